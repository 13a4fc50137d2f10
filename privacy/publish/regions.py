"""Shared pieces of Liu, Zhi et al. (LAP / KLAP / RKLAP / DP-RKLAP): minutiae clustering, padded boxes, regression
bands, masks, the Alg. 4 budget allocation, the exponential-mechanism ordering and the Laplace noise.

Coordinates follow :mod:`fedprint.data.minutiae`: ``x`` is the pixel column, ``y`` the pixel row. Boxes are inclusive
``(x0, y0, x1, y1)`` in pixels, clipped to the image. A :class:`Region` keeps its pixels as a boolean mask over
its box only (``box_mask``), so a region costs O(box) and full-image masks are built with slicing.

Paper: Liu, Zhi, Zhao, He, "Research on local fingerprint image differential privacy protection method based on
clustering algorithm and regression algorithm segmentation image" (IEEE Access; Liu, Zhi et al.).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import pdist

from fedprint.privacy.publish.base import check_minutiae
from fedprint.privacy.publish.primitives import PIXEL_RANGE

#: L1 sensitivity of one pixel under the one-pixel neighbouring relation with values in [0, 255].
PIXEL_SENSITIVITY = PIXEL_RANGE  # module-level alias so tests can monkeypatch the scale
#: Paper: every cluster must hold M_i > 4 minutiae (Sec. IV, "minimum cluster size of 5").
MIN_CLUSTER_SIZE = 5
#: Paper Eqs. (11), (20), (32): epsilon >= Delta Q / 256 so that the Laplace scale b = Delta Q / epsilon <= 256.
PAPER_SCALE_LIMIT = 256.0
LINKAGES = ("ward", "average", "complete", "single")


def sound_scale(epsilon: float) -> float:
    """Laplace scale of the sound variants: ``PIXEL_SENSITIVITY / epsilon`` (read at call time, so a test can
    monkeypatch :data:`PIXEL_SENSITIVITY` to check that the privacy audit catches a wrong scale)."""
    return PIXEL_SENSITIVITY / epsilon


def paper_minimum_epsilon(n_protected: int) -> float:
    """The paper's documented minimum budget ``Delta Q / 256`` (Eqs. 11, 20, 32) for ``Delta Q = n_protected``."""
    return float(n_protected) / PAPER_SCALE_LIMIT


@dataclass(frozen=True, eq=False)
class Region:
    """One protected region: a cluster of minutiae, its padded box and the pixels protected inside the box.

    Attributes
    ----------
    members : ndarray of int
        Row indices (into the minutiae table) of the cluster's minutiae; ``M_i = len(members)``.
    box : (int, int, int, int)
        Inclusive ``(x0, y0, x1, y1)`` of the padded bounding box (Eqs. 14-16), clipped to the image.
    box_mask : ndarray of bool, shape (y1 - y0 + 1, x1 - x0 + 1)
        Protected pixels inside the box: all True for KLAP, the regression band for RKLAP (Eqs. 29-30).
    degree : int or None
        RKLAP: degree of the chosen polynomial h (Eq. 25); None for KLAP.
    band : float or None
        RKLAP: band half-width ``dist = dist_max + dist_min`` (Eq. 28) in pixels; None for KLAP.
    """

    members: np.ndarray
    box: tuple[int, int, int, int]
    box_mask: np.ndarray
    degree: int | None = None
    band: float | None = None

    @property
    def n_minutiae(self) -> int:
        return int(len(self.members))

    @property
    def n_pixels(self) -> int:
        """``Q_i``: pixels of this region (counted on its own, overlaps with other regions included)."""
        return int(self.box_mask.sum())

    @property
    def slices(self) -> tuple[slice, slice]:
        x0, y0, x1, y1 = self.box
        return slice(y0, y1 + 1), slice(x0, x1 + 1)

    def summary(self) -> dict:
        """JSON-able description (for ``Publication.details``)."""
        return {"n_minutiae": self.n_minutiae, "box": list(self.box), "n_pixels": self.n_pixels,
                "degree": self.degree, "band": self.band}


