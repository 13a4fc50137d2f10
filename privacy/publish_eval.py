"""Usability benchmark of the DP publication mechanisms (``fedprint publish-eval``): what honest privacy costs.

For every mechanism x variant x ε, each probe impression (impression 1 of a finger) is published and the release
is compared with the original and with the unprotected gallery (impression 0 of every finger):

(a) minutiae retained — the fraction of the original probe's minutiae (by ``minutiae_backend``,
    :mod:`fedprint.data.minutiae_backends`; the same minutiae the point-set and region mechanisms protect) matched
    one-to-one within ``tolerance`` px (:func:`fedprint.data.realism.match_points`) by the minutiae extracted
    from
    the released image, or by the released point set itself for point-set mechanisms (Liu, Zhi et al.'s matching
    rate); minutiae precision — the fraction of the *released* minutiae so matched (the closest reading of their
    "matching accuracy": how many of the points a matcher sees in the release are real);
(b) verification EER against the unprotected gallery — genuine pair = released probe vs its own finger's gallery
    impression, impostor pairs = released probe vs every other finger's gallery impression — and rank-1
    identification accuracy (the best-scoring gallery finger is the probe's own) with a trained Siamese encoder
    (``checkpoint``) and/or the classical afis matcher (``classical``); "not run" otherwise; and, from the same
    rank-1 decision (the predicted finger of each release, in ``releases.csv``), the macro precision, recall and
    F1 over fingers (:func:`macro_prf`; the precision / recall / F1-score of the seed papers' classifier tables);
(c) PSNR / SSIM of the released image vs the original (image mechanisms only).

ε semantics. ``epsilon_unit="absolute"`` (default): each grid value is the ε passed to the mechanism.
``"mn/256"``: grid value k means ε = k·m·n/256 for an m×n image (Liu, Zhi et al.'s grid ε_k = k·mn/256, which
depends on the image size); the released row records k and the mean ε actually passed.

Noise. The mechanisms' noise comes from OS entropy (a fresh ``numpy.random.default_rng()`` per row) unless a test
injects ``rng`` through this Python API; ``seed`` only chooses which probes are sampled when ``n_images`` is
smaller than the number of fingers (benchmark data sampling, never a release's noise).

A mechanism that refuses a release (ε below a paper's minimum, too few minutiae) raises ``ValueError``; that is
recorded as ``refused: <reason>`` and the benchmark goes on. Any other exception is a bug and propagates.

Outputs in ``out_dir``: ``results.csv`` (one row per mechanism x variant x ε, plus the ``unprotected`` baseline),
``releases.csv`` (one row per release), ``table_<variant>.md`` and ``plot_<variant>.png`` per variant, and
``report.md`` (paper vs sound side by side, and each mechanism/variant's guarantee statement).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fedprint.data.minutiae_backends import extract, resolve_backend
from fedprint.data.realism import match_points
from fedprint.data.record import FingerprintRecord
from fedprint.models.metrics import eer
from fedprint.privacy.publish import registry
from fedprint.privacy.publish.base import VARIANTS
from fedprint.privacy.publish.ceiling import largest_meaningful_epsilon
from fedprint.privacy.similarity import psnr, ssim

NOT_RUN = "not run"
NOT_APPLICABLE = "n/a"
RESULT_COLUMNS = ["mechanism", "variant", "epsilon", "epsilon_unit", "mean_epsilon", "status", "n_probes",
                  "n_released", "n_refused", "dp", "spent_epsilon", "minutiae_retained", "minutiae_precision",
                  "psnr", "ssim", "eer_siamese", "eer_classical", "rank1_siamese", "rank1_classical",
                  "minutiae_backend", "above_ceiling",
                  # appended (issue 62) so that existing column positions do not move
                  "macro_precision_siamese", "macro_recall_siamese", "f1_siamese",
                  "macro_precision_classical", "macro_recall_classical", "f1_classical"]
RELEASE_COLUMNS = ["mechanism", "variant", "epsilon", "image_epsilon", "identity", "status", "n_minutiae_original",
                   "n_minutiae_released", "minutiae_retained", "minutiae_precision", "psnr", "ssim", "spent_epsilon",
                   "predicted_siamese", "predicted_classical"]
#: Metrics plotted against ε (column, axis label).
PLOT_METRICS = [("minutiae_retained", "minutiae retained"), ("ssim", "SSIM"), ("psnr", "PSNR (dB)"),
                ("eer_siamese", "EER (Siamese)"), ("eer_classical", "EER (classical)")]
EPSILON_UNITS = ("absolute", "mn/256")
MATCHERS = ("siamese", "classical")
VERIFICATION_COLUMNS = ("eer_siamese", "eer_classical", "rank1_siamese", "rank1_classical",
                        *(f"{c}_{m}" for m in MATCHERS for c in ("macro_precision", "macro_recall", "f1")))
#: ``predicted_<matcher>`` of a release whose best score is tied between several gallery fingers (no decision).
TIE = "(tie)"


def split_gallery_probes(records: Sequence[FingerprintRecord], n_images: int | None = None, seed: int | None = None
                         ) -> tuple[list[FingerprintRecord], list[FingerprintRecord]]:
    """Gallery = impression 0 of every finger; probes = impression 1 of the fingers that have both (``n_images``
    of them: the first in identity order, or a ``seed``-ed random sample kept in identity order). Altered images
    are ignored."""
    by_id: dict[str, dict[int, FingerprintRecord]] = {}
    for r in records:
        if r.alteration is None:
            by_id.setdefault(r.identity, {}).setdefault(r.impression, r)
    gallery = [imps[0] for _, imps in sorted(by_id.items()) if 0 in imps]
    probes = [imps[1] for _, imps in sorted(by_id.items()) if 0 in imps and 1 in imps]
    if n_images is not None:
        if n_images < 1:
            raise ValueError(f"n_images: expected a positive number of probes, got {n_images}")
        if seed is None or n_images >= len(probes):
            probes = probes[:n_images]
        else:
            keep = np.sort(np.random.default_rng(seed).choice(len(probes), n_images, replace=False))
            probes = [probes[i] for i in keep]
    if len(gallery) < 2 or not probes:
        raise ValueError(f"records: need >= 2 fingers with impression 0 and >= 1 with impressions 0 and 1, got "
                         f"{len(gallery)} gallery and {len(probes)} probe impressions")
    return gallery, probes


class SiameseScorer:
    """Embedding distances of a FedPrint model file (``model_<method>.pt``, :mod:`fedprint.models.model_file`)."""

    def __init__(self, checkpoint: str | Path) -> None:
        from fedprint.models.model_file import load_model

        self.model = load_model(checkpoint)

    def embed(self, images: Sequence[np.ndarray], dpi: Sequence[float | None] | float | None = None) -> np.ndarray:
        """Embeddings of images at resolution ``dpi`` (one value or one per image; None: working resolution)."""
        import torch

        from fedprint.models.preprocess import to_tensor_batch

        with torch.no_grad():
            x = to_tensor_batch(list(images), self.model.spec, dpi)
            return self.model.encoder(x).double().numpy()


def _pair_labels(probe_ids: Sequence[str], gallery_ids: Sequence[str]) -> np.ndarray:
    """(n_probes, n_gallery) 1 for genuine (same finger), 0 for impostor."""
    return (np.asarray(probe_ids)[:, None] == np.asarray(gallery_ids)[None, :]).astype(int)


def _eer_or_nan(scores: np.ndarray, labels: np.ndarray, higher_is_genuine: bool) -> float:
    lab = labels.reshape(-1)
    if lab.sum() == 0 or lab.sum() == lab.size:
        return math.nan
    return eer(scores.reshape(-1), lab, higher_is_genuine=higher_is_genuine)


def rank1_accuracy(scores: np.ndarray, labels: np.ndarray, higher_is_genuine: bool) -> float:
    """Fraction of probes (rows) whose best-scoring gallery entry is genuine; ties count as a miss unless every
    tied entry is genuine (a constant scorer gets 0 with more than one gallery finger)."""
    s = np.asarray(scores, float) if higher_is_genuine else -np.asarray(scores, float)
    best = s == s.max(axis=1, keepdims=True)
    return float(np.mean(np.all(~best | (labels == 1), axis=1)))


def rank1_predictions(scores: np.ndarray, gallery_ids: Sequence[str], higher_is_genuine: bool) -> list[str | None]:
    """The rank-1 decision of each probe (row): the identity of its best-scoring gallery entry, or None (no
    decision) when the best score is shared by entries of more than one identity — the tie rule of
    :func:`rank1_accuracy`, so a probe's prediction is its own finger exactly when rank-1 counts it a hit."""
    s = np.asarray(scores, float) if higher_is_genuine else -np.asarray(scores, float)
    ids = np.asarray(gallery_ids)
    best = s == s.max(axis=1, keepdims=True)
    preds: list[str | None] = []
    for row in best:
        tied = set(ids[row].tolist())
        preds.append(tied.pop() if len(tied) == 1 else None)
    return preds


