"""Minutiae by crossing number on a binarised, thinned ridge map (FP-DFSN step 2, Yan et al. 2025 Eq. 9).

Pipeline: :func:`segment` (foreground mask) -> :func:`binarize` (ridge map, ridges True) -> :func:`thin`
(one-pixel skeleton) -> :func:`minutiae_from_skeleton` (crossing number, border filter, spurious-pair removal,
directions).  :func:`extract_minutiae` chains them.

Minutiae tables are float64 arrays of shape (n, 4) with columns ``x, y, direction, type`` (see
:class:`fedprint.data.record.GroundTruth`): ``x`` the pixel column, ``y`` the pixel row, ``direction`` in radians in
[0, 2*pi) measured in image axes (x right, y *down*, so an angle of pi/2 points down the image), ``type`` 1 for a
ridge ending (CN = 1) and 3 for a bifurcation (CN = 3).

Direction convention (ISO/IEC 19794-2-like, invariant under ridge/valley inversion):

* ending: the direction *along its ridge, away from the ending*, i.e. from the ridge tip into the ridge body;
* bifurcation: the direction *between the two branches*, i.e. away from the stem ridge.

(A ridge ending is a valley bifurcation seen in the inverted image, and both rules then give the same angle.)
"""

from __future__ import annotations

import cv2
import numpy as np
from scipy import ndimage
from skimage.morphology import skeletonize

from fedprint.data.record import BIFURCATION, ENDING, empty_minutiae
from fedprint.models.ridges import gabor_enhance, orientation_field

# The 8 neighbours of a pixel in cyclic (clockwise on screen) order starting at north, as (drow, dcol).
# Eq. (9) sums |x_{i+1} - x_i| around this cycle, with x_8 = x_0.
_RING = np.array([(-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1)], dtype=np.int64)
# Neighbour order used when tracing a ridge: 4-neighbours first, so a diagonal shortcut is taken only when
# no edge-adjacent continuation exists.
_TRACE = np.array([(-1, 0), (0, 1), (1, 0), (0, -1), (-1, 1), (1, 1), (1, -1), (-1, -1)], dtype=np.int64)


def _check_image(image: np.ndarray, name: str = "image") -> np.ndarray:
    if not isinstance(image, np.ndarray):
        raise ValueError(f"{name}: expected a numpy array, got {type(image).__name__}")
    if image.ndim != 2 or image.size == 0:
        raise ValueError(f"{name}: expected a non-empty 2-D array, got shape {image.shape}")
    return image


def _check_bool_map(arr: np.ndarray, name: str) -> np.ndarray:
    arr = _check_image(arr, name)
    if arr.dtype != bool:
        if not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name}: expected a boolean (or 0/1) map, got values outside {{0, 1}}")
        arr = arr.astype(bool)
    return arr


