"""Shared DP primitives for the image-publication mechanisms: Laplace noise, the exponential mechanism, and the
one definition of neighbouring images used by every *sound* variant (Zhang et al. 2018; Liu et al. 2021).

ε semantics (used by ``fourier.py`` and ``swp.py``): ``epsilon`` is the total budget of one release of one image;
two images are neighbours when they have the same shape and differ in the value of one pixel (values in [0, 255]).
A one-pixel change therefore moves the image by at most 255 in every norm (L1, L2, L∞). Guarantees under other
relations follow by group privacy (e.g. Zhang et al. 2018's one-column relation: m pixels → m·ε).
"""

from __future__ import annotations

import numpy as np

PIXEL_NEIGHBOURS = "images of the same shape differing in the value of one pixel, values in [0, 255]"
PIXEL_RANGE = 255.0  # worst-case change of one pixel: the L1 / L2 / L∞ sensitivity of the identity on one pixel


def laplace(rng: np.random.Generator, scale: float, size: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Centred Laplace noise Lap(scale) of the given size (scale >= 0; 0 gives zeros)."""
    if not np.isfinite(scale) or scale < 0:
        raise ValueError(f"laplace: scale must be finite and >= 0, got {scale}")
    return rng.laplace(0.0, scale, size)


#: Mironov 2012's bound on the floating-point error of the snapping mechanism, per unit of clamp bound B.
SNAP_SLACK = 2.0 ** -49


def snapping_laplace(rng: np.random.Generator, values: np.ndarray, scale: np.ndarray | float,
                     bound: np.ndarray | float) -> np.ndarray:
    """Laplace noise released on a grid: Mironov's snapping mechanism, clamp_B(round_Λ(clamp_B(v) + Lap(λ))).

    Plain ``v + rng.laplace(...)`` in float64 leaks ``v`` through the low-order bits of the result (the set of
    doubles a noisy value can take depends on ``v``; Mironov 2012, Sec. 3), which voids ε-DP. Snapping to a grid
    of Λ = 2^⌈log2 λ⌉ (a power of two ≥ the noise scale) and clamping to [−B, B] removes that channel.

    Guarantee (Mironov 2012, Thm 1): for a query of sensitivity Δ with values in [−B, B] and λ < B < 2^46·λ, the
    output is (Δ/λ + 2^−49·B/λ)-DP. For a vector released coordinate by coordinate with L1 sensitivity Δ, the
    privacy losses add up over the coordinates that change: ε ≤ (Δ + 2^−49·Σ_i B_i)/min_i λ_i. Callers shrink
    their ε by the factor 1 + 2^−49·Σ_i B_i/Δ so the stated ε holds exactly (see `snapping_epsilon`).

    Parameters
    ----------
    values : ndarray
        True query values, each in [−bound, bound].
    scale : float or ndarray
        Laplace scale λ per value (> 0).
    bound : float or ndarray
        Clamp bound B per value, > λ.

    References
    ----------
    I. Mironov, "On Significance of the Least Significant Bits for Differential Privacy", CCS 2012.
    """
    scale = np.broadcast_to(np.asarray(scale, np.float64), np.shape(values))
    bound = np.broadcast_to(np.asarray(bound, np.float64), np.shape(values))
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0) and np.all(bound > scale)):
        raise ValueError("snapping_laplace: need finite scales > 0 and bounds > scales")
    grid = 2.0 ** np.ceil(np.log2(scale))
    noisy = np.clip(values, -bound, bound) + rng.laplace(0.0, scale)
    edge = np.floor(bound / grid) * grid  # the largest grid point inside [−B, B]: outputs stay on the grid
    return np.clip(np.round(noisy / grid) * grid, -edge, edge)


def snapping_epsilon(epsilon: float, bounds: np.ndarray, sensitivity: float = 1.0) -> float:
    """The ε to calibrate λ with so that `snapping_laplace` is ``epsilon``-DP including its 2^−49 slack."""
    return float(epsilon / (1.0 + SNAP_SLACK * float(np.sum(bounds)) / sensitivity))


def exponential_mechanism_logits(scores: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    """Normalised log-probabilities of the exponential mechanism Pr[i] ∝ exp(ε·score_i / (2Δu)) (Zhang 2018, Eq. 4)."""
    if sensitivity <= 0 or not np.isfinite(sensitivity):
        raise ValueError(f"exponential mechanism: sensitivity must be finite and > 0, got {sensitivity}")
    z = epsilon * np.asarray(scores, np.float64) / (2.0 * sensitivity)
    return z - (z.max() + np.log(np.exp(z - z.max()).sum()))


def exponential_mechanism(rng: np.random.Generator, scores: np.ndarray, epsilon: float, sensitivity: float) -> int:
    """Index drawn with Pr[i] ∝ exp(ε·score_i / (2Δu)); ε-DP when every score has sensitivity <= Δu.

    Drawn by the Gumbel-max trick (argmax of logits + Gumbel noise), which has exactly this distribution.
    """
    logits = exponential_mechanism_logits(scores, epsilon, sensitivity)
    return int(np.argmax(logits + rng.gumbel(size=logits.shape)))


def exponential_ordering(rng: np.random.Generator, scores: np.ndarray, epsilon: float,
                         sensitivity: float) -> np.ndarray:
    """Order of all items by repeated exponential-mechanism draws without replacement, each with ``epsilon``.

    Equivalent (Gumbel-top-k) to drawing the first item with Pr ∝ exp(ε·score/(2Δu)), removing it, and repeating.
    """
    logits = exponential_mechanism_logits(scores, epsilon, sensitivity)
    return np.argsort(-(logits + rng.gumbel(size=logits.shape)), kind="stable")
