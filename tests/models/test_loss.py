"""fedprint.models.loss.batch_contrastive_loss: Eq. 1 over every pair of a batch."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from fedprint.models.loss import batch_contrastive_loss, contrastive_loss


def test_equals_eq1_over_all_pairs_when_unbalanced():
    torch.manual_seed(0)
    e = F.normalize(torch.randn(6, 8), dim=1)
    lab = torch.tensor([0, 0, 1, 1, 2, 2])
    i, j = zip(*itertools.combinations(range(6), 2), strict=True)
    i, j = list(i), list(j)
    ref = contrastive_loss(e[i], e[j], (lab[i] == lab[j]).float(), margin=0.8)
    assert torch.allclose(batch_contrastive_loss(e, lab, margin=0.8, balance=False), ref, atol=1e-6)


def test_balanced_weights_both_classes_equally_and_gradient_is_finite():
    e = F.normalize(torch.tensor([[1.0, 0], [1.0, 0], [0, 1.0], [0.6, 0.8]]), dim=1).requires_grad_()
    lab = torch.tensor([0, 0, 1, 2])
    loss = batch_contrastive_loss(e, lab, margin=1.0)
    loss.backward()  # identical embeddings (d = 0) must not give NaN gradients
    assert torch.isfinite(e.grad).all()
    # genuine pair (0, 1) has d = 0, so the genuine term is 0 and the loss is half the impostor mean
    d = torch.cdist(e.detach(), e.detach())
    imp = [(0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    ref = 0.5 * torch.stack([torch.clamp(1 - d[a, b], min=0) ** 2 for a, b in imp]).mean()
    assert torch.allclose(loss, ref, atol=1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="labels"):
        batch_contrastive_loss(torch.zeros(3, 2), torch.zeros(2))
    with pytest.raises(ValueError, match="margin"):
        batch_contrastive_loss(torch.zeros(3, 2), torch.zeros(3), margin=0)
