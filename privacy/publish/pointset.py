"""DP point-set publication (Fang 2013, Fang's thesis Ch. 4) applied to a fingerprint's minutiae set.

Mechanism (thesis Sec. 4.3, steps A1–A3 and B1–B2):

A1. Normalise every minutia to the unit cube — ``x / W``, ``y / H`` (image size, or a declared ``domain``) and,
    by default, ``direction / 2π`` as a third coordinate — quantise to a grid of ``2**order`` cells per axis and
    map each point to t ∈ [0, 1) by its position on a ``d``-dimensional Hilbert curve (Sec. 4.2.2), t = h / 2^(d·order).
A2. Sort the n values and split the sorted sequence into g = ⌊n / k⌋ groups of consecutive values (sizes k or
    k + 1 when k does not divide n; the thesis assumes it does).
A3. Release the group sums with noise. Everything is done on the integer grid: point i has Hilbert index
    h_i ∈ [0, L), L = 2^(d·order), the group sums of the sorted h are integers, and group i gets exact discrete
    Laplace noise (:func:`fedprint.privacy.publish.primitives.discrete_laplace`, Canonne, Kamath & Steinke 2020) of
    scale
    L/ε cells (*sound*: Lap(1/ε) on the sum of t-values) or ``L·|h_i|/(kε)`` cells (*paper*: the thesis's
    Lap(1/(kε)) on every mean). The means are the noisy sums divided by ``L·|h_i|`` (public).
B1. Post-process: weighted isotonic regression (PAVA, weights = group sizes) of the noisy means, clip to [0, 1],
    upsample each value to its group's size.
B2. Map back through the inverse Hilbert curve to cell centres,
    and to pixel / radian units.

Proof (Thm 1 and Cor. 2 of the thesis; they hold as stated for this neighbouring relation). Neighbours: two
minutiae sets of the same public size n that differ in one minutia, replaced by any other point of the domain.
Each minutia is mapped to the grid independently, so the two multisets of Hilbert indices differ in one element,
h_i → A. Sorting then shifts the elements between the old and new rank by one position each, and for *any*
partition H of the ranks the vector of integer group sums changes monotonically (all in the same direction)
with ``‖ΔS_H‖₁ = |A − h_i| ≤ L − 1`` (Cor. 2; the argument only uses the order). The discrete Laplace law of scale
b ≥ L/ε has Pr[y]/Pr[y + Δ] ≤ ``e^{|Δ|/b}`` at every integer y, so the noisy sums are ε-DP with δ = 0 — exactly:
the sampler uses integer arithmetic on uniform random integers only, so no output is unreachable from a
neighbour (numpy's float Laplace never exceeds 36.04 scales, which made an earlier snapped version only
(ε, ~1e−16)-DP). Division by the public ``L·|h_i|``, PAVA, upsampling and the inverse map are post-processing.
The paper variant's noise is at least that for every group (``|h_i| ≥ k``), so it is ε-DP too: the thesis's
privacy claim holds, and the two variants differ only in the *choice of k* (thesis Table 4.1 vs. simulation,
:func:`choose_k`) and in using the exact per-group scale when k does not divide n. The thesis's Table 4.1 k is
too small (e.g. n = 10,000, ε = 1: k = 51, whereas simulation finds k ≈ 160–200 with lower error) and it has no
row below n = 2,000, while a minutiae set has n ≈ 20–100: the paper variant uses the nearest row, capped at n.

Finger level (``protect="finger"``). The unit is a finger: neighbours are *any* two non-empty minutiae sets
D, D' of any sizes n, n'. The set is first resampled to a fixed public size N (:func:`fixed_size`: a random
subset of N, or all n plus N − n random repeats); then the mechanism runs at ε/N per point. For any two
realisations, f(D) and f(D') are N-point sets joined by at most N single-point replacements, so by group
privacy (Dwork & Roth Thm 2.2) the release is (N · ε/N) = ε-DP for that pair, and the released law is a
mixture over f's randomness, each component within e^ε of every component for D' — hence ε-DP for the finger,
n included: nothing in the output, the sidecar or the ledger charge depends on n. (Without the resampling,
running at ε/n would release n exactly and make the ledger's finger-level charge untrue.) Per-minutia
releases (``protect="minutia"``) keep n points and state n as released.

Released exactly (public): N (finger) or n (minutia), the domain (image shape), k, the group sizes, the curve
order and dimension. The minutia *type* column is not released. An image with no minutiae is refused before
the mechanism runs (one bit, stated by :mod:`fedprint.privacy.publish.release`).

Direction choice: direction is the third coordinate of a 3-D Hilbert curve (``direction=True``, default), so
each released point keeps an (x, y, θ) association under one budget ε. Publishing the directions separately
(a sorted 1-D multiset with its own budget) would lose the pairing of a direction with its position and split ε;
``direction=False`` releases (x, y) only on a 2-D curve. Direction is treated as a linear coordinate on
[0, 2π): points near θ = 0 and θ = 2π are far apart on the curve (costs accuracy, not privacy).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.optimize import isotonic_regression

from fedprint.privacy.publish.base import Guarantee, Publication, check_epsilon, check_minutiae, check_variant
from fedprint.privacy.publish.primitives import discrete_laplace

#: Default Hilbert-curve order: 2**10 = 1024 cells per axis (one pixel for images up to 1024 px).
DEFAULT_ORDER = 10

#: Thesis Table 4.1: best group size k for (n, ε), rows n, columns ε.
PAPER_TABLE_N = (2_000, 5_000, 10_000, 20_000, 100_000, 180_000)
PAPER_TABLE_EPS = (0.5, 1.0, 2.0, 3.0)
PAPER_TABLE_K = ((44, 29, 20, 12), (59, 37, 27, 18), (79, 51, 36, 27), (121, 83, 61, 41), (234, 150, 98, 73),
                 (300, 177, 110, 94))

PROTECT = ("minutia", "finger")
#: Largest fixed public size N of a finger-level release: a minutiae set holds 20-100 points, and each of the N points
#: gets ε / N, so N beyond a few thousand is noise only (and 1e9 points would not fit in memory).
MAX_SIZE = 4096

#: Default fixed, public number of released points for ``protect="finger"`` (the median minutiae count our
#: extractor finds on 500 dpi prints is about 25–50; smaller sets are resampled, larger ones subsampled).
DEFAULT_SIZE = 32


# --------------------------------------------------------------------------------------------- Hilbert curve
def _check_order(order: int, dims: int) -> int:
    if isinstance(order, bool) or not isinstance(order, int | np.integer) or not 1 <= order or order * dims > 62:
        raise ValueError(f"order: expected an integer >= 1 with order * dims <= 62, got {order!r} (dims={dims})")
    return int(order)


def hilbert_index(cells: np.ndarray, order: int) -> np.ndarray:
    """Position of integer grid cells along a d-dimensional Hilbert curve (Skilling 2004, vectorised over points).

    Parameters
    ----------
    cells : ndarray of int, shape (n, d)
        Cell coordinates in [0, 2**order), d >= 1 axes.
    order : int
        Bits per axis; the curve visits 2**(d·order) cells.

    Returns
    -------
    ndarray of int64, shape (n,)
        Index in [0, 2**(d·order)); cells with consecutive indices are grid neighbours (distance 1).
    """
    x = np.array(cells, dtype=np.int64, copy=True)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"cells: expected shape (n, d), got {x.shape}")
    d = x.shape[1]
    order = _check_order(order, d)
    if x.size and (x.min() < 0 or x.max() >= 1 << order):
        raise ValueError(f"cells: coordinates must lie in [0, {1 << order}), got [{x.min()}, {x.max()}]")
    # Inverse undo (Skilling's AxestoTranspose), loops over bits and axes only.
    q = 1 << (order - 1)
    while q > 1:
        p = q - 1
        for i in range(d):
            on = (x[:, i] & q) != 0
            x[on, 0] ^= p
            t = np.where(on, 0, (x[:, 0] ^ x[:, i]) & p)
            x[:, 0] ^= t
            x[:, i] ^= t
        q >>= 1
    for i in range(1, d):  # Gray encode
        x[:, i] ^= x[:, i - 1]
    t = np.zeros(len(x), np.int64)
    q = 1 << (order - 1)
    while q > 1:
        t = np.where((x[:, d - 1] & q) != 0, t ^ (q - 1), t)
        q >>= 1
    x ^= t[:, None]
    # Interleave the transposed bits, most significant first: bit b of axis i -> index bit b·d + (d-1-i).
    h = np.zeros(len(x), np.int64)
    for b in range(order - 1, -1, -1):
        for i in range(d):
            h = (h << 1) | ((x[:, i] >> b) & 1)
    return h


def hilbert_cells(index: np.ndarray, order: int, dims: int) -> np.ndarray:
    """Inverse of :func:`hilbert_index`: the grid cells (n, ``dims``) at Hilbert positions ``index``."""
    order = _check_order(order, dims)
    h = np.asarray(index, dtype=np.int64).ravel()
    if h.size and (h.min() < 0 or h.max() >= 1 << (order * dims)):
        raise ValueError(f"index: expected values in [0, 2**{order * dims}), got [{h.min()}, {h.max()}]")
    x = np.zeros((len(h), dims), np.int64)
    for b in range(order - 1, -1, -1):  # de-interleave
        for i in range(dims):
            x[:, i] |= ((h >> (b * dims + dims - 1 - i)) & 1) << b
    t = x[:, dims - 1] >> 1  # Gray decode (Skilling's TransposetoAxes)
    for i in range(dims - 1, 0, -1):
        x[:, i] ^= x[:, i - 1]
    x[:, 0] ^= t
    q = 2
    while q != 1 << order:  # undo excess work
        p = q - 1
        for i in range(dims - 1, -1, -1):
            on = (x[:, i] & q) != 0
            x[on, 0] ^= p
            t = np.where(on, 0, (x[:, 0] ^ x[:, i]) & p)
            x[:, 0] ^= t
            x[:, i] ^= t
        q <<= 1
    return x


def to_line(unit_points: np.ndarray, order: int = DEFAULT_ORDER) -> np.ndarray:
    """Map points of the unit cube [0, 1]^d to t ∈ [0, 1) along the Hilbert curve (step A1).

    A coordinate u falls in cell ⌊u·2^order⌋ (u = 1 in the last cell); t = h / 2^(d·order).
    """
    u = np.asarray(unit_points, dtype=np.float64)
    if u.ndim != 2 or not np.all(np.isfinite(u)) or (u.size and (u.min() < 0 or u.max() > 1)):
        raise ValueError("unit_points: expected a finite (n, d) array with values in [0, 1]")
    side = 1 << order
    cells = np.minimum(np.floor(u * side).astype(np.int64), side - 1)
    return hilbert_index(cells, order).astype(np.float64) / float(1 << (order * u.shape[1]))


def from_line(t: np.ndarray, dims: int, order: int = DEFAULT_ORDER) -> np.ndarray:
    """Inverse of :func:`to_line` (step B2): cell centres in [0, 1]^dims of values t (clipped to [0, 1])."""
    total = 1 << (order * dims)
    h = np.clip(np.floor(np.clip(np.asarray(t, np.float64), 0.0, 1.0) * total), 0, total - 1).astype(np.int64)
    return (hilbert_cells(h, order, dims) + 0.5) / float(1 << order)


# ------------------------------------------------------------------------------------- 1-D mechanism core
def group_sizes(n: int, k: int) -> np.ndarray:
    """Sizes of the ⌊n/k⌋ groups of consecutive sorted values (k or k + 1; all n when k >= n)."""
    if not 1 <= k:
        raise ValueError(f"k: expected an integer >= 1, got {k}")
    g = max(n // k, 1)
    return np.full(g, n // g, np.int64) + (np.arange(g) < n % g)


def sum_noise_scales(sizes: np.ndarray, k: int, epsilon: float | Fraction, variant: str) -> list[Fraction]:
    """Exact Laplace scale of each group's *sum* of t-values: 1/ε (sound) or ``|h_i|/(kε)`` (paper: Lap(1/(kε)) on the
    mean, thesis step A3). Multiply by the grid's ``levels`` for the scale in grid cells."""
    eps = Fraction(epsilon)
    return [1 / eps if variant == "sound" else Fraction(int(size), k) / eps for size in sizes]


