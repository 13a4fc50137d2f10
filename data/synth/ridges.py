"""Ridge pattern by iterative space-variant Gabor filtering (SFinGe step 4).

Starting from an image holding a few random seed spots, SFinGe repeats ``I <- normalise(sum I * g_{theta, f})``
where at every pixel the Gabor filter ``g`` is tuned to the local orientation and frequency, until the fingertip
is filled with ridges and the pattern is stable (Cappelli, Maio, Maltoni, ICPR 2000). Ridge fronts growing from
different seeds that meet out of phase, and the orientation / density changes the pattern must follow, produce
the minutiae; none are placed by hand.

Implementation (vectorised, no per-pixel loop):

* orientation is quantised into ``n_orientations`` bins over [0, pi) and the period into ``n_periods`` bins;
  pixels are grouped by their (orientation, period) bin, and each group is filtered only over its bounding box;
* a Gabor filter with an isotropic Gaussian envelope is a sum of two separable filters,
  ``G(x)G(y) cos(a x + b y) = [G cos(a x)][G cos(b y)] - [G sin(a x)][G sin(b y)]``, so every bin costs two
  ``cv2.sepFilter2D`` calls;
* the growth runs at a reduced resolution (``downsample``; 2 for 500-dpi periods >= 7 px, i.e. >= 3.5 px on the
  growth grid) and the final, unclipped band-limited response is interpolated back to the full canvas.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class _Group:
    """Pixels sharing one (orientation, period) bin, with their bounding box on the padded grid."""

    kx: tuple[np.ndarray, np.ndarray]  # (G cos(a x), G sin(a x))
    ky: tuple[np.ndarray, np.ndarray]  # (G cos(b y), G sin(b y))
    y0: int
    y1: int
    x0: int
    x1: int
    r: int
    dst: np.ndarray  # flat indices into the padded image
    src: np.ndarray  # flat indices into the response of the crop


def gabor_factors(
    theta: float, period: float, *, sigma_factor: float = 0.45
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Separable factors of an even Gabor filter tuned to ridges of orientation ``theta`` and ``period``.

    The filter is ``g(x, y) = G(x) G(y) cos(w (n_x x + n_y y))`` with ``w = 2 pi / period``, the ridge normal
    ``n = (-sin theta, cos theta)`` and ``G`` a Gaussian of ``sigma = sigma_factor * period`` normalised so that
    the filter answers a unit-amplitude sinusoid of its own orientation and period with amplitude 1.

    Returns
    -------
    (kx_cos, kx_sin), (ky_cos, ky_sin) : float32 1-D kernels, with
        ``g = outer(ky_cos, kx_cos) - outer(ky_sin, kx_sin)``.
    """
    sigma = sigma_factor * period
    r = int(np.ceil(2.5 * sigma))
    t = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-(t**2) / (2 * sigma**2))
    g *= np.sqrt(2.0) / g.sum()  # sum of G(x)G(y) = 2 -> response 1 to cos of the tuned frequency
    w = 2 * np.pi / period
    a, b = -w * np.sin(theta), w * np.cos(theta)
    f = np.float32
    return ((g * np.cos(a * t)).astype(f), (g * np.sin(a * t)).astype(f)), (
        (g * np.cos(b * t)).astype(f),
        (g * np.sin(b * t)).astype(f),
    )


