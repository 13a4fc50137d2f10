"""Shift-tolerant dense matching of two prints' deep feature maps: a second deep score beside the embedding.

The embedding of :class:`fedprint.models.siamese.CompactEncoder` averages its last feature map over the whole print, so
two impressions that overlap only in part (the common case on a real sensor) are compared through everything
each one shows, the non-overlapping skin included. Dense matching keeps the map: every cell of the last block
(16 x 16 input pixels, about 1.6 mm at 250 dpi) has a unit-norm descriptor; two prints are compared at every
relative shift of up to ``radius`` cells and the score is the best mean cosine similarity over the cells where
both prints have skin (at least ``min_overlap`` of them)::

    s(a, b) = max_{|dy|, |dx| <= r}  sum_{(i, j) in O} <u_a(i, j), u_b(i - dy, j - dx)> / |O|,

O being the shifted cells on the print in both images. It is the correlation step of a classical image-based
matcher (Maltoni et al. 2009 [1]_, Sec. 4.7) run on learned local features instead of grey levels. Rotation is left to
the training augmentation by default; :func:`pair_dense_scores` can also search rotations of the second print.
The network is the one trained for the embedding; nothing is retrained.

:func:`fedprint.models.metrics.zscore_fusion` combines it with the embedding distance into one deep score. Both are
outputs
of the same network: this is not a fusion with a minutiae matcher (that one: ``studies/study_fusion.py``).

References
----------
.. [1] D. Maltoni, D. Maio, A. K. Jain, S. Prabhakar, *Handbook of Fingerprint Recognition*, 2nd ed., Springer
   2009, Sec. 4.7 (correlation-based matching).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedprint.models.device import on_device
from fedprint.models.metrics import choose_threshold, standardised_sum

#: Default search radius in cells (5 cells = 80 input px = about 8 mm at 250 dpi).
RADIUS = 5
#: Fewest overlapping skin cells for a shift to count.
MIN_OVERLAP = 6
#: Rotations of the second print searched by :func:`pair_dense_scores`, in degrees.
ANGLES = (0.0,)
#: A cell is skin when its input variance is at least this fraction of the image's largest cell variance.
SKIN_FRACTION = 0.2


def _feature_maps(encoder: nn.Module, images: torch.Tensor, batch_size: int = 128) -> torch.Tensor:
    """The encoder's last feature map (N, C, H, W) of ``images``, on the CPU, in eval mode (mode restored)."""
    if not hasattr(encoder, "feature_map"):
        raise ValueError(f"dense matching: the encoder {type(encoder).__name__} has no feature map; it needs the "
                         "compact encoder")
    if images.ndim != 4 or images.shape[1] != 1:
        raise ValueError(f"dense matching: expected images of shape (N, 1, S, S), got {tuple(images.shape)}")
    was_training = encoder.training
    encoder.eval()
    maps = []
    with on_device(encoder, torch.device("cpu")), torch.no_grad():  # the matching itself runs on the CPU
        for s in range(0, len(images), batch_size):
            maps.append(encoder.feature_map(images[s:s + batch_size].cpu()).float().contiguous())
    encoder.train(was_training)
    return torch.cat(maps)


