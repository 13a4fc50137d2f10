"""Ridge-period (inverse density) map of a master fingerprint (SFinGe step 3).

Real fingerprints at 500 dpi have a ridge period of about 7–12 px (frequency near 1/9 px^-1). SFinGe draws the
density map so that ridges are somewhat denser above the core region and sparser near singular points, with a
random low-frequency variation on top; here the same ingredients are combined multiplicatively around a
per-finger base period and the result is clipped to the requested range.
"""

from __future__ import annotations

import cv2
import numpy as np

from fedprint.data.synth.orientation import smooth_random_field


def period_map(
    shape: tuple[int, int],
    cores: np.ndarray,
    deltas: np.ndarray,
    rng: np.random.Generator,
    *,
    period_px: tuple[float, float] = (8.0, 11.0),
    upper_ref_y: float | None = None,
    above_core: float = 0.08,
    near_singular: float = 0.10,
    variation: float = 0.08,
    wavelength_px: float = 100.0,
) -> np.ndarray:
    """Local ridge period in pixels.

    ``T(x, y) = T0 * (1 - above_core * s(y)) * (1 + near_singular * b(x, y)) * (1 + variation * n(x, y))``
    clipped to ``period_px``, where ``T0`` is drawn uniformly in the middle of ``period_px``, ``s`` is a smooth
    step from 0 below to 1 above the upper reference line (highest core), ``b`` is the largest Gaussian bump
    (sigma 35 px) over all singular points and ``n`` is a smooth unit random field.

    Parameters
    ----------
    shape : (int, int)
        ``(H, W)`` in pixels.
    cores, deltas : ndarray, shape (k, 2)
        Singular points (x, y).
    rng : numpy.random.Generator
        Source of randomness.
    period_px : (float, float), default (8, 11)
        Range of the period in pixels, ``0 < lo <= hi``.
    upper_ref_y : float, optional
        Row above which ridges are denser; default: the highest core (arches: canvas middle).
    above_core, near_singular, variation : float
        Relative strength of the three modulations.
    wavelength_px : float, default 150
        Shortest wavelength of the random variation in pixels.

    Returns
    -------
    ndarray of float32, shape (H, W)
    """
    lo, hi = (float(v) for v in period_px)
    if not (0 < lo <= hi):
        raise ValueError(f"period_px must satisfy 0 < lo <= hi, got {period_px}")
    h, w = shape
    span = hi - lo
    t0 = rng.uniform(lo + 0.25 * span, hi - 0.25 * span)
    y = np.arange(h, dtype=np.float32)[:, None]
    if upper_ref_y is None:
        upper_ref_y = float(np.min(cores[:, 1])) if len(cores) else 0.5 * h
    step = 1.0 / (1.0 + np.exp((y - np.float32(upper_ref_y)) / np.float32(25.0)))  # 1 above, 0 below
    period = np.float32(t0) * (1.0 - np.float32(above_core) * step) * np.ones((1, w), np.float32)
    points = np.concatenate([np.reshape(cores, (-1, 2)), np.reshape(deltas, (-1, 2))])
    if len(points):
        # Bumps on a coarse grid, then interpolated: they are smooth at the 35 px scale.
        s = 4
        gy, gx = np.mgrid[0 : h // s + 2, 0 : w // s + 2].astype(np.float32) * s
        bump = np.zeros_like(gx)
        for px, py in points:
            bump = np.maximum(bump, np.exp(-((gx - px) ** 2 + (gy - py) ** 2) / np.float32(2 * 35.0**2)))
        bump = cv2.resize(bump, (bump.shape[1] * s, bump.shape[0] * s), interpolation=cv2.INTER_LINEAR)
        period *= 1.0 + np.float32(near_singular) * bump[:h, :w]
    period *= 1.0 + np.float32(variation) * smooth_random_field(shape, rng, wavelength_px=wavelength_px)
    return np.clip(period, lo, hi).astype(np.float32)
