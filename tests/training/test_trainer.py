"""Local trainer, per-client data preparation and the local / centralized baselines on toy data."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from fedprint.config import TrainConfig
from fedprint.data.stripes import stripe_records
from fedprint.lab.baselines import evaluate_clients, train_centralized, train_local
from fedprint.models.preprocess import InputSpec
from fedprint.privacy.fpdfsn import FPDFSNParams
from fedprint.training.evaluation import validation_accuracy
from fedprint.training.experiment_data import union
from fedprint.training.local_data import build_client_data
from fedprint.training.trainer import pair_distances

SPEC = InputSpec(size=32)


def _client(records, name="c0", **kw):
    return build_client_data(records, name=name, spec=SPEC, seed=0, progress=False, **kw)


def test_client_data_is_consistent(toy_records):
    data = _client(toy_records)
    assert data.images.shape == (len(toy_records), 1, 32, 32)
    train_ids = {toy_records[i].identity for i in data.split.train}
    test_ids = {toy_records[i].identity for i in data.split.test}
    assert not train_ids & test_ids  # open-set by default
    assert data.train_pairs.n_genuine > 0 and data.test_pairs.n_genuine > 0
    assert set(data.train_pairs.a) <= set(data.split.train)
    assert data.fpdfsn_stats == {"enabled": False}


def test_fpdfsn_is_applied_and_counted(toy_records, tmp_path):
    data = _client(toy_records, fpdfsn=FPDFSNParams(beta=0.5), cache_dir=tmp_path)
    plain = _client(toy_records)
    assert data.fpdfsn_stats["enabled"] and data.fpdfsn_stats["images"] == len(toy_records)
    assert data.fpdfsn_stats["cache_misses"] == len(toy_records)
    assert not np.allclose(data.images.numpy(), plain.images.numpy())
    again = _client(toy_records, fpdfsn=FPDFSNParams(beta=0.5), cache_dir=tmp_path)
    assert again.fpdfsn_stats["cache_hits"] == len(toy_records)
    assert np.array_equal(again.images.numpy(), data.images.numpy())


def test_training_reduces_loss_and_separates_pairs():
    records = stripe_records(n_fingers=10, n_impressions=4, size=32)
    data = _client(records)
    cfg = TrainConfig(epochs=6, lr=2e-3, seed=0)
    net, hist = train_local(data, encoder="compact", embedding_dim=16, cfg=cfg, progress=False)
    assert hist[-1]["loss"] < hist[0]["loss"]
    d = pair_distances(net, data.images, data.train_pairs)
    lab = data.train_pairs.label
    assert d[lab == 1].mean() < d[lab == 0].mean()
    assert 0.5 <= validation_accuracy(net, data) <= 1.0


def test_training_is_deterministic(toy_records):
    data = _client(toy_records)
    cfg = TrainConfig(epochs=1, seed=3)
    a, _ = train_local(data, encoder="compact", embedding_dim=8, cfg=cfg, progress=False)
    b, _ = train_local(data, encoder="compact", embedding_dim=8, cfg=cfg, progress=False)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert (pa == pb).all()


def test_centralized_union_and_per_client_eval():
    c1 = _client(stripe_records(domain="a", seed=1), name="a")
    c2 = _client(stripe_records(domain="b", seed=2), name="b")
    images, pairs = union([c1, c2])
    assert len(images) == len(c1.images) + len(c2.images)
    assert pairs.b.max() >= len(c1.images) and len(pairs) == len(c1.train_pairs) + len(c2.train_pairs)
    net, _ = train_centralized([c1, c2], encoder="compact", embedding_dim=8,
                               cfg=TrainConfig(epochs=1), progress=False)
    rows = evaluate_clients(net, [c1, c2])
    assert [r["client"] for r in rows] == ["a", "b"]
    assert all(0.0 <= r["accuracy"] <= 1.0 and 0.0 <= r["eer"] <= 1.0 for r in rows)


def test_bad_train_config():
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=0)


def _ema_setup():
    from fedprint.models.siamese import CompactEncoder

    data = _client(stripe_records(n_fingers=6, n_impressions=2, size=32))
    assert len(np.unique(np.concatenate([data.train_pairs.a, data.train_pairs.b]))) <= 4 * 2  # one P x K step
    torch.manual_seed(0)
    return CompactEncoder(embedding_dim=8, width=4), data


def _train_copy(net, data, **kw):
    from fedprint.training.trainer import train_siamese

    net = copy.deepcopy(net)
    cfg = TrainConfig(epochs=kw.pop("epochs", 3), lr=1e-2, p=4, k=2, schedule="constant", seed=1, **kw)
    hist = train_siamese(net, data.images, data.train_pairs, cfg, progress=False)
    return net, hist


def test_weight_average_leaves_the_trajectory_and_replaces_the_weights():
    net, data = _ema_setup()
    plain, h_plain = _train_copy(net, data)
    avg, h_avg = _train_copy(net, data, ema=0.5)
    assert [h["loss"] for h in h_plain] == [h["loss"] for h in h_avg]  # the average never feeds back
    assert any(not (a == b).all() for a, b in zip(plain.parameters(), avg.parameters(), strict=True))
    # a decay of ~1 keeps the first step's weights: those of one plain epoch (one step) from the same start
    first, _ = _train_copy(net, data, epochs=1)
    still, _ = _train_copy(net, data, ema=1 - 1e-12)
    for a, b in zip(first.parameters(), still.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_weight_average_decay_is_validated():
    with pytest.raises(ValueError, match="ema"):
        TrainConfig(ema=1.0)


def test_weight_decay_is_decoupled_and_off_by_default():
    """[train] weight_decay λ: each step shrinks a weight by lr·λ whatever its gradient (AdamW); 0 is plain Adam."""
    from fedprint.training.trainer import adam

    w = torch.nn.Parameter(torch.full((3,), 2.0))
    opt = adam([w], TrainConfig(lr=0.1, weight_decay=0.5))
    w.grad = torch.zeros(3)  # no gradient: Adam's own update is 0, only the decay moves the weight
    opt.step()
    torch.testing.assert_close(w.detach(), torch.full((3,), 2.0 * (1 - 0.1 * 0.5)))
    v = torch.nn.Parameter(torch.full((3,), 2.0))
    plain = adam([v], TrainConfig(lr=0.1))
    v.grad = torch.zeros(3)
    plain.step()
    torch.testing.assert_close(v.detach(), torch.full((3,), 2.0))
    with pytest.raises(ValueError, match="weight_decay"):
        TrainConfig(weight_decay=-0.1)


def test_weight_decay_changes_training():
    net, data = _ema_setup()
    plain, _ = _train_copy(net, data)
    decayed, _ = _train_copy(net, data, weight_decay=0.5)
    assert sum(p.norm() ** 2 for p in decayed.parameters()) < sum(p.norm() ** 2 for p in plain.parameters())


def test_flipped_identities_are_new_fingers():
    """[train] flip_identities: every used image's flips appended as fingers of their own, never partners of
    the original (a mirrored print is no impression of its finger)."""
    from fedprint.training.trainer import flipped_identities

    images = torch.arange(5 * 4 * 4, dtype=torch.float32).view(5, 1, 4, 4)
    used, labels = np.array([0, 2, 3]), np.array([0, 0, 1])
    same = flipped_identities(images, used, labels, 0)
    assert torch.equal(same[0], images) and (same[1] == used).all() and (same[2] == labels).all()
    out, u, lab = flipped_identities(images, used, labels, 3)
    assert out.shape == (5 + 3 * 3, 1, 4, 4) and torch.equal(out[:5], images)
    assert (u == [0, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13]).all()
    assert (lab == [0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7]).all()  # offset labels.max() + 1 per flip
    assert torch.equal(out[6], images[2].flip(-1))  # left-right mirror of image 2
    assert torch.equal(out[9], images[2].flip(-2))  # upside-down
    assert torch.equal(out[12], images[2].flip(-2).flip(-1))  # rotated by 180 degrees
    with pytest.raises(ValueError, match="flips must be one of"):
        flipped_identities(images, used, labels, 2)


def test_flip_identities_is_validated_and_trains_at_the_real_prints_step_count(monkeypatch):
    import fedprint.training.trainer as trainer

    with pytest.raises(ValueError, match="flip_identities"):
        TrainConfig(flip_identities=2)
    with pytest.raises(ValueError, match="flip_identities"):
        TrainConfig(flip_identities=1, sampler="pairs")
    calls, real = [], trainer.pk_batches
    monkeypatch.setattr(trainer, "pk_batches", lambda lab, p, k, n, rng, groups=None: calls.append(
        (len(set(lab)), n)) or real(lab, p, k, n, rng, groups))
    net, data = _ema_setup()
    plain, h_plain = _train_copy(net, data)
    twins, h_twins = _train_copy(net, data, flip_identities=1)
    (f_plain, n_plain), (f_twins, n_twins) = calls[0], calls[-1]
    assert f_twins == 2 * f_plain and n_twins == n_plain  # twice the fingers, the real prints' step count
    assert [h["images"] for h in h_twins] == [2 * h["images"] for h in h_plain]  # the twins fill the P slots
    assert any(not torch.equal(a, b) for a, b in zip(plain.parameters(), twins.parameters(), strict=True))


def test_proxy_loss_is_validated_reported_and_changes_training():
    with pytest.raises(ValueError, match="proxy_weight"):
        TrainConfig(proxy_weight=1.0, sampler="pairs")
    with pytest.raises(ValueError, match="proxy_margin"):
        TrainConfig(proxy_margin=1.0)
    net, data = _ema_setup()
    plain, h_plain = _train_copy(net, data)
    proxy, h_proxy = _train_copy(net, data, proxy_weight=1.0)
    # one step an epoch: the first step starts from the same weights, so only the weighted proxy term differs
    assert h_proxy[0]["loss"] == pytest.approx(h_plain[0]["loss"] + h_proxy[0]["proxy_loss"], rel=1e-5)
    assert h_proxy[0]["proxy_loss"] > 0 and "proxy_loss" not in h_plain[0]
    assert any(not torch.equal(a, b) for a, b in zip(plain.parameters(), proxy.parameters(), strict=True))


def test_domain_batches_draw_each_batch_from_one_institution_in_proportion():
    from fedprint.training.trainer import pk_batches

    labels = np.repeat(np.arange(30), 4)  # fingers 0-19 at institution 0, 20-29 at institution 1
    groups = (labels >= 20).astype(int)
    batches = pk_batches(labels, 8, 4, 600, np.random.default_rng(0), groups)
    first = np.array([groups[b[0]] for b in batches])
    assert all(len(set(groups[b])) == 1 for b in batches)  # one institution a batch
    assert 0.6 < float(np.mean(first == 0)) < 0.73  # drawn in proportion to its images (80 of 120)
    mixed = pk_batches(labels, 8, 4, 50, np.random.default_rng(0))
    assert any(len(set(groups[b])) == 2 for b in mixed)  # without groups, batches mix
    assert all(np.array_equal(a, b) for a, b in zip(mixed, pk_batches(labels, 8, 4, 50, np.random.default_rng(0),
                                                                          None), strict=True))
    with pytest.raises(ValueError, match="domain_batches needs an institution"):
        pk_batches(labels[:8], 8, 4, 1, np.random.default_rng(0), np.arange(8) // 4)
    with pytest.raises(ValueError, match="domain_batches"):
        TrainConfig(domain_batches=True, sampler="pairs")


def test_centralized_domain_batches_keep_the_twins_with_their_institution(monkeypatch):
    import fedprint.training.trainer as trainer

    seen, real = [], trainer.pk_batches
    monkeypatch.setattr(trainer, "pk_batches", lambda lab, p, k, n, rng, groups=None: seen.append(
        (lab.copy(), None if groups is None else groups.copy())) or real(lab, p, k, n, rng, groups))
    c1 = _client(stripe_records(domain="a", seed=1), name="a")
    c2 = _client(stripe_records(domain="b", seed=2), name="b")
    cfg = TrainConfig(epochs=1, p=4, k=2, domain_batches=True, flip_identities=1)
    train_centralized([c1, c2], encoder="compact", embedding_dim=8, cfg=cfg, progress=False)
    labels, groups = seen[-1]
    assert groups is not None and set(groups.tolist()) == {0, 1}
    for lab in np.unique(labels):  # a finger (and its mirrored twin) belongs to one institution
        assert len(set(groups[labels == lab].tolist())) == 1
    half = len(labels) // 2  # the twins' institutions repeat the originals'
    assert np.array_equal(groups[:half], groups[half:])
    seen.clear()
    train_centralized([c1, c2], encoder="compact", embedding_dim=8, cfg=TrainConfig(epochs=1, p=4, k=2),
                      progress=False)
    assert seen[-1][1] is None  # off by default


def test_l2sp_term_is_half_mu_times_the_squared_distance_to_the_start():
    """[train] l2sp μ: the term added to the loss is (μ/2)·Σ‖w − w₀‖², w₀ the weights the call starts from (a
    missing 1/2 or a distance to zero instead of to w₀ gives another number)."""
    from fedprint.training.trainer import _with_l2sp

    net, _ = _ema_setup()
    assert _with_l2sp(net, None, 0.0) is None
    term = _with_l2sp(net, lambda: torch.tensor(1.5), 0.4)
    assert float(term().detach()) == pytest.approx(1.5)  # at the start only the other regulariser counts
    with torch.no_grad():
        net.fc.weight[0, 0] += 3.0
        net.fc.bias[1] -= 2.0
    assert float(term().detach()) == pytest.approx(0.5 * 0.4 * (3.0 ** 2 + 2.0 ** 2) + 1.5, rel=1e-5)


def test_l2sp_keeps_training_near_the_start_and_off_changes_nothing():
    net, data = _ema_setup()
    start = [p.detach().clone() for p in net.parameters()]
    plain, h_plain = _train_copy(net, data, epochs=6)
    off, h_off = _train_copy(net, data, epochs=6, l2sp=0.0)
    pulled, _ = _train_copy(net, data, epochs=6, l2sp=50.0)
    assert [h["loss"] for h in h_plain] == [h["loss"] for h in h_off]

    def moved(m):
        return float(sum((p - s).pow(2).sum() for p, s in zip(m.parameters(), start, strict=True)))

    assert moved(pulled) < 0.5 * moved(plain)
    with pytest.raises(ValueError, match="l2sp"):
        TrainConfig(l2sp=-0.1)


def test_freeze_blocks_holds_the_leading_blocks_and_trains_the_rest():
    from fedprint.models.siamese import leading_block_parameters

    net, data = _ema_setup()
    lead = leading_block_parameters(net, 2)
    assert len(lead) == 6  # two convolutions (no bias) and their GroupNorms' weight and bias
    assert leading_block_parameters(net, 0) == []
    trained, _ = _train_copy(net, data, freeze_blocks=2)
    names = {id(p): n for n, p in net.named_parameters()}
    frozen = {names[id(p)] for p in lead}
    after, before = dict(trained.named_parameters()), dict(net.named_parameters())
    assert all(torch.equal(after[n], before[n]) for n in frozen)
    assert any(not torch.equal(after[n], before[n]) for n in after if n not in frozen)
    assert all(p.requires_grad for p in trained.parameters())  # released when the call ends
    with pytest.raises(ValueError, match="freeze_blocks"):
        leading_block_parameters(net, 6)
    for bad in (6, -1, True, 1.0):  # a TOML true or 1.0 is no block count
        with pytest.raises(ValueError, match="freeze_blocks"):
            TrainConfig(freeze_blocks=bad)


def test_freeze_blocks_names_an_encoder_without_conv_blocks():
    from fedprint.models.siamese import leading_block_parameters

    with pytest.raises(ValueError, match="freeze_blocks: Linear has no stack"):
        leading_block_parameters(torch.nn.Linear(2, 2), 1)