def describe_cells(fmap: torch.Tensor, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(unit-norm descriptors (N, C, H·W), skin mask (N, H·W)) of a feature map and the inputs it came from."""
    cell = images.shape[-1] // fmap.shape[-1]
    x = images.float().to(fmap.device)
    var = F.avg_pool2d(x * x, cell) - F.avg_pool2d(x, cell) ** 2
    var = var[:, 0, :fmap.shape[-2], :fmap.shape[-1]].flatten(1)
    skin = (var >= SKIN_FRACTION * var.amax(dim=1, keepdim=True).clamp(min=1e-12)).float()
    return F.normalize(fmap, dim=1).flatten(2), skin


def cell_descriptors(encoder: nn.Module, images: torch.Tensor, *, batch_size: int = 128
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit-norm cell descriptors of the encoder's last feature map and each cell's skin mask.

    Parameters
    ----------
    encoder : nn.Module
        A trained :class:`fedprint.models.siamese.CompactEncoder` (it needs ``feature_map``; ResNet-18 has none).
    images : Tensor, float32, shape (N, 1, S, S)
        Network inputs (already normalised).
    batch_size : int
        Images per forward pass (default 128).

    Returns
    -------
    desc : Tensor, float32, shape (N, C, H * W)
        Descriptor of every cell, L2-normalised over the C channels.
    skin : Tensor, float32, shape (N, H * W)
        1 where the cell's input variance is at least ``SKIN_FRACTION`` of the image's largest cell variance.
    """
    return describe_cells(_feature_maps(encoder, images, batch_size), images)


def feature_grid(encoder: nn.Module, images: torch.Tensor) -> tuple[int, int]:
    """(H, W) of the encoder's last feature map for inputs shaped like ``images``."""
    with on_device(encoder, torch.device("cpu")), torch.no_grad():
        h, w = encoder.feature_map(images[:1].cpu()).shape[-2:]
    return int(h), int(w)


@lru_cache(maxsize=8)
def shift_matrices(h: int, w: int, radius: int) -> torch.Tensor:
    """(H·W·H·W, (2r+1)²) 0/1 matrix: column k marks the cell pairs ((i, j), (i − dy, j − dx)) of shift k.

    Cached (a few MB for a 12 x 12 map, built once per grid and radius); callers must not modify it.
    """
    if radius < 0:
        raise ValueError(f"shift_matrices: radius must be >= 0 cells, got {radius}")
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    yy, xx = yy.ravel(), xx.ravel()
    dy = yy[:, None] - yy[None, :]
    dx = xx[:, None] - xx[None, :]
    cols = [((dy == sy) & (dx == sx)).ravel() for sy in range(-radius, radius + 1)
            for sx in range(-radius, radius + 1)]
    return torch.as_tensor(np.stack(cols, axis=1), dtype=torch.float32)


def dense_similarity(desc: torch.Tensor, skin: torch.Tensor, a, b, *, grid: tuple[int, int],
                     radius: int = RADIUS, min_overlap: int = MIN_OVERLAP, chunk: int = 1000,
                     desc_b: torch.Tensor | None = None, skin_b: torch.Tensor | None = None) -> np.ndarray:
    """Dense score s(a, b) of the module docstring for the image index pairs (a[k], b[k]); higher = same finger.

    Parameters
    ----------
    desc, skin : Tensor
        Output of :func:`cell_descriptors` for the images the indices refer to.
    a, b : array-like of int, shape (P,)
        Image indices of each pair.
    grid : (int, int)
        (H, W) of the feature map (``desc`` holds H·W cells).
    radius : int
        Largest shift searched, in cells per axis (default ``RADIUS``).
    min_overlap : int
        Fewest common skin cells for a shift to count (default ``MIN_OVERLAP``); a pair with no such shift
        scores −1 (the lowest cosine).
    chunk : int
        Pairs per batched product (memory: chunk · (H·W)² floats).
    desc_b, skin_b : Tensor, optional
        Descriptors and skin of the second image of each pair when they differ from ``desc`` / ``skin`` (the
        images rotated, :func:`pair_dense_scores`); default: the same.

    Returns
    -------
    ndarray, float32, shape (P,)
        Best mean cosine similarity in [−1, 1].
    """
    h, w = grid
    desc_b = desc if desc_b is None else desc_b
    skin_b = skin if skin_b is None else skin_b
    if desc.shape[-1] != h * w or skin.shape[-1] != h * w or desc_b.shape[-1] != h * w:
        raise ValueError(f"dense_similarity: grid {grid} does not match {desc.shape[-1]} cells")
    if min_overlap < 1:
        raise ValueError(f"dense_similarity: min_overlap must be >= 1 cell, got {min_overlap}")
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"dense_similarity: a and b must be 1-D index arrays of equal length, got {a.shape} and "
                         f"{b.shape}")
    shifts = shift_matrices(h, w, radius)
    out = np.empty(len(a), np.float32)
    with torch.no_grad():
        for s in range(0, len(a), chunk):
            ia, ib = torch.as_tensor(a[s:s + chunk]), torch.as_tensor(b[s:s + chunk])
            score = shifted_scores(desc[ia], skin[ia], desc_b[ib], skin_b[ib], shifts, min_overlap)
            out[s:s + chunk] = score.max(dim=1).values.numpy()
    return out


