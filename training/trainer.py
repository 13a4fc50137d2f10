"""Local Siamese training loop: what every FedPrint client runs, and the local-only / centralized baselines.

Default recipe (``TrainConfig``), chosen to learn on 2 CPU cores:

* identity-balanced **P x K batches** (P fingers x K impressions, one forward pass per image) with Yan et al. 2025's
  contrastive loss Eq. 1 over every pair in the batch (:func:`fedprint.models.loss.batch_contrastive_loss`), or with
  ``[train] loss = "supcon"`` the supervised contrastive loss (:func:`embedding_loss`);
* on-the-fly **augmentation** that mimics impression variation (:mod:`fedprint.models.augment`);
* Adam with a **cosine learning-rate schedule** (linear warm-up) within each call.

The finger identities are not passed in: they are the connected components of the genuine training pairs (all
genuine pairs of a finger's training impressions are in the pair set), so every caller keeps handing over
``(images, pairs)``. ``sampler = "pairs"`` keeps Yan et al. 2025's original loop (one balanced pair sample per epoch,
batches of pairs, two forward passes per pair) for comparison (``benchmarks/bench_trainer_pk.py``).
Images are preprocessed to one tensor once; a batch only indexes into it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm.auto import tqdm

from fedprint.config import TrainConfig
from fedprint.config.train import FLIP_IDENTITIES
from fedprint.data.pairs import PairSet, sample_epoch_pairs
from fedprint.models.augment import AugmentSpec, augment
from fedprint.models.dense_loss import dense_contrastive_loss
from fedprint.models.device import autocast, current_device, grad_scaler, on_device
from fedprint.models.loss import batch_contrastive_loss, contrastive_loss
from fedprint.models.minutiae_map import MinutiaeHead, minutiae_map_loss
from fedprint.models.proxy_loss import class_mean_proxies, proxy_cosface_loss
from fedprint.models.siamese import leading_block_parameters
from fedprint.models.supcon import batch_supcon_loss
from fedprint.training.minutiae_targets import minutiae_maps


def _cap(pairs: PairSet, cap: int | None, rng: np.random.Generator) -> PairSet:
    if cap is None or len(pairs) <= cap:
        return pairs
    keep = np.sort(rng.choice(len(pairs), size=cap, replace=False))
    return pairs.take(keep)


def identities_from_pairs(pairs: PairSet) -> tuple[np.ndarray, np.ndarray]:
    """Images used by ``pairs`` and their finger label (connected components of the genuine pairs).

    Returns ``(image_indices, labels)``: sorted unique image indices and an int label per index; images that
    share a genuine pair (directly or transitively) share a label.
    """
    used = np.unique(np.concatenate([pairs.a, pairs.b]))
    pos = {int(v): i for i, v in enumerate(used)}
    gen = pairs.label == 1
    rows = np.array([pos[int(v)] for v in pairs.a[gen]], dtype=np.int64)
    cols = np.array([pos[int(v)] for v in pairs.b[gen]], dtype=np.int64)
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(used), len(used)))
    _, labels = connected_components(graph, directed=False)
    return used.astype(np.int64), labels.astype(np.int64)


def pk_batches(labels: np.ndarray, p: int, k: int, n_batches: int, rng: np.random.Generator,
               groups: np.ndarray | None = None) -> list[np.ndarray]:
    """``n_batches`` index arrays into ``labels``: P identities (with >= 2 images) x up to K images each.

    Identities are drawn without replacement within a batch (all of them when fewer than P exist); images of
    an identity without replacement when it has at least K, else all of its images. With ``groups`` (a group per
    element of ``labels``, e.g. its institution; ``[train] domain_batches``) every batch is drawn from one
    group's identities, the group drawn in proportion to its images (groups with fewer than two such
    identities are never drawn).
    """
    ids, counts = np.unique(labels, return_counts=True)
    ids = ids[counts >= 2]
    if len(ids) < 2:
        raise ValueError("train_siamese: P x K batches need at least two fingers with two or more training images")
    members = {int(i): np.flatnonzero(labels == i) for i in ids}
    pools = [ids]
    if groups is not None:
        id_group = np.array([groups[members[int(i)][0]] for i in ids])
        pools = [ids[id_group == g] for g in np.unique(id_group)]
        pools = [q for q in pools if len(q) >= 2]
        if not pools:
            raise ValueError("train_siamese: domain_batches needs an institution with two or more fingers of two "
                             "or more training images")
        weight = np.array([sum(len(members[int(i)]) for i in q) for q in pools], dtype=float)
    out = []
    for _ in range(n_batches):
        pool = pools[0] if groups is None else pools[rng.choice(len(pools), p=weight / weight.sum())]
        chosen = rng.choice(pool, size=min(p, len(pool)), replace=False)
        out.append(np.concatenate([rng.choice(members[int(c)], size=min(k, len(members[int(c)])), replace=False)
                                   for c in chosen]))
    return out


def flipped_identities(images: torch.Tensor, used: np.ndarray, labels: np.ndarray,
                       flips: int) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """The training set with mirrored twins of every finger added as new fingers (``[train] flip_identities``).

    Parameters
    ----------
    images : Tensor, shape (N, 1, S, S)
    used, labels : ndarray of int
        Training image indices into ``images`` and their finger labels (:func:`identities_from_pairs`).
    flips : int
        0 (nothing added), 1 (the left-right mirror of every used image) or 3 (also the upside-down and the
        rotated-by-180 degrees images).

    Returns
    -------
    (images, used, labels)
        ``images`` with the flipped copies appended after the originals; ``used`` and ``labels`` extended with
        their indices and with labels offset by ``labels.max() + 1`` per flip, so that a twin is never a genuine
        partner of its original (a mirrored print is no impression of the same finger).
    """
    if flips not in FLIP_IDENTITIES:
        raise ValueError(f"flipped_identities: flips must be one of {FLIP_IDENTITIES}, got {flips!r}")
    n, offset = len(images), int(labels.max()) + 1
    src = images[torch.from_numpy(used)]
    extra = [torch.flip(src, d) for d in ((-1,), (-2,), (-2, -1))[:flips]]  # mirror first, then the other two
    new_used = [used] + [n + i * len(used) + np.arange(len(used), dtype=used.dtype) for i in range(len(extra))]
    new_labels = [labels] + [labels + (i + 1) * offset for i in range(len(extra))]
    return torch.cat([images, *extra]), np.concatenate(new_used), np.concatenate(new_labels)


def embedding_loss(emb: torch.Tensor, labels: torch.Tensor, cfg: TrainConfig) -> torch.Tensor:
    """The embedding's loss of one P x K batch under ``cfg.loss``: Eq. 1 over every pair
    (:func:`fedprint.models.loss.batch_contrastive_loss`, ``cfg.margin``, ``cfg.balance``) or the supervised contrastive
    loss (:func:`fedprint.models.supcon.batch_supcon_loss`, ``cfg.temperature``, ``cfg.supcon_margin``). Every P x K
    loop
    of a client uses it."""
    if cfg.loss == "supcon":
        return batch_supcon_loss(emb, labels, cfg.temperature, cfg.supcon_margin)
    return batch_contrastive_loss(emb, labels, margin=cfg.margin, balance=cfg.balance)


def augment_spec(cfg: TrainConfig) -> AugmentSpec:
    """The augmentation of every training batch: :class:`fedprint.models.augment.AugmentSpec`'s defaults with the
    strengths a run configures (scale jitter, shift, rotation, plastic distortion, sensor texture, capture
    window), or none with ``augment = false``."""
    if not cfg.augment:
        return AugmentSpec.off()
    return AugmentSpec(scale=cfg.scale_jitter, translation=cfg.translation, rotation_deg=cfg.rotation,
                       elastic=cfg.elastic, texture=cfg.texture, window=cfg.window)


def adam(params, cfg: TrainConfig) -> torch.optim.Adam:
    """Adam at ``cfg.lr`` with ``cfg.weight_decay`` decoupled from the gradient (AdamW; 0: plain Adam), the one
    optimizer every trainer of a client starts from."""
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay, decoupled_weight_decay=True)


def _lr_lambda(cfg: TrainConfig, total: int):
    if cfg.schedule == "constant" or total <= 1:
        return lambda step: 1.0
    warm = max(1, int(0.05 * total))

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, total - warm)
        return 0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return f


def train_siamese(
    encoder: nn.Module,
    images: torch.Tensor,
    pairs: PairSet,
    cfg: TrainConfig,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    progress: bool = True,
    desc: str = "train",
    regularizer: Callable[[], torch.Tensor] | None = None,
    device: torch.device | None = None,
    amp: bool = True,
    groups: np.ndarray | None = None,
) -> list[dict]:
    """Train ``encoder`` in place on ``images`` with the contrastive loss (Eq. 1) or ``cfg.loss``.

    Parameters
    ----------
    encoder : nn.Module
        Maps (N, 1, S, S) float tensors to L2-normalised embeddings (N, d). Both branches of the Siamese network
        are this one module (shared weights).
    images : Tensor, shape (N, 1, S, S)
        Preprocessed images; ``pairs`` index into its first axis.
    pairs : PairSet
        The training pairs: the images they use are the training set, their genuine pairs define the fingers
        (``sampler = "pk"``); ``"pairs"`` resamples a balanced subset of them every epoch.
    cfg : TrainConfig
    optimizer : Optimizer, optional
        Defaults to Adam(lr=cfg.lr). Pass one to keep its state across rounds, or a FedProx one.
    regularizer : callable, optional
        Called after each step's forward pass(es); its scalar is added to the loss that is back-propagated
        (e.g. FedDBE's mean regularisation, which depends on that step's features). The reported ``loss``
        stays the embedding's loss alone.
    device : torch.device, optional
        Where the network trains (default :func:`fedprint.models.device.current_device`; CPU unless chosen). Batches are
        drawn and augmented on the CPU with the same generators whatever the device, then moved; the encoder is
        moved there for the call and back to the CPU afterwards.
    amp : bool
        Mixed precision on CUDA (:func:`fedprint.models.device.autocast`, with a gradient scaler under float16); ignored
        on the CPU, where the computation is exactly float32.
    groups : ndarray of int, shape (N,), optional
        The institution of each image (:func:`fedprint.training.experiment_data.union_groups`); with
        ``cfg.domain_batches``
        every P x K batch is drawn from one institution (:func:`pk_batches`). None: one institution.

    Returns
    -------
    list of dict
        Per epoch: ``epoch``, ``loss`` (mean over steps), ``pairs`` (pairs scored), ``genuine``, ``images``
        (forward passes), ``seconds``; with ``cfg.minutiae_weight`` > 0 also ``minutiae_loss`` (the mean
        :func:`fedprint.models.minutiae_map.minutiae_map_loss`, before its weight), with ``cfg.proxy_weight`` > 0
        ``proxy_loss`` (the mean :func:`fedprint.models.proxy_loss.proxy_cosface_loss`, before its weight). ``loss``
        includes both, weighted.
    """
    if len(pairs) == 0 or pairs.n_genuine == 0:
        raise ValueError("train_siamese: the training pairs contain no genuine pair; nothing to learn from")
    for key in ("dense_weight", "minutiae_weight"):
        if getattr(cfg, key) > 0 and not hasattr(encoder, "embed_with_maps"):
            raise ValueError(f"[train] {key} = {getattr(cfg, key)}: this loss needs the compact encoder's feature "
                             f"map; {type(encoder).__name__} has none (set {key} = 0)")
    if cfg.minutiae_weight > 0 and getattr(encoder, "align", None) is not None:
        # The targets mark minutiae on the input; the map the head predicts is of the aligned input.
        raise ValueError(f"[train] minutiae_weight = {cfg.minutiae_weight}: the minutiae targets are drawn in the "
                         "input's frame and [model] align = true moves the print before the encoder (set one off)")
    # Looked up with the checks above: an encoder without conv blocks is refused before any target is computed.
    frozen = [q for q in leading_block_parameters(encoder, cfg.freeze_blocks) if q.requires_grad]
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(int(cfg.seed))
    opt = optimizer or adam(encoder.parameters(), cfg)
    aug = augment_spec(cfg)
    if cfg.sampler == "pk":
        used, labels = identities_from_pairs(pairs)
        per_epoch = max(1, math.ceil(len(used) / (cfg.p * cfg.k)))  # from the real prints, before any twin
        if groups is not None and cfg.domain_batches:
            if len(groups) != len(images):
                raise ValueError(f"train_siamese: groups must give one institution per image ({len(images)}), "
                                 f"got {len(groups)}")
            groups = np.asarray(groups)[used]  # the twins below keep their original's institution
            groups = np.concatenate([groups] * (1 + cfg.flip_identities))
        else:
            groups = None
        if cfg.flip_identities:
            images, used, labels = flipped_identities(images, used, labels, cfg.flip_identities)
    else:
        per_epoch, groups = None, None
    dev = device or current_device()
    minutiae = _minutiae_task(encoder, images, used, cfg, dev, progress) if cfg.minutiae_weight > 0 else None
    proxies = _proxy_task(encoder, images, used, labels, cfg, dev) if cfg.proxy_weight > 0 else None
    try:
        for q in frozen:  # no gradient, so Adam (and its weight decay) leaves them exactly as they are
            q.requires_grad_(False)
        with on_device(encoder, dev):
            return _train(encoder, images, pairs, cfg, opt, aug, rng, gen, used if cfg.sampler == "pk" else None,
                          labels if cfg.sampler == "pk" else None, per_epoch, dev, amp, progress, desc,
                          _with_l2sp(encoder, regularizer, cfg.l2sp), minutiae, proxies, groups)
    finally:
        for q in frozen:
            q.requires_grad_(True)


def _with_l2sp(encoder: nn.Module, regularizer: Callable[[], torch.Tensor] | None,
               mu: float) -> Callable[[], torch.Tensor] | None:
    """``regularizer`` plus L2-SP's (μ/2)·Σ‖w − w₀‖² over the trained parameters (Li et al. 2018, Eq. 3), w₀
    copied now: the weights this call starts from, on the device it trains on. ``mu`` 0: ``regularizer`` as is."""
    if mu <= 0:
        return regularizer
    start = [(q, q.detach().clone()) for q in encoder.parameters() if q.requires_grad]

    def term() -> torch.Tensor:
        pull = 0.5 * mu * torch.stack([(q - w0).pow(2).sum() for q, w0 in start]).sum()
        return pull if regularizer is None else pull + regularizer()

    return term


def _minutiae_task(encoder, images, used, cfg, dev, progress):
    """(head, its optimizer, targets of ``used``) of the minutiae-map loss; the head starts from ``cfg.seed``."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(int(cfg.seed))
        maps = encoder.embed_with_maps(images[:1])
        last = cfg.minutiae_layer == "last"
        head = MinutiaeHead(int(maps[1 if last else 2].shape[1]), upsample=last).to(dev)
    return head, adam(head.parameters(), cfg), minutiae_maps(images, used, progress=progress,
                                                             backend=cfg.minutiae_backend)


