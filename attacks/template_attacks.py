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

import math
import time
from collections.abc import Sequence
from itertools import combinations

import numpy as np

from fedprint.privacy.templates.alignment import BACKGROUND, LEVELS, Pose, refine, register
from fedprint.privacy.templates.chaff import FIRST_RULE, MIN_ANGLE, MIN_DISTANCE, helper_orientation, too_close
from fedprint.privacy.templates.consistency import match_points
from fedprint.privacy.templates.field import CODE_BITS, evaluate, interpolate, poly_digest
from fedprint.privacy.templates.fuzzy_vault import unlock
from fedprint.privacy.templates.password import TRANSFORM_CELL, cell_transforms, derive_key, mask_helper
from fedprint.privacy.templates.quantise import FRAME, code_points
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


# --- Opening a vault from its file alone (issue 59): helper-guided ranking, spacing, ranked interpolation -----


def _preimages(pts: np.ndarray, key: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Enrolment-frame candidates of stored points under the keyed per-cell transform: (rows, owner index).

    The transform moves each 128 px cell by its own offset mod the frame, so a stored point has one candidate
    source per cell, kept when it lands in that cell (0, 1 or several per point; the true one among them).
    """
    cells = FRAME // TRANSFORM_CELL
    t = cell_transforms(key)
    rows, owner = [], []
    for c in range(cells * cells):
        cy, cx = divmod(c, cells)
        x = np.mod(pts[:, 0] - t[c, 0], FRAME)
        y = np.mod(pts[:, 1] - t[c, 1], FRAME)
        ok = (np.floor(x / TRANSFORM_CELL) == cx) & (np.floor(y / TRANSFORM_CELL) == cy)
        rows.append(np.column_stack([x[ok], y[ok], np.mod(pts[ok, 2] - t[c, 2], 2 * np.pi)]))
        owner.append(np.flatnonzero(ok))
    return np.vstack(rows), np.concatenate(owner)


def _mode(r: np.ndarray, kappa: float = 8.0) -> float:
    """Mode of angles mod pi: maximum of a von Mises kernel density (doubled angle) on a 0.5 degree grid."""
    if len(r) == 0:
        return 0.0
    grid = np.arange(0, np.pi, np.pi / 360)
    dens = np.exp(kappa * (np.cos(2 * (r[None, :] - grid[:, None])) - 1)).sum(axis=1)
    return float(grid[int(np.argmax(dens))])


def helper_gaps(data: dict, params: dict, *, key: bytes | None = None) -> np.ndarray:
    """Per vault element (``vault_of(...).codes`` order): gap between its direction and the helper's ridge
    orientation at its cell, after removing the template's own typical offset (radians in [0, pi/2]).

    The offset is the mode of ``direction - orientation`` (mod pi) over all elements (genuine minutiae
    concentrate there, uniform chaff spreads out), so the attacker needs no convention for either angle. Under
    a PIN the attacker passes the key (found by :func:`pin_search`): the helper is unmasked and each stored
    point is mapped back through every cell's transform (:func:`_preimages`), keeping its smallest gap.
    Elements with no position on the helper's foreground get -1 without a key (chaff is only ever drawn on
    the foreground, so such an element is genuine) and +inf with one (a scrambled chaff point of the first
    construction usually has no foreground source).
    """
    codes = vault_of(data, params).codes
    pts = code_points(codes)
    helper = data["helper"] if key is None else mask_helper(data["helper"], key, inverse=True)
    cand, owner = (pts, np.arange(len(pts))) if key is None else _preimages(pts, key)
    th = helper_orientation(helper, cand[:, :2])
    fg = np.isfinite(th)
    r = np.mod(cand[fg, 2] - th[fg], np.pi)
    mu = _mode(r)
    gap = np.abs(np.angle(np.exp(2j * (r - mu)))) / 2
    out = np.full(len(codes), -1.0 if key is None else np.inf)
    best = np.full(len(codes), np.inf)
    np.minimum.at(best, owner[fg], gap)
    has = np.isfinite(best)
    out[has] = best[has]
    return out


def spacing_flags(data: dict, params: dict, *, key: bytes | None = None, min_distance: float | None = None,
                  min_angle: float | None = None) -> np.ndarray:
    """Codes of vault elements that violate the chaff's spacing rule with another element — genuine for sure
    when only chaff obeys the rule (the first construction). With a key, the rule is also checked on each
    element's best enrolment-frame source (the PIN's transform keeps distances within a 128 px cell).
    The rule defaults to the one of the template's construction (``params["construction"]``, 1 when absent:
    :data:`~fedprint.privacy.templates.chaff.FIRST_RULE`; 2: 10 px / 33.75 degrees)."""
    rule = FIRST_RULE if int(params.get("construction", 1)) == 1 else (MIN_DISTANCE, MIN_ANGLE)
    min_distance = rule[0] if min_distance is None else min_distance
    min_angle = rule[1] if min_angle is None else min_angle
    codes = vault_of(data, params).codes
    pts = code_points(codes)
    frames = [pts]
    if key is not None:
        cand, owner = _preimages(pts, key)
        helper = mask_helper(data["helper"], key, inverse=True)
        th = helper_orientation(helper, cand[:, :2])
        ok = np.isfinite(th)
        gap = np.abs(np.angle(np.exp(2j * (cand[:, 2] - th)))) / 2
        src = np.full((len(pts), 3), np.nan)
        for i in np.argsort(-np.where(ok, gap, -1)):  # ascending gap last: each element keeps its best source
            if ok[i]:
                src[owner[i]] = cand[i]
        frames.append(src)
    flag = np.zeros(len(codes), bool)
    for f in frames:
        close = too_close(f, f, min_distance=min_distance, min_angle=min_angle)
        np.fill_diagonal(close, False)
        flag |= close.any(axis=1)
    return codes[flag]


def _log2_comb(n: int, k: int) -> float:
    if k < 0 or n < k:
        return float("-inf")
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(2)


def ranking_work(order: np.ndarray, genuine: np.ndarray, on_points: np.ndarray, *, degree: int,
                 slots: int) -> dict:
    """Expected interpolations of the ranked attack with the best cut-off chosen in hindsight (ground truth).

    Random (k+1)-subsets of the points of the top-m elements hit only points on F with probability
    C(G_m, k+1) / C(m q, k+1), G_m the points on F among them; the attacker's expected work at the best m is
    ``min_m C(m q, k+1) / C(G_m, k+1)`` — a lower bound on what the ranking costs an attacker, who does not
    know the best m (so: a conservative security figure). With a random ranking it is the brute force.

    Parameters
    ----------
    order : codes, best-ranked first
    genuine, on_points : genuine codes and their points on F (weights; 1 for the plain vault)
    """
    w = dict(zip(np.asarray(genuine).tolist(), np.asarray(on_points).tolist(), strict=True))
    g = np.cumsum([w.get(int(c), 0) for c in order])
    k1 = degree + 1
    best, at = float("inf"), 0
    for m in range(1, len(order) + 1):
        if g[m - 1] < k1:
            continue
        bits = _log2_comb(m * slots, k1) - _log2_comb(int(g[m - 1]), k1)
        if bits < best:
            best, at = bits, m
    return {"log2_work": best, "best_m": at}


def _ranked_order(codes: np.ndarray, score: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    tie = rng.random(len(codes))  # random tie-break: vault.codes are sorted, their order must not leak in
    return codes[np.lexsort((tie, score))]


def ranked_interpolation(vault, order: np.ndarray, *, budget: int, growth: float = 1.15,
                         rng: np.random.Generator | None = None) -> dict:
    """Interpolate (k+1)-subsets of the points of the top-m ranked elements, m growing geometrically, until a
    polynomial reproduces the template's salted digest (the check the verifier uses) or ``budget``
    interpolations are spent.

    Each stage gets an equal share of the budget left; a stage whose C(M, k+1) fits its share is enumerated
    exhaustively, otherwise random subsets are drawn. Returns ``opened``, ``interpolations``, ``seconds``,
    ``m`` (elements in the stage that opened it) and ``coef`` (None unless opened).
    """
    rng = np.random.default_rng(0) if rng is None else rng
    k1 = vault.degree + 1
    low = vault.xs & ((1 << CODE_BITS) - 1)
    pos = {int(c): np.flatnonzero(low == c) for c in order}
    ms, m = [], max(1, -(-k1 // vault.slots))
    while m < len(order):
        ms.append(m)
        m = max(m + 1, int(round(m * growth)))
    ms.append(len(order))
    done, t0 = 0, time.perf_counter()
    for i, m in enumerate(ms):
        idx = np.concatenate([pos[int(c)] for c in order[:m]])
        if len(idx) < k1:
            continue
        n_sub = math.comb(len(idx), k1)
        take = max(1, (budget - done) // (len(ms) - i))  # what an early, exhaustive stage leaves goes on
        if take <= 0:
            break
        subsets = np.array(list(combinations(range(len(idx)), k1)), np.int64) if n_sub <= take else \
            np.argsort(rng.random((take, len(idx))), axis=1)[:, :k1]
        for s in range(0, len(subsets), 2048):
            sel = idx[subsets[s:s + 2048]]
            coefs = interpolate(vault.xs[sel], vault.ys[sel], vault.bits)
            for j, c in enumerate(coefs):
                if poly_digest(c, vault.salt) == vault.digest:
                    done += s + j + 1
                    return {"opened": True, "interpolations": done, "seconds": time.perf_counter() - t0, "m": m,
                            "coef": c}
        done += len(subsets)
    return {"opened": False, "interpolations": done, "seconds": time.perf_counter() - t0, "m": None, "coef": None}


def helper_guided_attack(data: dict, params: dict, *, budget: int = 100_000, key: bytes | None = None,
                         use_spacing: bool = True, genuine: np.ndarray | None = None,
                         on_points: np.ndarray | None = None, rng: np.random.Generator | None = None) -> dict:
    """Open a vault from its file alone: elements flagged by :func:`spacing_flags` first, the rest ranked by
    :func:`helper_gaps`, then :func:`ranked_interpolation`.

    Parameters
    ----------
    data, params : the template (a hardened one needs ``key``, from the PIN :func:`pin_search` finds)
    budget : int
        Interpolations the attacker may spend.
    genuine, on_points : optional ground truth (genuine codes, points on F each) — only to measure
        (``flagged_genuine``, ``recovered_genuine``, :func:`ranking_work`).

    Returns
    -------
    dict
        ``opened``, ``interpolations``, ``seconds``, ``m``, ``flagged`` (spacing), and with ground truth
        ``flagged_genuine``, ``log2_work`` (expected interpolations of this ranking at its best cut-off),
        ``recovered_genuine`` (genuine elements on the recovered polynomial, when opened).
    """
    rng = np.random.default_rng(0) if rng is None else rng
    vault = vault_of(data, params)
    codes = vault.codes
    score = helper_gaps(data, params, key=key)
    flagged = spacing_flags(data, params, key=key) if use_spacing else np.zeros(0, np.int64)
    score = np.where(np.isin(codes, flagged), -2.0, score)
    order = _ranked_order(codes, score, rng)
    res = ranked_interpolation(vault, order, budget=budget, rng=rng)
    out = {k: v for k, v in res.items() if k != "coef"}
    out["flagged"] = int(len(flagged))
    if genuine is not None:
        w = np.ones(len(genuine), np.int64) if on_points is None else np.asarray(on_points)
        out["flagged_genuine"] = int(np.isin(flagged, genuine).sum())
        out.update(ranking_work(order, genuine, w, degree=vault.degree, slots=vault.slots))
        if res["coef"] is not None:
            on = evaluate(res["coef"], vault.xs, vault.bits) == vault.ys
            out["recovered_genuine"] = int(np.isin(np.unique(vault.xs[on] & ((1 << CODE_BITS) - 1)), genuine).sum())
    return out


def open_template(data: dict, params: dict, *, hardened: bool, pin_candidates: Sequence[str] = (),
                  budget: int = 100_000, genuine: np.ndarray | None = None, on_points: np.ndarray | None = None,
                  rng: np.random.Generator | None = None) -> dict:
    """The whole file-only attack: for a hardened template first :func:`pin_search` over ``pin_candidates``
    (its best PIN gives the key), then :func:`helper_guided_attack`. Adds ``pin`` (the PIN used),
    ``pin_guesses`` and ``pin_seconds`` for hardened templates."""
    key, extra = None, {}
    if hardened:
        if not pin_candidates:
            raise ValueError("pin_candidates: a hardened template needs candidate PINs to attack")
        t = time.perf_counter()
        found = pin_search(data, list(pin_candidates))
        key = derive_key(found["best"], data["kdf_salt"])
        extra = {"pin": found["best"], "pin_guesses": len(pin_candidates), "pin_seconds": time.perf_counter() - t}
    res = helper_guided_attack(data, params, budget=budget, key=key, genuine=genuine, on_points=on_points, rng=rng)
    return {**res, **extra}


def format_work(name: str, res: dict) -> str:
    """One line of an attack's outcome and the work it took (what ``fedprint audit`` prints)."""
    line = (f"{name}: {'OPENED' if res['opened'] else 'not opened'} after {res['interpolations']:,} "
            f"interpolations ({res['seconds']:.2f} s)")
    if "pin_guesses" in res:
        line += f" + PIN search {res['pin_guesses']:,} guesses ({res['pin_seconds']:.1f} s)"
    line += f"; spacing flags {res['flagged']}"
    if "log2_work" in res:
        line += f"; ranking work 2^{res['log2_work']:.1f} at best cut-off"
    return line
