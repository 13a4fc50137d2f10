"""Shared DP primitives for the publication mechanisms: Laplace noise, the exact discrete Laplace sampler (point
sets), the exponential mechanism, and the one definition of neighbouring images used by every *sound* image
variant (Zhang et al. 2018; Liu et al. 2021).

ε semantics (used by ``fourier.py`` and ``swp.py``): ``epsilon`` is the total budget of one release of one image;
two images are neighbours when they have the same shape and differ in the value of one pixel (values in [0, 255]).
A one-pixel change therefore moves the image by at most 255 in every norm (L1, L2, L∞). Guarantees under other
relations follow by group privacy (e.g. Zhang et al. 2018's one-column relation: m pixels → m·ε).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

PIXEL_NEIGHBOURS = "images of the same shape differing in the value of one pixel, values in [0, 255]"
PIXEL_RANGE = 255.0  # worst-case change of one pixel: the L1 / L2 / L∞ sensitivity of the identity on one pixel


def laplace(rng: np.random.Generator, scale: float, size: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Centred Laplace noise Lap(scale) of the given size (scale >= 0; 0 gives zeros)."""
    if not np.isfinite(scale) or scale < 0:
        raise ValueError(f"laplace: scale must be finite and >= 0, got {scale}")
    return rng.laplace(0.0, scale, size)


class _Bytes:
    """Random bytes from ``rng``, fetched 256 at a time (one ``rng.bytes`` call costs ~20 µs), used in order."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.buf, self.pos = rng, b"", 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            self.buf, self.pos = self.buf[self.pos:] + self.rng.bytes(max(256, n)), 0
        self.pos += n
        return self.buf[self.pos - n:self.pos]


def _uniform_below(src: _Bytes, n: int) -> int:
    """An exactly uniform integer in [0, n) (Python int, any size): rejection sampling on whole random bytes."""
    if n == 1:
        return 0
    bits = (n - 1).bit_length()
    nbytes, excess = (bits + 7) // 8, -bits % 8
    while True:
        u = int.from_bytes(src.take(nbytes), "little") >> excess
        if u < n:
            return u


def _bernoulli(src: _Bytes, num: int, den: int) -> bool:
    """Exactly Bernoulli(num / den), 0 <= num <= den."""
    return _uniform_below(src, den) < num


def _bernoulli_exp(src: _Bytes, num: int, den: int) -> bool:
    while num > den:
        if not _bernoulli_exp(src, 1, 1):
            return False
        num -= den
    k = 1
    while _bernoulli(src, num, den * k):
        k += 1
    return k % 2 == 1


def bernoulli_exp(rng: np.random.Generator, num: int, den: int) -> bool:
    """Exactly Bernoulli(exp(−num/den)) for integers num >= 0, den >= 1 (Canonne, Kamath & Steinke 2020, Alg. 1).

    For γ = num/den in [0, 1]: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, ... until the first A_k = 0 at k = K;
    return K odd. For γ > 1: ⌊γ⌋ independent Bernoulli(e^−1) and one Bernoulli(e^−(γ−⌊γ⌋)), all true.
    Only integer arithmetic and uniform integers are used: no floating point.
    """
    return _bernoulli_exp(_Bytes(rng), num, den)


def discrete_laplace(rng: np.random.Generator, scale: Fraction | int | float) -> int:
    """One exact draw of the discrete Laplace law on the integers: Pr[Y = y] ∝ exp(−|y| / scale).

    Canonne, Kamath & Steinke 2020, Alg. 2, with scale = t/s as an exact fraction (a float is converted exactly):
    U ~ uniform{0..t−1} accepted with probability e^{−U/t}; V ~ Geometric(1 − e^{−1}); X = U + t·V is
    geometric with Pr[X = x] ∝ e^{−x/t}; Y = ⌊X/s⌋ has Pr ∝ e^{−y·s/t}; a fair sign, rejecting "−0".

    Exact: every step is integer arithmetic on uniform integers drawn from ``rng``'s random bytes, so the output
    law is the discrete Laplace law itself — unbounded support, no rounding and no floating-point artefacts
    (contrast ``rng.laplace``, a 53-bit float transform whose ``|noise|`` never exceeds 36.04·scale, and Mironov's
    snapping, which is then only (ε, δ)-DP with δ > 0). Added to an integer query of L1 sensitivity Δ with
    scale >= Δ/ε, it is ε-DP with δ = 0 (the ratio of the two laws at any output is at most e^{Σ|Δ_i|/scale}).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the random bytes (OS entropy in every user path; tests inject a seeded one).
    scale : Fraction, int or float
        The scale b > 0 (in units of the integer grid).

    References
    ----------
    C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, Alg. 1–2.
    """
    b = Fraction(scale)
    if not b > 0:
        raise ValueError(f"discrete_laplace: scale must be > 0, got {scale!r}")
    t, s = b.numerator, b.denominator
    src = _Bytes(rng)
    while True:
        u = _uniform_below(src, t)
        if not _bernoulli_exp(src, u, t):
            continue
        v = 0
        while _bernoulli_exp(src, 1, 1):
            v += 1
        y = (u + t * v) // s
        if _bernoulli(src, 1, 2):
            if y == 0:
                continue
            return -y
        return y


def discrete_laplace_pmf(y: np.ndarray, scale: Fraction | int | float) -> np.ndarray:
    """Pr[Y = y] of the discrete Laplace law of `discrete_laplace`: tanh(1/(2b))·e^{−|y|/b} (float, for tests)."""
    b = float(scale)
    return np.tanh(0.5 / b) * np.exp(-np.abs(np.asarray(y, np.float64)) / b)


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