def _proxy_task(encoder, images, used, labels, cfg, dev):
    """(proxies, their optimizer) of the proxy loss: one row per training finger (twins included), started at the
    finger's mean embedding of the un-augmented images, moved by Adam at 10 x ``cfg.lr`` (a proxy stands for a
    whole finger and has to keep up with every step's encoder; proxy methods train them faster still)."""
    emb = embed(encoder, images[torch.from_numpy(used)], device=dev)
    start = class_mean_proxies(emb, torch.from_numpy(labels), int(labels.max()) + 1)
    proxies = nn.Parameter(start.to(dev))
    return proxies, torch.optim.Adam([proxies], lr=10 * cfg.lr)


def _train(encoder, images, pairs, cfg, opt, aug, rng, gen, used, labels, per_epoch, dev, amp, progress, desc,
           regularizer, minutiae=None, proxies=None, groups=None) -> list[dict]:
    """The epochs of :func:`train_siamese`, with ``encoder`` already on ``dev``."""
    scaler = grad_scaler(dev, amp)
    average = (AveragedModel(encoder, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema), use_buffers=True)
               if cfg.ema > 0 else None)
    head, head_opt, maps = minutiae or (None, None, None)
    proxy, proxy_opt = proxies or (None, None)
    need_map = cfg.dense_weight > 0 or head is not None
    encoder.train()
    history = []
    sched = None
    for epoch in range(cfg.epochs):
        t0 = time.perf_counter()
        if cfg.sampler == "pk":
            steps_idx = [used[b] for b in pk_batches(labels, cfg.p, cfg.k, per_epoch, rng, groups)]
            step_labels = [labels[np.searchsorted(used, b)] for b in steps_idx]
        else:
            sample = _cap(sample_epoch_pairs(pairs, n_impostor_per_genuine=cfg.impostor_ratio, rng=rng),
                          cfg.max_pairs_per_epoch, rng)
            order = rng.permutation(len(sample))
            a, b, y = sample.a[order], sample.b[order], sample.label[order].astype(np.float32)
            steps_idx = [slice(s, s + cfg.batch_size) for s in range(0, len(order), cfg.batch_size)]
        if sched is None:
            sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg, cfg.epochs * len(steps_idx)))
        total, steps, scored, genuine, embedded, m_total, p_total = 0.0, 0, 0, 0, 0, 0.0, 0.0
        bar = tqdm(range(len(steps_idx)), desc=f"{desc} epoch {epoch + 1}/{cfg.epochs}", disable=not progress,
                   leave=False, unit="batch")
        for s in bar:
            if cfg.sampler == "pk":
                idx, lab = steps_idx[s], torch.from_numpy(step_labels[s])
                if maps is None:
                    x = augment(images[torch.from_numpy(idx)], aug, gen).to(dev)
                else:  # the targets get the same warp as their inputs
                    rows = torch.from_numpy(np.searchsorted(used, idx))
                    x, target = augment(images[torch.from_numpy(idx)], aug, gen, carry=maps[rows].float())
                    x = x.to(dev)
                with autocast(dev, amp):
                    emb, fmap, middle = encoder.embed_with_maps(x) if need_map else (encoder(x), None, None)
                    pred = head(fmap if cfg.minutiae_layer == "last" else middle) if head is not None else None
                loss = embedding_loss(emb.float(), lab.to(dev), cfg)
                if cfg.dense_weight > 0:
                    loss = loss + cfg.dense_weight * dense_contrastive_loss(fmap, x, lab, gen)
                if pred is not None:
                    m_loss = minutiae_map_loss(pred, target)
                    m_total += float(m_loss.detach())
                    loss = loss + cfg.minutiae_weight * m_loss
                if proxy is not None:
                    p_loss = proxy_cosface_loss(emb.float(), lab.to(dev), proxy, scale=1 / cfg.temperature,
                                                margin=cfg.proxy_margin)
                    p_total += float(p_loss.detach())
                    loss = loss + cfg.proxy_weight * p_loss
                n = len(idx)
                g = int(np.sum(np.bincount(step_labels[s]) * (np.bincount(step_labels[s]) - 1) // 2))
                scored, genuine, embedded = scored + n * (n - 1) // 2, genuine + g, embedded + n
            else:
                sl = steps_idx[s]
                ia, ib = torch.from_numpy(a[sl].astype(np.int64)), torch.from_numpy(b[sl].astype(np.int64))
                xa, xb = augment(images[ia], aug, gen).to(dev), augment(images[ib], aug, gen).to(dev)
                with autocast(dev, amp):
                    e1, e2 = encoder(xa), encoder(xb)
                loss = contrastive_loss(e1.float(), e2.float(), torch.from_numpy(y[sl]).to(dev), margin=cfg.margin)
                scored, genuine = scored + len(ia), genuine + int(y[sl].sum())
                embedded += 2 * len(ia)
            opts = [o for o in (opt, head_opt, proxy_opt) if o is not None]
            for o in opts:
                o.zero_grad(set_to_none=True)
            total_loss = loss + regularizer() if regularizer is not None else loss
            if scaler is None:
                total_loss.backward()
                for o in opts:
                    o.step()
            else:  # float16 autocast: scale the loss so small gradients do not underflow
                scaler.scale(total_loss).backward()
                for o in opts:
                    scaler.step(o)
                scaler.update()
            sched.step()
            if average is not None:
                average.update_parameters(encoder)
            total += float(loss.detach())
            steps += 1
            bar.set_postfix(loss=f"{total / steps:.4f}")
        history.append({"epoch": epoch + 1, "loss": total / max(steps, 1), "pairs": scored, "genuine": genuine,
                        "images": embedded, "seconds": time.perf_counter() - t0}
                       | ({"minutiae_loss": m_total / max(steps, 1)} if head is not None else {})
                       | ({"proxy_loss": p_total / max(steps, 1)} if proxy is not None else {}))
    if average is not None:
        encoder.load_state_dict(average.module.state_dict())
    return history


@torch.no_grad()
def embed(encoder: nn.Module, images: torch.Tensor, *, batch_size: int = 256,
          device: torch.device | None = None) -> torch.Tensor:
    """Embeddings of all ``images`` (eval mode, no grad, float32 on the CPU), shape (N, d); computed on ``device``
    (default :func:`fedprint.models.device.current_device`) in full precision."""
    dev = device or current_device()
    encoder.eval()
    with on_device(encoder, dev):
        out = [encoder(images[i : i + batch_size].to(dev)).float().cpu() for i in range(0, len(images), batch_size)]
    return torch.cat(out) if out else torch.zeros((0, 0))


def pair_distances(encoder: nn.Module, images: torch.Tensor, pairs: PairSet) -> np.ndarray:
    """Euclidean embedding distance of every pair (each image embedded once), float64 array."""
    used = np.unique(np.concatenate([pairs.a, pairs.b]))
    emb = embed(encoder, images[torch.from_numpy(used.astype(np.int64))]).double().numpy()
    pos = np.full(len(images), -1, dtype=np.int64)
    pos[used] = np.arange(len(used))
    return np.linalg.norm(emb[pos[pairs.a]] - emb[pos[pairs.b]], axis=1)
