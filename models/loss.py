"""Contrastive loss (Yan et al. 2025 Eq. 1) and the distance decision rule (Yan et al. 2025 Eq. 2).

Eq. 1:  L(x1, x2, y) = y * d^2 + (1 - y) * max(0, m - d)^2,   d = ||f(x1) - f(x2)||_2,
with y = 1 for two impressions of the same finger and y = 0 otherwise; the batch loss is the mean over pairs.

The encoders of :mod:`fedprint.models.siamese` output unit-norm embeddings, so d lies in [0, 2]: the default margin
m = 1.0 asks impostor embeddings to be at least 60 degrees apart (d = 2 sin(angle / 2)). A margin >= 2 can
never be met and keeps every impostor pair active.

Eq. 2 matches iff d <= m. We keep the rule's form but not its constant: the threshold is chosen on validation
pairs (:func:`fedprint.models.metrics.choose_threshold`) and applied unchanged to the test pairs, since nothing in the
training makes the margin the accuracy-optimal cut-off.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedprint.models.siamese import distance


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


def batch_contrastive_loss(emb: torch.Tensor, labels: torch.Tensor, margin: float = 1.0,
                           balance: bool = True) -> torch.Tensor:
    """Eq. 1 over ALL pairs of a batch of embeddings: every image is embedded once and paired with every other.

    A P x K batch (P fingers, K impressions each) gives P·K(K−1)/2 genuine and K²·P(P−1)/2 impostor pairs from
    P·K forward passes, instead of one pair per two forward passes.

    Parameters
    ----------
    emb : Tensor, shape (N, d)
        Unit-norm embeddings (N >= 2).
    labels : Tensor of int, shape (N,)
        Finger identity of each embedding; pairs with equal labels are genuine (y = 1).
    margin : float
        Margin m of Eq. 1 (default 1.0).
    balance : bool
        True (default): the mean of the genuine-pair term and the mean of the impostor-pair term are averaged
        with equal weight (impostor pairs outnumber genuine ones ~(P−1)K/(K−1) to 1 and would otherwise drown
        them); False: the plain mean of Eq. 1 over all pairs.

    Returns
    -------
    Tensor
        Scalar loss.
    """
    if margin <= 0:
        raise ValueError(f"batch_contrastive_loss: margin must be > 0, got {margin}")
    if emb.ndim != 2 or emb.shape[0] < 2:
        raise ValueError(f"batch_contrastive_loss: emb must have shape (N >= 2, d), got {tuple(emb.shape)}")
    labels = torch.as_tensor(labels)
    if labels.shape != (emb.shape[0],):
        raise ValueError(f"batch_contrastive_loss: labels must have shape ({emb.shape[0]},), got "
                         f"{tuple(labels.shape)}")
    i, j = torch.triu_indices(emb.shape[0], emb.shape[0], offset=1)
    # ||a − b|| for unit vectors, sqrt(2 − 2 a·b), clamped away from 0 so the gradient stays finite.
    sim = (emb[i] * emb[j]).sum(dim=1)
    d = torch.sqrt(torch.clamp(2.0 - 2.0 * sim, min=1e-12))
    y = (labels[i] == labels[j]).to(d.dtype)
    gen = y * d.pow(2)
    imp = (1 - y) * torch.clamp(margin - d, min=0).pow(2)
    if not balance:
        return (gen + imp).mean()
    n_gen, n_imp = y.sum(), (1 - y).sum()
    g_term = gen.sum() / n_gen if n_gen > 0 else d.new_zeros(())
    i_term = imp.sum() / n_imp if n_imp > 0 else d.new_zeros(())
    return 0.5 * (g_term + i_term) if (n_gen > 0 and n_imp > 0) else g_term + i_term
