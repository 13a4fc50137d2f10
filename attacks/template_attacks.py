"""Attacks on our own protected templates: cross-matching and helper linkage, the correlation attack, PIN guessing.

* **Cross-matching / linkability** [3]_ (:func:`link_score`; :func:`link_scores` for a tolerance sweep): uses the
  vault points and the helper fields. Given two vault templates from two systems, is it the same finger? The
  attacker registers the two stored helper fields (the same public routine the verifier uses), refines the
  translation by Hough voting between the two point sets, and counts vault elements of one that have a partner in
  the other within the matching tolerance; a second, helper-free alignment (translation voting over the whole
  frame) covers templates whose helper is masked. Genuine minutiae of one finger coincide, chaff does not, so mated
  pairs score higher. Success = best balanced accuracy of a threshold on the score (chance 0.5).
* **Correlation attack** (Scheirer & Boult 2007 [1]_; Kholmatov & Yanikoglu 2008 [2]_) (:func:`correlation_attack`):
  align two vaults of one finger and intersect them; the surviving elements of vault 1 are mostly genuine, and the
  attacker runs the ordinary unlock on them. Success = the secret polynomial (hence the genuine minutiae) is
  recovered from public data alone. Uses the vault points and the helper fields.
* **Helper linkage** (:func:`helper_link_score`): uses only the stored alignment helper field (the enrolment
  impression's coarse orientation field, :mod:`fedprint.privacy.templates.alignment`). Score = mean orientation
  agreement
  of the two fields after the verifier's own registration (:func:`~fedprint.privacy.templates.alignment.register`). Two
  unhardened templates of one finger store similar ridge flows; a PIN-masked helper is a one-time pad over the
  symbols and scores at chance.
* **Offline PIN guess** (:func:`pin_search`): uses the masked helper field and the public scrypt salt
  (``kdf_salt``). For each candidate PIN the attacker derives the key, unmasks the helper and scores its
  :func:`helper_smoothness` (a ridge flow is smooth, a wrong pad leaves noise): the template itself is the PIN
  oracle, although no PIN check value is stored.

All use only what a template file holds. Ground truth (which elements are genuine, the true PIN) is used only to
measure.

References
----------
.. [1] W. J. Scheirer, T. E. Boult, "Cracking fuzzy vaults and biometric encryption", Biometrics Symposium 2007.
.. [2] A. Kholmatov, B. Yanikoglu, "Realization of correlation attack against the fuzzy vault scheme", SPIE 2008.
.. [3] K. Simoens, P. Tuyls, B. Preneel, "Privacy weaknesses in biometric sketches", IEEE S&P 2009.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from fedprint.privacy.templates.alignment import BACKGROUND, LEVELS, Pose, refine, register
from fedprint.privacy.templates.consistency import match_points
from fedprint.privacy.templates.fuzzy_vault import unlock
from fedprint.privacy.templates.password import derive_key, mask_helper
from fedprint.privacy.templates.quantise import code_points
from fedprint.privacy.templates.vault_template import vault_of


def _align(data1: dict, data2: dict, pts1: np.ndarray, pts2: np.ndarray) -> list[np.ndarray]:
    """Candidate placements of vault 2's element centres in vault 1's frame (helper-based and helper-free)."""
    helper_pose = refine(register(data2["helper"], data1["helper"]), pts2, pts1)
    free = refine(Pose(0.0, (0.0, 0.0), (0.0, 0.0), 0.0), pts2, pts1, radius=256.0, bin_px=8.0, min_votes=2)
    return [helper_pose.apply(pts2), free.apply(pts2)]


def _placed(data1: dict, params1: dict, data2: dict, params2: dict) -> tuple[np.ndarray, np.ndarray, list]:
    """Vault-1 codes, their element centres and the candidate placements of vault 2's centres in vault 1's frame."""
    codes1, codes2 = vault_of(data1, params1).codes, vault_of(data2, params2).codes
    pts1, pts2 = code_points(codes1), code_points(codes2)
    return codes1, pts1, _align(data1, data2, pts1, pts2)


def _best_hit(codes1: np.ndarray, pts1: np.ndarray, placements: list[np.ndarray], tol_px: float,
              tol_angle: float) -> np.ndarray:
    """Codes of vault-1 elements with a partner under the placement that pairs the most."""
    best = np.zeros(0, np.int64)
    for placed in placements:
        idx = match_points(placed, pts1, tol_px=tol_px, tol_angle=tol_angle)
        hit = codes1[idx[idx >= 0]]
        if len(hit) > len(best):
            best = hit
    return best


def _intersection(data1: dict, params1: dict, data2: dict, params2: dict, tol_px: float | None = None,
                  tol_angle: float | None = None) -> np.ndarray:
    """Codes of vault-1 elements with a partner in vault 2 under the best of the attacker's alignments
    (tolerances default to vault 1's own matching tolerance)."""
    tol_px = float(params1["tol_px"]) if tol_px is None else tol_px
    tol_angle = float(params1["tol_angle"]) if tol_angle is None else tol_angle
    return _best_hit(*_placed(data1, params1, data2, params2), tol_px, tol_angle)


def link_score(data1: dict, params1: dict, data2: dict, params2: dict, *, tol_px: float | None = None,
               tol_angle: float | None = None) -> int:
    """Cross-matching score of two vault templates: elements in common after the attacker's alignment."""
    return int(len(_intersection(data1, params1, data2, params2, tol_px, tol_angle)))


def link_scores(data1: dict, params1: dict, data2: dict, params2: dict,
                tolerances: Sequence[tuple[float, float]]) -> list[int]:
    """:func:`link_score` at several tolerances, aligning once.

    Parameters
    ----------
    data1, params1, data2, params2 : dict
        The two templates and their parameters.
    tolerances : sequence of (tol_px, tol_angle)
        Matching tolerances (pixels, radians).

    Returns
    -------
    list of int
        Elements in common at each tolerance, in order.
    """
    placed = _placed(data1, params1, data2, params2)
    return [int(len(_best_hit(*placed, float(tp), float(ta)))) for tp, ta in tolerances]


def helper_link_score(data1: dict, data2: dict) -> float:
    """Helper-field linkage score: mean orientation agreement of the two stored helpers after registration.

    Parameters
    ----------
    data1, data2 : dict
        Templates (only ``"helper"`` is read).

    Returns
    -------
    float
        ``register(data2["helper"], data1["helper"]).score``: ~1 for one finger's ridge flow, lower for two
        fingers; -1 when a helper has no foreground.
    """
    return float(register(data2["helper"], data1["helper"]).score)


def helper_smoothness(field: np.ndarray) -> float:
    """Fraction of adjacent foreground block pairs whose orientation levels differ by at most one level.

    Parameters
    ----------
    field : (h, w) uint8
        Helper field: levels 0..15 or ``BACKGROUND``.

    Returns
    -------
    float
        Over horizontally and vertically adjacent pairs of foreground blocks, the fraction with cyclic level
        difference (mod 16) <= 1: near 1 for a ridge flow, 3/16 for uniform noise; 0 without such pairs.
    """
    f = np.asarray(field)
    fg = f != BACKGROUND
    lv = f.astype(np.int64)
    close = []
    for a, b, ma, mb in ((lv[:, 1:], lv[:, :-1], fg[:, 1:], fg[:, :-1]), (lv[1:], lv[:-1], fg[1:], fg[:-1])):
        d = np.abs(a - b)[ma & mb] % LEVELS
        close.append(np.minimum(d, LEVELS - d) <= 1)
    c = np.concatenate(close)
    return float(c.mean()) if c.size else 0.0


def pin_search(data: dict, candidates: Sequence[str]) -> dict:
    """Offline PIN guessing on a hardened template: unmask the helper with each candidate, rank by smoothness.

    Parameters
    ----------
    data : dict
        Hardened template (reads ``"helper"`` and ``"kdf_salt"``).
    candidates : sequence of str
        PINs to try (each costs one scrypt call).

    Returns
    -------
    dict
        ``ranking``: list of (pin, smoothness), best first (ties keep the candidates' order); ``best``: the top
        PIN; ``helper``: the helper unmasked with it; ``seconds_per_guess``: wall time per candidate.
    """
    if len(candidates) == 0:
        raise ValueError("pin_search: expected at least one candidate PIN")
    scores, best_field = [], None
    t = time.perf_counter()
    for pin in candidates:
        field = mask_helper(data["helper"], derive_key(pin, data["kdf_salt"]), inverse=True)
        scores.append(helper_smoothness(field))
        if scores[-1] > max(scores[:-1], default=-1.0):
            best_field = field
    seconds = (time.perf_counter() - t) / len(candidates)
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    ranking = [(str(candidates[i]), float(scores[i])) for i in order]
    return {"ranking": ranking, "best": ranking[0][0], "helper": best_field, "seconds_per_guess": seconds}


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