def shifted_scores(desc_a: torch.Tensor, skin_a: torch.Tensor, desc_b: torch.Tensor, skin_b: torch.Tensor,
                   shifts: torch.Tensor, min_overlap: int) -> torch.Tensor:
    """(P, S) mean cosine of every pair (desc_a[k], desc_b[k]) at each shift of ``shifts`` (:func:`shift_matrices`)
    over the cells where both have skin; −1 where fewer than ``min_overlap`` cells overlap. Differentiable in the
    descriptors (the training loss of :mod:`fedprint.models.dense_loss` uses it)."""
    sim = torch.bmm(desc_a.transpose(1, 2), desc_b)  # (P, HW, HW) cosine of every cell pair
    both = skin_a[:, :, None] * skin_b[:, None, :]
    shifts = shifts.to(sim.device)
    num = (sim * both).flatten(1) @ shifts
    cnt = both.flatten(1) @ shifts
    return torch.where(cnt >= min_overlap, num / cnt.clamp(min=1), torch.full_like(num, -1.0))


def rotate(images: torch.Tensor, degrees: float) -> torch.Tensor:
    """The inputs rotated by ``degrees`` about their centre (bilinear, 0 outside: the mean of a normalised input)."""
    if degrees == 0:
        return images
    t = np.deg2rad(degrees)
    theta = torch.tensor([[np.cos(t), -np.sin(t), 0.0], [np.sin(t), np.cos(t), 0.0]], dtype=images.dtype)
    grid = F.affine_grid(theta.expand(len(images), 2, 3), list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


@dataclass(frozen=True)
class PrintFeatures:
    """What the two scores need of a batch of inputs, computed once for any number of pair sets.

    ``embedding`` (N, d) unit-norm embeddings; ``grid`` (H, W) of the feature map; ``desc`` / ``skin`` the
    cell descriptors and skin of the inputs (:func:`cell_descriptors`); ``turned``: rotation angle in degrees ->
    (descriptors, skin) of the inputs rotated by it, for the second image of a pair (0: the inputs as they are).
    """

    embedding: torch.Tensor
    grid: tuple[int, int]
    desc: torch.Tensor
    skin: torch.Tensor
    turned: dict[float, tuple[torch.Tensor, torch.Tensor]]


def print_features(encoder: nn.Module, images: torch.Tensor, angles: tuple[float, ...] = ANGLES) -> PrintFeatures:
    """Embeddings and cell descriptors of ``images``, and descriptors of the images rotated by each of ``angles``.

    One forward pass per image and non-zero angle, plus one: the embedding is pooled from the same feature map as
    the unrotated descriptors.
    """
    if not angles:
        raise ValueError("print_features: angles must hold at least one rotation (0 for none)")
    fmap = _feature_maps(encoder, images)
    with torch.no_grad():
        emb = encoder.project(encoder.pool(fmap).flatten(1)).float()
    desc, skin = describe_cells(fmap, images)
    turned = {a: (desc, skin) if a == 0 else cell_descriptors(encoder, rotate(images.float().cpu(), a))
              for a in dict.fromkeys(float(x) for x in angles)}
    return PrintFeatures(embedding=emb, grid=(int(fmap.shape[-2]), int(fmap.shape[-1])), desc=desc, skin=skin,
                         turned=turned)


def pair_similarities(features: PrintFeatures, a, b, *, radius: int = RADIUS, min_overlap: int = MIN_OVERLAP
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(−embedding distance, dense score) of each pair (a[k], b[k]); both higher = same finger.

    The dense score is the best over shifts (:func:`dense_similarity`) and over the rotations of the second
    image that ``features`` holds.
    """
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    f = features
    g = -(f.embedding[a] - f.embedding[b]).norm(dim=1).numpy()
    dense = [dense_similarity(f.desc, f.skin, a, b, grid=f.grid, radius=radius, min_overlap=min_overlap,
                              desc_b=desc_b, skin_b=skin_b) for desc_b, skin_b in f.turned.values()]
    return g, np.max(dense, axis=0)


def pair_dense_scores(encoder: nn.Module, images: torch.Tensor, a, b, *, radius: int = RADIUS,
                      min_overlap: int = MIN_OVERLAP, angles: tuple[float, ...] = ANGLES) -> np.ndarray:
    """Dense score of each pair (a[k], b[k]) of ``images``, searched over shifts and over rotations of image b.

    For every angle in ``angles`` (degrees) the second image is rotated and matched at every shift; the score is
    the best over both. Cost: one forward pass per image and angle, and one :func:`dense_similarity` per angle.
    """
    return pair_similarities(print_features(encoder, images, angles), a, b, radius=radius,
                             min_overlap=min_overlap)[1]


def fusion_calibration(global_similarity: np.ndarray, dense: np.ndarray, labels: np.ndarray, *,
                       radius: int = RADIUS, min_overlap: int = MIN_OVERLAP, angles: tuple[float, ...] = ANGLES
                       ) -> dict:
    """What a model file stores to score ``global + dense`` (:func:`fused_scores`), from VALIDATION pairs.

    Parameters
    ----------
    global_similarity : ndarray, shape (P,)
        −(embedding distance) of each validation pair.
    dense : ndarray, shape (P,)
        :func:`pair_dense_scores` of the same pairs, searched with ``radius``, ``min_overlap`` and ``angles``.
    labels : ndarray, shape (P,)
        1 = same finger, 0 = different fingers (both classes needed: the threshold is chosen on them).

    Returns
    -------
    dict
        ``radius``, ``min_overlap``, ``angles``, the mean and standard deviation of each score over the pairs
        (the weights of :func:`fedprint.models.metrics.zscore_fusion`), ``threshold``: the accuracy-optimal fused score
        (match iff score >= it) and ``pairs``: how many validation pairs set them.
    """
    g, d, y = (np.asarray(v, float) for v in (global_similarity, dense, labels))
    if not (g.shape == d.shape == y.shape) or g.ndim != 1:
        raise ValueError("fusion_calibration: the two scores and the labels need one value per validation pair")
    if y.min() == y.max():
        raise ValueError("fusion_calibration: validation pairs of both classes are needed to choose a threshold")
    cal = {"radius": int(radius), "min_overlap": int(min_overlap), "angles": [float(a) for a in angles],
           "global_mean": float(g.mean()), "global_std": float(g.std()), "dense_mean": float(d.mean()),
           "dense_std": float(d.std()), "pairs": int(len(y))}
    t = choose_threshold(fused_scores(cal, g, d), y.astype(int), "accuracy", higher_is_genuine=True)
    return cal | {"threshold": float(t)}


def search_of(calibration: dict | None) -> dict:
    """The dense-match search (``radius``, ``min_overlap``, ``angles``) a fusion calibration was made with, as
    keyword arguments; the defaults without one."""
    if not calibration:
        return {"radius": RADIUS, "min_overlap": MIN_OVERLAP, "angles": ANGLES}
    return {"radius": int(calibration["radius"]), "min_overlap": int(calibration["min_overlap"]),
            "angles": tuple(float(a) for a in calibration.get("angles", ANGLES))}


def fused_scores(calibration: dict, global_similarity: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """``global + dense`` score of :func:`fedprint.models.metrics.zscore_fusion` with the weights a model file stores
    (higher = same)."""
    try:
        gm, gs = float(calibration["global_mean"]), float(calibration["global_std"])
        dm, ds = float(calibration["dense_mean"]), float(calibration["dense_std"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"fused_scores: not a score-fusion calibration: {calibration!r}") from None
    if not (gs > 0 and ds > 0):
        raise ValueError(f"fused_scores: the calibration's standard deviations must be > 0, got {gs} and {ds}")
    return standardised_sum([global_similarity, dense], [(gm, gs), (dm, ds)])
