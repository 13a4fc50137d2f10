"""Minutia Cylinder-Code (MCC): a fixed-length local descriptor per minutia, and the Local Similarity Sort score.

Each minutia ``m`` of a print gets a cylinder: a disc of radius ``R`` around it, aligned with its direction and cut
into ``ns x ns`` spatial cells times ``nd`` direction sectors; a cell's value sums, over the other minutiae ``t``
near the cell's centre, a spatial Gaussian of the distance times the share of a directional Gaussian that falls in
the sector ([1]_, Eqs. 2-9), and the bit version keeps ``value >= mu_psi`` (Eq. 15). Cells off the
print (outside the convex hull of the minutiae grown by ``hull_offset``) are invalid and never compared. Two
cylinders are compared by the Dice coefficient of their bits on the cells valid in both (Eq. 17, bit form:
``1 - |a xor b| / (|a| + |b|) = 2 |a and b| / (|a| + |b|)``), when their directions differ by at most ``max_angle``
and enough cells are valid in both; a probe and a gallery print score the mean of the ``n_P`` best cylinder
similarities (Local Similarity Sort, Eq. 23). The 8 x 8 x 5 bit cylinders are those of the indexing paper [2]_.

In FedPrint the score is a cheap, rotation- and translation-invariant minutiae matcher: a matrix product per probe
against the whole gallery (:func:`lss_scores`), used where the embedding's shortlist misses mates that Bozorth3
would find (``identify --index --score minutiae --shortlist-by cylinders``). The cylinders are computed from the
minutiae the index already stores (ISO/IEC 19794-2 records), so the index format does not change.

Coordinates are scaled to 500 dpi (``dpi``) so that ``R`` and ``sigma_s`` keep their physical size on every sensor.

References
----------
.. [1] R. Cappelli, M. Ferrara, D. Maltoni, "Minutia Cylinder-Code: a new representation and matching technique
   for fingerprint recognition", IEEE TPAMI 32(12):2128-2141, 2010.
.. [2] R. Cappelli, M. Ferrara, D. Maltoni, "Fingerprint indexing based on Minutia Cylinder-Code", IEEE TPAMI
   33(5):1051-1057, 2011 (the 8 x 8 x 5 bit cylinders used for indexing).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> pts = np.c_[rng.uniform(0, 300, (40, 2)), rng.uniform(0, 2 * np.pi, 40)]
>>> a = cylinders(pts)
>>> float(lss_scores(a, [a])[0]) > 0.9
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from scipy.special import erf


@dataclass(frozen=True)
class CylinderParams:
    """MCC's parameters (the names of Cappelli et al. 2010, Table 1; ``ns`` / ``nd`` of their 2011 indexing
    variant, 8 x 8 x 5 bits)."""

    radius: float = 70.0  # R, pixels at 500 dpi
    ns: int = 8  # N_S, spatial cells per side
    nd: int = 5  # N_D, direction sectors
    sigma_s: float = 28.0 / 3.0  # sigma_S, pixels at 500 dpi
    sigma_d: float = 2.0 * np.pi / 9.0  # sigma_D, radians
    mu_psi: float = 0.01  # the bit threshold of Psi (Eq. 15)
    hull_offset: float = 50.0  # Omega, pixels at 500 dpi
    min_valid_cells: float = 0.75  # min_VC, share of the disc's cells a valid cylinder has on the print
    min_minutiae: int = 2  # min_M, neighbours a valid cylinder needs within R + 3 sigma_S
    min_matchable: float = 0.6  # min_ME, share of the disc's cells valid in both cylinders
    max_angle: float = np.pi / 2  # delta_theta, the largest direction difference of matchable cylinders
    min_np: int = 4  # min_NP of LSS
    max_np: int = 12  # max_NP of LSS
    mu_p: float = 20.0  # mu_P of LSS
    tau_p: float = 0.4  # tau_P of LSS


DEFAULT = CylinderParams()


@dataclass(frozen=True)
class Cylinders:
    """One print's valid cylinders: ``bits`` (n, ns*ns*nd) bool, cell-major with the sectors innermost; ``mask``
    (n, ns*ns) bool, the cells on the print; ``angle`` (n,) the minutiae directions; ``count``: the minutiae the
    print had (LSS's n_A uses it)."""

    bits: np.ndarray
    mask: np.ndarray
    angle: np.ndarray
    count: int

    def __len__(self) -> int:
        return len(self.angle)


def _dphi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The difference of two angles in [-pi, pi) (Eq. 8)."""
    return np.mod(a - b + np.pi, 2 * np.pi) - np.pi


def _cell_offsets(p: CylinderParams) -> tuple[np.ndarray, np.ndarray]:
    """Cell centres relative to the minutia, before rotation (ns*ns, 2), and which lie in the disc."""
    step = 2 * p.radius / p.ns
    c = (np.arange(p.ns) - (p.ns - 1) / 2) * step
    gx, gy = np.meshgrid(c, c, indexing="ij")
    off = np.c_[gx.ravel(), gy.ravel()]
    return off, np.hypot(off[:, 0], off[:, 1]) <= p.radius


def _hull_valid(xy: np.ndarray, centres: np.ndarray, offset: float) -> np.ndarray:
    """Whether each centre (any leading shape, last axis x, y) lies within ``offset`` of the minutiae's convex
    hull: the hull rasterised at 1 px and a distance transform of its outside."""
    lo = xy.min(0) - offset - 2
    size = np.ceil(xy.max(0) - lo + offset + 2).astype(int) + 1
    canvas = np.full((size[1], size[0]), 255, np.uint8)
    hull = cv2.convexHull(np.round(xy - lo).astype(np.int32))
    cv2.fillConvexPoly(canvas, hull, 0)
    dist = cv2.distanceTransform(canvas, cv2.DIST_L2, 5)
    ij = np.round(centres - lo).astype(int)
    inside = (ij[..., 0] >= 0) & (ij[..., 0] < size[0]) & (ij[..., 1] >= 0) & (ij[..., 1] < size[1])
    out = np.zeros(centres.shape[:-1], bool)
    out[inside] = dist[ij[..., 1][inside], ij[..., 0][inside]] <= offset
    return out


def cylinders(minutiae: np.ndarray, params: CylinderParams = DEFAULT, *, dpi: float = 500.0) -> Cylinders:
    """The bit cylinders of one print's minutiae ``(n, >= 3)`` table (x, y, direction in radians; FedPrint's
    convention, :mod:`fedprint.data.minutiae_backends`), the invalid ones dropped (Cappelli et al. 2010, Section 3.1).

    Raises ``ValueError`` on a table without three columns or with non-finite values."""
    m = np.asarray(minutiae, dtype=np.float64)
    if m.ndim != 2 or (len(m) and m.shape[1] < 3):
        raise ValueError(f"minutiae: expected an (n, 3+) table of x, y, direction, got shape {m.shape}")
    if not np.isfinite(m[:, :3]).all():
        raise ValueError("minutiae: non-finite x, y or direction")
    p, n = params, len(m)
    d = p.ns * p.ns * p.nd
    if n < 2:
        return Cylinders(np.zeros((0, d), bool), np.zeros((0, p.ns * p.ns), bool), np.zeros(0), n)
    xy, th = m[:, :2] * (500.0 / float(dpi)), m[:, 2]
    off, disc = _cell_offsets(p)
    c, s = np.cos(th), np.sin(th)
    # cell centres, rotated with each minutia's direction (Eq. 2): (n, ns*ns, 2)
    centres = xy[:, None, :] + np.stack([c[:, None] * off[:, 0] - s[:, None] * off[:, 1],
                                         s[:, None] * off[:, 0] + c[:, None] * off[:, 1]], axis=-1)
    valid = disc[None, :] & _hull_valid(xy, centres, p.hull_offset)
    # spatial contribution of minutia t to cell (i, j) of m's cylinder (Eqs. 4, 6): (n, cells, n)
    d2 = (centres[:, :, None, 0] - xy[None, None, :, 0]) ** 2 + (centres[:, :, None, 1] - xy[None, None, :, 1]) ** 2
    cs = np.exp(-d2 / (2 * p.sigma_s ** 2)) / (p.sigma_s * np.sqrt(2 * np.pi))
    cs[d2 > (3 * p.sigma_s) ** 2] = 0.0
    cs[np.arange(n), :, np.arange(n)] = 0.0  # t != m
    # directional contribution (Eqs. 5, 7): the share of G_D in sector k, around dphi(d_phi_k, dphi(th_m, th_t))
    step = 2 * np.pi / p.nd
    sector = -np.pi + (np.arange(p.nd) + 0.5) * step
    alpha = _dphi(sector[None, None, :], _dphi(th[:, None], th[None, :])[:, :, None])  # (n, n, nd)
    r = np.sqrt(2) * p.sigma_d
    cd = 0.5 * (erf((alpha + step / 2) / r) - erf((alpha - step / 2) / r))
    value = np.matmul(cs, cd)  # (n, cells, nd): the sum over t of Eq. 3, before Psi
    bits = (value >= p.mu_psi) & valid[:, :, None]
    # a valid cylinder: enough cells on the print, enough neighbours (Section 3.1)
    near = (((xy[:, None] - xy[None]) ** 2).sum(-1) <= (p.radius + 3 * p.sigma_s) ** 2).sum(1) - 1
    keep = (valid.sum(1) >= p.min_valid_cells * disc.sum()) & (near >= p.min_minutiae)
    return Cylinders(bits[keep].reshape(int(keep.sum()), d), valid[keep], th[keep], n)


def _n_p(n_a: np.ndarray | int, n_b: np.ndarray | int, p: CylinderParams) -> np.ndarray:
    """LSS's n_P (Eq. 22): between min_NP and max_NP, following the smaller minutiae count."""
    z = 1.0 / (1.0 + np.exp(-p.tau_p * (np.minimum(n_a, n_b) - p.mu_p)))
    return p.min_np + np.round(z * (p.max_np - p.min_np)).astype(int)


