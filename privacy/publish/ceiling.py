"""The largest meaningful ε of each publication mechanism: above it the noise no longer hides one grey level.

A release at ε beyond :func:`largest_meaningful_epsilon` still carries the mechanism's formal ε-DP statement, but
its noise has fallen below the resolution of the data: for image mechanisms the Laplace scale of the noise in the
released image is below **one grey level** for every pixel it covers, for point sets the noise on every group sum is
below **one grid cell** of the Hilbert curve. Such a release is (up to rounding) the input itself, and an
"ε = 1e300" guarantee says nothing a reader can use. :func:`check_meaningful` refuses those ε unless the caller
asks for them explicitly (``fedprint publish --allow-large-epsilon``).

Every ceiling depends only on the mechanism, the variant, the public image shape and the options — never on the
pixels — so the refusal reveals nothing about the image. Where the noise scale depends on data (the paper
variants of FIP / EMK / BEMK / SWP) or on a data-dependent choice (EMK's k, KLAP's mask size Q), the ceiling uses
the largest value that quantity can take, so an ε is refused only when the noise is below one grey level for
*every* image of that shape.

Per mechanism (m × n image, N(k) coefficients of the sound Fourier block, :func:`fourier.block_size`):

* ``lap`` / ``klap`` / ``rklap`` / ``dp-rklap`` sound: Lap(255 / ε_pixels) per pixel, ε_pixels <= ε − ε_order:
  ceiling 255 + ε_order. Paper: Lap(Q / ε) with Q <= m n protected pixels: ceiling m n.
* ``swp`` sound: Lap(255 / ε_pub), ε_pub = (1 − test_fraction) ε: ceiling 255 / (1 − test_fraction);
  ``sort-swp``: ε_pub = (1 − sort_fraction − test_fraction) ε. Paper: Lap(ΔQ / ε_i), ΔQ <= 255, ε_i <= ε: 255.
* ``fip`` / ``emk`` / ``bemk`` sound: orthonormal block with Lap(b) per real and imaginary part, b =
  √2 N 255 / (√(mn) ε₂); the image-domain noise per pixel has RMS LE(k) / √(mn)
  (:func:`fourier.sound_noise_error`), a Laplace scale of LE / √(2mn). Ceiling: ε₂ where that scale is 1, at the
  caller's k (FIP) or at the largest k (EMK / BEMK: their choice of k is random), ε = ε₂ / (1 − select_fraction).
  Paper: Lap(√k Δ₂W / ε) on k² coefficients of the unnormalised inverse (per-pixel scale k √k Δ₂W / ε), Δ₂W <=
  255 √m (a column of m pixels): ceiling k √k 255 √m at the largest k.
* ``pointset``: discrete Laplace of scale >= L / ε_point cells on every group sum, L = 2^(d · order): ceiling L per
  point (protect="minutia"), N L for a finger-level release of N points (ε_point = ε / N).
"""

from __future__ import annotations

import math

import numpy as np

from fedprint.privacy.publish import fourier
from fedprint.privacy.publish.primitives import PIXEL_RANGE

#: Option that lifts the refusal (the CLI's spelling; the library argument is ``allow_large_epsilon``).
ALLOW_OPTION = "--allow-large-epsilon"


def _fourier_sound(shape: tuple[int, int], k: int, half: bool) -> float:
    """ε₂ at which the sound Fourier release's per-pixel noise (as a Laplace scale) is one grey level."""
    rms_at_1 = float(fourier.sound_noise_error(shape, k, 1.0, half)) / math.sqrt(shape[0] * shape[1])
    return rms_at_1 / math.sqrt(2.0)