def _groups(
    theta: np.ndarray,
    period: np.ndarray,
    active: np.ndarray,
    n_orientations: int,
    n_periods: int,
    pad: int,
) -> list[_Group]:
    """Group the active pixels by quantised (orientation, period) and precompute their filters.

    (Splitting groups further into tiles shrinks the filtered area but, measured, costs more in per-call
    overhead than it saves at these image sizes.)
    """
    h, w = theta.shape
    tbin = np.rint(theta * (n_orientations / np.pi)).astype(np.int32) % n_orientations
    plo, phi = float(period[active].min()), float(period[active].max())
    nb = max(1, min(n_periods, int(np.ceil((phi - plo) / 0.25))))  # bins no narrower than 0.25 px
    pbin = np.clip(((period - plo) / max(phi - plo, 1e-6) * nb).astype(np.int32), 0, nb - 1)
    label = np.where(active, tbin * nb + pbin, -1).ravel()
    flat = np.flatnonzero(label >= 0)
    order = flat[np.argsort(label[flat], kind="stable")]
    lab_sorted = label[order]
    starts = np.flatnonzero(np.r_[True, lab_sorted[1:] != lab_sorted[:-1]])
    ends = np.r_[starts[1:], lab_sorted.size]
    wp = w + 2 * pad
    groups = []
    for s, e in zip(starts, ends, strict=True):
        idx = order[s:e]
        ti, pi_ = divmod(int(lab_sorted[s]), nb)
        ys, xs = np.divmod(idx, w)
        tb = ti * np.pi / n_orientations
        pb = plo + (pi_ + 0.5) * (phi - plo) / nb
        kx, ky = gabor_factors(tb, pb)
        r = (kx[0].size - 1) // 2
        if r > pad:
            raise ValueError(f"Gabor radius {r} exceeds padding {pad}")
        y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
        dst = (ys + pad) * wp + (xs + pad)
        # The crop spans padded rows y0+pad-r .. y1+pad+r; its valid response starts r pixels in.
        cw = (x1 - x0) + 2 * r
        src = (ys - y0 + r) * cw + (xs - x0 + r)
        groups.append(_Group(kx, ky, y0 + pad - r, y1 + pad + r, x0 + pad - r, x1 + pad + r, r, dst, src))
    return groups


def _filter_step(img: np.ndarray, groups: list[_Group], out: np.ndarray) -> None:
    """One space-variant Gabor pass: ``out`` (padded, zeroed) gets each pixel's response of its own bin."""
    flat_out = out.reshape(-1)
    for g in groups:
        crop = img[g.y0 : g.y1, g.x0 : g.x1]
        if not crop.any():
            continue
        resp = cv2.sepFilter2D(crop, cv2.CV_32F, g.kx[0], g.ky[0], borderType=cv2.BORDER_CONSTANT)
        resp -= cv2.sepFilter2D(crop, cv2.CV_32F, g.kx[1], g.ky[1], borderType=cv2.BORDER_CONSTANT)
        flat_out[g.dst] = resp.reshape(-1)[g.src]