@dataclass
class CylinderGallery:
    """Many prints' cylinders stacked for :func:`lss_scores`, in print order: ``bits`` (N, d) uint8, ``cell_bits``
    (N, cells) the set bits per cell, ``mask`` (N, cells) uint8, ``direction`` (N, 2) the unit vectors of the
    minutiae directions, ``starts`` (prints + 1,) where each print's cylinders begin, ``counts`` (prints,) the
    minutiae each print had."""

    bits: np.ndarray
    cell_bits: np.ndarray
    mask: np.ndarray
    direction: np.ndarray
    starts: np.ndarray
    counts: np.ndarray

    @property
    def prints(self) -> int:
        return len(self.counts)


def stack(prints: Sequence[Cylinders], params: CylinderParams = DEFAULT) -> CylinderGallery:
    """Stack prints' cylinders (in order) into one :class:`CylinderGallery`."""
    d, cells = params.ns * params.ns * params.nd, params.ns * params.ns
    if any(c.bits.shape[1:] != (d,) for c in prints):
        raise ValueError(f"cylinders: expected {d} bits each (ns={params.ns}, nd={params.nd})")
    bits = np.concatenate([c.bits for c in prints] or [np.zeros((0, d), bool)]).astype(np.uint8)
    mask = np.concatenate([c.mask for c in prints] or [np.zeros((0, cells), bool)]).astype(np.uint8)
    angle = np.concatenate([c.angle for c in prints] or [np.zeros(0)])
    return CylinderGallery(bits, bits.reshape(len(bits), cells, params.nd).sum(2).astype(np.uint8), mask,
                           np.c_[np.cos(angle), np.sin(angle)].astype(np.float32),
                           np.r_[0, np.cumsum([len(c) for c in prints])].astype(np.int64),
                           np.array([c.count for c in prints], dtype=np.int64))