def crossing_number(skeleton: np.ndarray) -> np.ndarray:
    """Crossing number of every pixel of a binary map (Yan et al. 2025 Eq. 9).

    ``CN(P) = 1/2 * sum_{i=0..7} |x_{i+1} - x_i|`` over the 8 neighbours of ``P`` in cyclic order, ``x_8 = x_0``;
    pixels outside the image count as 0.  Computed with array shifts, for all pixels at once.

    Parameters
    ----------
    skeleton : ndarray of bool, shape (H, W)
        Thinned ridge map (ridge pixels True).

    Returns
    -------
    cn : ndarray of uint8, shape (H, W)
        Crossing number of every pixel (also of background pixels; mask it with ``skeleton`` to use it).
    """
    sk = _check_bool_map(skeleton, "skeleton")
    h, w = sk.shape
    pad = np.pad(sk, 1).astype(np.int8)
    ring = [pad[1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w] for dr, dc in _RING]
    total = np.zeros((h, w), dtype=np.int8)
    for i in range(8):
        total += np.abs(ring[(i + 1) % 8] - ring[i])
    return (total // 2).astype(np.uint8)


def _one_per_component(candidates: np.ndarray) -> np.ndarray:
    """Collapse each 8-connected blob of candidate pixels to the pixel nearest its centroid; (k, 2) rows, cols."""
    labels, n = ndimage.label(candidates, structure=np.ones((3, 3), bool))
    if n == 0:
        return np.zeros((0, 2), dtype=np.int64)
    rr, cc = np.nonzero(labels)
    lab = labels[rr, cc] - 1
    counts = np.bincount(lab, minlength=n)
    cy = np.bincount(lab, rr, minlength=n) / counts
    cx = np.bincount(lab, cc, minlength=n) / counts
    d2 = (rr - cy[lab]) ** 2 + (cc - cx[lab]) ** 2
    # per label, the pixel of minimum d2: sort by (label, d2) and take the first of each label
    order = np.lexsort((d2, lab))
    first = order[np.r_[0, np.flatnonzero(np.diff(lab[order])) + 1]]
    return np.stack([rr[first], cc[first]], axis=1)


def _trace(
    skeleton: np.ndarray, starts: np.ndarray, blocked: np.ndarray, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """Follow the skeleton from many start pixels at once, for up to ``length`` steps each.

    Parameters
    ----------
    skeleton : (H, W) bool
    starts : (m, 2) int
        First pixel of each trace (row, col).
    blocked : (m, k, 2) int
        Pixels each trace may never enter (e.g. the minutia and its other branches); entries of -1 are unused.
    length : int
        Maximum number of steps after the start pixel.

    Returns
    -------
    end : (m, 2) int
        Last pixel reached by each trace.
    steps : (m,) int
        Number of pixels visited (including the start pixel).
    """
    m = len(starts)
    h, w = skeleton.shape
    hist = np.full((m, blocked.shape[1] + length + 1, 2), -1, dtype=np.int64)
    hist[:, : blocked.shape[1]] = blocked
    k0 = blocked.shape[1]
    pos = starts.astype(np.int64).copy()
    hist[:, k0] = pos
    steps = np.ones(m, dtype=np.int64)
    alive = np.ones(m, dtype=bool)
    for s in range(length):
        nb = pos[:, None, :] + _TRACE[None, :, :]  # (m, 8, 2)
        inside = (nb[..., 0] >= 0) & (nb[..., 0] < h) & (nb[..., 1] >= 0) & (nb[..., 1] < w)
        r = np.clip(nb[..., 0], 0, h - 1)
        c = np.clip(nb[..., 1], 0, w - 1)
        ok = inside & skeleton[r, c]
        seen = (nb[:, :, None, :] == hist[:, None, : k0 + s + 1, :]).all(-1).any(-1)  # (m, 8)
        ok &= ~seen & alive[:, None]
        has = ok.any(1)
        choice = np.argmax(ok, axis=1)
        nxt = nb[np.arange(m), choice]
        pos = np.where(has[:, None], nxt, pos)
        hist[:, k0 + s + 1] = np.where(has[:, None], nxt, -1)
        steps += has
        alive &= has
        if not alive.any():
            break
    return pos, steps


def _branch_starts(skeleton: np.ndarray, rc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each pixel in ``rc`` (k, 2), the first pixel of each run of set neighbours in ring order.

    Returns ``starts`` (k, 8, 2) and ``valid`` (k, 8): ``valid[j, i]`` marks ring position ``i`` as the first
    (a 4-neighbour where the run has one) pixel of a run of consecutive set neighbours of minutia ``j``.
    """
    h, w = skeleton.shape
    pad = np.pad(skeleton, 1)
    nb = rc[:, None, :] + _RING[None]  # (k, 8, 2)
    on = pad[nb[..., 0] + 1, nb[..., 1] + 1]
    prev_on = np.roll(on, 1, axis=1)
    run_start = on & ~prev_on  # a 0 -> 1 transition in ring order starts a run (branch)
    # Prefer a 4-neighbour (even ring index) inside the run: if the run starts on a diagonal and the next ring
    # pixel (a 4-neighbour) is also on, start the branch there.
    nxt_on = np.roll(on, -1, axis=1)
    diag = (np.arange(8) % 2 == 1)[None, :]
    shift = run_start & diag & nxt_on
    valid = (run_start & ~shift) | np.roll(shift, 1, axis=1)
    inside = (nb[..., 0] >= 0) & (nb[..., 0] < h) & (nb[..., 1] >= 0) & (nb[..., 1] < w)
    return nb, valid & inside


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, n, out=np.zeros_like(v, dtype=np.float64), where=n > 0)


def _directions(
    skeleton: np.ndarray, rc: np.ndarray, kinds: np.ndarray, trace_length: int, orientation: np.ndarray | None
) -> np.ndarray:
    """Direction (radians, image axes) of each minutia by tracing its branches ``trace_length`` pixels."""
    k = len(rc)
    if k == 0:
        return np.zeros(0)
    starts, valid = _branch_starts(skeleton, rc)  # (k, 8, 2), (k, 8)
    # Each trace is blocked from the minutia pixel and from all its neighbours (so branches stay apart).
    ring = rc[:, None, :] + _RING[None]
    blocked = np.concatenate([rc[:, None, :], ring], axis=1)  # (k, 9, 2)
    jj, ii = np.nonzero(valid)
    ends, _ = _trace(skeleton, starts[jj, ii], blocked[jj], trace_length)
    vec = np.zeros((k, 8, 2))
    # (dx, dy) from the minutia to the end of each branch trace
    vec[jj, ii] = np.stack([ends[:, 1] - rc[jj, 1], ends[:, 0] - rc[jj, 0]], axis=1)
    u = _unit(vec)  # (k, 8, 2); zero rows for absent branches
    d = np.zeros((k, 2))
    end_m = kinds == ENDING
    d[end_m] = u[end_m].sum(1)  # an ending has one branch: into the ridge body
    bif = np.flatnonzero(kinds == BIFURCATION)
    if len(bif):
        ub = u[bif]  # (b, 8, 2)
        g = np.einsum("bid,bjd->bij", ub, ub)  # pairwise cosines of branch directions
        present = np.linalg.norm(ub, axis=-1) > 0
        # the stem is the branch least aligned with the others (smallest summed cosine to the other branches)
        score = np.where(present, (g.sum(2) - 1.0), np.inf)
        stem = np.argmin(score, axis=1)
        others = present.copy()
        others[np.arange(len(bif)), stem] = False
        between = (ub * others[..., None]).sum(1)
        stem_v = ub[np.arange(len(bif)), stem]
        # between the two branches; if they cancel exactly, pointing away from the stem
        d[bif] = np.where(np.linalg.norm(between, axis=1, keepdims=True) > 1e-9, between, -stem_v)
    ang = np.arctan2(d[:, 1], d[:, 0])
    if orientation is not None:
        # Snap to the (smoother) ridge orientation at the minutia, keeping the traced sense.
        theta = orientation[rc[:, 0], rc[:, 1]]
        flip = np.cos(theta - ang) < 0
        ang = np.where(np.linalg.norm(d, axis=1) > 0, np.where(flip, theta + np.pi, theta), theta)
    return np.mod(ang, 2 * np.pi)


def border_distance(mask: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    """Euclidean distance (pixels) from each pixel to the nearest pixel outside the foreground.

    The region outside the image counts as background, so a first-column foreground pixel has distance 1.
    ``mask=None`` means the whole image is foreground.
    """
    fg = np.ones(shape, bool) if mask is None else mask
    return ndimage.distance_transform_edt(np.pad(fg, 1))[1:-1, 1:-1]


def remove_spurious(minutiae: np.ndarray, min_separation: float = 6.0) -> np.ndarray:
    """Drop both members of every pair of minutiae closer than ``min_separation`` pixels.

    Close pairs are the classic artefacts of thinning noisy ridges: two endings facing each other (broken ridge),
    an ending next to a bifurcation (spur), two bifurcations (bridge or hole).  Genuine minutiae are rarely
    closer than about half a ridge period (about 4-5 px at 500 dpi).  ``min_separation <= 0`` disables it.
    """
    if min_separation <= 0 or len(minutiae) < 2:
        return minutiae
    xy = minutiae[:, :2]
    d2 = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    return minutiae[(d2 >= min_separation**2).all(1)]


def minutiae_from_skeleton(
    skeleton: np.ndarray,
    mask: np.ndarray | None = None,
    border: int = 10,
    orientation: np.ndarray | None = None,
    *,
    min_separation: float = 6.0,
    trace_length: int = 10,
) -> np.ndarray:
    """Minutiae of a thinned ridge map by crossing number (Yan et al. 2025 Eq. 9).

    Ridge pixels with CN = 1 are endings and CN = 3 bifurcations.  Adjacent bifurcation pixels of one junction
    (thinning often leaves two or three) are merged into one.  Then minutiae closer than ``border`` pixels to the
    foreground border are dropped (the paper's T_d filter), and close pairs are removed as spurious
    (:func:`remove_spurious`).

    Parameters
    ----------
    skeleton : ndarray of bool, shape (H, W)
        One-pixel-wide ridge map, ridge pixels True (0/1 integers are accepted).
    mask : ndarray of bool, shape (H, W), optional
        Foreground (fingerprint area).  ``None``: the whole image is foreground, so only the image edge counts.
    border : int, default 10
        T_d in pixels: a minutia is dropped when its Euclidean distance to the nearest pixel outside the
        foreground (the image surround counts as outside; see :func:`border_distance`) is below ``border``.
    orientation : ndarray of float, shape (H, W), optional
        Ridge orientation in radians (modulo pi, image axes).  When given, each direction is the orientation at
        the minutia with the sense (which of theta, theta + pi) taken from the traced ridge; otherwise the traced
        direction itself.
    min_separation : float, default 6.0
        Spurious-pair distance in pixels for :func:`remove_spurious`; 0 disables it.
    trace_length : int, default 10
        How many skeleton pixels each branch is followed to measure directions.

    Returns
    -------
    minutiae : ndarray of float64, shape (n, 4)
        Columns ``x`` (column), ``y`` (row), ``direction`` in [0, 2*pi) and ``type`` (1 ending, 3 bifurcation);
        direction convention in the module docstring.  Rows sorted by (y, x).
    """
    sk = _check_bool_map(skeleton, "skeleton")
    if mask is not None:
        mask = _check_bool_map(mask, "mask")
        if mask.shape != sk.shape:
            raise ValueError(f"mask: expected shape {sk.shape} (the skeleton's), got {mask.shape}")
    if orientation is not None:
        orientation = np.asarray(orientation, dtype=np.float64)
        if orientation.shape != sk.shape:
            raise ValueError(f"orientation: expected shape {sk.shape} (the skeleton's), got {orientation.shape}")
    if border < 0:
        raise ValueError(f"border: expected a non-negative number of pixels, got {border}")
    if trace_length < 1:
        raise ValueError(f"trace_length: expected >= 1, got {trace_length}")

    cn = crossing_number(sk)
    ends = np.argwhere(sk & (cn == 1))
    bifs = _one_per_component(sk & (cn == 3))
    rc = np.concatenate([ends, bifs]).astype(np.int64)
    kinds = np.r_[np.full(len(ends), ENDING), np.full(len(bifs), BIFURCATION)].astype(np.float64)
    if len(rc) == 0:
        return empty_minutiae()

    dist = border_distance(mask, sk.shape)
    keep = dist[rc[:, 0], rc[:, 1]] >= border
    rc, kinds = rc[keep], kinds[keep]
    if len(rc) == 0:
        return empty_minutiae()

    ang = _directions(sk, rc, kinds, trace_length, orientation)
    out = np.column_stack([rc[:, 1], rc[:, 0], ang, kinds]).astype(np.float64)
    out = remove_spurious(out, min_separation)
    order = np.lexsort((out[:, 0], out[:, 1]))
    return out[order]


# --------------------------------------------------------------------------------------------------------------
# Image -> skeleton pipeline
# --------------------------------------------------------------------------------------------------------------


def _check_uint8(image: np.ndarray) -> np.ndarray:
    image = _check_image(image, "image")
    if image.dtype != np.uint8:
        raise ValueError(f"image: expected uint8 grayscale, got dtype {image.dtype}")
    return image


def _box(x: np.ndarray, size: int) -> np.ndarray:
    return cv2.boxFilter(x, cv2.CV_64F, (size, size), normalize=True, borderType=cv2.BORDER_REFLECT)


def segment(
    image: np.ndarray, block: int = 16, var_threshold: float = 0.1, coherence_threshold: float = 0.2
) -> np.ndarray:
    """Foreground (fingerprint area) mask from local intensity variance and gradient coherence.

    A pixel is foreground when the local standard deviation in a ``block`` window exceeds ``var_threshold``
    times the global standard deviation *and* either the coherence of the gradient structure tensor exceeds
    ``coherence_threshold`` or the local variance is high (above the image's median local standard deviation).
    The mask is then cleaned morphologically (opening, hole filling, largest component, a smooth closing).

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
    block : int, default 16
        Window size in pixels (about two ridge periods at 500 dpi).
    var_threshold : float, default 0.1
        Relative local-std threshold.
    coherence_threshold : float, default 0.2
        Minimum gradient coherence (0 isotropic noise, 1 perfect parallel ridges).

    Returns
    -------
    mask : ndarray of bool, shape (H, W)
    """
    img = _check_uint8(image).astype(np.float64)
    mean = _box(img, block)
    std = np.sqrt(np.maximum(_box(img * img, block) - mean**2, 0))
    g = img.std()
    if g == 0:
        return np.zeros(img.shape, bool)
    _, coh = orientation_field(img, sigma=block / 2)
    strong = std > np.median(std)
    fg = (std > var_threshold * g) & ((coh > coherence_threshold) | strong)
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (block + 1, block + 1))
    fg = cv2.morphologyEx(fg.astype(np.uint8), cv2.MORPH_OPEN, k).astype(bool)
    fg = ndimage.binary_fill_holes(fg)
    labels, n = ndimage.label(fg)
    if n > 1:
        sizes = np.bincount(labels.ravel())
        sizes[0] = 0
        fg = labels == np.argmax(sizes)
    fg = cv2.morphologyEx(fg.astype(np.uint8), cv2.MORPH_CLOSE, k).astype(bool)
    return ndimage.binary_fill_holes(fg)


def _ridge_period(img: np.ndarray, mask: np.ndarray) -> float:
    """Dominant ridge period (pixels): peak of the radially averaged power spectrum of the foreground.

    Pass a locally normalised image; on a raw image, low-frequency illumination can dominate the band.
    """
    x = np.where(mask, img - img[mask].mean(), 0.0)
    p = np.abs(np.fft.fftshift(np.fft.fft2(x))) ** 2
    h, w = p.shape
    yy, xx = np.mgrid[:h, :w]
    r = np.hypot((yy - h // 2) / h, (xx - w // 2) / w)  # cycles per pixel
    band = (r > 1 / 25) & (r < 1 / 4)  # periods 4..25 px: anything plausible for 250-1000 dpi sensors
    if not band.any():
        return 9.0
    rb = np.round(r[band] * 200).astype(int)
    prof = np.bincount(rb, p[band]) / np.maximum(np.bincount(rb), 1)
    f = np.argmax(prof) / 200
    return float(np.clip(1 / max(f, 1e-6), 4.0, 25.0))


def binarize(
    image: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    block: int = 15,
    enhance: bool = True,
    orientation_sigma: float = 10.0,
) -> np.ndarray:
    """Ridge map (ridge pixels True; ridges are dark in real prints) inside the foreground.

    Local normalisation (subtract a ``block`` box mean, divide by the local std), then optionally an oriented
    Gabor filter bank tuned to the estimated ridge period (:func:`gabor_enhance`), then threshold at 0 (the
    normalised image has zero local mean, so this is an adaptive threshold).  Small specks are removed.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
    mask : ndarray of bool, shape (H, W), optional
        Foreground; :func:`segment` is used when None.
    block : int, default 15
        Normalisation window in pixels (odd, about 1.5 ridge periods at 500 dpi).
    enhance : bool, default True
        Apply Gabor enhancement (slower, fewer spurious minutiae).
    orientation_sigma : float, default 10.0
        Smoothing (pixels) of the orientation field that steers the Gabor filters.
    """
    img = _check_uint8(image).astype(np.float64)
    if mask is None:
        mask = segment(image)
    mask = _check_bool_map(mask, "mask")
    if mask.shape != img.shape:
        raise ValueError(f"mask: expected shape {img.shape} (the image's), got {mask.shape}")
    if not mask.any():
        return np.zeros(img.shape, bool)
    mean = _box(img, block)
    std = np.sqrt(np.maximum(_box(img * img, block) - mean**2, 0))
    norm = (img - mean) / np.maximum(std, 1e-3 * max(img.std(), 1.0))
    # Dark ridges -> positive values after sign flip.
    norm = -norm
    if enhance:
        theta, _ = orientation_field(img, sigma=orientation_sigma)
        # Period from the normalised image: its low frequencies (illumination, pressure) are already removed.
        norm = gabor_enhance(norm, mask, theta, _ridge_period(norm, mask))
    ridges = (norm > 0) & mask
    # Remove isolated specks (< 10 px) that would thin to tiny fragments with two endings each.
    labels, n = ndimage.label(ridges, structure=np.ones((3, 3), bool))
    if n:
        sizes = np.bincount(labels.ravel())
        small = sizes < 10
        small[0] = False
        ridges &= ~small[labels]
    return ridges


def thin(ridges: np.ndarray) -> np.ndarray:
    """One-pixel-wide, 8-connected skeleton of a binary ridge map (scikit-image ``skeletonize``)."""
    return skeletonize(_check_bool_map(ridges, "ridges"))


def extract_minutiae(
    image: np.ndarray,
    *,
    border: int = 10,
    mask: np.ndarray | None = None,
    enhance: bool = True,
    min_separation: float = 6.0,
    use_orientation: bool = True,
) -> np.ndarray:
    """Full minutiae pipeline on a grayscale fingerprint: segment, binarise, thin, crossing number.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
        Grayscale fingerprint, ridges dark.
    border : int, default 10
        T_d in pixels (see :func:`minutiae_from_skeleton`).
    mask : ndarray of bool, optional
        Foreground mask; computed by :func:`segment` when None.
    enhance : bool, default True
        Gabor enhancement before thresholding (see :func:`binarize`).
    min_separation : float, default 6.0
        Spurious-pair distance in pixels (see :func:`remove_spurious`).
    use_orientation : bool, default True
        Take directions from the smoothed orientation field (sense from ridge tracing).

    Returns
    -------
    minutiae : ndarray of float64, shape (n, 4)
        ``x, y, direction, type`` (see the module docstring); shape (0, 4) when none are found.
    """
    image = _check_uint8(image)
    if mask is None:
        mask = segment(image)
    ridges = binarize(image, mask, enhance=enhance)
    skel = thin(ridges)
    theta = orientation_field(image)[0] if use_orientation else None
    return minutiae_from_skeleton(skel, mask, border, theta, min_separation=min_separation)