def grow_ridges(
    orientation: np.ndarray,
    period: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    *,
    seeds_per_megapixel: float = 800.0,
    n_orientations: int = 24,
    n_periods: int = 4,
    downsample: int | None = None,
    gain: float = 2.0,
    stable_iterations: int = 4,
    max_iterations: int = 60,
    fill_level: float = 0.5,
    fill_fraction: float = 0.99,
    floor: float = 0.01,
) -> np.ndarray:
    """Grow a ridge pattern over ``mask`` by iterative orientation- and frequency-adaptive Gabor filtering.

    Each iteration filters the current image with the Gabor filter of every pixel's own (orientation, period)
    bin, divides the response by its local RMS amplitude (Gaussian window of 0.75 period; floored at
    ``floor`` x its maximum), and clips ``gain * response`` to [-1, 1]. Iteration stops ``stable_iterations``
    passes after the foreground is filled (>= ``fill_fraction`` of its pixels with a locally averaged ``|I|``
    above ``fill_level``), or after ``max_iterations``.

    Parameters
    ----------
    orientation : ndarray of float, shape (H, W)
        Ridge orientation in radians in [0, pi), image axes.
    period : ndarray of float, shape (H, W)
        Ridge period in pixels (> 2 * downsample).
    mask : ndarray of bool, shape (H, W)
        Fingertip foreground; ridges are grown over it plus a margin of one period.
    rng : numpy.random.Generator
        Draws the seed spots (count ``max(2, round(seeds_per_megapixel * area_px / 1e6))``, each a single
        pixel of random sign at a random foreground position).
    seeds_per_megapixel : float, default 800
        Seed density over the foreground area at full resolution.
    n_orientations : int, default 24
        Orientation bins over [0, pi) (16–36 in SFinGe practice).
    n_periods : int, default 4
        Maximum number of period bins (bins are at least 0.25 px wide).
    downsample : int, optional
        Growth-grid decimation; default 2 when the smallest period is >= 7 px, else 1.
    gain : float, default 2
        Saturation gain after the per-iteration normalisation (larger: more binary ridges).
    stable_iterations : int, default 4
        Extra iterations after the foreground is filled.
    max_iterations : int, default 60
        Hard cap on the number of iterations.
    fill_level, fill_fraction : float, default 0.5, 0.99
        Fill criterion (see above).
    floor : float, default 0.01
        Relative floor of the normalising amplitude (keeps not-yet-reached pixels at zero).

    Returns
    -------
    ndarray of float32, shape (H, W), in [-1, 1]: +1 at ridge centres, -1 at valley centres, 0 outside
    ``mask``.
    """
    orientation = np.asarray(orientation, np.float32)
    period = np.asarray(period, np.float32)
    mask = np.asarray(mask, bool)
    if orientation.shape != period.shape or orientation.shape != mask.shape or orientation.ndim != 2:
        raise ValueError(
            f"orientation, period and mask must be 2-D of one shape, got {orientation.shape}, "
            f"{period.shape}, {mask.shape}"
        )
    if not mask.any():
        raise ValueError("mask is empty: nothing to grow ridges on")
    h, w = mask.shape
    pmin = float(period[mask].min())
    if downsample is None:
        downsample = 2 if pmin >= 7.0 else 1
    if pmin <= 2.0 * downsample:
        raise ValueError(f"period must exceed {2 * downsample} px (Nyquist on the growth grid), min is {pmin}")

    # Growth grid: decimated fields (orientation and period are smooth away from singular points).
    d = downsample
    th = orientation[::d, ::d]
    pe = period[::d, ::d] / d
    margin = int(np.ceil(float(period.max())))
    grown = cv2.dilate(mask.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * margin + 1,) * 2))
    active = grown[::d, ::d].astype(bool)
    hs, ws = th.shape
    pad = int(np.ceil(2.5 * 0.45 * float(pe[active].max()))) + 1
    groups = _groups(th, pe, active, n_orientations, n_periods, pad)

    img = np.zeros((hs + 2 * pad, ws + 2 * pad), np.float32)
    inner = (slice(pad, pad + hs), slice(pad, pad + ws))
    fg = np.flatnonzero(mask[::d, ::d].ravel())
    n_seeds = max(2, int(round(seeds_per_megapixel * float(mask.sum()) / 1e6)))
    pick = rng.choice(fg, size=min(n_seeds, fg.size), replace=False)
    signs = rng.choice(np.array([-1.0, 1.0], np.float32), size=pick.size)
    seeds = np.zeros(hs * ws, np.float32)
    seeds[pick] = signs
    img[inner] = seeds.reshape(hs, ws)

    active_f = active.astype(np.float32)
    fg_small = mask[::d, ::d]
    n_fg = float(fg_small.sum())
    sigma_env = 0.75 * float(np.median(pe[active]))
    resp = np.zeros_like(img)
    filled_at = None
    for it in range(max_iterations):
        resp[...] = 0.0
        _filter_step(img, groups, resp)
        r = resp[inner]
        # Normalisation: divide by the local RMS amplitude (window ~ one period), so weak responses at the
        # growing fronts reach full contrast at once; the floor keeps numerical dust in empty areas at zero.
        env = np.sqrt(cv2.GaussianBlur(r * r, (0, 0), sigma_env))
        peak = float(env.max())
        if peak <= 0:
            raise ValueError("Gabor growth died out (zero response everywhere)")
        r = r / np.maximum(env, np.float32(floor * peak))
        if filled_at is not None and it >= filled_at + stable_iterations:
            break
        img[inner] = np.clip(np.float32(gain) * r, -1.0, 1.0) * active_f
        if filled_at is None:
            level = cv2.GaussianBlur(np.abs(img[inner]), (0, 0), sigma_env)
            if np.count_nonzero((level > fill_level) & fg_small) >= fill_fraction * n_fg:
                filled_at = it
    # ``r`` is the last unclipped, band-limited response: interpolate it to the full canvas.
    final = r * active_f
    if d > 1:
        # Sample i of the growth grid is canvas pixel d * i: map canvas (x, y) to grid (x / d, y / d).
        to_grid = np.array([[1.0 / d, 0.0, 0.0], [0.0, 1.0 / d, 0.0]])
        final = cv2.warpAffine(final, to_grid, (w, h), flags=cv2.INTER_CUBIC | cv2.WARP_INVERSE_MAP)
    # A locally normalised sinusoid peaks at sqrt(2): scale ridge / valley centres to +-1.
    final = np.clip(final * np.float32(1.0 / np.sqrt(2.0)), -1.0, 1.0)
    return np.where(mask, final, np.float32(0.0)).astype(np.float32)
