"""Verification metrics on scored pairs: ROC, EER, FNMR at fixed FMR, ROC AUC, threshold choice, report.

Conventions
-----------
* A pair is *genuine* (label 1: two impressions of one finger) or *impostor* (label 0).
* ``scores`` are **distances** by default (lower = more similar; the Siamese net's d of Yan et al. 2025 Eq. 1). Pass
  ``higher_is_genuine=True`` for similarity scores (e.g. a classical minutiae matcher); every function then
  behaves as on the negated scores, and thresholds are reported in the caller's own units.
* Decision at threshold t: accept (claim "same finger") iff score <= t for distances (Yan et al. 2025 Eq. 2), iff
  score >= t for similarities.
* FMR (false match rate) = accepted impostors / impostors; FNMR (false non-match rate) = rejected genuines /
  genuines; TPR = 1 - FNMR.
* FMR100 / FMR1000 = the lowest FNMR among thresholds with FMR <= 1% / 0.1% (FVC convention, no
  interpolation). With fewer than 100 / 1000 impostor pairs this means FMR = 0.
* EER: FMR and FNMR are linearly interpolated along the ROC between the two adjacent operating points where
  FNMR - FMR changes sign; the EER is the common value at the crossing.
* Precision with no accepted pair is defined as 0 (as is F1 when precision + recall = 0).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CRITERIA = ("accuracy", "eer")


@dataclass(frozen=True)
class RocCurve:
    """Operating points of a verifier, one per distinct score plus the accept-nothing point.

    Attributes
    ----------
    thresholds : ndarray, float64, shape (k + 1,)
        Threshold of each point in the caller's score units; the first is -inf (distances) or +inf
        (similarities): nothing accepted. Ordered from strictest to most lenient.
    fmr, fnmr : ndarray, float64, shape (k + 1,)
        False match / false non-match rates; fmr is non-decreasing and fnmr non-increasing along the arrays.
    """

    thresholds: np.ndarray
    fmr: np.ndarray
    fnmr: np.ndarray

    @property
    def tpr(self) -> np.ndarray:
        return 1.0 - self.fnmr


def _validate(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1) if np.ndim(scores) <= 1 else None
    lab = np.asarray(labels).reshape(-1) if np.ndim(labels) <= 1 else None
    if s is None or lab is None:
        raise ValueError(f"scores and labels must be 1-D, got shapes {np.shape(scores)} and "
                         f"{np.shape(labels)}")
    if s.shape[0] != lab.shape[0]:
        raise ValueError(f"scores and labels must have the same length, got {s.shape[0]} and {lab.shape[0]}")
    if s.shape[0] == 0:
        raise ValueError("scores: expected at least one scored pair, got none")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores: must be finite (found NaN or inf)")
    if not np.all((lab == 0) | (lab == 1)):
        raise ValueError("labels: must contain only 0 (impostor) and 1 (genuine)")
    lab = lab.astype(bool)
    n_gen = int(lab.sum())
    if n_gen == 0 or n_gen == lab.shape[0]:
        raise ValueError(f"labels: need both genuine and impostor pairs, got {n_gen} genuine of "
                         f"{lab.shape[0]}")
    return s, lab


def _operating_points(scores, labels, higher_is_genuine: bool):
    """Shared core: distinct genuineness values g (descending) and cumulative accept counts.

    Returns (g_values, tp, fp, n_gen, n_imp, sign), where point j (0..k) accepts the pairs with
    g >= g_values[j-1] (j = 0 accepts nothing), tp/fp have length k + 1, and score = sign * g.
    """
    s, lab = _validate(scores, labels)
    sign = 1.0 if higher_is_genuine else -1.0
    g = sign * s
    order = np.argsort(-g, kind="stable")
    g_sorted, pos = g[order], lab[order]
    cum_tp, cum_fp = np.cumsum(pos), np.cumsum(~pos)
    # Last index of each run of equal scores: ties are accepted or rejected together.
    last = np.flatnonzero(np.r_[g_sorted[1:] != g_sorted[:-1], True])
    tp = np.r_[0, cum_tp[last]].astype(np.float64)
    fp = np.r_[0, cum_fp[last]].astype(np.float64)
    return g_sorted[last], tp, fp, int(lab.sum()), int((~lab).sum()), sign


def roc_curve(scores, labels, higher_is_genuine: bool = False) -> RocCurve:
    """FMR and FNMR at every distinct threshold (vectorised: one sort and two cumulative sums).

    Parameters
    ----------
    scores : array_like, shape (N,)
        Pair scores; distances unless ``higher_is_genuine``.
    labels : array_like, shape (N,)
        1 genuine, 0 impostor. Both classes must be present.
    higher_is_genuine : bool
        False (default) for distances, True for similarity scores.
    """
    g_vals, tp, fp, n_gen, n_imp, sign = _operating_points(scores, labels, higher_is_genuine)
    thresholds = np.r_[sign * np.inf, sign * g_vals]
    return RocCurve(thresholds=thresholds, fmr=fp / n_imp, fnmr=1.0 - tp / n_gen)


def roc_auc(scores, labels, higher_is_genuine: bool = False) -> float:
    """Area under the ROC (TPR vs FMR), trapezoidal; equals P(genuine more similar than impostor) with ties
    counted as one half (the Mann-Whitney statistic)."""
    roc = roc_curve(scores, labels, higher_is_genuine)
    tpr = roc.tpr
    return float(np.sum(np.diff(roc.fmr) * (tpr[1:] + tpr[:-1]) / 2.0))


def eer(scores, labels, higher_is_genuine: bool = False) -> float:
    """Equal error rate: FMR = FNMR on the ROC, interpolated linearly between adjacent operating points.

    Parameters
    ----------
    scores : array_like, shape (N,)
        Pair scores, finite; distances (lower = more alike) unless ``higher_is_genuine``.
    labels : array_like, shape (N,)
        1 genuine, 0 impostor. Both classes must be present.
    higher_is_genuine : bool
        False (default) for distances, True for similarity scores.

    Returns
    -------
    float
        The EER in [0, 1]: the error rate where the false match rate (impostor pairs accepted) equals the false
        non-match rate (genuine pairs rejected), between the two ROC points that bracket it (the FVC
        competitions' headline figure [1]_).

    Raises
    ------
    ValueError
        If the arrays are not 1-D of one length, a score is not finite, a label is not 0 / 1, or one class is
        missing.

    See Also
    --------
    fnmr_at_fmr : the error at a fixed false match rate (FMR100, FMR1000).
    roc_curve : every operating point.

    References
    ----------
    .. [1] D. Maio, D. Maltoni, R. Cappelli, J. L. Wayman, A. K. Jain, "FVC2002: Second Fingerprint Verification
       Competition", ICPR 2002 (EER, FMR100 and FMR1000 as verification metrics).

    Examples
    --------
    Four genuine and four impostor distances; one impostor (0.35) is closer than one genuine pair (0.40):

    >>> import numpy as np
    >>> d = np.array([0.10, 0.20, 0.30, 0.40, 0.35, 0.60, 0.70, 0.80])
    >>> y = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    >>> eer(d, y)
    0.25
    >>> eer(1 - d, y, higher_is_genuine=True)  # the same pairs as similarities
    0.25
    """
    roc = roc_curve(scores, labels, higher_is_genuine)
    diff = roc.fnmr - roc.fmr  # non-increasing from 1 (accept nothing) to -1 (accept everything)
    i = int(np.argmax(diff <= 0))  # first point with FNMR <= FMR; exists because the last point has diff = -1
    if diff[i] == 0:
        return float(roc.fmr[i])
    lam = diff[i - 1] / (diff[i - 1] - diff[i])
    return float(roc.fmr[i - 1] + lam * (roc.fmr[i] - roc.fmr[i - 1]))


def fnmr_at_fmr(scores, labels, fmr: float = 0.01, higher_is_genuine: bool = False) -> float:
    """Lowest FNMR over thresholds whose FMR <= ``fmr`` (0.01: FMR100, 0.001: FMR1000).

    Parameters
    ----------
    scores : array_like, shape (N,)
        Pair scores, finite; distances unless ``higher_is_genuine``.
    labels : array_like, shape (N,)
        1 genuine, 0 impostor. Both classes must be present.
    fmr : float
        Target false match rate in [0, 1]. A target below 1 / (number of impostor pairs) can only be met by
        accepting no impostor at all: resolve FMR1000 with at least 1000 impostor pairs.
    higher_is_genuine : bool
        False (default) for distances, True for similarity scores.

    Returns
    -------
    float
        The false non-match rate in [0, 1] at the best threshold whose false match rate is at most ``fmr``
        (the accept-nothing threshold always qualifies, with FNMR 1).

    Raises
    ------
    ValueError
        If ``fmr`` is outside [0, 1], or for the input errors of :func:`eer`.

    See Also
    --------
    eer, threshold_at_fmr

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([0.10, 0.20, 0.30, 0.40, 0.35, 0.60, 0.70, 0.80])
    >>> y = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    >>> fnmr_at_fmr(d, y, fmr=0.0)  # no impostor accepted: the genuine pair at 0.40 is rejected
    0.25
    >>> fnmr_at_fmr(d, y, fmr=0.25)  # one impostor in four may pass
    0.0
    """
    if not 0.0 <= fmr <= 1.0:
        raise ValueError(f"fnmr_at_fmr: fmr must lie in [0, 1], got {fmr}")
    roc = roc_curve(scores, labels, higher_is_genuine)
    ok = roc.fmr <= fmr + 1e-12  # the accept-nothing point always qualifies
    return float(roc.fnmr[ok].min())


def rank_fusion(*similarities) -> np.ndarray:
    """Unsupervised score-level fusion: the mean of each matcher's empirical CDF over the scored pairs.

    Parameters
    ----------
    *similarities : arrays of shape (n,)
        One similarity per matcher and pair (higher = more alike; pass ``-distance`` for a distance).

    Returns
    -------
    (n,) fused similarity in (0, 1]. It uses the score distribution of the pairs being fused but never their
    labels, so no matcher is tuned on the test's ground truth; ties get their average rank.
    """
    cols = [np.asarray(s, dtype=np.float64) for s in similarities]
    if not cols or any(c.shape != cols[0].shape or c.ndim != 1 for c in cols):
        raise ValueError("rank_fusion: expected one or more 1-D score arrays of the same length")
    from scipy.stats import rankdata

    return np.mean([rankdata(c, method="average") / len(c) for c in cols], axis=0)


def standardised_sum(scores: list[np.ndarray], stats: list[tuple[float, float]],
                     weights: list[float] | None = None) -> np.ndarray:
    """Σ_k w_k (scores[k] − mean_k) / std_k with the given (mean, std) of each score (weights 1 by default)."""
    fused = np.zeros(len(scores[0]), float)
    weights = [1.0] * len(scores) if weights is None else weights
    for s, (mean, sd), w in zip(scores, stats, weights, strict=True):
        fused += w * (np.asarray(s, float) - mean) / sd
    return fused


def fisher_weights(z: np.ndarray, labels: np.ndarray) -> list[float]:
    """Weights of standardised scores ``z`` (n, k) along Fisher's linear discriminant of genuine vs impostor pairs.

    ``w ∝ S_w⁻¹ (μ_genuine − μ_impostor)`` with ``S_w`` the pooled within-class covariance, negative weights set
    to 0 (a score that ranks impostors above genuine pairs is dropped, not inverted), scaled to sum to ``k``, so
    that equal weights are all 1 as in the plain z-score sum.

    Raises
    ------
    ValueError
        If ``labels`` holds no genuine or no impostor pair, or no score separates them.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[2.0, 0.1], [1.5, -0.1], [-1.0, 0.2], [-1.5, -0.2]])
    >>> [round(w, 2) for w in fisher_weights(z, np.array([1, 1, 0, 0]))]  # the second score carries nothing
    [2.0, 0.0]
    """
    z, labels = np.asarray(z, float), np.asarray(labels)
    g, i = z[labels == 1], z[labels == 0]
    if len(g) < 2 or len(i) < 2:
        raise ValueError(f"fusion weights: need at least 2 genuine and 2 impostor pairs, got {len(g)} / {len(i)}")
    sw = np.cov(g, rowvar=False) * (len(g) - 1) + np.cov(i, rowvar=False) * (len(i) - 1)
    sw = np.atleast_2d(sw) / (len(g) + len(i) - 2) + 1e-9 * np.eye(z.shape[1])
    w = np.clip(np.linalg.solve(sw, g.mean(0) - i.mean(0)), 0, None)
    if not np.isfinite(w).all() or w.sum() <= 0:
        raise ValueError("fusion weights: no score ranks genuine pairs above impostor pairs on these pairs")
    return (w * z.shape[1] / w.sum()).tolist()


def pair_cosines(embeddings: np.ndarray, pairs) -> np.ndarray:
    """Cosine of the unit-norm embeddings of each pair ``(pairs.a[k], pairs.b[k])`` (``1 − d² / 2`` for their
    Euclidean distance ``d``)."""
    return np.einsum("ij,ij->i", embeddings[pairs.a], embeddings[pairs.b])


def score_stats(reference, what: str = "a reference set") -> tuple[float, float]:
    """(mean, std) of reference scores, the standardisation of :func:`standardised_sum`; ValueError naming
    ``what`` unless there are at least two finite scores with a spread."""
    ref = np.asarray(reference, float)
    sd = float(ref.std()) if len(ref) else float("nan")
    if len(ref) < 2 or not np.isfinite(sd) or sd == 0:
        raise ValueError(f"zscore_fusion: {what} takes one value on all {len(ref)} of its scores (at least two "
                         "distinct finite scores are needed): it has no spread to standardise by")
    return float(ref.mean()), sd


def zscore_fusion(reference: list[np.ndarray], scores: list[np.ndarray]) -> np.ndarray:
    """Sum of similarity scores, each standardised by the mean and std of its ``reference`` scores (the z-score
    sum rule of Jain, Nandakumar and Ross 2005).

    ``reference[k]`` holds score k on pairs other than those scored (e.g. the validation or training pairs): no
    test pair and no label is used to set the weights, so the fused score can serve a deployed verifier with one
    threshold. Passing the scored pairs themselves (``reference = scores``) standardises them label-free on their
    own distribution, as :func:`rank_fusion` does. Every score must be a similarity (higher = same finger): pass
    −distance for a distance.

    References
    ----------
    .. [1] A. K. Jain, K. Nandakumar, A. Ross, "Score normalization in multimodal biometric systems", *Pattern
       Recognition* 38(12), 2005, pp. 2270-2285.
    """
    if len(reference) != len(scores) or not scores:
        raise ValueError("zscore_fusion: one reference set per score is needed")
    return standardised_sum(scores, [score_stats(ref) for ref in reference])


def choose_threshold(
    val_scores, val_labels, criterion: str = "accuracy", higher_is_genuine: bool = False
) -> float:
    """Decision threshold chosen on VALIDATION pairs, to be applied unchanged to test pairs.

    Parameters
    ----------
    val_scores, val_labels : array_like, shape (N,)
        Validation pair scores and labels (1 genuine, 0 impostor).
    criterion : str
        ``"accuracy"``: maximise validation accuracy. ``"eer"``: minimise ``|FMR - FNMR|``. Ties go to the
        strictest (fewest accepted) operating point.
    higher_is_genuine : bool
        False (default) for distances, True for similarity scores.

    Returns
    -------
    float
        Threshold t in score units (accept iff score <= t for distances, >= t for similarities). It lies
        halfway between the last accepted and the first rejected validation score, so it reproduces the chosen
        validation operating point exactly while leaving equal slack on both sides for unseen pairs.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"choose_threshold: criterion must be one of {CRITERIA}, got {criterion!r}")
    g_vals, tp, fp, n_gen, n_imp, sign = _operating_points(val_scores, val_labels, higher_is_genuine)
    if criterion == "accuracy":
        j = int(np.argmax((tp + (n_imp - fp)) / (n_gen + n_imp)))
    else:
        j = int(np.argmin(np.abs(fp / n_imp - (1.0 - tp / n_gen))))
    return _threshold_of_point(g_vals, j, sign)


