"""Unlinkability of protected templates: the D<->sys metric of Gomez-Barrero et al. 2017 [1]_ (ISO/IEC 30136 [2]_).

Given linkage scores of *mated* template pairs (two templates of one finger, from different enrolments or
systems) and *non-mated* pairs (two fingers), the local measure at score s is

    D<->(s) = p(H_m | s) - p(H_nm | s)   where the likelihood ratio f_m(s) / f_nm(s) > 1, else 0,

with equal priors (omega = 1 in [1]_, Eq. 4): ``(f_m - f_nm) / (f_m + f_nm)`` where f_m > f_nm. The global
measure is its expectation over the mated scores (Eq. 5):

    D<->sys = integral of D<->(s) f_m(s) ds  in [0, 1]

0: mated and non-mated scores are identically distributed (fully unlinkable for this score); 1: they are
disjoint (every pair linked). The densities are histograms over common bins (``bins`` equal-width bins over
the pooled range; integer scores, e.g. elements in common, get one bin per value), so identical samples give
exactly 0 and disjoint ones exactly 1. Like any plug-in estimate it is biased upward on few pairs: report the
pair counts beside it.

References
----------
.. [1] M. Gomez-Barrero, J. Galbally, C. Rathgeb, C. Busch, "General framework to evaluate unlinkability in
   biometric template protection systems", IEEE TIFS 13(6), 2018 (online 2017).
.. [2] ISO/IEC 30136:2018, Performance testing of biometric template protection schemes.
"""

from __future__ import annotations

import numpy as np


def d_sys(mated: np.ndarray, non_mated: np.ndarray, *, bins: int = 50) -> dict:
    """Global unlinkability D<->sys of linkage scores (higher score = more likely mated or not: either works).

    Parameters
    ----------
    mated, non_mated : 1-D float arrays
        Linkage scores of mated and non-mated template pairs.
    bins : int
        Histogram bins over the pooled score range (integer-valued scores spanning fewer values use one bin
        per value).

    Returns
    -------
    dict
        ``d_sys`` in [0, 1], ``mated`` and ``non_mated`` pair counts, ``bins`` used.

    Raises
    ------
    ValueError
        If either sample is empty or not finite.

    Examples
    --------
    >>> d_sys([1, 2, 3], [1, 2, 3])["d_sys"]
    0.0
    >>> d_sys([5, 6], [1, 2])["d_sys"]
    1.0
    """
    m = np.asarray(mated, dtype=np.float64).ravel()
    n = np.asarray(non_mated, dtype=np.float64).ravel()
    if m.size == 0 or n.size == 0:
        raise ValueError("d_sys: expected at least one mated and one non-mated score")
    if not (np.isfinite(m).all() and np.isfinite(n).all()):
        raise ValueError("d_sys: scores must be finite")
    both = np.concatenate([m, n])
    lo, hi = float(both.min()), float(both.max())
    integer = np.all(both == np.round(both)) and hi - lo + 1 <= bins
    if integer:
        edges = np.arange(lo - 0.5, hi + 1.5)
    elif hi > lo:
        edges = np.linspace(lo, hi, bins + 1)
    else:
        edges = np.array([lo - 0.5, lo + 0.5])
    pm = np.histogram(m, edges)[0] / m.size  # probability mass per bin: density x width, widths cancel
    pn = np.histogram(n, edges)[0] / n.size
    tot = pm + pn
    local = np.where(pm > pn, (pm - pn) / np.where(tot > 0, tot, 1.0), 0.0)
    return {"d_sys": float(np.sum(local * pm)), "mated": int(m.size), "non_mated": int(n.size),
            "bins": int(len(edges) - 1)}