def check_coordinates(minutiae: np.ndarray, shape: tuple[int, int], name: str = "minutiae") -> np.ndarray:
    """``(n, 2)`` float array of ``x, y``; every minutia must be finite and lie inside the ``(H, W)`` image."""
    m = check_minutiae(minutiae, minimum=1, name=name)
    xy = m[:, :2]
    h, w = shape
    if not np.all(np.isfinite(xy)):
        raise ValueError(f"{name}: x, y must be finite")
    outside = (xy[:, 0] < 0) | (xy[:, 0] > w - 1) | (xy[:, 1] < 0) | (xy[:, 1] > h - 1)
    if outside.any():
        raise ValueError(f"{name}: {int(outside.sum())} minutiae lie outside the {h}x{w} image "
                         f"(x must be in [0, {w - 1}], y in [0, {h - 1}])")
    return xy


def cluster_minutiae(
    xy: np.ndarray,
    *,
    n_clusters: int | None = None,
    method: str = "ward",
    min_cluster_size: int = MIN_CLUSTER_SIZE,
) -> list[np.ndarray]:
    """AGNES (bottom-up agglomerative) clustering of minutiae coordinates; keep clusters of >= ``min_cluster_size``.

    Parameters
    ----------
    xy : ndarray, shape (M, 2)
        Minutiae ``x, y`` in pixels.
    n_clusters : int, optional
        K, where the dendrogram is cut. The paper does not say how K is chosen; its example (Table 2) has
        25 minutiae in 4 clusters, so the default is ``max(1, M // (min_cluster_size + 1))``.
    method : {"ward", "average", "complete", "single"}, default "ward"
        Linkage (scipy.cluster.hierarchy). The paper only says AGNES; Ward gives compact, balanced clusters.
    min_cluster_size : int, default 5
        Clusters with fewer minutiae are dropped (paper: M_i > 4). Their minutiae are then outside every
        protected region — the mechanisms' guarantees say so.

    Returns
    -------
    list of ndarray of int
        Member indices of each kept cluster (the dendrogram cut after M - K merges), ordered by first member.

    Raises
    ------
    ValueError
        If no cluster of >= ``min_cluster_size`` minutiae exists (including M < ``min_cluster_size``).
    """
    xy = np.asarray(xy, dtype=np.float64)
    m = len(xy)
    if method not in LINKAGES:
        raise ValueError(f"method: expected one of {LINKAGES}, got {method!r}")
    if int(min_cluster_size) < 2:
        raise ValueError(f"min_cluster_size: expected an integer >= 2, got {min_cluster_size}")
    if m < min_cluster_size:
        raise ValueError(f"minutiae: the image has {m} minutiae, fewer than one cluster of {min_cluster_size} "
                         f"(the paper needs clusters with M_i > {min_cluster_size - 1})")
    k = max(1, m // (min_cluster_size + 1)) if n_clusters is None else int(n_clusters)
    if k < 1 or k > m:
        raise ValueError(f"n_clusters: expected 1 <= n_clusters <= {m} (number of minutiae), got {n_clusters}")
    groups = _cut(linkage(xy, method=method), m, k) if k > 1 else [np.arange(m)]
    kept = [g for g in groups if len(g) >= min_cluster_size]
    if not kept:
        sizes = sorted((len(g) for g in groups), reverse=True)
        raise ValueError(f"minutiae: no cluster of >= {min_cluster_size} minutiae (cluster sizes {sizes} with "
                         f"K={k}); the mechanism has nothing to protect — pass a smaller n_clusters")
    return kept


def _cut(merges: np.ndarray, m: int, k: int) -> list[np.ndarray]:
    """Clusters after the first ``m - k`` merges of a scipy linkage matrix (exactly k clusters, sorted members),
    ordered by smallest member."""
    members = {i: [i] for i in range(m)}
    for t in range(m - k):
        a, b = int(merges[t, 0]), int(merges[t, 1])
        members[m + t] = members.pop(a) + members.pop(b)
    return sorted((np.array(sorted(g), dtype=np.int64) for g in members.values()), key=lambda g: g[0])


def _min_gap(v: np.ndarray) -> float:
    """Smallest |v_m - v_n| over pairs m != n (Eq. 15)."""
    return float(np.min(np.diff(np.sort(v)))) if len(v) > 1 else 0.0


def padded_box(xy: np.ndarray, shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """Eqs. (14)-(16): the cluster's bounding box widened by ``dist_x`` / ``dist_y``, the smallest coordinate
    interval between two of its minutiae along each axis; rounded outwards and clipped to the ``(H, W)`` image."""
    h, w = shape
    dx, dy = _min_gap(xy[:, 0]), _min_gap(xy[:, 1])
    x0 = max(0, int(np.floor(xy[:, 0].min() - dx)))
    x1 = min(w - 1, int(np.ceil(xy[:, 0].max() + dx)))
    y0 = max(0, int(np.floor(xy[:, 1].min() - dy)))
    y1 = min(h - 1, int(np.ceil(xy[:, 1].max() + dy)))
    return x0, y0, x1, y1


def fit_band(xy: np.ndarray, *, max_degree: int = 6) -> tuple[np.polynomial.Polynomial, int, float]:
    """Eqs. (25)-(28): fit ``y = h(x)`` to a cluster and choose the band half-width.

    For each degree d in 1..min(max_degree, distinct x - 1) (degree 0 when all x coincide) a least-squares
    polynomial is fitted; the one whose maximum absolute residual is closest to ``Loss``, the smallest
    Euclidean distance between two minutiae of the cluster (Eq. 25), is kept (ties: lower degree). The band
    half-width is ``dist = dist_max + dist_min`` (Eqs. 26-28), so every minutia of the cluster lies in the band.

    Returns
    -------
    h : numpy.polynomial.Polynomial
    degree : int
    dist : float
        Band half-width in pixels.
    """
    if max_degree < 1:
        raise ValueError(f"max_degree: expected an integer >= 1, got {max_degree}")
    x, y = xy[:, 0], xy[:, 1]
    loss = float(pdist(xy).min())
    top = max(0, min(int(max_degree), len(np.unique(x)) - 1))
    lo, hi = float(x.min()), float(x.max())
    xs = (x - (lo + hi) / 2) / ((hi - lo) / 2) if hi > lo else np.zeros_like(x)  # [-1, 1]: well conditioned
    d_min = 1 if top >= 1 else 0
    # Nested least squares for every degree from one QR: the fit of degree d uses the first d + 1 columns,
    # whose projection is Q[:, :d+1] Q[:, :d+1]^T y (Gram-Schmidt order), so all residuals come from a cumsum.
    qmat, rmat = np.linalg.qr(xs[:, None] ** np.arange(top + 1))
    qty = qmat.T @ y
    res = np.abs(y[:, None] - np.cumsum(qmat * qty, axis=1))[:, d_min:]  # (n, degrees)
    gaps = np.abs(res.max(axis=0) - loss)
    k = int(np.argmin(gaps))  # first minimum: ties go to the lower degree
    d = d_min + k
    coef = np.linalg.solve(rmat[: d + 1, : d + 1], qty[: d + 1])
    dist = float(res[:, k].max() + res[:, k].min())
    domain = [lo, hi] if hi > lo else [lo - 1.0, lo + 1.0]
    h = np.polynomial.Polynomial(coef, domain=domain, window=[-1.0, 1.0])
    return h, d, dist


def band_mask(h: np.polynomial.Polynomial, dist: float, box: tuple[int, int, int, int]) -> np.ndarray:
    """Eqs. (29)-(30): pixels ``(x, y)`` of the box with ``|y - h(x)| <= dist`` (boolean, box-shaped)."""
    x0, y0, x1, y1 = box
    hx = h(np.arange(x0, x1 + 1, dtype=np.float64))
    rows = np.arange(y0, y1 + 1, dtype=np.float64)[:, None]
    return np.abs(rows - hx[None, :]) <= dist


def klap_regions(xy: np.ndarray, shape: tuple[int, int], **cluster_options) -> list[Region]:
    """KLAP (Alg. 2): one padded box per cluster of >= 5 minutiae; every pixel of the box is protected."""
    regions = []
    for members in cluster_minutiae(xy, **cluster_options):
        box = padded_box(xy[members], shape)
        x0, y0, x1, y1 = box
        regions.append(Region(members, box, np.ones((y1 - y0 + 1, x1 - x0 + 1), dtype=bool)))
    return regions


def rklap_regions(xy: np.ndarray, shape: tuple[int, int], *, max_degree: int = 6, **cluster_options) -> list[Region]:
    """RKLAP (Alg. 3): inside each KLAP box, the band ``|y - h(x)| <= dist`` around the cluster's polynomial.

    A band of half-width ~0 (a cluster its polynomial fits exactly) can hold no pixel centre: such a region
    protects nothing (and would make Q_j = 0 in DP-RKLAP's Eq. 31), so it is dropped and its minutiae lie outside
    every region. Raises ValueError when every band is empty.
    """
    regions = []
    for r in klap_regions(xy, shape, **cluster_options):
        h, d, dist = fit_band(xy[r.members], max_degree=max_degree)
        region = Region(r.members, r.box, band_mask(h, dist, r.box), degree=d, band=dist)
        if region.n_pixels > 0:
            regions.append(region)
    if not regions:
        raise ValueError("rklap: every cluster's band is empty (no pixel within the fitted band); nothing to protect")
    return regions


def union_mask(regions: Sequence[Region], shape: tuple[int, int]) -> np.ndarray:
    """Boolean (H, W) mask of the pixels covered by at least one region (``Q`` = its sum, Eq. 19)."""
    mask = np.zeros(shape, dtype=bool)
    for r in regions:
        mask[r.slices] |= r.box_mask
    return mask


def owner_map(regions: Sequence[Region], order: Sequence[int], shape: tuple[int, int]) -> np.ndarray:
    """Disjoint ownership: int (H, W) map, -1 outside every region, else the index (into ``regions``) of the
    first region in ``order`` that covers the pixel. Overlaps are thus given to the earlier region."""
    owner = np.full(shape, -1, dtype=np.int64)
    for i in order:
        r = regions[i]
        view = owner[r.slices]
        view[r.box_mask & (view < 0)] = i
    return owner


def allocate_budget(sizes: Sequence[float], epsilon: float) -> np.ndarray:
    """Alg. 4 step 7 / Eqs. (38)-(44): split ``epsilon`` over regions taken in the given order.

    With ``Q^left`` the pixels not yet allocated (``Q^left_0 = sum(sizes)``) and ``eps^left`` the budget left
    (``eps^left_0 = epsilon``), region j gets ``eps_j = omega_j * eps^left`` with

    * ``omega = 2 Q_j / Q^left``  if ``Q_j <= Q^left / 4``,
    * ``omega = 1/2``            if ``Q^left / 4 < Q_j <= Q^left / 2``,
    * ``omega = Q_j / Q^left``    if ``Q_j > Q^left / 2``;

    the last region takes the remainder, so ``sum(eps_j) = epsilon``.

    Parameters
    ----------
    sizes : sequence of float
        ``Q_j`` (pixels) of the regions in allocation order; each >= 0 and their sum > 0.
    epsilon : float
        Budget to split (the paper's eps_2), > 0.

    Returns
    -------
    ndarray of float64, shape (len(sizes),)
        ``eps_j`` in the same order.
    """
    q = np.asarray(sizes, dtype=np.float64)
    if q.ndim != 1 or not len(q) or np.any(~np.isfinite(q)) or np.any(q < 0) or q.sum() <= 0:
        raise ValueError(f"sizes: expected a non-empty 1-D sequence of region sizes >= 0 with a positive sum, "
                         f"got {sizes!r}")
    if not epsilon > 0:
        raise ValueError(f"epsilon: must be > 0, got {epsilon}")
    left_q, left_eps = float(q.sum()), float(epsilon)
    out = np.empty(len(q))
    for j, qj in enumerate(q):
        if j == len(q) - 1:
            omega = 1.0
        elif qj <= left_q / 4:
            omega = 2 * qj / left_q
        elif qj <= left_q / 2:
            omega = 0.5
        else:
            omega = qj / left_q
        out[j] = omega * left_eps
        left_eps -= out[j]
        left_q -= qj
    return out


def density_order(scores: np.ndarray) -> np.ndarray:
    """Deterministic order by decreasing density ``I_i = M_i / Q_i`` (ties: lower index first)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def add_laplace(out: np.ndarray, mask: np.ndarray, scale: float | np.ndarray, rng: np.random.Generator) -> None:
    """Add independent Laplace(0, scale) noise, in place, to the pixels of the float array ``out`` where ``mask``.

    ``scale`` is a scalar or an array with one entry per True pixel of ``mask`` (row-major order). ``out`` may be
    a view (a region's box), so regions can be noised one after the other.
    """
    n = int(np.count_nonzero(mask))
    if n:
        out[mask] += rng.laplace(0.0, 1.0, n) * scale
