"""Master orientation field: singular-point placement per class and the zero-pole model.

The ridge orientation of a master fingerprint follows the Sherlock–Monro zero-pole model (Sherlock & Monro 1993)
with the piecewise-linear corrections of Vizcaya & Gerhardt (1996), as used by SFinGe (Cappelli, Maio, Maltoni,
ICPR 2000; Handbook of Fingerprint Recognition, ch. "Synthetic fingerprint generation"):

    theta(z) = theta_inf + 1/2 [ sum_c g_c(arg(z - z_c)) - sum_d g_d(arg(z - z_d)) ]          (SM/VG eq.)

with ``z = x + i y`` in image axes (x right, y down). Cores carry the + sign (Poincare index +1/2: a single
ridge line runs radially out of a core, along the loop axis) and deltas the - sign (index -1/2: three radial
lines, the triradius). Flipping the y axis negates both ``theta`` and every ``arg``, so the formula reads the
same in image and in mathematical axes. Arches have no singular point and use the SFinGe arch model
``theta = -atan(max(0, k - k y/H) cos(pi x/W))`` instead. A smooth low-frequency random field is added to every
class so that two masters of one class never look alike.

All angles are ridge orientations in radians in [0, pi), image axes (x right, y down): a ridge running from
lower-left to upper-right has an orientation in (pi/2, pi).
"""

from __future__ import annotations

import cv2
import numpy as np

PATTERNS = ("arch", "tented_arch", "left_loop", "right_loop", "whorl")

#: Number of control points of a Vizcaya–Gerhardt correction function (their paper uses 8 sectors).
N_CONTROL = 8