def macro_prf(true_ids: Sequence[str], predicted_ids: Sequence[str | None]) -> tuple[float, float, float]:
    """Macro precision, recall and F1 over fingers of a rank-1 decision (one-vs-rest per finger, then averaged).

    Classes C are the gallery fingers that have at least one evaluated probe (here: the fingers of the released
    probes); a gallery finger without a probe is still a candidate — predicting it is a miss of the true finger —
    but not a class, since its recall would be 0/0. For c in C, with TP_c probes of c predicted c, P̂_c probes
    predicted c and N_c probes of c::

        precision_c = TP_c / P̂_c,  recall_c = TP_c / N_c,  F1_c = 2·precision_c·recall_c / (precision_c + recall_c)

    and each macro value is the unweighted mean over C. Conventions: a finger never predicted (P̂_c = 0) has
    precision_c = 0, and F1_c = 0 when precision_c + recall_c = 0 (scikit-learn's ``zero_division=0``). Zero, not
    1 or "left out", because a never-predicted finger is one the matcher cannot identify at all: leaving it out
    would let a matcher that collapses onto a few fingers score a high macro precision (predicting one finger for
    every probe would give 1/n instead of 1/n², n = the number of classes). A tie (``None``) predicts no finger:
    a miss for the true finger, a false positive for none. With one probe per finger (N_c = 1,
    :func:`split_gallery_probes`) macro recall equals rank-1 accuracy.

    Macro F1 here is the mean of the per-finger F1_c. Seeds 001 and 004 report an F1 that is the harmonic mean of
    their (macro) precision and recall, 2·P·R / (P + R) (their tables satisfy it to rounding); that value follows
    from the two other columns.

    Parameters
    ----------
    true_ids : sequence of str
        Each evaluated probe's finger.
    predicted_ids : sequence of str or None
        Its rank-1 decision (:func:`rank1_predictions`).

    Returns
    -------
    tuple of float
        (macro precision, macro recall, macro F1); NaN each when there is no probe.
    """
    t = np.asarray(list(true_ids), dtype=object)
    p = np.asarray([TIE if x is None else x for x in predicted_ids], dtype=object)
    if t.shape != p.shape:
        raise ValueError(f"predicted_ids: expected {t.size} predictions, got {p.size}")
    if t.size == 0:
        return math.nan, math.nan, math.nan
    prec, rec, f1 = [], [], []
    for c in sorted(set(t.tolist())):
        tp = float(np.sum((t == c) & (p == c)))
        n_pred = float(np.sum(p == c))
        pc = tp / n_pred if n_pred else 0.0  # never predicted: precision 0 (docstring)
        rc = tp / float(np.sum(t == c))
        prec.append(pc)
        rec.append(rc)
        f1.append(2 * pc * rc / (pc + rc) if pc + rc > 0 else 0.0)
    return float(np.mean(prec)), float(np.mean(rec)), float(np.mean(f1))


