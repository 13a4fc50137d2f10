"""Master fingerprint of one synthetic finger identity (SFinGe, Cappelli, Maio, Maltoni, ICPR 2000 / 2002).

A master is the noise-free, full ridge pattern of a finger, from which impressions are derived
(:mod:`fedprint.data.synth` impression code). Steps: class and silhouette -> singular points -> orientation field
(:mod:`fedprint.data.synth.orientation`) -> period map (:mod:`fedprint.data.synth.density`) -> ridge pattern by
iterative Gabor
growth (:mod:`fedprint.data.synth.ridges`) -> ground-truth minutiae by binarising, thinning and crossing number
(:mod:`fedprint.data.minutiae`). All randomness of a master comes from ``numpy.random.default_rng([seed, identity, 0])``
(sibling masters: see :func:`make_master`); impressions use ``[seed, identity, impression + 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedprint.data.minutiae import minutiae_from_skeleton, thin
from fedprint.data.synth.density import period_map
from fedprint.data.synth.orientation import PATTERNS, orientation_field, place_singular_points
from fedprint.data.synth.ridges import grow_ridges
from fedprint.data.synth.silhouette import random_silhouette

__all__ = ["PATTERNS", "Master", "make_master", "sample_pattern"]


@dataclass(frozen=True)
class Master:
    """Master fingerprint of one finger identity, on a 500-dpi canvas.

    Attributes
    ----------
    identity : int
        Finger identity.
    pattern : str
        One of :data:`PATTERNS`.
    ridges : ndarray of float32, shape (H, W), in [-1, 1]
        +1 ridge centre, -1 valley centre, 0 outside ``mask``.
    mask : ndarray of bool, shape (H, W)
        Fingertip silhouette (foreground).
    orientation : ndarray of float32, shape (H, W)
        Ridge orientation in radians in [0, pi), image axes (x right, y down).
    period : ndarray of float32, shape (H, W)
        Local ridge period in pixels.
    cores, deltas : ndarray of float64, shape (k, 2)
        Singular points as (x, y); cores lie inside the canvas, deltas inside the canvas but possibly outside
        ``mask`` (as on real plain prints).
    minutiae : ndarray of float64, shape (n, 4)
        ``x, y, direction (radians, [0, 2 pi)), type (1 ending, 3 bifurcation)``, from the ridge pattern.
    """

    identity: int
    pattern: str
    ridges: np.ndarray
    mask: np.ndarray
    orientation: np.ndarray
    period: np.ndarray
    cores: np.ndarray
    deltas: np.ndarray
    minutiae: np.ndarray


def sample_pattern(pattern_prior: dict[str, float], rng: np.random.Generator) -> str:
    """Draw a fingerprint class from a prior ``{pattern: weight}`` (weights >= 0, normalised here).

    Raises
    ------
    ValueError
        If a key is not in :data:`PATTERNS`, a weight is negative or not finite, or the weights sum to 0.
    """
    if not isinstance(pattern_prior, dict) or not pattern_prior:
        raise ValueError(f"pattern_prior must be a non-empty dict {{pattern: weight}}, got {pattern_prior!r}")
    unknown = sorted(set(pattern_prior) - set(PATTERNS))
    if unknown:
        raise ValueError(f"pattern_prior has unknown pattern(s) {unknown}; expected keys from {PATTERNS}")
    names = [p for p in PATTERNS if p in pattern_prior]
    weights = np.array([pattern_prior[p] for p in names], dtype=np.float64)
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError(f"pattern_prior weights must be finite and >= 0, got {pattern_prior}")
    total = weights.sum()
    if total <= 0:
        raise ValueError(f"pattern_prior weights must sum to > 0, got {pattern_prior}")
    return names[int(rng.choice(len(names), p=weights / total))]


def make_master(
    identity: int,
    *,
    seed: int,
    size: tuple[int, int],
    pattern_prior: dict[str, float],
    period_px: tuple[float, float] = (8.0, 11.0),
    family: int | None = None,
) -> Master:
    """Generate the master fingerprint of finger ``identity``.

    Parameters
    ----------
    identity : int
        Finger identity (>= 0).
    seed : int
        Dataset seed (>= 0); ``rng = np.random.default_rng([seed, identity, 0])``.
    size : (int, int)
        ``(H, W)`` of the 500-dpi master canvas in pixels; each at least 64.
    pattern_prior : dict
        Class weights ``{pattern: weight}`` over :data:`PATTERNS` (e.g. the natural frequencies arch 3.7 %,
        tented arch 2.9 %, left loop 33.8 %, right loop 31.7 %, whorl 27.9 %).
    period_px : (float, float), default (8, 11)
        Range of the local ridge period in pixels, ``0 < lo <= hi``; 500-dpi fingers lie within about 7–12.
    family : int, optional
        Sibling masters: every master of one family (>= 0) has the same class, silhouette, singular points,
        orientation and period maps, drawn from ``default_rng([seed, family, 0, 1])``, and its own ridge growth
        (the seed spots of :func:`fedprint.data.synth.ridges.grow_ridges`) from ``default_rng([seed, identity, 0, 2])``:
        the same ridge flow with other minutiae, an impostor that only the minutiae tell apart. None (default):
        one stream ``default_rng([seed, identity, 0])`` draws all of it.

    Returns
    -------
    Master
    """
    if not (isinstance(size, tuple | list) and len(size) == 2):
        raise ValueError(f"size must be (H, W), got {size!r}")
    h, w = (int(v) for v in size)
    if h < 64 or w < 64:
        raise ValueError(f"size must be (H, W) with H, W >= 64 pixels, got {size!r}")
    if int(identity) < 0 or int(seed) < 0 or (family is not None and int(family) < 0):
        raise ValueError(f"identity, seed and family must be >= 0, got identity={identity}, seed={seed}, "
                         f"family={family}")
    lo, hi = (float(v) for v in period_px)
    if not (2.5 < lo <= hi):
        raise ValueError(f"period_px must satisfy 2.5 < lo <= hi (pixels), got {period_px}")

    if family is None:
        rng = ridge_rng = np.random.default_rng([int(seed), int(identity), 0])
    else:
        rng = np.random.default_rng([int(seed), int(family), 0, 1])
        ridge_rng = np.random.default_rng([int(seed), int(identity), 0, 2])
    pattern = sample_pattern(pattern_prior, rng)
    sil = random_silhouette((h, w), rng)
    mask = sil.mask((h, w))
    cores, deltas = place_singular_points(pattern, sil.box, rng, canvas=(h, w))
    orientation = orientation_field(pattern, (h, w), cores, deltas, sil.box, rng)
    upper = None if len(cores) else sil.box[1] + 0.45 * sil.box[3]
    period = period_map((h, w), cores, deltas, rng, period_px=(lo, hi), upper_ref_y=upper)
    ridges = grow_ridges(orientation, period, mask, ridge_rng)
    minutiae = minutiae_from_skeleton(thin(ridges > 0), mask, 10, orientation)
    return Master(
        identity=int(identity),
        pattern=pattern,
        ridges=ridges,
        mask=mask,
        orientation=orientation,
        period=period,
        cores=cores,
        deltas=deltas,
        minutiae=minutiae,
    )