def largest_meaningful_epsilon(mechanism: str, variant: str, shape: tuple[int, int], options: dict | None = None
                               ) -> tuple[float, str]:
    """(ε ceiling, what falls below the data's resolution above it) for one release (module docstring).

    Parameters
    ----------
    mechanism : str
        A name of :func:`fedprint.privacy.publish.registry.known`.
    variant : {"sound", "paper"}
    shape : (int, int)
        The image shape (public).
    options : dict, optional
        The mechanism options of the release (``k``, ``select_fraction``, ``test_fraction``, ``sort_fraction``,
        ``epsilon_order``, ``protect``, ``size``, ``order``, ``direction``); defaults as the mechanisms' own.

    Returns
    -------
    (float, str)
        The ceiling and a short reason naming the noise and the resolution.

    Examples
    --------
    >>> largest_meaningful_epsilon("lap", "sound", (256, 256))[0]
    255.0
    >>> largest_meaningful_epsilon("lap", "paper", (256, 256))[0]
    65536.0
    """
    o = dict(options or {})
    m, n = int(shape[0]), int(shape[1])
    grey = "the noise scale falls below one grey level"
    if mechanism in ("lap", "klap", "rklap", "dp-rklap"):
        if variant == "paper":
            return float(m * n), f"{grey} (Lap(Q / ε) with at most Q = m·n = {m * n} protected pixels)"
        eps_order = float(o.get("epsilon_order") or 0.0)
        return PIXEL_RANGE + eps_order, f"{grey} (Lap(255 / ε) on every protected pixel)"
    if mechanism in ("swp", "sort-swp"):
        if variant == "paper":
            return PIXEL_RANGE, f"{grey} (Lap(ΔQ / ε_i), ΔQ <= 255, ε_i <= ε)"
        share = 1.0 - float(o.get("test_fraction", 0.2))
        if mechanism == "sort-swp":
            share -= float(o.get("sort_fraction", 0.1))
        if not share > 0:
            raise ValueError(f"{mechanism}: the budget fractions leave no ε for the published values")
        return PIXEL_RANGE / share, f"{grey} (Lap(255 / ε_pub), ε_pub = {share:g}·ε)"
    if mechanism in ("fip", "emk", "bemk"):
        half = mechanism == "bemk"
        if variant == "paper":
            k = int(o["k"]) if mechanism == "fip" and o.get("k") is not None else min(m, n)
            return k * math.sqrt(k) * PIXEL_RANGE * math.sqrt(m), \
                f"{grey} (Lap(√k·Δ₂W / ε) on k² coefficients, Δ₂W <= 255·√m, k = {k})"
        if mechanism == "fip":
            k = int(o["k"]) if o.get("k") is not None else fourier._default_k((m, n))
            return _fourier_sound((m, n), k, half), f"{grey} in the image (sound FIP block, k = {k})"
        k = fourier.max_k((m, n))
        share = 1.0 - float(o.get("select_fraction", 0.1))
        return _fourier_sound((m, n), k, half) / share, \
            f"{grey} in the image even at the largest block (k = {k}; ε₂ = {share:g}·ε)"
    if mechanism == "pointset":
        d = 3 if o.get("direction", True) else 2
        cells = float(2 ** (d * int(o.get("order", 10))))
        if o.get("protect") == "finger":
            size = int(o.get("size") or 32)
            return size * cells, (f"the noise on every group sum falls below one grid cell (L = 2^{d}·order cells, "
                                  f"ε / {size} per point)")
        return cells, "the noise on every group sum falls below one grid cell (discrete Lap(L / ε), L = 2^(d·order))"
    raise ValueError(f"mechanism: no ε ceiling is stated for {mechanism!r}")


def check_meaningful(mechanism: str, variant: str, epsilon: float, shape: tuple[int, int],
                     options: dict | None = None, *, allow_large_epsilon: bool = False) -> float:
    """``epsilon`` if it is at most the mechanism's ceiling (or ``allow_large_epsilon``), else a ValueError naming
    the ceiling and why; returns the ceiling."""
    ceiling, why = largest_meaningful_epsilon(mechanism, variant, shape, options)
    if not allow_large_epsilon and not (np.isfinite(epsilon) and epsilon <= ceiling):
        raise ValueError(f"epsilon {epsilon:g}: above {ceiling:.6g}, {mechanism} ({variant}) on a {shape[0]}x"
                         f"{shape[1]} image releases the input unchanged ({why}); its ε-DP statement would "
                         f"protect nothing. Use a smaller ε, or pass {ALLOW_OPTION} to release anyway")
    return ceiling
