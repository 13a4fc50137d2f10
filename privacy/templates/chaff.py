"""Chaff for the minutiae vault that the template file cannot tell from genuine points (issue 59).

The file shows, per vault element, a cell and a direction sector (:mod:`.quantise`), and beside them the alignment
helper field (:mod:`fedprint.privacy.templates.alignment`: the enrolment ridge orientation per 8 px block, in
clear unless PIN-hardened).
Two statistics of those gave the genuine points of the first construction away without a probe:

* **direction vs the helper** — a genuine minutia's direction follows the local ridge orientation (median gap
  0-11 degrees on the real sets), chaff directions were uniform. Ranking elements by that gap and interpolating
  among the top few dozen opened every real template in at most ~72,000 interpolations
  (:func:`fedprint.attacks.template_attacks.helper_guided_attack`).
* **spacing** — chaff kept a minimum distance from every point (Nandakumar, Jain & Pankanti 2007 [3]_ Sec. 3),
  genuine minutiae did not: two elements closer than the rule were both genuine.

The construction here removes both (Clancy et al. 2003 [1]_ and Chang et al. 2006 [2]_ already warned that chaff must
follow the genuine feature distribution):

* :func:`helper_orientation` / :func:`deviations` — the gap of each genuine minutia to the stored helper
  orientation at its cell, ``d = direction - theta_helper`` (mod 2 pi, both ridge senses kept);
* :func:`sample_points` — a chaff point lies in a uniformly drawn foreground cell, and its direction is the
  helper orientation *at its own cell* plus a gap drawn from the genuine gaps of the same template (with
  replacement). Given the helper, chaff and genuine directions then have the same distribution — the empirical
  one of this template — so the gap ranks them at chance. We keep the helper (it carries the alignment that
  verification needs) rather than align without it; it still links templates of one finger and reveals the
  ridge flow, which is stated where it is stored.
* :func:`spaced` — genuine points obey the chaff's spacing rule too (elements closer than ``min_distance`` px
  *and* ``min_angle`` are not both kept; the more consistent one wins), so no pair of elements violates it.
  The rule is 10 px / 33.75 degrees (:data:`MIN_DISTANCE`), not NJP07's 20 px: see there.

What is not matched: the *positions* — chaff cells are uniform over the helper's foreground, minutiae are not
(extractors drop border minutiae, ridge structure clusters them); position-only rankers are an open attack,
measured by nothing here.

References
----------
.. [1] T. C. Clancy, N. Kiyavash, D. J. Lin, "Secure smartcard-based fingerprint authentication", ACM WBMA 2003.
.. [2] E.-C. Chang, R. Shen, F. W. Teo, "Finding the original point set hidden among chaff", ASIACCS 2006.
.. [3] K. Nandakumar, A. K. Jain, S. Pankanti, "Fingerprint-based fuzzy vault: implementation and performance",
   IEEE TIFS 2(4), 2007.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fedprint.privacy.templates.alignment import BACKGROUND, BLOCK, LEVELS
from fedprint.privacy.templates.quantise import CELL, FRAME, SECTORS, code_points, minutia_codes

#: The spacing rule: two elements closer than this in position AND direction are not both kept. NJP07's 20 px
#: (2.5 cells, kept as :data:`FIRST_RULE` for the first construction) relied on chaff directions being uniform:
#: with directions that follow the ridge flow the angle clause rarely separates neighbours, and 20 px packs only
#: ~120-250 points onto a 380 px print's foreground — less than 24 + 200; at 12 px a 300 px print's foreground
#: still did not hold them (measured on the synthetic test print). 10 px (1.25 cells) forbids two elements in
#: edge-adjacent cells with directions within 33.75 degrees; a probe minutia within the 12 px match tolerance of
#: a genuine element can then meet a chaff element too, which the one-to-one matching resolves by distance.
MIN_DISTANCE = 1.25 * CELL
MIN_ANGLE = 2 * np.pi / SECTORS * 1.5
#: The first construction's rule (chaff only): (distance px, angle rad).
FIRST_RULE = (2.5 * CELL, 2 * np.pi / SECTORS * 1.5)


def helper_orientation(helper: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Ridge orientation (radians in [0, pi)) of the helper block under each position; NaN on background or off
    the field. ``xy``: (n, >=2) pixel positions (x = column, y = row) in the helper's frame."""
    xy = np.atleast_2d(np.asarray(xy, dtype=np.float64))
    out = np.full(len(xy), np.nan)
    if len(xy) == 0:
        return out
    by = np.floor(xy[:, 1] / BLOCK).astype(np.int64)
    bx = np.floor(xy[:, 0] / BLOCK).astype(np.int64)
    inside = (by >= 0) & (by < helper.shape[0]) & (bx >= 0) & (bx < helper.shape[1])
    lv = np.full(len(xy), BACKGROUND, np.int64)
    lv[inside] = helper[by[inside], bx[inside]]
    fg = lv != BACKGROUND
    # level L stores the doubled angle 2 pi L / LEVELS (alignment.helper_field), i.e. orientation pi L / LEVELS
    out[fg] = np.pi * lv[fg] / LEVELS
    return out