def _threshold_of_point(g_vals: np.ndarray, j: int, sign: float) -> float:
    """Threshold (score units) reproducing operating point ``j`` of :func:`_operating_points`: halfway between
    the last accepted and the first rejected score."""
    k = g_vals.shape[0]
    if j == 0:  # accept nothing: just above the most genuine-looking score
        g_t = np.nextafter(g_vals[0], np.inf)
    elif j == k:  # accept everything
        g_t = g_vals[-1]
    else:
        hi, lo = g_vals[j - 1], g_vals[j]
        g_t = lo + (hi - lo) / 2.0
        if not lo < g_t <= hi:  # adjacent floats: the midpoint is not representable
            g_t = hi
    return float(sign * g_t)


def threshold_at_fmr(scores, labels, fmr: float = 0.01, higher_is_genuine: bool = False) -> dict:
    """The most accepting threshold whose FMR on these pairs is at most ``fmr`` (calibration of a threshold).

    Returns
    -------
    dict
        ``threshold`` (score units, placed as in :func:`choose_threshold`), ``fmr`` and ``fnmr`` reached on
        these pairs, ``target_fmr``.
    """
    if not (isinstance(fmr, int | float) and 0.0 <= float(fmr) < 1.0):
        raise ValueError(f"fmr: expected a rate in [0, 1), got {fmr!r}")
    g_vals, tp, fp, n_gen, n_imp, sign = _operating_points(scores, labels, higher_is_genuine)
    j = int(np.flatnonzero(fp / n_imp <= fmr + 1e-12).max())  # accept-nothing (j = 0) always qualifies
    return {"threshold": _threshold_of_point(g_vals, j, sign), "fmr": float(fp[j] / n_imp),
            "fnmr": float(1.0 - tp[j] / n_gen), "target_fmr": float(fmr)}