def _print_blocks(starts: np.ndarray, block: int) -> list[tuple[int, int]]:
    """Runs of whole prints (print indices ``[p0, p1)``) of about ``block`` cylinders each."""
    out, p0 = [], 0
    while p0 < len(starts) - 1:
        p1 = max(p0 + 1, int(np.searchsorted(starts, starts[p0] + block, side="right")) - 1)
        p1 = min(p1, len(starts) - 1)
        out.append((p0, p1))
        p0 = p1
    return out


def lss_scores(probe: Cylinders, gallery: CylinderGallery | Sequence[Cylinders],
               params: CylinderParams = DEFAULT, *, block: int = 32768) -> np.ndarray:
    """The LSS-style score of ``probe`` against each gallery print, in [0, 1] (0 for a print with no matchable
    cylinder): the mean of the ``n_P`` best cylinder similarities (Cappelli et al. 2010, Eqs. 17, 22, 23), where
    each probe cylinder takes part once, with its best partner in the gallery print. (LSS proper sorts every pair;
    one pair per probe cylinder stops one distinctive probe cylinder from filling all ``n_P`` places, and reduces a
    print to a per-cylinder maximum that costs no sort.) Three matrix products per block of about ``block`` gallery
    cylinders (whole prints)."""
    g = gallery if isinstance(gallery, CylinderGallery) else stack(list(gallery), params)
    out = np.zeros(g.prints)
    if len(probe) == 0 or len(g.bits) == 0:
        return out
    p = params
    a = probe.bits.astype(np.float32)
    a_cell = a.reshape(len(a), -1, p.nd).sum(2)
    ma = probe.mask.astype(np.float32)
    da = np.c_[np.cos(probe.angle), np.sin(probe.angle)].astype(np.float32)
    min_cells = np.float32(p.min_matchable * _cell_offsets(p)[1].sum())
    cos_max = np.float32(np.cos(p.max_angle) - 1e-6)
    best = np.zeros((len(a), g.prints), np.float32)  # each probe cylinder's best partner in each print
    for p0, p1 in _print_blocks(g.starts, block):
        i0, i1 = int(g.starts[p0]), int(g.starts[p1])
        if i1 == i0:
            continue
        b, mb = g.bits[i0:i1].astype(np.float32), g.mask[i0:i1].astype(np.float32)
        sim = a @ b.T  # |a and b| (bits lie only on valid cells, so on cells valid in both)
        size = a_cell @ mb.T
        size += ma @ g.cell_bits[i0:i1].astype(np.float32).T  # |a on b's cells| + |b on a's cells|
        np.divide(2 * sim, size, out=sim, where=size > 0)
        sim[size <= 0] = 0.0
        sim[(ma @ mb.T < min_cells) | (da @ g.direction[i0:i1].T < cos_max)] = 0.0  # not matchable
        seg = g.starts[p0:p1] - i0
        full = np.diff(g.starts[p0:p1 + 1]) > 0
        best[:, p0:p1][:, full] = np.maximum.reduceat(sim, seg[full], axis=1)
    # the n_P best probe cylinders of each print (Eq. 23)
    k = min(p.max_np, len(a))
    top = -np.sort(-np.partition(best, len(a) - k, axis=0)[len(a) - k:], axis=0)  # (k, prints), descending
    take = np.minimum(_n_p(probe.count, g.counts, p), k)
    csum = np.cumsum(top, axis=0, dtype=np.float64)
    return csum[take - 1, np.arange(g.prints)] / take



