"""Yan et al. 2025 (seed 003, AFFR + FP-DFSN) Figs. 3, 4 and 6 on the real prints (issue 62).

    python -m studies.repro_003_figures [--only fig3|fig4|fig6] [--out docs/studies/reproduction]
                                        [--real ROOT] [--model M] [--seed 0]
                                        [--fig3-prints 40] [--fig4-prints 240] [--fig6-prints 6]

Each figure writes ``003_<fig>.png`` and ``003_<fig>.json`` into ``--out``; then ``003_figures.md`` there is
rendered from every ``003_fig*.json`` present (a figure not yet run says so, with its command).

* **Fig. 3** (similarity of a print to its FP-DFSN version). The paper scores each pair with LPIPS (AlexNet); here
  LPIPS is computed only where torchvision's ImageNet AlexNet weights are installed (they are never downloaded), and
  every pair gets SSIM and PSNR on the 0-255 scale (:mod:`fedprint.privacy.similarity`), SSIM of the print rebuilt
  knowing only β (:func:`fedprint.privacy.fpdfsn.invert_fpdfsn`), and the shipped model's embedding distance, with
  the same finger's second impression as the reference of what "the same finger" looks like to the verifier.
* **Fig. 4** (EMD heatmap of feature heterogeneity between data sets): one real sensor per folder of ``--real``,
  every print embedded by the shipped model (128-D, unit norm), and between two folders (a) the exact EMD
  (1-Wasserstein distance, Euclidean ground cost, uniform weights) between their embedding clouds, solved as the
  transportation linear programme by HiGHS (:func:`emd_exact`; POT is not installed), and (b) the mean over the
  128 embedding dimensions of the 1-D Wasserstein distance of their marginals
  (:func:`scipy.stats.wasserstein_distance`, :func:`emd_mean_1d`). Diagonal cells are the EMD between two
  finger-disjoint halves of the folder (the EMD of a cloud with itself is 0): what sampling alone gives.
* **Fig. 6** (NFIQ 2 quality vs β): NFIQ 2 is nbis-py's NIST implementation (0-100); an image not at 500 ppi is
  resampled to 500 ppi for it (NFIQ 2 is defined at 500 ppi). Beside it the product's own gate measure
  (:func:`fedprint.recognition.quality.print_quality`) and the gate's decision (:func:`~fedprint.recognition.
  quality.gate`: quality and MINDTCT minutiae count), and NFIQ 2 of the image rebuilt knowing β (I_diff / (1 − β)),
  which separates the (1 − β) darkening of Eq. 10 from its noise.

Subsamples (which fingers) are drawn with ``--seed``; FP-DFSN's noise is the mechanism's and comes from OS entropy
(``np.random.default_rng()``), so results are reported as spreads over prints, never as one seeded draw.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.spatial.distance import cdist
from scipy.stats import wasserstein_distance

from fedprint.data.atomic_io import write_json, write_text
from fedprint.data.record import FingerprintRecord
from fedprint.privacy.fpdfsn import FPDFSNParams, fpdfsn, invert_fpdfsn, to_uint8

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "studies" / "reproduction"
DOC = "003_figures.md"
FIGS = ("fig3", "fig4", "fig6")
#: β of the paper's experiments (Sec. 5.2: "a coefficient of 0.5 applied to process the difference image").
PAPER_BETA = 0.5
#: Fig. 6's β grid: the ten clients of Sec. 5.3.2, β = 0, 0.1, ..., 0.9.
BETAS = tuple(round(0.1 * i, 1) for i in range(10))
NFIQ2_PPI = 500.0
#: β at which Fig. 6 also scores the print rebuilt knowing β (NFIQ 2 costs ~0.3-1 s an image; β = 0 is I itself).
INVERTED_BETAS = (0.0, 0.3, 0.5, 0.7, 0.9)
MAX_IMPOSTORS = 2000
Embed = Callable[[Sequence[np.ndarray], Sequence[float | None]], np.ndarray]


# ------------------------------------------------------------------------------------------------------------ data
def load_sets(real: Path | None) -> dict[str, list[FingerprintRecord]]:
    """Unaltered records of every real set (one per folder of the root), by folder name."""
    from fedprint.recognition.real_samples import load_real_sets

    return {name: [r for r in recs if r.alteration is None] for name, recs in load_real_sets(real).items()}


def subsample(records: Sequence[FingerprintRecord], n: int, rng: np.random.Generator,
              per_finger: int) -> list[FingerprintRecord]:
    """Up to ``n`` prints: fingers in a random order, ``per_finger`` impressions of each a pass, passes until ``n``.

    The first pass takes impressions 0 .. per_finger − 1 of every finger (in the drawn order), the next the
    following ones, so a set with few fingers still gives ``n`` prints. ``n <= 0`` takes every print.
    Deterministic given ``rng``'s state (a data choice, not privacy noise).
    """
    by_id: dict[str, list[FingerprintRecord]] = {}
    for r in records:
        by_id.setdefault(r.identity, []).append(r)
    order = [sorted(by_id[list(by_id)[i]], key=lambda r: r.impression) for i in rng.permutation(len(by_id))]
    out: list[FingerprintRecord] = []
    start = 0
    while any(len(f) > start for f in order):
        for f in order:
            out += f[start:start + per_finger]
            if 0 < n <= len(out):
                return out[:n]
        start += per_finger
    return out


def spread(values: Sequence[float]) -> dict:
    """n, mean, median, quartiles, min, max of the finite values (NaN-free summary; None where empty)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if v.size == 0:
        return {"n": 0, "mean": None, "median": None, "q1": None, "q3": None, "min": None, "max": None}
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return {"n": int(v.size), "mean": float(v.mean()), "median": float(med), "q1": float(q1), "q3": float(q3),
            "min": float(v.min()), "max": float(v.max())}