def noisy_group_sums(h: np.ndarray, levels: int, k: int, epsilon: float | Fraction, rng: np.random.Generator,
                     variant: str = "sound") -> tuple[list[int], np.ndarray]:
    """Steps A2–A3 on integer grid values: sort, group, sum, add exact discrete Laplace noise.

    Parameters
    ----------
    h : ndarray of int
        Grid values in [0, ``levels``) (Hilbert indices); replacing one changes the sorted group sums by at most
        ``levels`` − 1 in L1 (thesis Cor. 2, which holds on any totally ordered set).
    levels : int
        Grid size L: the t-value of h is h / L.
    k : int
        Group size.
    epsilon : float or Fraction
        ε of the release under "one value replaced".
    rng : numpy.random.Generator
        Source of the noise's random bytes.
    variant : {"sound", "paper"}

    Returns
    -------
    (list of int, ndarray)
        The noisy integer sums (the exact DP output, Python ints) and the public group sizes.
        Group i gets :func:`fedprint.privacy.publish.primitives.discrete_laplace` noise of scale L·`sum_noise_scales`
        >= L/ε cells, so the output is ε-DP with δ = 0 (see the module docstring).
    """
    values = sorted(int(v) for v in np.asarray(h).ravel())
    if values and (values[0] < 0 or values[-1] >= levels):
        raise ValueError(f"h: expected grid values in [0, {levels}), got [{values[0]}, {values[-1]}]")
    sizes = group_sizes(len(values), k)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    scales = sum_noise_scales(sizes, k, epsilon, variant)
    sums = [sum(values[lo:hi]) + discrete_laplace(rng, levels * b)
            for lo, hi, b in zip(bounds[:-1], bounds[1:], scales, strict=True)]
    return sums, sizes