def image_epsilon(epsilon: float, shape: tuple[int, ...], unit: str) -> float:
    """The ε passed to a mechanism for grid value ``epsilon`` on an image of ``shape`` (see module docstring)."""
    if unit == "absolute":
        return epsilon
    if unit == "mn/256":
        return epsilon * shape[0] * shape[1] / 256.0
    raise ValueError(f"epsilon_unit: expected one of {EPSILON_UNITS}, got {unit!r}")


def _fmt(v) -> str:
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return float(np.mean(xs)) if xs else math.nan


def publish_eval(
    records: Sequence[FingerprintRecord],
    *,
    mechanisms: Sequence[str] | None = None,
    variants: Sequence[str] = VARIANTS,
    epsilons: Sequence[float],
    checkpoint: str | Path | None = None,
    classical: bool = False,
    n_images: int | None = None,
    seed: int | None = None,
    out_dir: str | Path,
    tolerance: float = 8.0,
    epsilon_unit: str = "absolute",
    data_label: str = "",
    rng: np.random.Generator | None = None,
    progress: bool = True,
    minutiae_backend: str | None = "auto",
) -> Path:
    """Publish every probe with every mechanism x variant x ε and measure usability; write the outputs.

    Parameters
    ----------
    records : sequence of FingerprintRecord
        At least two fingers with impression 0 (gallery) and one with impression 1 (probe).
    mechanisms : sequence of str, optional
        Names from :data:`fedprint.privacy.publish.registry.MECHANISMS` (default: all available).
    variants : sequence of {"paper", "sound"}
    epsilons : sequence of float
        ε grid (each > 0; a mechanism may still refuse one below its documented minimum — recorded); read in
        ``epsilon_unit``.
    checkpoint : path, optional
        ``checkpoint_<model>.pt`` of a ``fedprint train`` run: enables the Siamese EER.
    classical : bool, default False
        Also compute the classical (afis Bozorth3) EER — slow: ~2 s per image template, ~0.2 s per pair.
    n_images : int, optional
        Use only ``n_images`` probes (default: all).
    seed : int, optional
        Data sampling only: with ``n_images``, a random sample of that many probes instead of the first ones.
        Never seeds a mechanism's noise.
    out_dir : path
        Output directory (created).
    tolerance : float, default 8.0
        Minutia matching distance in pixels.
    epsilon_unit : {"absolute", "mn/256"}
        How grid values are read (module docstring).
    data_label : str
        What the records are (a folder, a synthetic profile), printed in the report.
    rng : numpy.random.Generator, optional
        Tests only: the noise source of every release. Default: OS entropy, a fresh generator per row.
    progress : bool
        tqdm bar over releases.
    minutiae_backend : {"auto", "nbis", "leader", "crossing"}
        Extractor of the probes' minutiae (what the mechanisms protect, and the reference of "retained") and of
        the released images' minutiae; named in the report and in ``results.csv``.

    Returns
    -------
    Path
        ``out_dir / "results.csv"``.
    """
    backend = resolve_backend(minutiae_backend)
    mechanisms = list(registry.known() if mechanisms is None else mechanisms)
    for m in mechanisms:
        registry.releases_points(m)  # unknown -> ValueError listing the known ones
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"variants: expected values from {VARIANTS}, got {v!r}")
    if epsilon_unit not in EPSILON_UNITS:
        raise ValueError(f"epsilon_unit: expected one of {EPSILON_UNITS}, got {epsilon_unit!r}")
    epsilons = [float(e) for e in epsilons]
    if not epsilons or any(not math.isfinite(e) or e <= 0 for e in epsilons):
        raise ValueError(f"epsilons: expected a non-empty list of finite values > 0, got {epsilons}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gallery, probes = split_gallery_probes(records, n_images, seed)
    gallery_ids = [g.identity for g in gallery]
    labels = _pair_labels([p.identity for p in probes], gallery_ids)
    def minutiae_of(image: np.ndarray) -> np.ndarray:
        return extract(image, backend)[:, :4]

    orig_minutiae = [minutiae_of(p.image) for p in probes]

    scorer = SiameseScorer(checkpoint) if checkpoint is not None else None
    gallery_emb = scorer.embed([g.image for g in gallery], [g.dpi for g in gallery]) if scorer else None
    classical_ctx = _ClassicalMatcher(gallery, progress) if classical else None

    def verification(images: list[np.ndarray | None]) -> tuple[dict[str, object], dict[str, list[str | None]]]:
        """EERs, rank-1 accuracies and macro P/R/F1 of the released probes (None = refused) against the gallery,
        and each matcher's predicted finger per probe (None where refused, :data:`TIE` where tied)."""
        keep = [i for i, im in enumerate(images) if im is not None]
        out: dict[str, object] = {c: NOT_RUN for c in VERIFICATION_COLUMNS}
        preds: dict[str, list[str | None]] = {}
        if not keep:
            return {c: math.nan for c in VERIFICATION_COLUMNS}, preds
        lab = labels[keep]
        true_ids = [probes[i].identity for i in keep]
        scored = []
        if scorer is not None:
            emb = scorer.embed([images[i] for i in keep], [probes[i].dpi for i in keep])
            scored.append(("siamese", np.linalg.norm(emb[:, None, :] - gallery_emb[None, :, :], axis=2), False))
        if classical_ctx is not None:
            scored.append(("classical", classical_ctx.scores([images[i] for i in keep], [probes[i] for i in keep]),
                           True))
        for name, s, higher in scored:
            out[f"eer_{name}"] = _eer_or_nan(s, lab, higher_is_genuine=higher)
            out[f"rank1_{name}"] = rank1_accuracy(s, lab, higher_is_genuine=higher)
            pred = rank1_predictions(s, gallery_ids, higher_is_genuine=higher)
            (out[f"macro_precision_{name}"], out[f"macro_recall_{name}"],
             out[f"f1_{name}"]) = macro_prf(true_ids, pred)
            full: list[str | None] = [None] * len(images)
            for i, q in zip(keep, pred, strict=True):
                full[i] = TIE if q is None else q
            preds[name] = full
        return out, preds

    results: list[dict] = []
    releases: list[dict] = []
    statements: dict[tuple[str, str], tuple[float, str]] = {}
    results.append({"mechanism": "unprotected", "variant": "", "epsilon": math.inf, "epsilon_unit": epsilon_unit,
                    "mean_epsilon": math.inf, "status": "ok", "n_probes": len(probes), "n_released": len(probes),
                    "n_refused": 0, "dp": "", "spent_epsilon": 0.0, "minutiae_retained": 1.0,
                    "minutiae_precision": 1.0, "psnr": math.inf, "ssim": 1.0,
                    **verification([p.image for p in probes])[0], "minutiae_backend": backend, "above_ceiling": ""})

    bar = tqdm(total=len(mechanisms) * len(variants) * len(epsilons) * len(probes), desc="publish-eval releases",
               disable=not progress)
    for mech in mechanisms:
        is_points = registry.releases_points(mech)
        needs_m = registry.needs_minutiae(mech)
        for variant in variants:
            for eps in epsilons:
                noise = rng if rng is not None else np.random.default_rng()  # OS entropy unless a test injects one
                released: list[np.ndarray | None] = []
                cell_rows: list[dict] = []  # this row's releases.csv rows, in probe order (predictions filled below)
                retained, precision, psnrs, ssims, spent, reasons, dps, used = [], [], [], [], [], [], [], []
                above = 0  # releases above the largest meaningful ε (fedprint.privacy.publish.ceiling)
                for p, m0 in zip(probes, orig_minutiae, strict=True):
                    e_img = image_epsilon(eps, p.image.shape, epsilon_unit)
                    used.append(e_img)
                    above += e_img > largest_meaningful_epsilon(mech, variant, p.image.shape[:2])[0]
                    row = {"mechanism": mech, "variant": variant, "epsilon": eps, "image_epsilon": e_img,
                           "identity": p.identity}
                    try:
                        pub = registry.publish(mech, p.image, m0 if needs_m else None, e_img, noise, variant)
                    except ValueError as exc:
                        reasons.append(str(exc))
                        released.append(None)
                        cell_rows.append({**row, "status": f"refused: {exc}"})
                        bar.update()
                        continue
                    statements.setdefault((mech, variant), (e_img, pub.guarantee.statement()))
                    pts = pub.points if is_points else minutiae_of(pub.image)
                    hits = match_points(pts, m0, tolerance)
                    frac = hits / len(m0) if len(m0) else math.nan
                    prec = hits / len(pts) if len(pts) else math.nan
                    retained.append(frac)
                    precision.append(prec)
                    spent.append(pub.spent_epsilon)
                    dps.append(pub.guarantee.dp)
                    if is_points:
                        released.append(None)
                        q_psnr = q_ssim = math.nan
                    else:
                        released.append(pub.image)
                        q_psnr, q_ssim = psnr(p.image, pub.image), ssim(p.image, pub.image)
                        psnrs.append(q_psnr)
                        ssims.append(q_ssim)
                    cell_rows.append({**row, "status": "ok", "n_minutiae_original": len(m0),
                                      "n_minutiae_released": len(pts), "minutiae_retained": frac,
                                      "minutiae_precision": prec, "psnr": q_psnr, "ssim": q_ssim,
                                      "spent_epsilon": pub.spent_epsilon})
                    bar.update()
                n_ok = len(probes) - len(reasons)
                if n_ok == 0:
                    status = f"refused: {reasons[0]}"
                elif reasons:
                    status = f"partly refused ({len(reasons)}/{len(probes)}): {reasons[0]}"
                else:
                    status = "ok"
                if is_points:
                    ver = {c: NOT_APPLICABLE if n_ok else math.nan for c in VERIFICATION_COLUMNS}
                    preds = {}
                    q_psnr = q_ssim = NOT_APPLICABLE
                else:
                    ver, preds = verification(released)
                    q_psnr, q_ssim = _mean(psnrs), _mean(ssims)
                for i, r in enumerate(cell_rows):
                    if r["status"] != "ok":
                        continue  # refused: no release, no prediction (empty cell)
                    for name in MATCHERS:
                        r[f"predicted_{name}"] = (NOT_APPLICABLE if is_points else
                                                  preds[name][i] if name in preds else NOT_RUN)
                releases.extend(cell_rows)
                results.append({"mechanism": mech, "variant": variant, "epsilon": eps, "epsilon_unit": epsilon_unit,
                                "mean_epsilon": _mean(used), "status": status, "n_probes": len(probes),
                                "n_released": n_ok, "n_refused": len(reasons), "dp": (all(dps) if dps else ""),
                                "spent_epsilon": _mean(spent), "minutiae_retained": _mean(retained),
                                "minutiae_precision": _mean(precision), "psnr": q_psnr, "ssim": q_ssim, **ver,
                                "minutiae_backend": backend, "above_ceiling": above})
    bar.close()

    path = out / "results.csv"
    _write_csv(path, results, RESULT_COLUMNS)
    _write_csv(out / "releases.csv", releases, RELEASE_COLUMNS)
    tables = {}
    for v in variants:
        tables[v] = _markdown_table([r for r in results if r["variant"] in (v, "")])
        (out / f"table_{v}.md").write_text(f"# Usability, variant `{v}`\n\n{tables[v]}\n")
        _plot(out / f"plot_{v}.png", [r for r in results if r["variant"] == v], v)
    (out / "report.md").write_text(_report(results, variants, mechanisms, epsilons, statements, len(probes),
                                           len(gallery), checkpoint, classical, tolerance, epsilon_unit, data_label,
                                           "OS entropy" if rng is None else "a generator injected by the caller",
                                           backend))
    return path


class _ClassicalMatcher:
    """afis Bozorth3 scores of released probes vs the gallery (gallery templates computed once)."""

    def __init__(self, gallery: list[FingerprintRecord], progress: bool) -> None:
        from fedprint.data.realism import afis_templates

        self.gallery = gallery
        self.templates = afis_templates(gallery, progress=progress)

    def scores(self, images: list[np.ndarray], probes: list[FingerprintRecord]) -> np.ndarray:
        from fedprint.data.realism import afis_templates, matcher_scores

        recs = [FingerprintRecord(p.identity, p.impression, im, p.domain) for im, p in zip(images, probes,
                                                                                            strict=True)]
        all_recs = list(self.gallery) + recs
        templates = self.templates + afis_templates(recs, progress=False)
        ng = len(self.gallery)
        pi, gi = np.meshgrid(np.arange(len(recs)), np.arange(ng), indexing="ij")
        pairs = np.stack([ng + pi.reshape(-1), gi.reshape(-1)], 1).astype(np.int64)
        s = matcher_scores(all_recs, pairs, templates=templates, progress=False)
        return s.reshape(len(recs), ng)


def _write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _fmt(r.get(k)) for k in columns})


