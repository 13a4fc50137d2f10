"""Attacks on our own protected templates: cross-matching (linkability) and the correlation attack on vaults.

* **Cross-matching / linkability** (:func:`link_score`): given two vault templates from two systems, is it the
  same finger? The attacker registers the two stored helper fields (the same public routine the verifier uses),
  refines the translation by Hough voting between the two point sets, and counts vault elements of one that have
  a partner in the other within the matching tolerance; a second, helper-free alignment (translation voting over
  the whole frame) covers templates whose helper is masked. Genuine minutiae of one finger coincide, chaff does
  not, so mated pairs score higher. Success = best balanced accuracy of a threshold on the score (chance 0.5).
* **Correlation attack** (Scheirer & Boult 2007; Kholmatov & Yanikoglu 2008) (:func:`correlation_attack`): align
  two vaults of one finger and intersect them; the surviving elements of vault 1 are mostly genuine, and the
  attacker runs the ordinary unlock on them. Success = the secret polynomial (hence the genuine minutiae) is
  recovered from public data alone.

Both use only what a template file holds. Ground truth (which elements are genuine) is used only to measure.

References
----------
.. [1] W. J. Scheirer, T. E. Boult, "Cracking fuzzy vaults and biometric encryption", Biometrics Symposium 2007.
.. [2] A. Kholmatov, B. Yanikoglu, "Realization of correlation attack against the fuzzy vault scheme", SPIE 2008.
.. [3] K. Simoens, P. Tuyls, B. Preneel, "Privacy weaknesses in biometric sketches", IEEE S&P 2009.
"""

from __future__ import annotations

import numpy as np

from privacy.templates.alignment import Pose, refine, register
from privacy.templates.consistency import match_points
from privacy.templates.fuzzy_vault import unlock
from privacy.templates.quantise import code_points
from privacy.templates.vault_template import vault_of


def _align(data1: dict, data2: dict, pts1: np.ndarray, pts2: np.ndarray) -> list[np.ndarray]:
    """Candidate placements of vault 2's element centres in vault 1's frame (helper-based and helper-free)."""
    helper_pose = refine(register(data2["helper"], data1["helper"]), pts2, pts1)
    free = refine(Pose(0.0, (0.0, 0.0), (0.0, 0.0), 0.0), pts2, pts1, radius=256.0, bin_px=8.0, min_votes=2)
    return [helper_pose.apply(pts2), free.apply(pts2)]


def _intersection(data1: dict, params1: dict, data2: dict, params2: dict, tol_px: float | None = None,
                  tol_angle: float | None = None) -> np.ndarray:
    """Codes of vault-1 elements with a partner in vault 2 under the best of the attacker's alignments
    (tolerances default to vault 1's own matching tolerance)."""
    tol_px = float(params1["tol_px"]) if tol_px is None else tol_px
    tol_angle = float(params1["tol_angle"]) if tol_angle is None else tol_angle
    codes1, codes2 = vault_of(data1, params1).codes, vault_of(data2, params2).codes
    pts1, pts2 = code_points(codes1), code_points(codes2)
    best = np.zeros(0, np.int64)
    for placed in _align(data1, data2, pts1, pts2):
        idx = match_points(placed, pts1, tol_px=tol_px, tol_angle=tol_angle)
        hit = codes1[idx[idx >= 0]]
        if len(hit) > len(best):
            best = hit
    return best


def link_score(data1: dict, params1: dict, data2: dict, params2: dict, *, tol_px: float | None = None,
               tol_angle: float | None = None) -> int:
    """Cross-matching score of two vault templates: elements in common after the attacker's alignment."""
    return int(len(_intersection(data1, params1, data2, params2, tol_px, tol_angle)))


def linkage_success(mated: np.ndarray, non_mated: np.ndarray) -> dict:
    """Best balanced accuracy of a threshold on link scores (0.5 = chance) and the ROC AUC of the scores."""
    m, n = np.asarray(mated, float), np.asarray(non_mated, float)
    ts = np.unique(np.concatenate([m, n, [np.inf]]))
    acc = max(0.5 * (np.mean(m >= t) + np.mean(n < t)) for t in ts)
    auc = float(np.mean(m[:, None] > n[None, :]) + 0.5 * np.mean(m[:, None] == n[None, :]))
    return {"balanced_accuracy": float(acc), "auc": auc, "mated": len(m), "non_mated": len(n)}


def correlation_attack(data1: dict, params1: dict, data2: dict, params2: dict, *,
                       genuine1: np.ndarray | None = None, max_trials: int = 20000, tol_px: float | None = None,
                       tol_angle: float | None = None) -> dict:
    """Intersect two vaults of one finger and try to unlock vault 1 with the intersection (public data only).

    ``genuine1`` (ground truth, optional) only measures the precision of the intersection.
    """
    hit = _intersection(data1, params1, data2, params2, tol_px, tol_angle)
    coef, trials = unlock(vault_of(data1, params1), hit, max_trials=max_trials)
    out = {"intersection": int(len(hit)), "recovered": coef is not None, "trials": trials}
    if genuine1 is not None:
        out["genuine_in_intersection"] = int(np.isin(hit, genuine1).sum())
    return out
