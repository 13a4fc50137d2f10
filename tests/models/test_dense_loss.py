"""fedprint.models.dense_loss: the pairs it draws, agreement with the matcher's dense score, its gradient, and
training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprint.models.dense_loss import batch_pairs, dense_contrastive_loss
from fedprint.models.dense_match import dense_similarity, describe_cells


def test_batch_pairs_takes_every_genuine_pair_and_as_many_impostors():
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    a, b, y = batch_pairs(labels, torch.Generator().manual_seed(0))
    assert int(y.sum()) == 1 + 3 and len(y) == 8
    assert bool((labels[a[y == 1]] == labels[b[y == 1]]).all()) and bool((labels[a[y == 0]] != labels[b[y == 0]]).all())
    assert len(set(zip(a.tolist(), b.tolist(), strict=True))) == len(a)  # no pair twice
    a2, _, y2 = batch_pairs(labels, torch.Generator().manual_seed(0), impostors_per_genuine=2.0)
    assert int((y2 == 0).sum()) == 8 and len(a2) == 12


def _maps(n_fingers: int = 3, k: int = 2, c: int = 8, h: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    base = torch.relu(torch.randn(n_fingers, c, h, h, generator=g))  # post-ReLU, like the encoder's map
    fmap = base.repeat_interleave(k, 0) + 0.05 * torch.rand(n_fingers * k, c, h, h, generator=g)
    images = torch.randn(n_fingers * k, 1, 16 * h, 16 * h, generator=g)  # every cell has skin
    return fmap, images, torch.arange(n_fingers).repeat_interleave(k)


def test_loss_uses_the_matchers_dense_score():
    fmap, images, labels = _maps()
    desc, skin = describe_cells(fmap, images)
    a, b, y = batch_pairs(labels, torch.Generator().manual_seed(1))
    s = dense_similarity(desc, skin, a.numpy(), b.numpy(), grid=(4, 4), radius=1, min_overlap=4)
    d = 1 - torch.as_tensor(s)
    expected = 0.5 * (d[y == 1].pow(2).mean() + torch.relu(0.5 - d[y == 0]).pow(2).mean())
    got = dense_contrastive_loss(fmap, images, labels, torch.Generator().manual_seed(1), radius=1, min_overlap=4)
    assert float(got) == pytest.approx(float(expected), rel=1e-5)


def test_loss_rewards_discriminative_cells_and_has_a_gradient():
    fmap, images, labels = _maps()
    fmap.requires_grad_(True)
    good = dense_contrastive_loss(fmap, images, labels, torch.Generator().manual_seed(0), radius=1, min_overlap=4)
    good.backward()
    assert fmap.grad is not None and float(fmap.grad.abs().sum()) > 0
    shuffled = fmap.detach()[torch.tensor([0, 2, 4, 1, 3, 5])]  # same-finger maps now belong to other fingers
    bad = dense_contrastive_loss(shuffled, images, labels, torch.Generator().manual_seed(0), radius=1, min_overlap=4)
    assert float(bad) > float(good.detach()) + 0.05
    with pytest.raises(ValueError, match="margin"):
        dense_contrastive_loss(fmap, images, labels, torch.Generator(), margin=1.5)


def test_training_with_the_dense_loss_lowers_it():
    from fedprint.config import TrainConfig
    from fedprint.data.pairs import make_pairs
    from fedprint.data.stripes import stripe_records
    from fedprint.models.preprocess import InputSpec, to_tensor_batch
    from fedprint.models.siamese import build_encoder
    from fedprint.training.trainer import train_siamese

    torch.manual_seed(0)
    recs = stripe_records(n_fingers=8, n_impressions=4, size=64, seed=2)
    x = to_tensor_batch([r.image for r in recs], InputSpec(size=64))
    labels = torch.as_tensor(np.unique([r.identity for r in recs], return_inverse=True)[1])
    net = build_encoder("compact", 16, width=4)

    def dense_loss() -> float:
        with torch.no_grad():
            _, fmap = net.embed_with_map(x)
        return float(dense_contrastive_loss(fmap, x, labels, torch.Generator().manual_seed(0), radius=1,
                                            min_overlap=2))

    before = dense_loss()
    train_siamese(net, x, make_pairs(recs, np.arange(len(recs)), seed=0),
                  TrainConfig(epochs=15, p=8, k=4, augment=False, dense_weight=1.0, seed=0), progress=False)
    assert dense_loss() < before
    with pytest.raises(ValueError, match="dense_weight"):
        TrainConfig(sampler="pairs", dense_weight=1.0)
