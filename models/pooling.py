"""Generalised-mean (GeM) pooling of a feature map: a learned exponent between average and max pooling.

``GeM_p(X)_c = (mean_{h,w} max(X_chw, eps)^p)^(1/p)`` per channel c (Radenović et al. 2019 [1]_): p = 1 is
global average pooling, p -> inf max pooling. The exponent p is one learned scalar shared by all channels. A print
is mostly background ridges; a larger p lets a few strongly responding cells (a core, a delta, a minutia cluster)
weigh more than the global average gives them.

References
----------
.. [1] F. Radenović, G. Tolias, O. Chum, "Fine-tuning CNN Image Retrieval with No Human Annotation", IEEE TPAMI
   41(7), 2019 (arXiv:1711.02512).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

#: Initial exponent: the value Radenović et al. start from.
GEM_P0 = 3.0


class GeM(nn.Module):
    """GeM pooling to a ``grid`` x ``grid`` map: (N, C, H, W) non-negative -> (N, C, grid, grid).

    Parameters
    ----------
    grid : int
        Output side (default 1: one value per channel), as ``nn.AdaptiveAvgPool2d(grid)``.
    p : float
        Initial exponent (default 3), learned; clamped to >= 1 in the forward pass so the pooling stays between
        the average and the maximum.
    eps : float
        Floor of the activations before the power (default 1e-6; ReLU outputs are 0 in flat areas and 0^p has no
        gradient with respect to p).
    """

    def __init__(self, grid: int = 1, p: float = GEM_P0, eps: float = 1e-6) -> None:
        super().__init__()
        if not p >= 1:
            raise ValueError(f"GeM: the exponent p must be >= 1 (1 = average pooling), got {p!r}")
        self.grid = int(grid)
        self.p = nn.Parameter(torch.tensor(float(p)))
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.p.clamp(min=1.0)
        return F.adaptive_avg_pool2d(x.clamp(min=self.eps).pow(p), self.grid).pow(1.0 / p)
