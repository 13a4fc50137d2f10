"""Contrastive loss (seed 003 Eq. 1) and the distance decision rule (seed 003 Eq. 2).

Eq. 1:  L(x1, x2, y) = y * d^2 + (1 - y) * max(0, m - d)^2,   d = ||f(x1) - f(x2)||_2,
with y = 1 for two impressions of the same finger and y = 0 otherwise; the batch loss is the mean over pairs.

The encoders of :mod:`models.siamese` output unit-norm embeddings, so d lies in [0, 2]: the default margin
m = 1.0 asks impostor embeddings to be at least 60 degrees apart (d = 2 sin(angle / 2)). A margin >= 2 can
never be met and keeps every impostor pair active.

Eq. 2 matches iff d <= m. We keep the rule's form but not its constant: the threshold is chosen on validation
pairs (:func:`models.metrics.choose_threshold`) and applied unchanged to the test pairs, since nothing in the
training makes the margin the accuracy-optimal cut-off.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from models.siamese import distance


def _check_labels(y: torch.Tensor, n: int) -> torch.Tensor:
    y = torch.as_tensor(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"contrastive_loss: y must have shape ({n},) (one label per pair), "
                         f"got {tuple(y.shape)}")
    if bool(((y != 0) & (y != 1)).any()):
        raise ValueError("contrastive_loss: y must contain only 0 (impostor) and 1 (genuine)")
    return y


def contrastive_loss_from_distance(
    d: torch.Tensor, y: torch.Tensor, margin: float = 1.0, check_labels: bool = True
) -> torch.Tensor:
    """Eq. 1 from pair distances: mean_i [ y_i d_i^2 + (1 - y_i) max(0, m - d_i)^2 ].

    Parameters
    ----------
    d : Tensor, shape (N,)
        Euclidean distances between the two embeddings of each pair (N >= 1).
    y : Tensor, shape (N,)
        1 = same finger (genuine), 0 = different fingers (impostor); bool, int or float.
    margin : float
        Margin m > 0 (default 1.0).
    check_labels : bool
        Verify that ``y`` holds only 0 and 1 (default). That check is data-dependent control flow, which
        ``torch.func`` transforms (``vmap(grad(...))`` per-sample gradients for DP-SGD) cannot trace: pass
        False there, after validating the labels once outside the transform.

    Returns
    -------
    Tensor
        Scalar mean loss over the batch.
    """
    if margin <= 0:
        raise ValueError(f"contrastive_loss: margin must be > 0, got {margin}")
    if d.ndim != 1 or d.shape[0] == 0:
        raise ValueError(f"contrastive_loss: d must be a non-empty 1-D tensor, got shape {tuple(d.shape)}")
    if check_labels:
        y = _check_labels(y, d.shape[0])
    elif y.shape != d.shape:
        raise ValueError(f"contrastive_loss: y must have shape {tuple(d.shape)}, got {tuple(y.shape)}")
    y = y.to(dtype=d.dtype, device=d.device)
    genuine = y * d.pow(2)
    impostor = (1 - y) * torch.clamp(margin - d, min=0).pow(2)
    return (genuine + impostor).mean()


def contrastive_loss(
    e1: torch.Tensor, e2: torch.Tensor, y: torch.Tensor, margin: float = 1.0, check_labels: bool = True
) -> torch.Tensor:
    """Eq. 1 on embedding batches e1, e2 of shape (N, d) with labels y of shape (N,); mean over pairs.

    See :func:`contrastive_loss_from_distance` for ``margin`` and ``check_labels``.
    """
    return contrastive_loss_from_distance(distance(e1, e2), y, margin, check_labels)


class ContrastiveLoss(nn.Module):
    """Module form of :func:`contrastive_loss` with a fixed margin m (default 1.0)."""

    def __init__(self, margin: float = 1.0) -> None:
        super().__init__()
        if margin <= 0:
            raise ValueError(f"ContrastiveLoss: margin must be > 0, got {margin}")
        self.margin = float(margin)

    def forward(self, e1: torch.Tensor, e2: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return contrastive_loss(e1, e2, y, self.margin)

    def extra_repr(self) -> str:
        return f"margin={self.margin}"


def match(d: torch.Tensor | np.ndarray, threshold: float) -> torch.Tensor | np.ndarray:
    """Eq. 2 decision: a pair matches (same finger) iff its distance d <= ``threshold``.

    Returns a bool tensor or bool array, matching the type of ``d``. The paper uses threshold = m; FedPrint
    chooses it on validation pairs (see module docstring).
    """
    if not np.isfinite(threshold):
        raise ValueError(f"match: threshold must be finite, got {threshold}")
    if isinstance(d, torch.Tensor):
        return d <= threshold
    return np.asarray(d) <= threshold