def pack(prints: Sequence[Cylinders], params: CylinderParams = DEFAULT) -> dict[str, np.ndarray]:
    """Prints' cylinders as flat arrays for a file (:func:`unpack` reads them back exactly): bits and masks
    bit-packed, ``offsets`` (prints + 1,) where each print's cylinders begin, ``counts``, ``angle``, ``params``."""
    g = stack(prints, params)
    return {"bits": np.packbits(g.bits.astype(bool), axis=1), "mask": np.packbits(g.mask.astype(bool), axis=1),
            "angle": np.concatenate([c.angle for c in prints] or [np.zeros(0)]), "offsets": g.starts,
            "counts": g.counts, "params": np.array(repr(params))}


def unpack(arrays: dict[str, np.ndarray], params: CylinderParams = DEFAULT) -> list[Cylinders]:
    """The prints :func:`pack` wrote; ValueError when they were made with other parameters or do not fit."""
    if str(arrays["params"]) != repr(params):
        raise ValueError("cylinder codes made with other parameters")
    d, cells = params.ns * params.ns * params.nd, params.ns * params.ns
    off, counts = np.asarray(arrays["offsets"], np.int64), np.asarray(arrays["counts"], np.int64)
    bits = np.unpackbits(arrays["bits"], axis=1, count=d).astype(bool)
    mask = np.unpackbits(arrays["mask"], axis=1, count=cells).astype(bool)
    angle = np.asarray(arrays["angle"], np.float64)
    if len(off) != len(counts) + 1 or off[-1] != len(bits) or len(mask) != len(bits) or len(angle) != len(bits):
        raise ValueError("cylinder codes: arrays do not fit together")
    return [Cylinders(bits[a:b], mask[a:b], angle[a:b], int(n)) for a, b, n in zip(off[:-1], off[1:], counts,
                                                                                  strict=True)]
