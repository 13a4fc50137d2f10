"""Gradient-inversion audit of one client: the rows behind Yan et al. 2025 Table 5 (MSE / PSNR / SSIM / LPIPS with vs
without FP-DFSN), computed against the RAW image and against the image the client trained on.

:func:`run_inversion_audit` attacks updates the client would send from its *training* pairs:

* ``"imprint"`` - malicious server, one gradient step (FedSGD) of the tampered model, for every
  (batch size, bins) combination (:mod:`fedprint.attacks.imprint`);
* ``"imprint_fedavg"`` - the same block, but the server sees a FedAvg update of several local steps
  (parameter difference / lr), with SGD and with Adam;
* ``"dlg"`` and ``"ig"`` (``"inversion"`` = both) - optimisation attacks by an honest-but-curious server on the
  untampered encoder (:mod:`fedprint.attacks.inversion`), for batch sizes up to ``max_optimisation_pairs``.

Each true training image of an attacked batch is paired with its best reconstruction (smallest MSE on the
network-input scale - the evaluator's choice, standard in the literature) and scored with
:func:`fedprint.attacks.recon_metrics.compare` on both scales. With FP-DFSN, rows against the raw image are
given for the naive attacker, the β-aware attacker and the β-aware attacker who also inpaints the re-estimated
noise disks (:mod:`fedprint.attacks.fpdfsn_inversion`). ``verify_rate`` is the fraction of reconstructions that
the trained verifier accepts against at least one other impression of the same finger, at the validation
threshold.

The audit never modifies ``encoder`` or ``client_data`` (attacks run on deep copies).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from fedprint.attacks import fpdfsn_inversion as fi
from fedprint.attacks import imprint as im
from fedprint.attacks import recon_metrics as rm
from fedprint.attacks.inversion import (
    dlg_attack,
    inverting_gradients_attack,
    normalise_like_client,
    pair_gradients,
)
from fedprint.models.loss import contrastive_loss
from fedprint.models.preprocess import InputSpec

ATTACKS = ("imprint", "imprint_fedavg", "dlg", "ig")
#: Columns of the compact Table-5 view returned as ``table``.
TABLE_COLUMNS = ("attack", "fpdfsn", "beta", "batch_pairs", "bins", "steps", "optimizer", "reference", "attacker",
                 "images", "exact_fraction", "images_with_gradient",
                 "exact_fraction_with_gradient", "mse", "psnr_median", "ssim", "lpips", "psnr_norm_median",
                 "ssim_norm", "verify_rate", "seconds_per_image")


def _attack_list(attacks: Sequence[str]) -> list[str]:
    out: list[str] = []
    for a in attacks:
        names = ["dlg", "ig"] if a == "inversion" else [a]
        for n in names:
            if n not in ATTACKS:
                raise ValueError(f"attacks: unknown attack {a!r}; expected some of {ATTACKS} or 'inversion'")
            if n not in out:
                out.append(n)
    return out


def _sample_pairs(pairs, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n training pairs, at least one genuine, half genuine where possible (the trainer's balanced sample)."""
    gen, imp = np.flatnonzero(pairs.label == 1), np.flatnonzero(pairs.label == 0)
    if gen.size == 0:
        raise ValueError("client_data.train_pairs: no genuine pair to attack")
    n_gen = min(gen.size, max(1, n - min(imp.size, n // 2)))
    n_imp = min(imp.size, n - n_gen)
    sel = np.concatenate([rng.choice(gen, n_gen, replace=False), rng.choice(imp, n_imp, replace=False)])
    sel = rng.permutation(sel)
    return pairs.a[sel], pairs.b[sel], pairs.label[sel].astype(np.float32)


class _Scorer:
    """Scores reconstructions of record k against its raw and trained-on images, with the verifier."""

    def __init__(self, encoder, client_data, raw_gray, trained_gray, normalization, threshold, beta, params,
                 with_lpips):
        self.encoder, self.cd = encoder, client_data
        self.raw, self.trained = raw_gray, trained_gray
        self.norm, self.threshold, self.beta, self.params = normalization, threshold, beta, params
        self.with_lpips = with_lpips
        ids = np.array([r.identity for r in client_data.records])
        self.owner = {k: np.flatnonzero((ids == ids[k]) & (np.arange(len(ids)) != k)) for k in range(len(ids))}

    def _verify(self, x: torch.Tensor, k: int) -> bool | None:
        others = self.owner[k]
        if self.threshold is None or others.size == 0:
            return None
        return rm.verifies_against_owner(self.encoder, x, self.cd.images[torch.from_numpy(others)],
                                         self.threshold)["match_any"]

    def _gray_to_input(self, g: np.ndarray) -> torch.Tensor:
        u = torch.from_numpy(np.clip(g, 0, 255) / 255.0).float()[None, None]
        return normalise_like_client(u, self.norm)

    def score(self, k: int, x: torch.Tensor) -> dict[str, dict]:
        """{(reference, attacker): metrics} for one reconstruction x (network input) of record k."""
        out = {("trained", "naive"): rm.compare(x, self.trained[k], self.norm, with_lpips=self.with_lpips),
               ("raw", "naive"): rm.compare(x, self.raw[k], self.norm, with_lpips=self.with_lpips)}
        v = self._verify(x, k)
        out[("trained", "naive")]["verifies"] = v
        out[("raw", "naive")]["verifies"] = v
        if self.beta > 0:
            inv = fi.invert_network_input(x, self.beta, self.norm, reference_gray=self.raw[k])
            m = rm.compare_gray(inv, self.raw[k], with_lpips=self.with_lpips)
            m["verifies"] = self._verify(self._gray_to_input(inv), k)
            out[("raw", "beta-aware")] = m
            if self.params is not None:
                mask = fi.estimated_noise_mask(inv, self.params)
                filled = fi.inpaint_noise_disks(inv, mask)
                m = rm.compare_gray(filled, self.raw[k], with_lpips=self.with_lpips)
                m["verifies"] = self._verify(self._gray_to_input(filled), k)
                out[("raw", "beta-aware+inpaint")] = m
        return out


def _summarise(per_image: list[dict], base: dict) -> list[dict]:
    rows = []
    for key in per_image[0] if per_image else []:
        ms = [p[key] for p in per_image]
        psnrs = np.array([m["psnr"] for m in ms])
        lp = [m["lpips"] for m in ms]
        ver = [m["verifies"] for m in ms if m["verifies"] is not None]
        row = {**base, "reference": key[0], "attacker": key[1], "images": len(ms),
               "exact_fraction": float(np.mean([m["exact"] for m in ms])),
               "mse": float(np.mean([m["mse"] for m in ms])),
               "psnr_median": float(np.median(psnrs)), "psnr_min": float(psnrs.min()),
               "ssim": float(np.mean([m["ssim"] for m in ms])),
               "lpips": float(np.mean(lp)) if all(v is not None for v in lp) else None,
               "mse_norm": float(np.mean([m.get("mse_norm", np.nan) for m in ms])),
               "psnr_norm_median": float(np.median([m.get("psnr_norm", np.nan) for m in ms])),
               "ssim_norm": float(np.mean([m.get("ssim_norm", np.nan) for m in ms])),
               "verify_rate": float(np.mean(ver)) if ver else None}
        if row["lpips"] is None:
            row["lpips_note"] = next((m.get("lpips_note") for m in ms if m.get("lpips_note")), "unavailable")
        rows.append(row)
    return rows


def _best_per_image(true_x: torch.Tensor, cands: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    idx, err = im.match_candidates(true_x, cands)
    return idx, err


def run_inversion_audit(
    encoder: nn.Module,
    client_data,
    raw_images: Sequence[np.ndarray] | None = None,
    *,
    attacks: Sequence[str] = ("imprint", "inversion"),
    batch_sizes: Sequence[int] = (1, 4, 16),
    bins: Sequence[int] = (64, 256),
    seed: int = 0,
    spec: InputSpec | None = None,
    trained_images: Sequence[np.ndarray] | None = None,
    fpdfsn_params=None,
    fpdfsn_seed: int | None = None,
    threshold: float | None = None,
    public_inputs: torch.Tensor | None = None,
    margin: float = 1.0,
    fedavg_steps: Sequence[int] = (4,),
    fedavg_lr: float = 3e-4,
    max_optimisation_pairs: int = 2,
    dlg_iterations: int = 50,
    ig_iterations: int = 300,
    ig_restarts: int = 2,
    with_lpips: bool = True,
    keep_examples: int = 8,
    grid_dir: str | Path | None = None,
) -> dict:
    """Run gradient-inversion attacks on one client's training batches and score them.

    Parameters
    ----------
    encoder : nn.Module
        The trained verifier's encoder (attacked as the global model, and used to verify reconstructions).
    client_data : fedprint.training.local_data.ClientData
        The client's data; its ``images`` are the inputs it trained on.
    raw_images : sequence of uint8 ndarray, optional
        Pre-FP-DFSN images aligned with ``client_data.records`` (default: the records' own images, which
        :func:`fedprint.training.local_data.build_client_data` leaves raw).
    attacks : sequence of str
        Some of ``"imprint"``, ``"imprint_fedavg"``, ``"dlg"``, ``"ig"``, ``"inversion"`` (= dlg + ig).
    batch_sizes : sequence of int
        Client batch sizes in *pairs* (the trainer's unit); a batch holds up to 2B distinct images.
    bins : sequence of int
        Imprint bins k.
    seed : int
        Seeds batch sampling, the imprint directions and the attack initialisations.
    spec : InputSpec, optional
        The run's input pipeline (default: ``InputSpec(size=S)`` with S from ``client_data.images``).
    trained_images : sequence of uint8 ndarray, optional
        FP-DFSN images the client trained on (gray, pre-resize); recomputed from ``fpdfsn_params`` and
        ``fpdfsn_seed`` when absent. Required one way or the other when ``client_data.beta > 0``.
    fpdfsn_params : privacy.fpdfsn.FPDFSNParams, optional
        The client's FP-DFSN parameters (β must equal ``client_data.beta``); also enables the inpainting
        attacker.
    fpdfsn_seed : int, optional
        The ``seed`` given to :func:`fedprint.training.local_data.build_client_data` (seeds the FP-DFSN noise); needed
        with ``fpdfsn_params`` when ``trained_images`` is absent. Recomputed images are checked against
        ``client_data.images``.
    threshold : float, optional
        Verification threshold; default: chosen on ``client_data.val_pairs`` (accuracy criterion).
    public_inputs : Tensor (n, 1, S, S), optional
        Public network inputs the malicious server uses to place imprint thresholds (default: N(0, 1)
        quantiles, see :class:`fedprint.attacks.imprint.ImprintBlock`).
    margin : float
        Contrastive margin of the client's loss.
    fedavg_steps, fedavg_lr : local steps per FedAvg update and learning rate (``"imprint_fedavg"``).
    max_optimisation_pairs : int
        Largest batch (pairs) given to DLG / IG (their cost grows with it; labels are known to the attacker).
    dlg_iterations, ig_iterations, ig_restarts : attack budgets.
    with_lpips : bool
        Compute LPIPS when its weights exist (rows carry ``lpips=None`` and ``lpips_note`` otherwise).
    keep_examples : int
        Reconstructions kept per attack for :func:`save_grid`.
    grid_dir : path, optional
        When given, one PNG grid per attack setting is written there (:func:`save_grid`) and listed in
        ``grids``.

    Returns
    -------
    dict
        ``rows`` (list of flat dicts: attack, fpdfsn, beta, batch_pairs, bins, steps, optimizer, reference
        {raw, trained}, attacker {naive, beta-aware, beta-aware+inpaint}, images, exact_fraction, mse,
        psnr_median, psnr_min, ssim, lpips, mse_norm, psnr_norm_median, ssim_norm, verify_rate,
        seconds_per_image), ``examples`` ({attack label: (originals gray, reconstructions gray)}),
        ``table`` (the rows reduced to the Table 5 columns), ``grids`` (PNG paths, empty without
        ``grid_dir``), ``threshold``, ``classical_matcher`` (status string), ``notes``.
    """
    from fedprint.models.metrics import choose_threshold
    from fedprint.training.local_data import apply_fpdfsn
    from fedprint.training.trainer import pair_distances

    names = _attack_list(attacks)
    if any(int(b) < 1 for b in batch_sizes) or any(int(k) < 2 for k in bins):
        raise ValueError(f"batch_sizes must be >= 1 and bins >= 2, got {batch_sizes}, {bins}")
    size = int(client_data.images.shape[-1])
    spec = spec or InputSpec(size=size)
    if spec.size != size:
        raise ValueError(f"spec.size={spec.size} does not match client_data.images ({size} px)")
    records = client_data.records
    raw_images = [r.image for r in records] if raw_images is None else list(raw_images)
    if len(raw_images) != len(records):
        raise ValueError(f"raw_images: expected {len(records)} images (one per record), got {len(raw_images)}")
    beta = float(client_data.beta)
    if beta > 0 and trained_images is None:
        if fpdfsn_params is None or fpdfsn_seed is None:
            raise ValueError(f"client_data was built with FP-DFSN (beta={beta}): pass trained_images, or "
                             "fpdfsn_params and fpdfsn_seed, so the trained-on images can be compared")
        trained_images, _ = apply_fpdfsn(raw_images, fpdfsn_params, seed=int(fpdfsn_seed), cache_dir=None,
                                         progress=False)
    if trained_images is not None:
        from fedprint.models.preprocess import to_tensor_batch

        if len(trained_images) != len(records) or not torch.allclose(
                to_tensor_batch(list(trained_images), spec), client_data.images, atol=1e-4):
            raise ValueError("trained_images (given or recomputed from fpdfsn_params / fpdfsn_seed) do not "
                             "reproduce client_data.images under spec; check the FP-DFSN parameters, seed "
                             "and input spec")
    if fpdfsn_params is not None and abs(fpdfsn_params.beta - beta) > 1e-12:
        raise ValueError(f"fpdfsn_params.beta={fpdfsn_params.beta} differs from client_data.beta={beta}")
    raw_gray = rm.gray_at_input_size(raw_images, spec)
    trained_gray = raw_gray if beta == 0 else rm.gray_at_input_size(list(trained_images), spec)

    enc = copy.deepcopy(encoder)
    if threshold is None and len(client_data.val_pairs) and client_data.val_pairs.n_genuine \
            and client_data.val_pairs.n_impostor:
        d = pair_distances(enc, client_data.images, client_data.val_pairs)
        threshold = choose_threshold(d, client_data.val_pairs.label)
    scorer = _Scorer(enc, client_data, raw_gray, trained_gray, spec.normalization, threshold, beta,
                     fpdfsn_params if beta > 0 else None, with_lpips)
    x_all = client_data.images
    shape = tuple(x_all.shape[1:])
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    examples: dict = {}
    base0 = {"fpdfsn": beta > 0, "beta": beta, "normalization": spec.normalization}

    def with_gradient(a, b, y) -> set[int]:
        """Images of pairs whose loss has a non-zero gradient (impostors at d >= margin contribute none)."""
        with torch.no_grad():
            d = torch.linalg.vector_norm(enc(x_all[torch.from_numpy(a)]) - enc(x_all[torch.from_numpy(b)]),
                                         dim=1).numpy()
        live = (y == 1) & (d > 0) | (y == 0) & (d < margin)
        return set(a[live].tolist()) | set(b[live].tolist())

    def record(label, base, ks, xs, seconds):
        per = [scorer.score(int(k), x) for k, x in zip(ks, xs, strict=True)]
        new = _summarise(per, {**base0, **base, "seconds_per_image": seconds / max(len(ks), 1)})
        live = np.array([int(k) in base.get("_live", set(ks.tolist())) for k in ks])
        for r, key in zip(new, per[0], strict=True):
            r.pop("_live", None)
            r["images_with_gradient"] = int(live.sum())
            r["exact_fraction_with_gradient"] = (float(np.mean([p[key]["exact"] for p, v in zip(per, live,
                                                 strict=True) if v])) if live.any() else None)
        rows.extend(new)
        if label not in examples:
            n = min(keep_examples, len(ks))
            examples[label] = (np.stack([trained_gray[int(k)] for k in ks[:n]]),
                               np.stack([per[i][("trained", "naive")]["recon_gray"] for i in range(n)]))

    for bsz in (int(b) for b in batch_sizes):
        a, b, y = _sample_pairs(client_data.train_pairs, bsz, rng)
        ks = np.unique(np.concatenate([a, b]))
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        yt = torch.from_numpy(y)
        if "imprint" in names:
            for k in bins:
                t0 = time.perf_counter()
                model = im.tamper(enc, shape, int(k), public_inputs=public_inputs, seed=seed)
                g = pair_gradients(model, x_all[ta], x_all[tb], yt, margin)
                cands = im.recover_from_gradients(*im.imprint_gradients(model, g), input_shape=shape)
                idx, _ = _best_per_image(x_all[torch.from_numpy(ks)], cands)
                xs = [cands[i].float() if i >= 0 else torch.zeros(shape) for i in idx]
                record(f"imprint B={bsz} k={k}", {"attack": "imprint", "batch_pairs": bsz, "bins": int(k),
                                                  "steps": 1, "optimizer": "-", "candidates": len(cands),
                                                  "_live": with_gradient(a, b, y)},
                       ks, xs, time.perf_counter() - t0)
        if "imprint_fedavg" in names:
            for steps in (int(s) for s in fedavg_steps):
                sa, sb, sy = zip(*[_sample_pairs(client_data.train_pairs, bsz, rng) for _ in range(steps)],
                                 strict=True)
                ks_f = np.unique(np.concatenate([*sa, *sb]))
                for opt_name in ("sgd", "adam"):
                    for k in bins:
                        t0 = time.perf_counter()
                        before = im.tamper(enc, shape, int(k), public_inputs=public_inputs, seed=seed)
                        after = local_steps(before, x_all, sa, sb, sy, opt_name, fedavg_lr, margin)
                        dw, db = im.fedavg_pseudo_gradient(before, after, fedavg_lr)
                        cands = im.recover_from_gradients(dw, db, input_shape=shape)
                        idx, _ = _best_per_image(x_all[torch.from_numpy(ks_f)], cands)
                        xs = [cands[i].float() if i >= 0 else torch.zeros(shape) for i in idx]
                        record(f"imprint_fedavg {opt_name} B={bsz} T={steps} k={k}",
                               {"attack": "imprint_fedavg", "batch_pairs": bsz, "bins": int(k), "steps": steps,
                                "optimizer": opt_name, "candidates": len(cands),
                                "_live": set().union(*map(with_gradient, sa, sb, sy))},
                               ks_f, xs, time.perf_counter() - t0)
        for name in ("dlg", "ig"):
            if name not in names or bsz > max_optimisation_pairs:
                continue
            t0 = time.perf_counter()
            g = pair_gradients(enc, x_all[ta], x_all[tb], yt, margin)
            if name == "dlg":
                res = dlg_attack(enc, g, bsz, shape, labels=y.astype(int), margin=margin,
                                 normalization=spec.normalization, iterations=dlg_iterations, seed=seed)
            else:
                res = inverting_gradients_attack(enc, g, bsz, shape, labels=y.astype(int), margin=margin,
                                                 normalization=spec.normalization, iterations=ig_iterations,
                                                 restarts=ig_restarts, seed=seed)
            cands = torch.cat([res.x1, res.x2])
            idx, _ = _best_per_image(x_all[torch.from_numpy(ks)], cands)
            record(f"{name} B={bsz}", {"attack": name, "batch_pairs": bsz, "bins": None, "steps": 1,
                                       "optimizer": "-", "match_loss": res.loss,
                                       "match_loss_init": res.initial_loss, "_live": with_gradient(a, b, y)},
                   ks, [cands[i] for i in idx], time.perf_counter() - t0)
    notes = [
        "standardize normalisation discards each image's mean/std: gray-scale metrics map the reconstruction "
        "onto the reference's mean/std (oracle affine); *_norm metrics compare z-normalised images",
        "exact = max abs error < 0.5 gray level (rounds to the identical uint8 image)",
        "each true image is scored with its best-matching reconstruction",
    ]
    if beta > 0 and spec.normalization == "standardize":
        notes.append("with standardize, the beta-aware division is absorbed by the normalisation: its rows "
                     "equal the naive ones up to clipping")
    grids = []
    if grid_dir is not None:
        for j, (label, (orig, rec)) in enumerate(examples.items()):
            fname = f"inversion_{j:02d}_" + "".join(c if c.isalnum() else "_" for c in label) + ".png"
            grids.append(str(save_grid(orig, rec, Path(grid_dir) / fname)))
    table = [{k: r.get(k) for k in TABLE_COLUMNS} for r in rows]
    return {"rows": rows, "table": table, "grids": grids, "examples": examples, "threshold": threshold,
            "classical_matcher": rm.classical_matcher_status(), "notes": notes}


def local_steps(model: nn.Module, images: torch.Tensor, a_steps, b_steps, y_steps, optimizer: str, lr: float,
                margin: float) -> nn.Module:
    """A copy of ``model`` after one local step per (a, b, y) batch, as :func:`fedprint.training.trainer.train_siamese`
    steps (contrastive loss on both branches), with plain SGD or Adam at learning rate ``lr``."""
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer: expected 'sgd' or 'adam', got {optimizer!r}")
    m = copy.deepcopy(model)
    m.train()
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)(m.parameters(), lr=lr)
    for a, b, y in zip(a_steps, b_steps, y_steps, strict=True):
        loss = contrastive_loss(m(images[torch.from_numpy(a)]), m(images[torch.from_numpy(b)]),
                                torch.from_numpy(y), margin=margin)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return m


def save_grid(originals: Sequence[np.ndarray], recons: Sequence[np.ndarray], path_png: str | Path, *,
              titles: Sequence[str] | None = None) -> Path:
    """Two-row PNG: originals (top) and reconstructions (bottom), gray levels 0-255 (clipped), one column each.

    Parameters
    ----------
    originals, recons : sequence of ndarray, shape (H, W)
        Equal-length lists of gray images (0-255 scale).
    path_png : path
        Output file (parent folders are created).
    titles : sequence of str, optional
        One caption per column (e.g. PSNR).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    originals, recons = list(originals), list(recons)
    if not originals or len(originals) != len(recons):
        raise ValueError(f"originals and recons: expected equal, non-zero lengths, got {len(originals)} and "
                         f"{len(recons)}")
    n = len(originals)
    fig, axes = plt.subplots(2, n, figsize=(1.6 * n, 3.4), squeeze=False)
    for j in range(n):
        for i, img in enumerate((originals[j], recons[j])):
            ax = axes[i, j]
            ax.imshow(np.clip(np.asarray(img, dtype=np.float64), 0, 255), cmap="gray", vmin=0, vmax=255)
            ax.set_xticks([])
            ax.set_yticks([])
        if titles is not None:
            axes[1, j].set_title(str(titles[j]), fontsize=7)
    axes[0, 0].set_ylabel("original")
    axes[1, 0].set_ylabel("reconstruction")
    fig.tight_layout()
    path = Path(path_png)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