def threshold_at_eer(scores, labels, higher_is_genuine: bool = False) -> dict:
    """The threshold of the operating point closest to FMR = FNMR, with the FMR and FNMR it reaches."""
    g_vals, tp, fp, n_gen, n_imp, sign = _operating_points(scores, labels, higher_is_genuine)
    j = int(np.argmin(np.abs(fp / n_imp - (1.0 - tp / n_gen))))
    return {"threshold": _threshold_of_point(g_vals, j, sign), "fmr": float(fp[j] / n_imp),
            "fnmr": float(1.0 - tp[j] / n_gen)}


def verification_metrics(test_scores, test_labels, threshold: float, higher_is_genuine: bool = False) -> dict:
    """Threshold-dependent and threshold-free verification metrics on TEST pairs.

    Parameters
    ----------
    test_scores, test_labels : array_like, shape (N,)
        Test pair scores and labels (1 genuine, 0 impostor).
    threshold : float
        Decision threshold, normally from :func:`choose_threshold` on validation pairs.
    higher_is_genuine : bool
        False (default) for distances, True for similarity scores.

    Returns
    -------
    dict
        ``accuracy, precision, recall, f1, fmr, fnmr`` (at ``threshold``, genuine = positive class),
        ``roc_auc, eer, fmr100, fmr1000`` (threshold-free), ``n_genuine, n_impostor, threshold``.
    """
    s, lab = _validate(test_scores, test_labels)
    if not np.isfinite(threshold):
        raise ValueError(f"verification_metrics: threshold must be finite, got {threshold}")
    accept = s >= threshold if higher_is_genuine else s <= threshold
    tp = int(np.sum(accept & lab))
    fp = int(np.sum(accept & ~lab))
    fn = int(np.sum(~accept & lab))
    tn = int(np.sum(~accept & ~lab))
    n_gen, n_imp = tp + fn, fp + tn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / n_gen
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "accuracy": (tp + tn) / (n_gen + n_imp),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "fmr": fp / n_imp,
        "fnmr": fn / n_gen,
        "roc_auc": roc_auc(s, lab, higher_is_genuine),
        "eer": eer(s, lab, higher_is_genuine),
        "fmr100": fnmr_at_fmr(s, lab, 0.01, higher_is_genuine),
        "fmr1000": fnmr_at_fmr(s, lab, 0.001, higher_is_genuine),
        "n_genuine": n_gen,
        "n_impostor": n_imp,
        "threshold": float(threshold),
    }