def noisy_group_means(values: np.ndarray, k: int, epsilon: float, rng: np.random.Generator,
                      variant: str = "sound", *, levels: int = 1 << 30) -> tuple[np.ndarray, np.ndarray]:
    """Steps A2–A3 on values in [0, 1]: quantise to a grid of ``levels`` cells, then :func:`noisy_group_sums`.

    Returns (noisy means in t units, sizes); the means are the exact integer output divided by the public
    ``levels`` × size (post-processing).
    """
    v = np.asarray(values, np.float64)
    if v.size and (not np.all(np.isfinite(v)) or v.min() < 0 or v.max() > 1):
        raise ValueError("values: expected finite values in [0, 1]")
    h = np.minimum(np.floor(v * levels), levels - 1).astype(np.int64)
    sums, sizes = noisy_group_sums(h, levels, k, epsilon, rng, variant)
    return np.array([s / (levels * int(n)) for s, n in zip(sums, sizes, strict=True)]), sizes


def reconstruct(noisy_means: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Step B1: weighted isotonic regression (PAVA) of the noisy means, clip to [0, 1], upsample by size."""
    fit = isotonic_regression(np.asarray(noisy_means, np.float64), weights=np.asarray(sizes, np.float64)).x
    return np.repeat(np.clip(fit, 0.0, 1.0), sizes)


def sorted_error(values: np.ndarray, k: int, epsilon: float, rng: np.random.Generator) -> float:
    """Normalised EMD ‖S_n(D) − ↑_k IR(S̃)‖₁ / n of one simulated sound run on 1-D ``values`` (thesis Eq. 4.5).

    A simulation for choosing k (no privacy at stake): continuous Lap(1/ε) on the sums stands in for the exact
    discrete law of the release, whose scale is 2^30 or more grid cells — the same error to within a cell.
    """
    s = np.sort(np.asarray(values, np.float64))
    sizes = group_sizes(len(s), k)
    sums = np.add.reduceat(s, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
    noisy = (sums + rng.laplace(0.0, 1.0 / epsilon, len(sizes))) / sizes
    return float(np.mean(np.abs(s - reconstruct(noisy, sizes))))


def synthetic_values(n: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Synthetic 1-D data on [0, 1] for :func:`choose_k`: ``uniform`` or ``clustered`` (5 Gaussian clusters)."""
    if kind == "uniform":
        return rng.uniform(0, 1, n)
    if kind == "clustered":
        centres, widths = rng.uniform(0.05, 0.95, 5), rng.uniform(0.005, 0.05, 5)
        c = rng.integers(0, 5, n)
        return np.clip(rng.normal(centres[c], widths[c]), 0, 1)
    raise ValueError(f"kind: expected 'uniform' or 'clustered', got {kind!r}")


def k_errors(n: int, epsilon: float, rng: np.random.Generator, *, candidates=None, trials: int = 8,
             kinds: tuple[str, ...] = ("uniform", "clustered")) -> dict[int, float]:
    """Mean normalised EMD of the sound mechanism for each candidate k (simulation behind :func:`choose_k`)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"n: expected >= 1, got {n}")
    epsilon = check_epsilon(epsilon)
    if candidates is None:
        candidates = np.unique(np.round(np.geomspace(1, n, min(n, 40))).astype(int))
    cand = sorted({int(k) for k in candidates if 1 <= int(k) <= n})
    if not cand:
        raise ValueError(f"candidates: no value in [1, {n}]")
    err = {k: 0.0 for k in cand}
    for kind in kinds:
        for _ in range(trials):
            data = synthetic_values(n, kind, rng)  # same data for every k: a paired comparison
            for k in cand:
                err[k] += sorted_error(data, k, epsilon, rng) / (trials * len(kinds))
    return err


def choose_k(n: int, epsilon: float, rng: np.random.Generator, *, candidates=None, trials: int = 8) -> int:
    """Group size k with the smallest simulated error for n points at ε (data-independent: costs no privacy).

    Simulates the sound mechanism on synthetic uniform and clustered 1-D data (``trials`` sets of each) for a
    log-spaced grid of candidate k in [1, n] and returns the k of minimal mean normalised EMD (Eq. 4.5).
    """
    err = k_errors(n, epsilon, rng, candidates=candidates, trials=trials)
    return min(err, key=err.get)


def paper_k(n: int, epsilon: float) -> int:
    """The thesis's Table 4.1 k: nearest row in log n and nearest column in ε, capped at n."""
    i = int(np.argmin(np.abs(np.log(PAPER_TABLE_N) - math.log(max(n, 1)))))
    j = int(np.argmin(np.abs(np.asarray(PAPER_TABLE_EPS) - epsilon)))
    return max(1, min(PAPER_TABLE_K[i][j], n))


@lru_cache(maxsize=256)
def _simulated_k(n: int, epsilon: float) -> int:
    # Fixed seed per (n, ε): the same request always gets the same k; k depends on public values only.
    return choose_k(n, epsilon, np.random.default_rng([n, int(round(epsilon * 1e9))]))


# ---------------------------------------------------------------------------------- fixed output size
def fixed_size(minutiae: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """The finger's minutiae resampled to exactly ``size`` rows, so the release does not depend on their count n.

    n >= size: a uniformly random subset of ``size`` distinct minutiae; n < size: all n minutiae plus
    size − n drawn uniformly with replacement from them (duplicates). Any map from a non-empty set to a
    ``size``-point set keeps the finger-level proof (module docstring); this one keeps the real minutiae.
    """
    n = len(minutiae)
    if n >= size:
        keep = np.arange(n) if n == size else rng.choice(n, size, replace=False)
    else:
        keep = np.concatenate([np.arange(n), rng.integers(0, n, size - n)])
    return minutiae[keep]


# ------------------------------------------------------------------------------------------- the mechanism
def publish_pointset(
    image: np.ndarray | None,
    minutiae: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    variant: str = "sound",
    *,
    k: int | None = None,
    order: int = DEFAULT_ORDER,
    direction: bool = True,
    protect: str = "minutia",
    domain: tuple[int, int] | None = None,
    size: int | None = None,
) -> Publication:
    """Publish a minutiae set with ε-DP (Fang 2013 Ch. 4; see the module docstring for the proof).

    Parameters
    ----------
    image : ndarray uint8 (H, W) or None
        Only its shape is used: the domain [0, W] × [0, H] in pixels.
    minutiae : ndarray float64 (n, 4)
        ``x, y, direction, type`` (direction in radians, [0, 2π)); n >= 1.
    epsilon : float
        Budget of this release, > 0: ε per minutia (``protect="minutia"``) or per finger (``"finger"``).
    rng : numpy.random.Generator
        Source of the Laplace noise.
    variant : {"sound", "paper"}
        ``paper``: k from thesis Table 4.1, Lap(1/(kε)) on every mean; ``sound``: k by :func:`choose_k`,
        ``Lap(1/(|h_i|ε))``. Both are ε-DP (the thesis's theorem holds).
    k : int, optional
        Group size (1..n); overrides the variant's choice.
    order : int, default 10
        Hilbert-curve bits per axis (2**order cells per axis).
    direction : bool, default True
        Use direction as the third coordinate (3-D curve); False publishes (x, y) only.
    protect : {"minutia", "finger"}
        Record unit of the guarantee. ``finger``: the set is resampled to ``size`` points (:func:`fixed_size`)
        and the mechanism runs at ε / size per point (group privacy over the size points); the minutiae count
        is not released. ``minutia``: all n minutiae at ε each; n is released.
    domain : (H, W), optional
        Declared domain in pixels when ``image`` is None.
    size : int, optional
        ``protect="finger"`` only: the fixed public output size N (default :data:`DEFAULT_SIZE`).

    Returns
    -------
    Publication
        ``points`` float64 (N, 3) ``x, y, direction`` (or (N, 2)) in pixels / radians, sorted along the curve
        (N = ``size`` for ``finger``, n for ``minutia``); ``details``: ``k``, ``group_sizes``, ``noisy_sums``
        (the exact DP output, integers on the grid of ``grid_levels`` cells), ``noisy_means``,
        ``noise_scale_cells``, ``order``, ``dims``, ``domain``, ``protect``, ``output_size`` (and how it was
        chosen), ``epsilon_per_minutia``, ``epsilon_finger``.
    """
    variant = check_variant(variant)
    epsilon = check_epsilon(epsilon)
    m = check_minutiae(minutiae, minimum=1)
    if direction and m.shape[1] < 3:
        raise ValueError("minutiae: direction=True needs a direction column (n, 4) table")
    if protect not in PROTECT:
        raise ValueError(f"protect: expected one of {PROTECT}, got {protect!r}")
    if image is not None:
        if not isinstance(image, np.ndarray) or image.ndim != 2 or image.size == 0:
            raise ValueError(f"image: expected a non-empty 2-D array or None, got {getattr(image, 'shape', image)}")
        h, w = image.shape
    elif domain is not None:
        h, w = (int(v) for v in domain)
        if h <= 0 or w <= 0:
            raise ValueError(f"domain: expected positive (H, W), got {domain}")
    else:
        raise ValueError("domain: pass the image or a declared domain (H, W) in pixels")
    if size is not None and protect != "finger":
        raise ValueError("size: a fixed public output size applies to protect='finger' only")
    if protect == "finger":
        size = DEFAULT_SIZE if size is None else size
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or not 1 <= size <= MAX_SIZE:
            raise ValueError(f"size: expected an integer in [1, {MAX_SIZE}] (points released), got {size!r}")
    dims = 3 if direction else 2
    _check_order(order, dims)
    x, y = m[:, 0], m[:, 1]
    if not (np.all(np.isfinite(m[:, :dims])) and x.min() >= 0 and y.min() >= 0 and x.max() <= w and y.max() <= h):
        raise ValueError(f"minutiae: coordinates must be finite and inside the domain [0, {w}] x [0, {h}]")
    if protect == "finger":  # from here on nothing depends on the private count n
        m = fixed_size(m, int(size), rng)
        n = len(m)  # = size: the group of points every finger-level neighbour differs in
        eps_exact = Fraction(epsilon) / n
    else:
        n = len(m)
        eps_exact = Fraction(epsilon)
    eps_minutia = float(eps_exact)
    if k is None:
        k = paper_k(n, eps_minutia) if variant == "paper" else _simulated_k(n, eps_minutia)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= n:
        raise ValueError(f"k: expected an integer in [1, {n}], got {k!r}")
    k = int(k)

    levels = 1 << (order * dims)
    side = 1 << order
    cols = [m[:, 0] / w, m[:, 1] / h] + ([np.mod(m[:, 2], 2 * np.pi) / (2 * np.pi)] if direction else [])
    cells = np.minimum(np.floor(np.clip(np.stack(cols, axis=1), 0.0, 1.0) * side).astype(np.int64), side - 1)
    sums, sizes = noisy_group_sums(hilbert_index(cells, order), levels, k, eps_exact, rng, variant)
    noisy = np.array([s / (levels * int(c)) for s, c in zip(sums, sizes, strict=True)])
    u = from_line(reconstruct(noisy, sizes), dims, order)
    points = u * np.array([w, h, 2 * np.pi][:dims])
    scales = [float(levels * b) for b in sum_noise_scales(sizes, k, eps_exact, variant)]

    eps_finger = eps_minutia * n
    noise = (f"exact discrete Laplace noise (Canonne, Kamath & Steinke 2020) on the integer group sums of Hilbert "
             f"indices (grid of 2^{order * dims} cells), scale >= 2^{order * dims}/epsilon per group, so delta = 0")
    if protect == "finger":
        neighbouring = ("two minutiae sets of any sizes: all minutiae of one finger (the whole set) replaced by any "
                        "other non-empty set in the domain")
        protected = (f"the finger's whole minutiae set, including how many minutiae it has: the set is resampled "
                     f"to the fixed public size N = {n} (a random subset, or every minutia plus random repeats), "
                     f"then each of the N points is protected at epsilon / N (group privacy over N points)")
        size_rule = f"fixed public size N = {n} (--points); the finger's minutiae count is not released"
        released = (f"the fixed output size N = {n} (a public parameter, not the minutiae count), the domain "
                    f"{w} x {h} px, the group size k = {k} and the group sizes; minutia types are not released")
        caveats = ""
    else:
        neighbouring = (f"minutiae sets of the same public size n = {n} differing in one minutia, replaced by any "
                        f"other point of the domain")
        protected = "each single minutia's position" + (" and direction" if direction else "")
        size_rule = f"the finger's own minutiae count n = {n}, released exactly"
        released = (f"the number of minutiae n = {n}, the domain {w} x {h} px, the group size k = {k} and the "
                    f"group sizes; minutia types are not released")
        caveats = (f"a whole finger (all {n} minutiae) is only {eps_finger:g}-DP by group privacy; use "
                   f"protect='finger' for a finger-level guarantee")
    guarantee = Guarantee(
        dp=True, epsilon=epsilon, delta=0.0, neighbouring=neighbouring, protected=protected,
        released_exactly=released,
        composition=(f"one release of {len(sizes)} group sums of the Hilbert-sorted points at epsilon = "
                     f"{eps_minutia:g} per point (sorting has sensitivity 1, thesis Thm 1 / Cor. 2) with {noise}; "
                     f"isotonic regression and the inverse curve are post-processing"),
        caveats=caveats,
    )
    details = {"k": k, "group_sizes": sizes.tolist(), "noisy_sums": sums, "grid_levels": levels,
               "noisy_means": noisy.tolist(), "noise_scale_cells": scales, "order": int(order), "dims": dims,
               "domain": [int(h), int(w)], "protect": protect, "output_size": n, "output_size_rule": size_rule,
               "epsilon_per_minutia": eps_minutia, "epsilon_finger": eps_finger}
    return Publication(mechanism="pointset", variant=variant, image=None, points=points, spent_epsilon=epsilon,
                       spent_delta=0.0, guarantee=guarantee, details=details)
