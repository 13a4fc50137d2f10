"""Local Siamese training loop: what every FedPrint client runs, and the local-only / centralized baselines.

Plain PyTorch, seed 003 defaults (Sec. 5.2): Adam, lr 3e-4, batch 32, E local epochs, contrastive loss (Eq. 1).
Each epoch draws a fresh balanced pair sample (all genuine pairs + as many random impostor pairs), seeded.
Images are preprocessed to one tensor once; a batch only indexes into it, so the input pipeline costs next to
nothing compared with the network (see ``bench/bench_trainer.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from data.pairs import PairSet, sample_epoch_pairs
from fedprint_config import TrainConfig
from models.loss import contrastive_loss


def _cap(pairs: PairSet, cap: int | None, rng: np.random.Generator) -> PairSet:
    if cap is None or len(pairs) <= cap:
        return pairs
    keep = np.sort(rng.choice(len(pairs), size=cap, replace=False))
    return PairSet(pairs.a[keep], pairs.b[keep], pairs.label[keep])


def train_siamese(
    encoder: nn.Module,
    images: torch.Tensor,
    pairs: PairSet,
    cfg: TrainConfig,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    progress: bool = True,
    desc: str = "train",
) -> list[dict]:
    """Train ``encoder`` in place with the contrastive loss on pairs of ``images``.

    Parameters
    ----------
    encoder : nn.Module
        Maps (N, 1, S, S) float tensors to L2-normalised embeddings (N, d). Both branches of the Siamese network
        are this one module (shared weights).
    images : Tensor, shape (N, 1, S, S)
        Preprocessed images; ``pairs`` index into its first axis.
    pairs : PairSet
        The pool of training pairs; each epoch resamples a balanced subset from it.
    cfg : TrainConfig
    optimizer : Optimizer, optional
        Defaults to Adam(lr=cfg.lr). Pass one to keep its state across rounds, or an Opacus-wrapped one.

    Returns
    -------
    list of dict
        Per epoch: ``epoch``, ``loss`` (mean over steps), ``pairs``, ``genuine``.
    """
    if len(pairs) == 0 or pairs.n_genuine == 0:
        raise ValueError("train_siamese: the training pairs contain no genuine pair; nothing to learn from")
    rng = np.random.default_rng(cfg.seed)
    opt = optimizer or torch.optim.Adam(encoder.parameters(), lr=cfg.lr)
    encoder.train()
    history = []
    for epoch in range(cfg.epochs):
        sample = _cap(sample_epoch_pairs(pairs, n_impostor_per_genuine=cfg.impostor_ratio, rng=rng),
                      cfg.max_pairs_per_epoch, rng)
        order = rng.permutation(len(sample))
        a = torch.from_numpy(sample.a[order].astype(np.int64))
        b = torch.from_numpy(sample.b[order].astype(np.int64))
        y = torch.from_numpy(sample.label[order].astype(np.float32))
        total, steps = 0.0, 0
        bar = tqdm(range(0, len(order), cfg.batch_size), desc=f"{desc} epoch {epoch + 1}/{cfg.epochs}",
                   disable=not progress, leave=False, unit="batch")
        for start in bar:
            sl = slice(start, start + cfg.batch_size)
            e1, e2 = encoder(images[a[sl]]), encoder(images[b[sl]])
            loss = contrastive_loss(e1, e2, y[sl], margin=cfg.margin)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach())
            steps += 1
            bar.set_postfix(loss=f"{total / steps:.4f}")
        history.append({"epoch": epoch + 1, "loss": total / max(steps, 1), "pairs": len(sample),
                        "genuine": int(sample.n_genuine)})
    return history


@torch.no_grad()
def embed(encoder: nn.Module, images: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
    """Embeddings of all ``images`` (eval mode, no grad), shape (N, d)."""
    encoder.eval()
    out = [encoder(images[i : i + batch_size]) for i in range(0, len(images), batch_size)]
    return torch.cat(out) if out else torch.zeros((0, 0))


def pair_distances(encoder: nn.Module, images: torch.Tensor, pairs: PairSet) -> np.ndarray:
    """Euclidean embedding distance of every pair (each image embedded once), float64 array."""
    used = np.unique(np.concatenate([pairs.a, pairs.b]))
    emb = embed(encoder, images[torch.from_numpy(used.astype(np.int64))]).double().numpy()
    pos = np.full(len(images), -1, dtype=np.int64)
    pos[used] = np.arange(len(used))
    return np.linalg.norm(emb[pos[pairs.a]] - emb[pos[pairs.b]], axis=1)