def model_embed(model_path: str | Path) -> tuple[Embed, dict]:
    """``embed(images, dpis)`` -> unit-norm embeddings of the shipped model, and what it is (name, threshold)."""
    from fedprint.models.model_file import load_model
    from fedprint.recognition.matching import embed_images

    model = load_model(model_path)

    def embed(images: Sequence[np.ndarray], dpis: Sequence[float | None]) -> np.ndarray:
        return embed_images(model, list(images), list(dpis))

    return embed, {"model": Path(model_path).name, "threshold": model.threshold,
                   "threshold_source": model.threshold_source}


# ----------------------------------------------------------------------------------------------------------- Fig. 3
def lpips_or_reason(a: np.ndarray, b: np.ndarray) -> tuple[float | None, str | None]:
    """LPIPS (AlexNet) of two gray prints, or ``(None, why not)`` where the ImageNet weights are absent."""
    from fedprint.privacy.similarity import LPIPSUnavailable, lpips_distance

    try:
        return lpips_distance(a.astype(np.float64), b.astype(np.float64)), None
    except LPIPSUnavailable as exc:
        return None, str(exc)


def fpdfsn_similarities(images: Sequence[np.ndarray], dpis: Sequence[float | None], params: FPDFSNParams,
                        rng: np.random.Generator, embed: Embed, *, with_lpips: bool = True) -> dict:
    """Similarity of each print I to its FP-DFSN version I_diff (Yan et al. Eq. 10), the quantity of Fig. 3.

    Parameters
    ----------
    images, dpis : sequences
        uint8 gray prints and their resolutions.
    params : FPDFSNParams
        β, σ², D0, T_d, neighbourhood radius of the product's FP-DFSN.
    rng : numpy.random.Generator
        FP-DFSN's noise (pass ``np.random.default_rng()``: OS entropy).
    embed : callable
        ``embed(images, dpis)`` -> unit-norm embeddings (rows).
    with_lpips : bool
        Try LPIPS (AlexNet) too; it is skipped, with the reason, where its weights are not installed.

    Returns
    -------
    dict of lists, one entry per print
        ``cosine`` and ``distance`` (‖f(I) − f(I_diff)‖₂) of the embeddings, ``ssim`` and ``psnr`` of
        (I, I_diff), ``ssim_inverted`` of (I, clip(I_diff / (1 − β))) (β < 1), ``n_minutiae``, ``lpips`` (or
        None) and ``lpips_note``.
    """
    from fedprint.privacy.similarity import psnr, ssim

    out: dict = {k: [] for k in ("cosine", "distance", "ssim", "psnr", "ssim_inverted", "n_minutiae", "lpips")}
    out["lpips_note"] = None
    perturbed = []
    for img in images:
        res = fpdfsn(img, params, rng)
        perturbed.append(res.image)
        out["n_minutiae"].append(res.n_minutiae)
        out["ssim"].append(ssim(img, res.image))
        out["psnr"].append(psnr(img, res.image))
        back = to_uint8(invert_fpdfsn(res.image, params.beta)) if params.beta < 1 else None
        out["ssim_inverted"].append(None if back is None else ssim(img, back))
        lp = None
        if with_lpips and out["lpips_note"] is None:
            lp, out["lpips_note"] = lpips_or_reason(img, res.image)
        out["lpips"].append(lp)
    e0, e1 = embed(images, dpis), embed(perturbed, dpis)
    out["cosine"] = [float(c) for c in np.sum(e0 * e1, axis=1)]
    out["distance"] = [float(d) for d in np.linalg.norm(e0 - e1, axis=1)]
    return out


def reference_distances(emb: np.ndarray, ids: Sequence[str], rng: np.random.Generator) -> dict:
    """Embedding distances of the same finger's two impressions (genuine) and of different fingers (impostor,
    at most :data:`MAX_IMPOSTORS` drawn with ``rng``)."""
    ids = np.asarray(ids)
    i, j = np.triu_indices(len(ids), 1)
    same = ids[i] == ids[j]
    d = np.linalg.norm(emb[i] - emb[j], axis=1)
    imp = d[~same]
    if len(imp) > MAX_IMPOSTORS:
        imp = imp[rng.choice(len(imp), MAX_IMPOSTORS, replace=False)]
    return {"genuine": [float(x) for x in d[same]], "impostor": [float(x) for x in imp]}


def run_fig3(sets: dict[str, list[FingerprintRecord]], embed: Embed, model_info: dict, n: int, seed: int,
             sigma2: float) -> dict:
    """Fig. 3 on ``n`` prints a set (two impressions a finger, for the genuine reference) at β = 0.5."""
    params = FPDFSNParams(beta=PAPER_BETA, sigma2=sigma2)
    rng = np.random.default_rng(seed)
    noise = np.random.default_rng()  # the mechanism's noise: OS entropy, never seeded
    per_set = {}
    for name, recs in sets.items():
        sub = subsample(recs, n, rng, per_finger=2)
        images, dpis = [r.image for r in sub], [r.dpi for r in sub]
        sims = fpdfsn_similarities(images, dpis, params, noise, embed)
        ref = reference_distances(embed(images, dpis), [r.identity for r in sub], rng)
        thr = model_info["threshold"]
        per_set[name] = {"prints": len(sub), "fingers": len({r.identity for r in sub}), **sims, **ref,
                         "still_match": (None if thr is None else
                                         float(np.mean(np.asarray(sims["distance"]) <= thr)))}
        print(f"fig3 {name}: {len(sub)} prints", file=sys.stderr)
    note = next((s["lpips_note"] for s in per_set.values() if s["lpips_note"]), None)
    return {"figure": "fig3", "params": params.to_dict(), **model_info, "lpips_note": note, "sets": per_set}