def smooth_random_field(
    shape: tuple[int, int],
    rng: np.random.Generator,
    *,
    wavelength_px: float,
    n_waves: int = 6,
) -> np.ndarray:
    """A smooth zero-mean random field with unit standard deviation (approximately).

    The field is a sum of ``n_waves`` plane cosines of random direction, random phase and wavelength drawn
    uniformly in ``[wavelength_px, 2 * wavelength_px]``; it is evaluated on a coarse grid (8 px) and
    interpolated, which is exact enough for such low frequencies and keeps large canvases cheap.

    Parameters
    ----------
    shape : (int, int)
        ``(H, W)`` of the output in pixels.
    rng : numpy.random.Generator
        Source of randomness.
    wavelength_px : float
        Shortest wavelength of the field in pixels (> 0).
    n_waves : int, default 6
        Number of plane waves summed.

    Returns
    -------
    ndarray of float32, shape (H, W)
    """
    h, w = shape
    if wavelength_px <= 0:
        raise ValueError(f"wavelength_px must be > 0, got {wavelength_px}")
    step = 8
    gh, gw = h // step + 2, w // step + 2
    yy, xx = np.mgrid[0:gh, 0:gw].astype(np.float32) * step
    ang = rng.uniform(0.0, np.pi, n_waves)
    lam = rng.uniform(wavelength_px, 2.0 * wavelength_px, n_waves)
    phase = rng.uniform(0.0, 2.0 * np.pi, n_waves)
    field = np.zeros((gh, gw), np.float32)
    for a, la, ph in zip(ang, lam, phase, strict=True):
        field += np.cos(2 * np.pi / la * (np.cos(a) * xx + np.sin(a) * yy) + ph).astype(np.float32)
    field *= np.float32(np.sqrt(2.0 / n_waves))
    # The coarse grid covers (gh-1)*step >= h pixels; resize then crop keeps the 8-px grid spacing.
    big = cv2.resize(field, ((gw - 1) * step + 1, (gh - 1) * step + 1), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(big[:h, :w])


def vizcaya_gerhardt(alpha: np.ndarray, control: np.ndarray) -> np.ndarray:
    """Piecewise-linear Vizcaya–Gerhardt correction g(alpha) of a singular point's argument.

    ``g`` interpolates the control values ``g(alpha_i) = alpha_i + control[i]`` at the sector borders
    ``alpha_i = -pi + 2 pi i / N`` (i = 0..N, with ``control[N] = control[0]`` so that g(alpha + 2pi) =
    g(alpha) + 2 pi). ``control = 0`` gives the identity, i.e. the plain Sherlock–Monro model.

    Parameters
    ----------
    alpha : ndarray
        Angles in radians in [-pi, pi].
    control : ndarray, shape (N,)
        Perturbations of the N control values in radians; keep ``|control| < pi / N`` so that g stays
        monotonic (no spurious singular points).

    Returns
    -------
    ndarray, same shape as ``alpha``.
    """
    control = np.asarray(control, dtype=np.float64)
    n = control.size
    knots = -np.pi + 2.0 * np.pi * np.arange(n + 1) / n
    values = knots + np.append(control, control[0])
    return np.interp(alpha, knots, values).astype(alpha.dtype, copy=False)


def zero_pole_orientation(
    shape: tuple[int, int],
    cores: np.ndarray,
    deltas: np.ndarray,
    *,
    theta_inf: float = 0.0,
    core_control: np.ndarray | None = None,
    delta_control: np.ndarray | None = None,
) -> np.ndarray:
    """Sherlock–Monro orientation with Vizcaya–Gerhardt corrections (SM/VG eq. in the module docstring).

    Parameters
    ----------
    shape : (int, int)
        ``(H, W)`` in pixels.
    cores, deltas : ndarray, shape (k, 2)
        Singular points as (x, y) pixel coordinates; may lie outside the canvas.
    theta_inf : float, default 0
        Far-field orientation in radians (0 = horizontal ridges).
    core_control, delta_control : ndarray, shape (k, N_CONTROL), optional
        Vizcaya–Gerhardt control perturbations per singular point (None: plain Sherlock–Monro).

    Returns
    -------
    ndarray of float32, shape (H, W), orientation in [0, pi).
    """
    h, w = shape
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    theta = np.full((h, w), theta_inf, np.float32)
    for points, control, sign in ((cores, core_control, 0.5), (deltas, delta_control, -0.5)):
        points = np.asarray(points, float).reshape(-1, 2)
        for i, (px, py) in enumerate(points):
            alpha = np.arctan2(y - np.float32(py), x - np.float32(px))
            if control is not None:
                alpha = vizcaya_gerhardt(alpha, control[i])
            theta += np.float32(sign) * alpha
    return np.mod(theta, np.pi).astype(np.float32)


def arch_orientation(shape: tuple[int, int], box: tuple[float, float, float, float], k: float) -> np.ndarray:
    """SFinGe arch model ``theta = -atan(max(0, k - k y'/h) cos(pi x'/w))`` in image axes.

    ``x'`` and ``y'`` are measured from the left and top of ``box``; ridges rise towards the box centre on
    the left, fall on the right, and flatten towards the bottom of the box.

    Parameters
    ----------
    shape : (int, int)
        ``(H, W)`` in pixels.
    box : (x0, y0, w, h)
        Region of the fingertip the arch spans, in pixels.
    k : float
        Arch strength (> 0): the largest ridge slope is ``atan(k)``.

    Returns
    -------
    ndarray of float32, shape (H, W), orientation in [0, pi).
    """
    h_img, w_img = shape
    x0, y0, bw, bh = box
    y, x = np.mgrid[0:h_img, 0:w_img].astype(np.float32)
    xr = np.clip((x - x0) / bw, 0.0, 1.0)
    amp = np.maximum(0.0, k - k * (y - y0) / bh)
    # y points down: a ridge rising to the right has negative slope dy/dx.
    return np.mod(-np.arctan(amp * np.cos(np.pi * xr)), np.pi).astype(np.float32)


def place_singular_points(
    pattern: str,
    box: tuple[float, float, float, float],
    rng: np.random.Generator,
    *,
    canvas: tuple[int, int],
) -> tuple[np.ndarray, np.ndarray]:
    """Random cores and deltas for a fingerprint class, in pixels at 500 dpi.

    Cores sit near the middle of the fingertip (40–55 % of its height); distances between singular points
    are physical (core–delta about 90–150 px, i.e. roughly 10–15 ridges at 500 dpi) and do not scale with the
    canvas. Deltas are kept inside the canvas (they may fall outside the silhouette, as on real plain prints).

    Parameters
    ----------
    pattern : str
        One of :data:`PATTERNS`.
    box : (x0, y0, w, h)
        Bounding box of the fingertip silhouette in pixels.
    rng : numpy.random.Generator
        Source of randomness.
    canvas : (int, int)
        ``(H, W)`` of the canvas; singular points are clipped to it (with a 4 px margin).

    Returns
    -------
    cores, deltas : ndarray of float64, shape (k, 2), as (x, y)
        arch: 0 / 0, tented_arch, left_loop, right_loop: 1 / 1, whorl: 2 / 2.
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    x0, y0, bw, bh = box
    cx = x0 + bw * rng.uniform(0.42, 0.58)
    cy = y0 + bh * rng.uniform(0.40, 0.52)
    if pattern == "arch":
        cores, deltas = np.zeros((0, 2)), np.zeros((0, 2))
    elif pattern == "tented_arch":
        d = rng.uniform(70.0, 120.0)
        tilt = rng.normal(0.0, 0.12)
        cores = np.array([[cx, cy]])
        deltas = np.array([[cx + d * np.sin(tilt), cy + d * np.cos(tilt)]])
    elif pattern in ("left_loop", "right_loop"):
        side = 1.0 if pattern == "left_loop" else -1.0  # left loop: delta to the right of the core
        cx = x0 + bw * (0.5 - side * rng.uniform(0.0, 0.1))
        cores = np.array([[cx, cy]])
        deltas = np.array([[cx + side * rng.uniform(60.0, 110.0), cy + rng.uniform(80.0, 130.0)]])
    else:  # whorl: two cores around the centre, two deltas below-left and below-right
        sep = rng.uniform(14.0, 40.0)
        ang = np.pi / 2 + rng.normal(0.0, 0.35)
        off = 0.5 * sep * np.array([np.cos(ang), np.sin(ang)])
        cores = np.array([[cx - off[0], cy - off[1]], [cx + off[0], cy + off[1]]])
        dy = rng.uniform(70.0, 120.0, 2)
        dx = rng.uniform(80.0, 130.0, 2)
        deltas = np.array([[cx - dx[0], cy + dy[0]], [cx + dx[1], cy + dy[1]]])
    h, w = canvas
    for pts in (cores, deltas):
        if pts.size:
            pts[:, 0] = np.clip(pts[:, 0], 4.0, w - 5.0)
            pts[:, 1] = np.clip(pts[:, 1], 4.0, h - 5.0)
    return cores.astype(np.float64), deltas.astype(np.float64)


def orientation_field(
    pattern: str,
    shape: tuple[int, int],
    cores: np.ndarray,
    deltas: np.ndarray,
    box: tuple[float, float, float, float],
    rng: np.random.Generator,
    *,
    correction_rad: float = 0.12,
) -> np.ndarray:
    """The master orientation field of one finger.

    Zero-pole model with random Vizcaya–Gerhardt corrections (each control value perturbed uniformly within
    +-0.3 rad, below pi/8 so that no singular point is added) for classes with singular points, the arch
    model (strength ``k`` uniform in [0.8, 2.0]) for arches, then a smooth random correction field of
    standard deviation ``correction_rad`` (wavelength >= 1.2 x the fingertip height) on top.

    Parameters
    ----------
    pattern : str
        One of :data:`PATTERNS`.
    shape : (int, int)
        ``(H, W)`` in pixels.
    cores, deltas : ndarray, shape (k, 2)
        Singular points (x, y) from :func:`place_singular_points`.
    box : (x0, y0, w, h)
        Bounding box of the fingertip silhouette.
    rng : numpy.random.Generator
        Source of randomness.
    correction_rad : float, default 0.12
        Standard deviation of the low-frequency random orientation correction in radians.

    Returns
    -------
    ndarray of float32, shape (H, W), orientation in [0, pi).
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    if pattern == "arch":
        x0, y0, bw, bh = box
        top = y0 + bh * rng.uniform(0.05, 0.2)
        theta = arch_orientation(shape, (x0, top, bw, bh * rng.uniform(0.6, 0.9)), rng.uniform(0.8, 2.0))
    else:
        cc = rng.uniform(-0.3, 0.3, (len(cores), N_CONTROL))
        dc = rng.uniform(-0.3, 0.3, (len(deltas), N_CONTROL))
        theta = zero_pole_orientation(
            shape, cores, deltas, theta_inf=rng.normal(0.0, 0.05), core_control=cc, delta_control=dc
        )
    noise = smooth_random_field(shape, rng, wavelength_px=1.2 * box[3])
    theta = theta + np.float32(correction_rad) * noise
    return np.mod(theta, np.float32(np.pi)).astype(np.float32)
