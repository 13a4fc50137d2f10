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