def example_strip(params: FPDFSNParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A synthetic CASIA-like print (the product's generator, seed 0), its FP-DFSN version and the print rebuilt
    knowing β: the picture of Fig. 3 without showing a real person's print in the repository."""
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile

    img = finger_records(get_profile("casia"), finger=0, impressions=1, seed=0)[0].image
    out = fpdfsn(img, params, np.random.default_rng()).image
    return img, out, to_uint8(invert_fpdfsn(out, params.beta))


def plot_fig3(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    params = FPDFSNParams(**{k: v for k, v in res["params"].items()})
    strip = example_strip(params)
    names = list(res["sets"])
    fig = plt.figure(figsize=(13, 8.5))
    gs = fig.add_gridspec(2, 6, height_ratios=[1, 1.25])
    titles = ["synthetic print I", f"FP-DFSN β={params.beta:g}, σ²={params.sigma2:g}", "I_diff / (1 − β)"]
    for k, (im, t) in enumerate(zip(strip, titles, strict=True)):
        ax = fig.add_subplot(gs[0, 2 * k:2 * k + 2])
        ax.imshow(im, cmap="gray", vmin=0, vmax=255)
        ax.set_title(t, fontsize=9)
        ax.axis("off")
    ax = fig.add_subplot(gs[1, :3])
    pos = np.arange(len(names))
    for off, key, col, lab in ((-0.2, "distance", "C3", "I vs FP-DFSN(I)"),
                               (0.2, "genuine", "C0", "same finger, two impressions")):
        data = [res["sets"][s][key] or [np.nan] for s in names]
        bp = ax.boxplot(data, positions=pos + off, widths=0.35, patch_artist=True, showfliers=True)
        for b in bp["boxes"]:
            b.set_facecolor(col)
            b.set_alpha(0.5)
        ax.plot([], [], color=col, lw=6, alpha=0.5, label=lab)
    if res["threshold"] is not None:
        ax.axhline(res["threshold"], color="k", ls="--", lw=1, label=f"model threshold {res['threshold']:.3f}")
    ax.set_yscale("log")
    ax.set_xticks(pos, [f"{s}\n(n={res['sets'][s]['prints']})" for s in names], fontsize=7, rotation=20)
    ax.set_ylabel("embedding distance ‖f(a) − f(b)‖ (shipped model)")
    ax.legend(fontsize=7)
    ax.set_title("(b) verifier: distance of a print to its FP-DFSN version", fontsize=9)
    ax = fig.add_subplot(gs[1, 3:])
    for off, key, col, lab in ((-0.2, "ssim", "C3", "SSIM(I, I_diff)"),
                               (0.2, "ssim_inverted", "C2", "SSIM(I, I_diff/(1−β)), knowing β")):
        data = [[v for v in res["sets"][s][key] if v is not None] or [np.nan] for s in names]
        bp = ax.boxplot(data, positions=pos + off, widths=0.35, patch_artist=True)
        for b in bp["boxes"]:
            b.set_facecolor(col)
            b.set_alpha(0.5)
        ax.plot([], [], color=col, lw=6, alpha=0.5, label=lab)
    ax.set_ylim(0, 1.02)
    ax.set_xticks(pos, [s for s in names], fontsize=7, rotation=20)
    ax.set_ylabel("SSIM")
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("(c) image similarity (LPIPS: " + ("computed" if res["lpips_note"] is None else "unavailable")
                 + ")", fontsize=9)
    fig.suptitle("Yan et al. 2025 Fig. 3 on real prints: similarity before / after FP-DFSN", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------------------- Fig. 4
def emd_exact(x: np.ndarray, y: np.ndarray) -> float:
    """Exact EMD (1-Wasserstein, Euclidean ground cost) between two point clouds with uniform weights.

    Solves the transportation problem min Σ_ij C_ij T_ij, C_ij = ‖x_i − y_j‖₂, subject to Σ_j T_ij = 1/n,
    Σ_i T_ij = 1/m, T ≥ 0, with HiGHS (:func:`scipy.optimize.linprog`); (n·m) variables.

    Parameters
    ----------
    x : ndarray, shape (n, d)
    y : ndarray, shape (m, d)

    Returns
    -------
    float
        The EMD, in the units of the embedding (for unit-norm embeddings, in [0, 2]).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1] or len(x) == 0 or len(y) == 0:
        raise ValueError(f"emd_exact: expected two non-empty (n, d) clouds of one d, got {x.shape} and {y.shape}")
    n, m = len(x), len(y)
    cost = cdist(x, y).ravel()
    rows = sp.kron(sp.eye(n), np.ones((1, m)))  # Σ_j T_ij
    cols = sp.kron(np.ones((1, n)), sp.eye(m))  # Σ_i T_ij
    a_eq = sp.vstack([rows, cols]).tocsr()
    b_eq = np.r_[np.full(n, 1.0 / n), np.full(m, 1.0 / m)]
    res = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"emd_exact: the transportation LP failed ({res.message})")
    return max(0.0, float(res.fun))


def emd_mean_1d(x: np.ndarray, y: np.ndarray) -> float:
    """Mean over the d dimensions of the 1-D Wasserstein distance between the two clouds' marginals."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"emd_mean_1d: expected two (n, d) clouds of one d, got {x.shape} and {y.shape}")
    return float(np.mean([wasserstein_distance(x[:, k], y[:, k]) for k in range(x.shape[1])]))


def emd_matrix(clouds: Sequence[np.ndarray], dist: Callable[[np.ndarray, np.ndarray], float],
               halves: Sequence[tuple[np.ndarray, np.ndarray] | None] | None = None) -> np.ndarray:
    """Symmetric matrix of ``dist`` between every two clouds; the diagonal is ``dist`` between the two halves of
    ``halves[i]`` (NaN where None), else 0 (the distance of a cloud to itself)."""
    k = len(clouds)
    out = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            out[i, j] = out[j, i] = dist(clouds[i], clouds[j])
        if halves is not None:
            out[i, i] = np.nan if halves[i] is None else dist(*halves[i])
    return out


def split_by_finger(emb: np.ndarray, ids: Sequence[str], rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """Two finger-disjoint halves of a cloud (random halves of its fingers); None with fewer than 2 fingers."""
    names = np.unique(np.asarray(ids))
    if len(names) < 2:
        return None
    first = set(rng.permutation(names)[: len(names) // 2])
    pick = np.array([i in first for i in ids])
    return emb[pick], emb[~pick]


def permutation_null(a: np.ndarray, ids_a: Sequence[str], b: np.ndarray, ids_b: Sequence[str],
                     dist: Callable[[np.ndarray, np.ndarray], float], rng: np.random.Generator,
                     reps: int) -> list[float]:
    """``dist`` between two groups of the pooled fingers of A and B, drawn at random ``reps`` times, with as
    many fingers as A and B each: the EMD two folders would show if their prints came from one distribution.

    Fingers, not prints, are shuffled (a finger's impressions stay together), so the null keeps the clustering
    by finger that a sensor's few fingers give its cloud.
    """
    emb = np.concatenate([a, b])
    ids = np.asarray([f"a/{i}" for i in ids_a] + [f"b/{i}" for i in ids_b])
    names = np.unique(ids)
    k = len(np.unique(np.asarray(ids_a)))
    out = []
    for _ in range(reps):
        first = set(rng.permutation(names)[:k])
        pick = np.array([i in first for i in ids])
        out.append(dist(emb[pick], emb[~pick]))
    return out


def run_fig4(sets: dict[str, list[FingerprintRecord]], embed: Embed, model_info: dict, n: int, seed: int,
             reps: int) -> dict:
    """Fig. 4: pairwise EMD between the folders' embedding distributions (at most ``n`` prints a folder), each
    pair against ``reps`` finger-level permutations of the two folders' pooled fingers."""
    rng = np.random.default_rng(seed)
    names, clouds, halves, fids, counts = [], [], [], [], {}
    for name, recs in sets.items():
        sub = subsample(recs, n, rng, per_finger=10**6)
        emb = embed([r.image for r in sub], [r.dpi for r in sub])
        ids = [r.identity for r in sub]
        names.append(name)
        clouds.append(emb)
        fids.append(ids)
        halves.append(split_by_finger(emb, ids, rng))
        counts[name] = {"prints": len(sub), "fingers": len(set(ids)), "of_prints": len(recs),
                        "half_sizes": None if halves[-1] is None else [len(h) for h in halves[-1]]}
        print(f"fig4 {name}: {len(sub)} prints embedded", file=sys.stderr)
    out: dict = {"figure": "fig4", **model_info, "sets": names, "counts": counts, "permutations": reps,
                 "diagonal": "EMD between two finger-disjoint halves of the folder (self-EMD is 0 by definition)",
                 "pairs": []}
    for key, dist in (("emd_exact", emd_exact), ("emd_mean_1d", emd_mean_1d)):
        out[key] = emd_matrix(clouds, dist, halves).tolist()
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            row = {"a": names[i], "b": names[j]}
            for key, dist in (("emd_exact", emd_exact), ("emd_mean_1d", emd_mean_1d)):
                null = permutation_null(clouds[i], fids[i], clouds[j], fids[j], dist, rng, reps)
                obs = out[key][i][j]
                row[key] = {"observed": obs, "null": spread(null),
                            # one-sided permutation p-value, the observed split counted as one of the draws
                            "p": (1 + sum(v >= obs for v in null)) / (1 + len(null))}
            out["pairs"].append(row)
            print(f"fig4 {names[i]} - {names[j]}: EMD {row['emd_exact']['observed']:.3f}, "
                  f"p {row['emd_exact']['p']:.3f}", file=sys.stderr)
    return out


def plot_fig4(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = res["sets"]
    labels = [f"{s} ({res['counts'][s]['prints']})" for s in names]
    fig, axes = plt.subplots(1, 2, figsize=(14, 6))
    for ax, key, title in ((axes[0], "emd_exact", "(a) exact EMD (W1, Euclidean cost) of the 128-D embeddings"),
                           (axes[1], "emd_mean_1d", "(b) mean over dimensions of the 1-D Wasserstein distance")):
        m = np.asarray(res[key], dtype=float)
        p = np.full(m.shape, np.nan)
        for row in res["pairs"]:
            i, j = names.index(row["a"]), names.index(row["b"])
            p[i, j] = p[j, i] = row[key]["p"]
        im = ax.imshow(m, cmap="Blues")
        for i in range(len(names)):
            for j in range(len(names)):
                v = m[i, j]
                mark = "\n(½|½)" if i == j else ("*" if p[i, j] <= 0.05 else "")
                txt = "—" if not np.isfinite(v) else f"{v:.3f}{mark}"
                ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                        color="white" if np.isfinite(v) and v > np.nanmax(m) * 0.6 else "black")
        ax.set_xticks(range(len(names)), labels, rotation=35, ha="right", fontsize=7)
        ax.set_yticks(range(len(names)), labels, fontsize=7)
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle("Yan et al. 2025 Fig. 4(a) on real sensors: EMD between folders' feature distributions "
                 f"(shipped model; diagonal: two finger-disjoint halves; * p ≤ 0.05 against "
                 f"{res['permutations']} finger permutations)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------------------- Fig. 6
@functools.lru_cache(maxsize=1)
def _nfiq2_extractor():
    """One NBIS extractor computing NFIQ 2 at 500 ppi, made once (not per print)."""
    import nbis

    return nbis.new_nbis_extractor(nbis.NbisExtractorSettings(
        min_quality=0.0, get_center=False, check_fingerprint=False, compute_nfiq2=True, ppi=NFIQ2_PPI))


def nfiq2_score(image: np.ndarray, dpi: float | None) -> float:
    """NFIQ 2 (nbis-py, NIST's implementation, 0-100) of a gray print; NaN where NFIQ 2 computes no value.

    An image not at 500 ppi is first resampled to 500 ppi (bilinear), the resolution NFIQ 2 is defined for.
    """
    import cv2

    res = float(dpi) if dpi else NFIQ2_PPI
    if abs(res - NFIQ2_PPI) > 1e-6:
        f = NFIQ2_PPI / res
        image = cv2.resize(image, (round(image.shape[1] * f), round(image.shape[0] * f)),
                           interpolation=cv2.INTER_LINEAR)
    png = cv2.imencode(".png", image)[1].tobytes()
    try:
        return float(_nfiq2_extractor().extract_minutiae(png).quality().score)
    except Exception:  # noqa: BLE001 - nbis raises its own error types (Nfiq2ComputeFailed) where it has no value
        return float("nan")


def nfiq2_available() -> tuple[bool, str]:
    """Whether NFIQ 2 can be computed here, and by what."""
    try:
        import nbis  # noqa: F401
    except ImportError as exc:
        return False, f"nbis-py not importable ({exc})"
    return True, "NFIQ 2 of nbis-py (NIST NFIQ 2 random forest), 0-100"


def beta_curve(image: np.ndarray, dpi: float | None, betas: Sequence[float], sigma2: float,
               rng: np.random.Generator, measure: Callable[[np.ndarray, float | None], float],
               inverted: Sequence[float] = INVERTED_BETAS) -> dict:
    """Quality of one print's FP-DFSN version at every β, and of the version rebuilt knowing β.

    The minutiae (found on the sharpened I, so independent of β) are extracted once and reused for every β.
    Returns lists over ``betas``: ``measure`` of I_diff (``literal``) and of clip(I_diff / (1 − β))
    (``inverted``; NaN at a β not in ``inverted``), the gate's ``print_quality`` of I_diff and whether the gate
    passes it.
    """
    from fedprint.recognition.quality import gate

    first = fpdfsn(image, FPDFSNParams(beta=0.0, sigma2=sigma2), rng)

    def known(img: np.ndarray, *, border: int = 10) -> np.ndarray:
        return first.minutiae

    out: dict = {"literal": [], "inverted": [], "print_quality": [], "gate_pass": [], "n_minutiae": first.n_minutiae}
    for b in betas:
        img = first.image if b == 0 else fpdfsn(image, FPDFSNParams(beta=b, sigma2=sigma2), rng,
                                                extractor=known).image
        lit = measure(img, dpi)
        out["literal"].append(lit)
        out["inverted"].append(lit if b == 0 else measure(to_uint8(invert_fpdfsn(img, b)), dpi)
                               if b in inverted else float("nan"))
        q, why = gate(img, dpi)
        out["print_quality"].append(q)
        out["gate_pass"].append(why is None)
    return out


def run_fig6(sets: dict[str, list[FingerprintRecord]], n: int, seed: int, sigma2: float) -> dict:
    """Fig. 6: quality vs β on ``n`` prints a set (one impression a finger)."""
    ok, what = nfiq2_available()
    measure = nfiq2_score if ok else (lambda img, dpi: float("nan"))
    rng = np.random.default_rng(seed)
    noise = np.random.default_rng()  # the mechanism's noise: OS entropy, never seeded
    per_set = {}
    for name, recs in sets.items():
        sub = subsample(recs, n, rng, per_finger=1)
        curves = [beta_curve(r.image, r.dpi, BETAS, sigma2, noise, measure) for r in sub]
        per_set[name] = {"prints": len(sub), "dpi": sub[0].dpi if sub else None,
                         "curves": curves,
                         "summary": {key: [spread([c[key][i] for c in curves]) for i in range(len(BETAS))]
                                     for key in ("literal", "inverted", "print_quality")},
                         "gate_pass": [float(np.mean([c["gate_pass"][i] for c in curves])) for i in
                                       range(len(BETAS))]}
        print(f"fig6 {name}: {len(sub)} prints x {len(BETAS)} β", file=sys.stderr)
    return {"figure": "fig6", "betas": list(BETAS), "inverted_betas": list(INVERTED_BETAS), "sigma2": sigma2,
            "nfiq2": what if ok else None,
            "nfiq2_missing": None if ok else what, "sets": per_set}


def plot_fig6(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    betas = np.asarray(res["betas"])
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    panels = (("literal", "(a) NFIQ 2 of I_diff (Eq. 10 as released)", "NFIQ 2 (0-100)"),
              ("inverted", "(b) NFIQ 2 of I_diff / (1 − β) (gain undone)", "NFIQ 2 (0-100)"),
              ("print_quality", "(c) FedPrint gate measure print_quality", "print_quality (gate 0.1)"))
    for ax, (key, title, ylab) in zip(axes, panels, strict=True):
        for k, (name, s) in enumerate(res["sets"].items()):
            summ = s["summary"][key]
            med = np.array([np.nan if x["median"] is None else x["median"] for x in summ])
            q1 = np.array([np.nan if x["q1"] is None else x["q1"] for x in summ])
            q3 = np.array([np.nan if x["q3"] is None else x["q3"] for x in summ])
            keep = np.isin(betas, res["inverted_betas"]) if key == "inverted" else np.ones(len(betas), bool)
            ax.plot(betas[keep], med[keep], "o-", color=f"C{k}", ms=3, label=f"{name} (n={s['prints']})")
            ax.fill_between(betas[keep], q1[keep], q3[keep], color=f"C{k}", alpha=0.12)
        ax.set_xlabel("β")
        ax.set_ylabel(ylab)
        ax.set_title(title, fontsize=9)
    axes[2].axhline(0.1, color="k", ls="--", lw=1)
    axes[0].legend(fontsize=7)
    fig.suptitle("Yan et al. 2025 Fig. 6 on real prints: quality vs β (median and quartiles over prints; "
                 "missing points: NFIQ 2 gave no value)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------------------ doc
def _f(x: float | None, nd: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


def _cmd(fig: str) -> str:
    return f"python -m studies.repro_003_figures --only {fig}"


def doc_fig3(r: dict | None) -> str:
    head = ("## Fig. 3 — similarity before / after FP-DFSN\n\n"
            "**Paper.** Three panels (SOCOFing, NIST SD10, CASIA), each an original print beside its FP-DFSN version, "
            "\"the similarity between the two images is evaluated using the AlexNet model selected by LPIPS\"; the "
            "text says the processed images \"show increased noise and reduced clarity\". The LPIPS values are in "
            "the image only (not in the text we have), β is the paper's 0.5 (Sec. 5.2), σ² is not given.\n\n")
    if r is None:
        return head + f"Not yet run: `{_cmd('fig3')}`.\n"
    p = r["params"]
    lp = ("LPIPS (AlexNet) computed." if r["lpips_note"] is None else
          "LPIPS not computed: torchvision's ImageNet AlexNet weights (alexnet-owt-7be5be79.pth) are not in the "
          "torch hub cache here, and FedPrint never downloads them.")
    rows = ["| set | prints (fingers) | same-finger pairs | distance to FP-DFSN(I), median [q1, q3] | "
            "genuine distance, median | still matches (d ≤ thr) | SSIM(I, I_diff) median | "
            "SSIM knowing β median | PSNR dB median |", "|---|---|---|---|---|---|---|---|---|"]
    allsim = {k: [] for k in ("distance", "ssim", "ssim_inverted", "genuine")}
    n_pr = 0
    for name, s in r["sets"].items():
        d, g = spread(s["distance"]), spread(s["genuine"])
        n_pr += s["prints"]
        for k in allsim:
            allsim[k] += [v for v in s[k] if v is not None]
        rows.append(f"| {name} | {s['prints']} ({s['fingers']}) | {len(s['genuine'])} | {_f(d['median'], 4)} "
                    f"[{_f(d['q1'], 4)}, {_f(d['q3'], 4)}] | {_f(g['median'], 3)} | "
                    f"{_f(None if s['still_match'] is None else 100 * s['still_match'], 1)} % | "
                    f"{_f(spread(s['ssim'])['median'])} | {_f(spread(s['ssim_inverted'])['median'])} | "
                    f"{_f(spread(s['psnr'])['median'], 1)} |")
    d, g = spread(allsim["distance"]), spread(allsim["genuine"])
    si, sv = spread(allsim["ssim"]), spread(allsim["ssim_inverted"])
    thr = r["threshold"]
    match = np.mean(np.asarray(allsim["distance"]) <= thr) if thr is not None else None
    recovered = 100 * (sv["median"] - si["median"]) / (1 - si["median"])
    ratio = g["median"] / d["median"] if g["n"] and d["median"] else float("nan")
    verdict = ("reproduced in shape" if r["lpips_note"] is None else
               "different mechanism (SSIM / PSNR and the shipped model's embedding distance instead of "
               "LPIPS-AlexNet, whose ImageNet weights are not installed here)")
    per = ", ".join(f"{k} {v['prints']}" for k, v in r["sets"].items())
    return head + (
        f"**Ours.** {n_pr} real prints ({per}; fingers drawn at "
        f"random, seed {r['seed']}, two impressions of each a pass), each perturbed once by the product's FP-DFSN "
        f"(`fedprint.privacy.fpdfsn`, β = {p['beta']:g}, σ² = {p['sigma2']:g} gray levels², D0 = {p['d0']:g}, "
        f"T_d = {p['border']}, radius {p['radius']:g} px, minutiae by {p['backend']}; noise from OS entropy). "
        f"Plotted: a synthetic print (the product's generator) before / after, the shipped model's "
        f"(`{r['model']}`) embedding distance between each print and its FP-DFSN version beside the distance "
        f"between the finger's two impressions, and SSIM of (I, I_diff) and of (I, I_diff / (1 − β)). {lp}\n\n"
        f"Command: `{_cmd('fig3')}` ({r['seconds']:.0f} s).\n\n" + "\n".join(rows) + "\n\n"
        f"Pooled over {d['n']} prints: embedding distance to the FP-DFSN version median {_f(d['median'], 4)} "
        f"(max {_f(d['max'], 4)}) against {_f(g['median'], 3)} between two impressions of one finger "
        f"({g['n']} genuine pairs); "
        + ("" if match is None else f"{100 * match:.1f} % of the perturbed prints still match their original at "
           f"the model's threshold {thr:.4f}; ")
        + f"SSIM(I, I_diff) median {_f(si['median'])} [{_f(si['q1'])}, {_f(si['q3'])}], but SSIM after dividing by "
        f"(1 − β) median {_f(sv['median'])}, so undoing the (1 − β) gain of Eq. 10, "
        f"which needs only β, restores {recovered:.0f} % of the SSIM lost. "
        f"The median distance of a print to its FP-DFSN version is {ratio:.1f} times smaller than that of two "
        f"impressions of one finger.\n\n"
        f"**Verdict:** {verdict}.\n")


def doc_fig4(r: dict | None) -> str:
    head = ("## Fig. 4 — EMD heatmap of feature heterogeneity\n\n"
            "**Paper.** (a) a heatmap of the Earth Mover's Distance between the three data sets' (clients') "
            "\"feature characteristics\" (darker = more different) and (b) a t-SNE map with \"minimal overlap "
            "between clusters\"; neither the feature extractor nor how the EMD is computed on features is stated, "
            "and the values are in the image only.\n\n")
    if r is None:
        return head + f"Not yet run: `{_cmd('fig4')}`.\n"
    names = r["sets"]
    parts = []
    for key, title in (("emd_exact", "exact EMD (W1, Euclidean cost) on the embeddings"),
                       ("emd_mean_1d", "mean over the 128 dimensions of the 1-D Wasserstein distance")):
        m = np.asarray(r[key], dtype=float)
        t = [f"{title} (diagonal: between two finger-disjoint halves of the folder):", "",
             "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        t += [f"| {a} | " + " | ".join(_f(m[i, j]) for j in range(len(names))) + " |" for i, a in enumerate(names)]
        parts.append("\n".join(t))
    t = ["| folders | prints | exact EMD | null (permuted fingers), median [min, max] | p | mean 1-D EMD | "
         "null median | p |", "|---|---|---|---|---|---|---|---|"]
    for row in r["pairs"]:
        e, w = row["emd_exact"], row["emd_mean_1d"]
        t.append(f"| {row['a']} – {row['b']} | {r['counts'][row['a']]['prints']} / {r['counts'][row['b']]['prints']} "
                 f"| {e['observed']:.3f} | {_f(e['null']['median'])} [{_f(e['null']['min'])}, "
                 f"{_f(e['null']['max'])}] | {e['p']:.2f} | {w['observed']:.4f} | {_f(w['null']['median'], 4)} | "
                 f"{w['p']:.2f} |")
    parts.append("Each pair against the EMD between two random groups of the two folders' pooled fingers (as many "
                 f"fingers as each folder; {r['permutations']} draws; one-sided p, the observed split counted as "
                 "one draw):\n\n" + "\n".join(t))
    sig = [row for row in r["pairs"] if row["emd_exact"]["p"] <= 0.05]
    off = sorted(r["pairs"], key=lambda row: row["emd_exact"]["observed"])
    lo, hi = off[0], off[-1]
    counts = ", ".join(f"{s} {c['prints']} of {c['of_prints']} ({c['fingers']} fingers)"
                       for s, c in r["counts"].items())
    cap = "all prints" if r["max_prints"] <= 0 else f"at most {r['max_prints']} prints a folder"
    return head + (
        f"**Ours.** One client per folder of `../shared/data/real`; prints embedded by the shipped model "
        f"(`{r['model']}`, 128-D unit-norm), {cap} (whole fingers drawn at random, seed {r['seed']}): {counts}. "
        f"Between two folders: (a) the exact EMD between the two embedding clouds (uniform weights, Euclidean "
        f"ground cost; the transportation LP solved by HiGHS through `scipy.optimize.linprog` — POT is not "
        f"installed) and (b) the mean over the 128 dimensions of `scipy.stats.wasserstein_distance` of the two "
        f"marginals. The t-SNE panel is not drawn. Because the empirical EMD in 128 dimensions depends on how many "
        f"prints and fingers each cloud has, each pair is judged against a finger-level permutation null rather "
        f"than against the other cells.\n\n"
        f"Command: `{_cmd('fig4')}` ({r['seconds']:.0f} s).\n\n" + "\n\n".join(parts) + "\n\n"
        f"Exact EMD between folders ranges from {lo['emd_exact']['observed']:.3f} ({lo['a']} – {lo['b']}) to "
        f"{hi['emd_exact']['observed']:.3f} ({hi['a']} – {hi['b']}); {len(sig)} of the {len(r['pairs'])} pairs "
        f"have p ≤ 0.05 ({0.05 * len(r['pairs']):.2f} expected by chance alone"
        + ("; " + ", ".join(f"{x['a']} – {x['b']}" for x in sig) if sig else "") + "). "
        + ("So the paper's reading, data sets with clearly separated features, holds here."
           if 2 * len(sig) > len(r["pairs"]) else
           "So with this model and these sensors the paper's reading, data sets with clearly separated features, "
           "does not hold: most pairs of sensors are no further apart than two random groups of their fingers.")
        + "\n\n"
        "**Verdict:** reproduced in shape (a pairwise EMD heatmap of one model's features between sensors; the "
        "paper names neither its feature extractor nor its EMD, ours are named above).\n")


def doc_fig6(r: dict | None) -> str:
    head = ("## Fig. 6 — NFIQ 2 quality vs β\n\n"
            "**Paper.** NFIQ 2 of each data set's prints after FP-DFSN at β = 0 … 0.9 (the ten clients of Sec. "
            "5.3.2): \"despite some fluctuations, the overall trend indicates a decline in image quality scores as "
            "the β increases, particularly in the SOCOFing dataset\"; the curves' values are in the image only "
            "(Table 2 gives the unperturbed NFIQ 2 means: NIST SD10 47.72, SOCOFing 32.09, CASIA 32.81).\n\n")
    if r is None:
        return head + f"Not yet run: `{_cmd('fig6')}`.\n"
    betas = r["betas"]
    sel = [i for i, b in enumerate(betas) if b in (0.0, 0.3, 0.5, 0.7, 0.9)]
    hdr = " | ".join(f"β={betas[i]:g}" for i in sel)
    t = [f"| set (prints) | measure | {hdr} |", "|---|---|" + "---|" * len(sel)]
    ib = r.get("inverted_betas", betas)
    mid = betas.index(PAPER_BETA)
    declines, total = 0, 0
    for name, s in r["sets"].items():
        for key, lab in (("literal", "NFIQ 2 of I_diff, median (n with a value)"),
                         ("inverted", "NFIQ 2 of I_diff/(1−β), median (n)"),
                         ("print_quality", "print_quality, median")):
            summ = s["summary"][key]
            cells = [("·" if key == "inverted" and betas[i] not in ib else
                      f"{_f(summ[i]['median'], 1 if key != 'print_quality' else 3)}"
                      + (f" ({summ[i]['n']})" if key != "print_quality" else "")) for i in sel]
            t.append(f"| {name} ({s['prints']}) | {lab} | " + " | ".join(cells) + " |")
        t.append(f"| {name} ({s['prints']}) | gate passes | "
                 + " | ".join(f"{100 * s['gate_pass'][i]:.0f} %" for i in sel) + " |")
        a, b = s["summary"]["literal"][0], s["summary"]["literal"][mid]
        if a["n"]:
            total += 1  # no value at β = 0.5 counts as a fall: NFIQ 2 no longer finds a print to score
            declines += int(b["n"] == 0 or b["median"] < a["median"])
    pooled = {key: [spread([c[key][i] for s in r["sets"].values() for c in s["curves"]]) for i in range(len(betas))]
              for key in ("literal", "inverted")}
    n_all = sum(s["prints"] for s in r["sets"].values())
    last = len(betas) - 1
    if r["nfiq2"] is None:
        verdict = (f"different mechanism (FedPrint's gate measure `print_quality` and the gate's decision; NFIQ 2 "
                   f"unavailable: {r['nfiq2_missing']})")
    elif total and 2 * declines > total:
        verdict = (f"reproduced in shape: the median NFIQ 2 at β = {PAPER_BETA:g} is below β = 0 (or NFIQ 2 has "
                   f"no value) on {declines} of {total} sets")
    else:
        verdict = (f"not reproduced in shape: the median NFIQ 2 at β = {PAPER_BETA:g} is below β = 0 on only "
                   f"{declines} of {total} sets")
    ib_text = ", ".join(f"{b:g}" for b in ib)
    summary = (f"Pooled over the {n_all} prints, NFIQ 2 of I_diff: median {_f(pooled['literal'][0]['median'], 1)} "
               f"at β = 0, {_f(pooled['literal'][mid]['median'], 1)} at β = {PAPER_BETA:g} "
               f"({pooled['literal'][mid]['n']} prints with a value), {_f(pooled['literal'][last]['median'], 1)} at "
               f"β = {betas[last]:g} ({pooled['literal'][last]['n']} with a value); of the print rebuilt knowing β: "
               f"{_f(pooled['inverted'][mid]['median'], 1)} at β = {PAPER_BETA:g} "
               f"({pooled['inverted'][mid]['n']}), {_f(pooled['inverted'][last]['median'], 1)} at "
               f"β = {betas[last]:g} ({pooled['inverted'][last]['n']}).")
    return head + (
        f"**Ours.** {r['nfiq2'] or 'NFIQ 2 unavailable'}; prints not at 500 ppi (SOCOFing, 170 dpi) are "
        f"resampled to 500 ppi for it. {sum(s['prints'] for s in r['sets'].values())} real prints (one impression "
        f"of up to {r['max_prints']} random fingers a set, seed {r['seed']}), each perturbed by the product's "
        f"FP-DFSN at β = {', '.join(f'{b:g}' for b in betas)} (σ² = {r['sigma2']:g}, other parameters the "
        f"product's defaults; one noise draw per print and β, OS entropy). Per β: NFIQ 2 of the released I_diff "
        f"(a), NFIQ 2 of I_diff / (1 − β), the print anyone knowing β rebuilds (b; at β = {ib_text}), and the "
        f"product's own gate measure `print_quality` (c) with the gate's pass rate (quality ≥ 0.1 and ≥ 5 MINDTCT "
        f"minutiae). "
        f"A print's NFIQ 2 is missing where nbis-py's NFIQ 2 computes no value (`Nfiq2ComputeFailed`).\n\n"
        f"Command: `{_cmd('fig6')}` ({r['seconds']:.0f} s).\n\n" + "\n".join(t) + "\n\n" + summary + " "
        "What (a) loses and (b) does not is the (1 − β) darkening of Eq. 10, which knowing β undoes; what (b) "
        "still loses is the noise at the minutiae and the 8-bit rounding of the darkened print.\n\n"
        f"**Verdict:** {verdict}.\n")


def render_doc(out: Path) -> Path:
    """``003_figures.md`` from the ``003_fig*.json`` in ``out`` (a missing one: "not yet run" and its command)."""
    got = {f: json.loads((out / f"003_{f}.json").read_text()) if (out / f"003_{f}.json").is_file() else None
           for f in FIGS}
    text = ("# Seed 003 (Yan et al. 2025, AFFR + FP-DFSN): Figs. 3, 4 and 6 on the real prints\n\n"
            "Written by `python -m studies.repro_003_figures` (issue 62) from the JSON beside each figure in "
            "this folder. Real prints: `../shared/data/real`, one sensor per folder (never copied into the "
            "repository; the example image of Fig. 3 is synthetic). FP-DFSN is a perturbation, not differential "
            "privacy (`privacy/fpdfsn.py`). Which fingers are used is drawn with a fixed seed; FP-DFSN's noise is "
            "drawn from OS entropy, so every number here is a spread over prints, and a rerun is a new sample.\n\n"
            + "\n".join(f"{fn(got[f])}\n![{f}](003_{f}.png)\n" if got[f] else fn(None) + "\n"
                        for f, fn in (("fig3", doc_fig3), ("fig4", doc_fig4), ("fig6", doc_fig6))))
    return write_text(out / DOC, text)


# ----------------------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    from fedprint.models.model_file import pretrained_path

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=FIGS, help="run one figure (default: all three); the document is re-rendered")
    p.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT.relative_to(ROOT)})")
    p.add_argument("--real", type=Path, default=None, help="root of the real sets (default: the project's)")
    p.add_argument("--model", default=None, help="model file (default: the shipped fedprint-synthetic.pt)")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsamples (not of FP-DFSN's noise)")
    p.add_argument("--sigma2", type=float, default=FPDFSNParams().sigma2,
                   help="FP-DFSN noise variance, gray levels² (default the product's; the paper gives none)")
    p.add_argument("--fig3-prints", type=int, default=60, help="prints a set for Fig. 3 (default 60)")
    p.add_argument("--fig4-prints", type=int, default=240, help="prints a set for Fig. 4 (default 240; 0 = all)")
    p.add_argument("--fig4-permutations", type=int, default=49,
                   help="finger-level permutations per pair of folders for Fig. 4's null (default 49: p >= 0.02)")
    p.add_argument("--fig6-prints", type=int, default=6,
                   help="prints a set for Fig. 6 (default 6: NFIQ 2 takes ~0.3-1 s an image, 19 images a print)")
    p.add_argument("--render-only", action="store_true", help="only re-render the document from the JSON files")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        sets = load_sets(args.real)
        if not sets:
            p.error("no real sets found (set --real or $FEDPRINT_REAL_SAMPLES)")
        model_path = args.model or str(pretrained_path())
        embed, info = model_embed(model_path)
        for fig in [args.only] if args.only else FIGS:
            t0 = time.perf_counter()
            if fig == "fig3":
                res = run_fig3(sets, embed, info, args.fig3_prints, args.seed, args.sigma2)
            elif fig == "fig4":
                res = {**run_fig4(sets, embed, info, args.fig4_prints, args.seed, args.fig4_permutations),
                       "max_prints": args.fig4_prints}
            else:
                res = {**run_fig6(sets, args.fig6_prints, args.seed, args.sigma2), "max_prints": args.fig6_prints}
            res.update(seconds=time.perf_counter() - t0, seed=args.seed,
                       command=shlex.join(["python", "-m", "studies.repro_003_figures", *(argv or sys.argv[1:])]))
            write_json(args.out / f"003_{fig}.json", res)
            {"fig3": plot_fig3, "fig4": plot_fig4, "fig6": plot_fig6}[fig](res, args.out / f"003_{fig}.png")
            print(f"{fig}: {res['seconds']:.0f} s -> {args.out / f'003_{fig}.png'}")
    print(f"Wrote {render_doc(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