def write_roc_csv(path: str | Path, scores, labels, higher_is_genuine: bool = False) -> Path:
    """Write the ROC as CSV with columns ``threshold, fmr, fnmr, tpr`` (one row per operating point)."""
    roc = roc_curve(scores, labels, higher_is_genuine)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["threshold", "fmr", "fnmr", "tpr"])
        for row in zip(roc.thresholds, roc.fmr, roc.fnmr, roc.tpr, strict=True):
            w.writerow([repr(float(v)) for v in row])
    return path


def plot_roc(path_png: str | Path, curves: dict, title: str = "Verification") -> Path:
    """Plot ROC (TPR vs FMR, log FMR axis) and DET (FNMR vs FMR, log-log) panels for several verifiers.

    Parameters
    ----------
    path_png : str or Path
        Output PNG file (parent directories are created).
    curves : dict
        ``name -> (scores, labels)`` for distances, or ``name -> (scores, labels, higher_is_genuine)`` to mix
        in similarity scores. The legend shows each curve's EER and AUC.
    title : str
        Figure title.

    Notes
    -----
    Log axes cannot show 0: rates are drawn clipped at half the resolution of that curve (0.5 / n_impostor for
    FMR, 0.5 / n_genuine for FNMR).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not curves:
        raise ValueError("plot_roc: curves must contain at least one (scores, labels) entry")
    fig = Figure(figsize=(10, 4.5))
    FigureCanvasAgg(fig)
    ax_roc, ax_det = fig.subplots(1, 2)
    lo = 1.0
    for name, spec in curves.items():
        if len(spec) not in (2, 3):
            raise ValueError(f"plot_roc: curve {name!r} must be (scores, labels) or (scores, labels, "
                             f"higher_is_genuine), got {len(spec)} items")
        scores, labels = spec[0], spec[1]
        hig = bool(spec[2]) if len(spec) == 3 else False
        roc = roc_curve(scores, labels, hig)
        lab = np.asarray(labels).astype(bool)
        fmr_floor, fnmr_floor = 0.5 / int((~lab).sum()), 0.5 / int(lab.sum())
        lo = min(lo, fmr_floor, fnmr_floor)
        label = f"{name} (EER {100 * eer(scores, labels, hig):.2f}%, AUC {roc_auc(scores, labels, hig):.4f})"
        fmr = np.maximum(roc.fmr, fmr_floor)
        ax_roc.plot(fmr, roc.tpr, drawstyle="steps-post", label=label)
        ax_det.plot(fmr, np.maximum(roc.fnmr, fnmr_floor), drawstyle="steps-post", label=name)
    ax_roc.set(xscale="log", xlim=(lo, 1.0), ylim=(0.0, 1.01), xlabel="FMR", ylabel="TPR = 1 - FNMR",
               title="ROC")
    ax_det.set(xscale="log", yscale="log", xlim=(lo, 1.0), ylim=(lo, 1.0), xlabel="FMR", ylabel="FNMR",
               title="DET")
    for ax in (ax_roc, ax_det):
        ax.grid(True, which="both", alpha=0.3)
        for x in (0.01, 0.001):
            ax.axvline(x, color="grey", lw=0.6, ls=":")
    ax_det.plot([lo, 1.0], [lo, 1.0], color="grey", lw=0.6, ls="--")  # EER line
    ax_roc.legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path_png)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