def _markdown_table(rows: list[dict]) -> str:
    cols = ["mechanism", "epsilon", "dp", "n_released", "minutiae_retained", "minutiae_precision", "psnr", "ssim",
            "eer_siamese", "eer_classical", "rank1_siamese", "rank1_classical", "f1_siamese", "f1_classical",
            "above_ceiling", "status"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r[c]).replace("|", "/") for c in cols) + " |")
    return "\n".join(lines)


def _plot(path: Path, rows: list[dict], variant: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps_grid = sorted({r["epsilon"] for r in rows})
    fig, axes = plt.subplots(1, len(PLOT_METRICS), figsize=(4 * len(PLOT_METRICS), 3.6))
    for ax, (col, label) in zip(axes, PLOT_METRICS, strict=True):
        for mech in dict.fromkeys(r["mechanism"] for r in rows):
            pts = [(r["epsilon"], r[col]) for r in rows if r["mechanism"] == mech and isinstance(r[col], float)
                   and math.isfinite(r[col])]
            if pts:
                x, y = zip(*sorted(pts), strict=True)
                ax.plot(x, y, marker="o", label=mech)
        if not ax.lines:
            ax.text(0.5, 0.5, "not run / n/a", ha="center", va="center", transform=ax.transAxes)
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(eps_grid, [f"{e:g}" for e in eps_grid])
        ax.set_xlabel("ε")
        ax.set_title(label)
    handles, names = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="center right", fontsize=8)
    fig.suptitle(f"Usability vs ε, variant '{variant}' (refused releases not plotted)")
    fig.tight_layout(rect=(0, 0, 0.9, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _report(results, variants, mechanisms, epsilons, statements, n_probes, n_gallery, checkpoint, classical,
            tolerance, epsilon_unit, data_label, noise, backend) -> str:
    key = {(r["mechanism"], r["variant"], r["epsilon"]): r for r in results}
    base = results[0]
    unit = "ε given per image" if epsilon_unit == "absolute" else "grid value k means ε = k·m·n/256 per m×n image"
    lines = ["# Publication usability benchmark (`fedprint publish-eval`)", "",
             f"Data: {data_label or 'records given through the Python API'}; ε grid: {unit}. Noise: {noise}.", "",
             f"{n_probes} probes (impression 1) against an unprotected gallery of {n_gallery} fingers "
             f"(impression 0). Minutiae by the `{backend}` backend (fedprint.data.minutiae_backends). Minutiae "
             f"retained: fraction of the original probe's minutiae matched within {tolerance:g} px. EER "
             f"(Siamese): {'checkpoint ' + str(checkpoint) if checkpoint else NOT_RUN}; "
             f"EER (classical, afis Bozorth3): {'run' if classical else NOT_RUN}. Point-set mechanisms release no "
             f"image, so PSNR/SSIM/EER are n/a for them. F1: macro F1 over fingers of the rank-1 decision "
             f"(mean of per-finger F1; a finger never predicted has precision 0; `macro_precision_*`, "
             f"`macro_recall_*` in results.csv, each release's predicted finger in releases.csv).", "",
             f"Unprotected baseline: EER Siamese {_fmt(base['eer_siamese'])}, EER classical "
             f"{_fmt(base['eer_classical'])}, F1 Siamese {_fmt(base['f1_siamese'])}, F1 classical "
             f"{_fmt(base['f1_classical'])}.", "",
             "`above_ceiling`: how many of a row's releases used an ε above the mechanism's largest meaningful one "
             "(fedprint.privacy.publish.ceiling: its noise is below one grey level, or one grid cell, everywhere). "
             "They are measured here to show the curve's end, but such a release is the input up to rounding and "
             "its ε statement protects nothing; `fedprint publish` refuses them without --allow-large-epsilon."
             + (f" **{sum(r['above_ceiling'] for r in results[1:])} release(s) of this benchmark lie above it.**"
                if any(r["above_ceiling"] for r in results[1:]) else " None of this benchmark's releases does."),
             "", "## Side by side", ""]
    metrics = [("minutiae_retained", "retained"), ("ssim", "SSIM"), ("eer_siamese", "EER-S"),
               ("eer_classical", "EER-C"), ("f1_siamese", "F1-S"), ("f1_classical", "F1-C"), ("status", "status")]
    head = ["mechanism", "ε"] + [f"{v} {lab}" for v in variants for _, lab in metrics]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in mechanisms:
        for e in epsilons:
            cells = [m, f"{e:g}"]
            for v in variants:
                r = key[(m, v, e)]
                cells += [_fmt(r[c]).replace("|", "/") for c, _ in metrics]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Guarantees (as stated by the first release of each mechanism/variant)", ""]
    for m in mechanisms:
        for v in variants:
            if (m, v) in statements:
                e, s = statements[(m, v)]
                lines.append(f"- **{m} / {v}** (ε = {e:g}): {s}")
            else:
                lines.append(f"- **{m} / {v}**: no release (every request refused).")
    lines += ["", "Per-variant tables: " + ", ".join(f"`table_{v}.md`" for v in variants) + "; plots: "
              + ", ".join(f"`plot_{v}.png`" for v in variants) + "; raw rows: `results.csv`, `releases.csv`.", ""]
    return "\n".join(lines)
