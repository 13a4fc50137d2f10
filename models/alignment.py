"""Learned alignment of a print before the encoder: a spatial transformer restricted to a rotation and a shift.

DeepPrint (Engelsma et al. 2021 [1]_, Sec. 3.2) puts a localisation network in front of its encoder that predicts a
rotation and a translation of the input, applied with a differentiable sampler (Jaderberg et al. 2015 [2]_), trained
by the identity loss alone; the encoder then sees prints in a pose of the network's own choosing. Here the same
module, small enough for 2 CPU cores: it looks at a 64 x 64 thumbnail of the input, and its last layer starts at
zero, so a freshly built aligner is the identity and a model pre-trained without one starts where it was.

``[model] align = true`` (:class:`fedprint.config.experiment.ModelSection`) puts one in front of the compact
encoder (:class:`fedprint.models.siamese.CompactEncoder`).

References
----------
.. [1] Engelsma, J. J., Cao, K., Jain, A. K. "Learning a Fixed-Length Fingerprint Representation." IEEE TPAMI
       43(6), 2021 (DeepPrint; Sec. 3.2, the alignment module).
.. [2] Jaderberg, M., Simonyan, K., Zisserman, A., Kavukcuoglu, K. "Spatial Transformer Networks." NeurIPS 2015.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

#: Side of the thumbnail the localisation network sees (pixels).
THUMBNAIL = 64


class RigidAligner(nn.Module):
    """Rotate and shift each input by the angle and offset a small CNN predicts from it.

    Parameters
    ----------
    max_angle : float
        Largest rotation in degrees (default 45): the predicted angle is ``max_angle · tanh(a)``.
    max_shift : float
        Largest shift as a fraction of the half-side (default 0.25, i.e. 12.5 % of the input side per axis):
        ``max_shift · tanh(t)``, in the normalised coordinates of :func:`torch.nn.functional.affine_grid`.
    width : int
        Channels of the localisation network's first conv (default 8; then 2x, 4x).

    Notes
    -----
    The sampler pads with the input's border values, so the rotated corners look like the background next to
    them rather than a black wedge. The pose is recomputed for every input: nothing is stored between calls.
    """

    def __init__(self, max_angle: float = 45.0, max_shift: float = 0.25, width: int = 8) -> None:
        super().__init__()
        if not (math.isfinite(max_angle) and 0 < max_angle <= 180):
            raise ValueError(f"RigidAligner: max_angle must lie in (0, 180] degrees, got {max_angle!r}")
        if not (math.isfinite(max_shift) and 0 < max_shift <= 1):
            raise ValueError(f"RigidAligner: max_shift must lie in (0, 1] (fraction of the half-side), got "
                             f"{max_shift!r}")
        chans = [1, width, 2 * width, 4 * width]
        layers: list[nn.Module] = []
        for cin, cout in zip(chans[:-1], chans[1:], strict=True):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.GroupNorm(1, cout),
                       nn.ReLU(inplace=True)]
        self.loc = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.pose = nn.Linear(chans[-1], 3)
        nn.init.zeros_(self.pose.weight)  # identity at start: angle 0, shift 0
        nn.init.zeros_(self.pose.bias)
        self.max_angle = float(max_angle)
        self.max_shift = float(max_shift)

    def poses(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 1, S, S) inputs -> (N, 3) poses: angle in degrees, shift x and y (normalised coordinates)."""
        if x.ndim != 4 or x.shape[1] != 1:
            raise ValueError(f"RigidAligner: expected (N, 1, S, S) grayscale inputs, got {tuple(x.shape)}")
        thumb = F.adaptive_avg_pool2d(x, THUMBNAIL) if x.shape[-1] > THUMBNAIL else x
        raw = torch.tanh(self.pose(self.loc(thumb)))
        return torch.cat([self.max_angle * raw[:, :1], self.max_shift * raw[:, 1:]], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 1, S, S) -> (N, 1, S, S): each input resampled in its predicted pose."""
        pose = self.poses(x)
        t = torch.deg2rad(pose[:, 0])
        c, s = torch.cos(t), torch.sin(t)
        theta = torch.stack([torch.stack([c, -s, pose[:, 1]], dim=1), torch.stack([s, c, pose[:, 2]], dim=1)], dim=1)
        grid = F.affine_grid(theta.to(x.dtype), list(x.shape), align_corners=False)
        return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