def deviations(points: np.ndarray, helper: np.ndarray) -> np.ndarray:
    """Gaps ``direction - helper orientation`` (mod 2 pi) of points (n, >=3) on the helper's foreground."""
    p = np.atleast_2d(np.asarray(points, dtype=np.float64))
    if p.size == 0:
        return np.zeros(0)
    th = helper_orientation(helper, p[:, :2])
    ok = np.isfinite(th)
    return np.mod(p[ok, 2] - th[ok], 2 * np.pi)


def too_close(a: np.ndarray, b: np.ndarray, *, min_distance: float = MIN_DISTANCE,
              min_angle: float = MIN_ANGLE) -> np.ndarray:
    """(len(a), len(b)) bool: pairs violating the spacing rule (closer than both thresholds)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), bool)
    d = np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])
    da = np.abs(np.angle(np.exp(1j * (a[:, None, 2] - b[None, :, 2]))))
    return (d < min_distance) & (da < min_angle)


def spaced(*views: np.ndarray, min_distance: float = MIN_DISTANCE, min_angle: float = MIN_ANGLE) -> np.ndarray:
    """Keep-mask over elements (in priority order) such that no two kept ones violate the spacing rule in any of
    the views given (greedy: an element is kept unless it is too close to an already kept one).

    Each view holds the same elements as points (n, 3) as one attacker sees them: the stored code centres, and
    under a PIN also what an attacker holding the PIN reconstructs in the enrolment frame (:func:`views_of`).
    """
    n = len(views[0])
    keep = np.zeros(n, bool)
    for i in range(n):
        keep[i] = not any(too_close(v[i:i + 1], v[keep], min_distance=min_distance, min_angle=min_angle).any()
                          for v in views)
    return keep


def views_of(points: np.ndarray, store: Callable[[np.ndarray], np.ndarray] | None = None,
             unstore: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> list[np.ndarray]:
    """The views of enrolment-frame points the spacing rule must hold in: the stored code centres and, when
    ``unstore`` (stored centres, source points -> enrolment-frame reconstruction) is given, the reconstruction
    an attacker holding the key makes of them."""
    p = np.atleast_2d(np.asarray(points, dtype=np.float64))[:, :3]
    stored = p if store is None else store(p)
    centres = code_points(minutia_codes(stored))
    return [centres] if unstore is None else [centres, unstore(centres, p)]


def sample_points(rng: np.random.Generator, n: int, cells: np.ndarray, helper: np.ndarray | None,
                  gaps: np.ndarray) -> np.ndarray:
    """``n`` candidate chaff points (x, y, direction) in the enrolment frame.

    Parameters
    ----------
    rng : numpy Generator
        Chaff randomness (OS entropy in enrolment).
    cells : (c, 2) int array
        Allowed cells (column u, row v) of the FRAME/CELL grid; drawn uniformly.
    helper : uint8 array or None
        Helper field in the enrolment frame; None: directions uniform.
    gaps : float array
        Genuine gaps to the helper orientation (:func:`deviations`), drawn with replacement; empty: uniform.
    """
    pick = cells[rng.integers(0, len(cells), size=n)]
    xy = (pick + rng.random((n, 2))) * CELL
    if helper is None or len(gaps) == 0:
        return np.column_stack([xy, rng.uniform(0, 2 * np.pi, n)])
    th = helper_orientation(helper, xy)
    th = np.where(np.isfinite(th), th, rng.uniform(0, np.pi, n))  # cells are foreground: not reached in practice
    return np.column_stack([xy, np.mod(th + gaps[rng.integers(0, len(gaps), size=n)], 2 * np.pi)])


def draw_chaff(rng: np.random.Generator, n_chaff: int, genuine_points: np.ndarray, *, cells: np.ndarray,
               helper: np.ndarray | None, store: Callable[[np.ndarray], np.ndarray] | None = None,
               unstore: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
               min_distance: float = MIN_DISTANCE, min_angle: float = MIN_ANGLE,
               max_rounds: int = 400) -> np.ndarray:
    """Stored codes of ``n_chaff`` chaff elements matched to the helper (see the module docstring).

    Parameters
    ----------
    genuine_points : (r, >=3) float
        Genuine minutiae kept for the vault, enrolment frame (their gaps are the chaff's direction model).
    cells : (c, 2) int
        Cells chaff may use (the foreground the genuine points were restricted to).
    helper : uint8 array or None
        Clear helper field in the enrolment frame.
    store, unstore : callable, optional
        The PIN's keyed transform (enrolment -> stored frame) and the reconstruction of stored code centres in
        the enrolment frame by a key holder (:func:`views_of`); identity / none by default. The spacing rule
        and code distinctness hold in every view, so neither a PIN-less attacker nor one who found the PIN sees
        a pair that only genuine points could form.

    Raises
    ------
    ValueError
        If the allowed cells cannot hold that many chaff points under the spacing rule.
    """
    store_ = (lambda p: p) if store is None else store
    g = np.atleast_2d(np.asarray(genuine_points, dtype=np.float64))[:, :3]
    gaps = deviations(g, helper) if helper is not None else np.zeros(0)
    seen = views_of(g, store_, unstore) if len(g) else [np.zeros((0, 3))] * (1 + (unstore is not None))
    taken = set(int(c) for c in minutia_codes(store_(g))) if len(g) else set()
    out: list[int] = []
    for _ in range(max_rounds):
        cand = sample_points(rng, 4 * (n_chaff - len(out)) + 16, cells, helper, gaps)
        e_codes, s_codes = minutia_codes(cand), minutia_codes(store_(cand))
        cand_views = views_of(cand, store_, unstore)
        for i, (ec, sc) in enumerate(zip(e_codes, s_codes, strict=True)):
            if ec <= 0 or sc <= 0 or int(sc) in taken:
                continue
            if any(too_close(v[i:i + 1], s, min_distance=min_distance, min_angle=min_angle).any()
                   for v, s in zip(cand_views, seen, strict=True)):
                continue
            out.append(int(sc))
            taken.add(int(sc))
            seen = [np.vstack([s, v[i:i + 1]]) for v, s in zip(cand_views, seen, strict=True)]
            if len(out) == n_chaff:
                return np.asarray(out, dtype=np.int64)
    raise ValueError(f"chaff: could not place {n_chaff} chaff points {min_distance:.0f} px apart on the print's "
                     f"{len(cells)} foreground cells of the {FRAME} px frame; lower the chaff count")
