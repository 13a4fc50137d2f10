"""models.supcon.batch_supcon_loss (Khosla et al. 2020, Eq. 2) and ``[train] loss = "supcon"``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedprint.models.supcon import batch_supcon_loss


def _reference(e: torch.Tensor, lab: torch.Tensor, tau: float, m: float = 0.0) -> float:
    """Eq. 2 written anchor by anchor, positive by positive; a positive's similarity less the margin ``m``."""
    n, per_anchor = len(e), []

    def s(i: int, a: int) -> float:
        return float(e[i] @ e[a]) - (m if lab[a] == lab[i] else 0.0)

    for i in range(n):
        others = [a for a in range(n) if a != i]
        denom = sum(math.exp(s(i, a) / tau) for a in others)
        pos = [p for p in others if lab[p] == lab[i]]
        if pos:
            per_anchor.append(-sum(math.log(math.exp(s(i, p) / tau) / denom) for p in pos) / len(pos))
    return sum(per_anchor) / len(per_anchor)


def test_equals_eq2_anchor_by_anchor_and_skips_anchors_without_positive():
    torch.manual_seed(0)
    e = F.normalize(torch.randn(7, 5), dim=1)
    lab = torch.tensor([0, 0, 0, 1, 1, 2, 3])  # fingers 2 and 3 have no positive: not anchors
    for tau in (0.1, 0.5):
        assert float(batch_supcon_loss(e, lab, tau)) == pytest.approx(_reference(e, lab, tau), rel=1e-5)


def test_margin_lowers_each_positive_similarity_by_m():
    torch.manual_seed(1)
    e = F.normalize(torch.randn(8, 5), dim=1)
    lab = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3])
    for tau, m in ((0.05, 0.2), (0.1, 0.5)):
        assert float(batch_supcon_loss(e, lab, tau, m)) == pytest.approx(_reference(e, lab, tau, m), rel=1e-5)
        # a margin makes every positive harder, so the loss grows
        assert float(batch_supcon_loss(e, lab, tau, m)) > float(batch_supcon_loss(e, lab, tau))
    with pytest.raises(ValueError, match="margin"):
        batch_supcon_loss(e, lab, 0.1, margin=1.0)


def test_the_hardest_impostor_gets_the_largest_push():
    # anchor 0 and its positive 1; impostor 2 close to the anchor, impostor 3 far from it
    e = F.normalize(torch.tensor([[1.0, 0.0], [0.9, 0.3], [0.8, -0.6], [-1.0, 0.2]]), dim=1).requires_grad_()
    batch_supcon_loss(e, torch.tensor([0, 0, 1, 2]), 0.1).backward()
    # under Eq. 1 with margin 1 the far impostor (distance ~1.98) would get no gradient at all, and neither
    # would the close one beyond the margin; here both get one, the close one far more
    assert e.grad[2].norm() > 10 * e.grad[3].norm() > 0
    clustered = F.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.01], [-1.0, 0.0], [-1.0, 0.01]]), dim=1)
    mixed = clustered[[0, 2, 1, 3]]
    lab = torch.tensor([0, 0, 1, 1])
    assert batch_supcon_loss(clustered, lab) < batch_supcon_loss(mixed, lab)


def test_no_genuine_pair_gives_zero_and_bad_inputs_are_named():
    e = F.normalize(torch.randn(3, 4), dim=1).requires_grad_()
    loss = batch_supcon_loss(e, torch.tensor([0, 1, 2]))
    loss.backward()
    assert float(loss.detach()) == 0.0 and torch.all(e.grad == 0)
    with pytest.raises(ValueError, match="temperature"):
        batch_supcon_loss(e, torch.tensor([0, 0, 1]), temperature=0)
    with pytest.raises(ValueError, match="labels"):
        batch_supcon_loss(e, torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="emb"):
        batch_supcon_loss(torch.zeros(1, 4), torch.tensor([0]))


def test_training_with_supcon_lowers_it_and_config_checks():
    from fedprint.config import TrainConfig
    from fedprint.data.pairs import make_pairs
    from fedprint.data.stripes import stripe_records
    from fedprint.models.preprocess import InputSpec, to_tensor_batch
    from fedprint.models.siamese import build_encoder
    from fedprint.training.trainer import train_siamese

    recs = stripe_records(n_fingers=4, n_impressions=4, size=64, seed=2)
    x = to_tensor_batch([r.image for r in recs], InputSpec(size=64))
    pairs = make_pairs(recs, np.arange(len(recs)), seed=0)
    cfg = TrainConfig(epochs=12, p=4, k=4, loss="supcon", temperature=0.2, seed=0)
    hist = train_siamese(build_encoder("compact", 16, width=4), x, pairs, cfg, progress=False)
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert hist[0]["loss"] > 1.0  # a supervised-contrastive value: Eq. 1 on unit vectors stays below 4 * 0.5
    with pytest.raises(ValueError, match="loss"):
        TrainConfig(sampler="pairs", loss="supcon")
    with pytest.raises(ValueError, match="loss"):
        TrainConfig(loss="triplet")
    with pytest.raises(ValueError, match="temperature"):
        TrainConfig(loss="supcon", temperature=0.0)
    with pytest.raises(ValueError, match="supcon_margin"):
        TrainConfig(supcon_margin=0.2)  # Eq. 1 has its own margin
    assert TrainConfig(loss="supcon", supcon_margin=0.2).supcon_margin == 0.2


def test_dp_sgd_refuses_a_loss_it_cannot_clip_per_pair():
    pytest.importorskip("opacus")
    from fedprint.config import TrainConfig
    from fedprint.data.pairs import make_pairs
    from fedprint.data.stripes import stripe_records
    from fedprint.models.preprocess import InputSpec, to_tensor_batch
    from fedprint.models.siamese import build_encoder
    from fedprint.training.dp_sgd import make_dp_trainer

    recs = stripe_records(n_fingers=3, n_impressions=2, size=32, seed=1)
    x = to_tensor_batch([r.image for r in recs], InputSpec(size=32))
    with pytest.raises(ValueError, match="loss"):
        make_dp_trainer(build_encoder("compact", 8, width=4), x, make_pairs(recs, np.arange(len(recs)), seed=0),
                        TrainConfig(loss="supcon"))
