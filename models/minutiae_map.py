"""Minutiae-map multi-task training: a second head that predicts where the minutiae are, trained beside Eq. 1.

DeepPrint (Engelsma et al. 2021 [1]_, Sec. 3.3) shares its early layers between the embedding and a branch that
regresses a minutiae map; the branch is dropped after training, but it forces the shared features to encode the
ridge topology a fingerprint examiner would use instead of whatever texture separates the training fingers.
This module is FedPrint's version of that branch for :class:`fedprint.models.siamese.CompactEncoder`:

* **target** (:func:`splat`): per input, two density maps at input resolution, one for ridge endings and one
  for bifurcations; each minutia adds a Gaussian of unit mass (σ = ``sigma`` px). The maps go through the
  augmentation's warp with the image (``models.augment.augment(..., carry=maps)``), so they stay aligned with it,
  and :func:`cell_counts` sums them over the head's cells (expected minutiae per cell).
* **head** (:class:`MinutiaeHead`): 3x3 conv + ReLU on the encoder's last feature map (S/16), then a stride-2
  transposed conv to S/8 (cells of 8 px, about two ridge periods at 250 dpi) with one channel per type; or, with
  ``[train] minutiae_layer = "middle"``, on the block-3 map (already S/8), the branch leaving the trunk earlier. Unlike
  DeepPrint's six orientation channels, there is no direction channel: the augmentation rotates the print, and a
  type map is invariant to that.
* **loss** (:func:`minutiae_map_loss`): mean squared error of the predicted counts, divided by the mean squared
  target of the batch, so predicting "no minutiae" costs 1 and a perfect map 0 whatever the print's density.
  ``[train] minutiae_weight`` multiplies it (default 0: off).

Measured on FCJ2020 (``studies/study_recipe.py``, 4 finger splits of 600 genuine / 20,000 impostor held-out pairs,
paired with the 40-epoch baseline; ``docs/studies/real_prints_recipe.md``): no setting helped. Weight 1 on the last map
+1.0 EER points [+0.0, +2.0], weight 0.1 −0.0 [−0.5, +0.4], weight 1 on the block-3 map +0.3 [−0.7, +1.2].

Where the minutiae come from is the caller's choice (``fedprint.training.minutiae_targets`` runs the extractor of
:mod:`fedprint.data.minutiae` on the network inputs, so real prints and synthetic ones get targets the same way).

References
----------
.. [1] J. J. Engelsma, K. Cao, A. K. Jain, "Learning a fixed-length fingerprint representation", IEEE TPAMI
   43(6), 2021 (DeepPrint; the minutiae-map branch, Sec. 3.3).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

#: Side in input pixels of one cell of the predicted map (the head upsamples the S/16 feature map once).
CELL = 8
#: Map channels: ridge endings, bifurcations (``data.record.ENDING`` = 1, ``BIFURCATION`` = 3).
TYPES = (1, 3)


class MinutiaeHead(nn.Module):
    """Feature map -> predicted minutiae counts per 8 px cell (N, 2, S/8, S/8).

    Parameters
    ----------
    channels : int
        Channels C of the feature map it reads (``8 * width`` for the compact encoder's last map, ``4 * width``
        for its block-3 map).
    upsample : bool
        True (default): the map is at S/16 (the last one) and a stride-2 transposed conv brings it to S/8; False:
        the map is already at S/8 (block 3) and a 1x1 conv predicts the counts.
    hidden : int
        Channels of the intermediate conv (default 32).
    """

    def __init__(self, channels: int, upsample: bool = True, hidden: int = 32) -> None:
        super().__init__()
        if not isinstance(channels, int) or channels < 1:
            raise ValueError(f"MinutiaeHead: channels must be a positive integer, got {channels!r}")
        out = (nn.ConvTranspose2d(hidden, len(TYPES), 4, stride=2, padding=1) if upsample
               else nn.Conv2d(hidden, len(TYPES), 1))
        self.body = nn.Sequential(nn.Conv2d(channels, hidden, 3, padding=1), nn.ReLU(inplace=True), out)

    def forward(self, fmap: torch.Tensor) -> torch.Tensor:
        return self.body(fmap)


def splat(minutiae: list[np.ndarray], size: int, sigma: float = 1.5) -> torch.Tensor:
    """Density maps of minutiae tables: (N, 2, size, size) float32, each minutia a unit-mass Gaussian.

    Parameters
    ----------
    minutiae : list of ndarray, shape (n_i, 4)
        One table per input, columns ``x, y, direction, type`` in input pixels (``data.minutiae`` convention);
        rows of another type than :data:`TYPES` are ignored.
    size : int
        Side S of the inputs, in pixels.
    sigma : float
        Standard deviation of each Gaussian in pixels (default 1.5).
    """
    if sigma <= 0:
        raise ValueError(f"splat: sigma must be > 0 pixels, got {sigma!r}")
    out = torch.zeros(len(minutiae), len(TYPES), size, size)
    grid = torch.arange(size, dtype=torch.float32)
    for i, m in enumerate(minutiae):
        m = np.asarray(m, dtype=np.float64).reshape(-1, 4)
        for c, t in enumerate(TYPES):
            pts = torch.from_numpy(m[m[:, 3] == t, :2]).float()
            if len(pts) == 0:
                continue
            gx = torch.exp(-0.5 * ((grid[None, :] - pts[:, :1]) / sigma) ** 2)  # (n, S) along x
            gy = torch.exp(-0.5 * ((grid[None, :] - pts[:, 1:]) / sigma) ** 2)  # (n, S) along y
            gx = gx / gx.sum(1, keepdim=True).clamp_min(1e-12)
            gy = gy / gy.sum(1, keepdim=True).clamp_min(1e-12)
            out[i, c] = gy.T @ gx  # sum over minutiae of the separable Gaussians
    return out


def cell_counts(maps: torch.Tensor, cell: int = CELL) -> torch.Tensor:
    """Density maps (N, 2, S, S) -> expected minutiae per ``cell`` x ``cell`` block, (N, 2, S/cell, S/cell)."""
    return F.avg_pool2d(maps, cell) * float(cell * cell)


def minutiae_map_loss(pred: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
    """Normalised squared error of predicted cell counts against the (warped) density maps.

    ``mean((pred - counts)²) / mean(counts²)``: 1 for an all-zero prediction, 0 for a perfect one. A batch
    without any minutia (blank inputs) contributes the plain mean squared error instead.

    Parameters
    ----------
    pred : Tensor, shape (N, 2, S/8, S/8)
        :class:`MinutiaeHead` output.
    maps : Tensor, shape (N, 2, S, S)
        :func:`splat` maps, warped with their inputs.
    """
    cell = maps.shape[-1] // max(pred.shape[-1], 1)
    if pred.ndim != 4 or maps.ndim != 4 or maps.shape[:2] != pred.shape[:2] or cell < 1 or maps.shape[-2:] != (
            pred.shape[-2] * cell, pred.shape[-1] * cell):
        raise ValueError(f"minutiae_map_loss: the maps {tuple(maps.shape)} do not match the prediction "
                         f"{tuple(pred.shape)} (same N and channels, a whole number of pixels per cell)")
    target = cell_counts(maps.to(pred.device, torch.float32), cell)
    scale = target.pow(2).mean().detach()
    err = (pred.float() - target).pow(2).mean()
    return err / scale if float(scale) > 0 else err
