"""models.minutiae_map (targets, head, loss), the augmentation's carried maps, training.minutiae_targets, training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprint.models.augment import AugmentSpec, augment
from fedprint.models.minutiae_map import CELL, MinutiaeHead, cell_counts, minutiae_map_loss, splat


def test_splat_puts_unit_mass_per_minutia_on_its_type_channel():
    m = np.array([[20.0, 30.0, 0.0, 1], [40.0, 10.0, 1.0, 3], [41.0, 50.0, 2.0, 3], [5.0, 5.0, 0.0, 2]])
    maps = splat([m, np.zeros((0, 4))], 64, sigma=1.5)
    assert maps.shape == (2, 2, 64, 64)
    assert maps[0].sum((1, 2)).tolist() == pytest.approx([1.0, 2.0], abs=1e-4)  # type 2 is not a minutia type
    assert float(maps[1].abs().sum()) == 0.0
    y, x = np.unravel_index(int(maps[0, 0].argmax()), (64, 64))
    assert (x, y) == (20, 30)  # column x, row y
    counts = cell_counts(maps)
    assert counts.shape == (2, 2, 64 // CELL, 64 // CELL)
    assert float(counts[0, 0, 30 // CELL, 20 // CELL]) > 0.8  # most of its mass: y = 30 is 1.5 px from the edge
    assert counts[0].sum((1, 2)).tolist() == pytest.approx([1.0, 2.0], abs=1e-4)
    with pytest.raises(ValueError, match="sigma"):
        splat([m], 64, sigma=0)


def test_loss_is_one_for_nothing_and_zero_for_the_truth():
    maps = splat([np.array([[20.0, 30.0, 0.0, 1], [40.0, 12.0, 1.0, 3]])], 64)
    truth = cell_counts(maps)
    assert float(minutiae_map_loss(torch.zeros_like(truth), maps)) == pytest.approx(1.0)
    assert float(minutiae_map_loss(truth, maps)) == pytest.approx(0.0, abs=1e-6)
    assert float(minutiae_map_loss(truth.roll(2, dims=-1), maps)) > 0.5  # a misplaced map is penalised
    with pytest.raises(ValueError, match="do not match"):
        minutiae_map_loss(torch.zeros(1, 2, 5, 5), maps)


def test_head_predicts_cells_of_eight_pixels():
    head = MinutiaeHead(32)
    assert head(torch.zeros(3, 32, 8, 8)).shape == (3, 2, 16, 16)  # a 128 px input: 8x8 map, 16x16 cells
    assert MinutiaeHead(16, upsample=False)(torch.zeros(3, 16, 16, 16)).shape == (3, 2, 16, 16)  # block 3: S/8
    with pytest.raises(ValueError, match="channels"):
        MinutiaeHead(0)


def test_carried_maps_get_the_same_warp_and_erasure_and_the_draws_do_not_change():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 1, 32, 32, generator=g)
    geometry = AugmentSpec(contrast=0, noise=0, erase_p=1.0)  # warp and erase only: the input is a map too
    out, carried = augment(x, geometry, torch.Generator().manual_seed(0), carry=x.repeat(1, 2, 1, 1))
    assert torch.allclose(carried[:, :1], out, atol=1e-6) and torch.allclose(carried[:, 1:], out, atol=1e-6)
    full = AugmentSpec(texture=0.5)
    alone = augment(x, full, torch.Generator().manual_seed(1))
    with_maps, _ = augment(x, full, torch.Generator().manual_seed(1), carry=torch.ones(4, 2, 32, 32))
    assert torch.equal(alone, with_maps)
    x_off, maps_off = augment(x, AugmentSpec.off(), g, carry=torch.ones(4, 2, 32, 32))
    assert x_off is x and float(maps_off.sum()) == 4 * 2 * 32 * 32
    with pytest.raises(ValueError, match="carry"):
        augment(x, full, g, carry=torch.ones(4, 2, 16, 16))


def _synthetic_inputs(size: int = 128):
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile
    from fedprint.models.preprocess import InputSpec, _locate, to_tensor_batch

    recs = [r for f in range(2) for r in finger_records(get_profile("casia"), f, 2, seed=5)]
    spec = InputSpec(size=size, crop="print", dpi=250.0, normalization="ridge")
    x = to_tensor_batch([r.image for r in recs], spec, dpi=[r.dpi for r in recs])
    truth = []
    for r in recs:  # the generator's minutiae in input pixels: resample to 250 dpi, then the crop's corner
        _, _, y0, x0 = _locate(r.image, spec, r.dpi)
        m = r.ground_truth.minutiae.copy()
        m[:, 0], m[:, 1] = m[:, 0] * 250.0 / r.dpi - x0, m[:, 1] * 250.0 / r.dpi - y0
        truth.append(m[(m[:, 0] >= 8) & (m[:, 0] < size - 8) & (m[:, 1] >= 8) & (m[:, 1] < size - 8)])
    return x, truth


def test_targets_from_the_inputs_find_the_generators_minutiae():
    from scipy.spatial import cKDTree

    from fedprint.training.minutiae_targets import input_minutiae

    x, truth = _synthetic_inputs()
    found = [input_minutiae(x[i, 0].numpy(), "crossing") for i in range(len(x))]  # the figures of its docstring
    hits = sum(int((cKDTree(f[:, :2]).query(t[:, :2])[0] <= 4.0).sum()) for f, t in zip(found, truth, strict=True))
    true_pos = sum(int((cKDTree(t[:, :2]).query(f[:, :2])[0] <= 4.0).sum()) for f, t in zip(found, truth, strict=True))
    recall = hits / sum(len(t) for t in truth)
    precision = true_pos / sum(len(f) for f in found)
    assert recall > 0.6 and precision > 0.5, (recall, precision)


def test_targets_are_cached_per_images_tensor(monkeypatch):
    import fedprint.training.minutiae_targets as mt

    calls = []
    monkeypatch.setattr(mt, "input_minutiae",
                        lambda x, backend: calls.append(backend) or np.array([[10.0, 12.0, 0.0, 1]]))
    images = torch.zeros(5, 1, 32, 32)
    first = mt.minutiae_maps(images, np.array([0, 2, 4]), backend="crossing")
    again = mt.minutiae_maps(images, np.array([2, 4, 1]), backend="crossing")
    assert calls == ["crossing"] * 4 and first.shape == (3, 2, 32, 32) and first.dtype == torch.float16
    assert torch.equal(first[1:], again[:2])
    # another backend's targets are not the cached ones: extracted anew, with that backend (installed or not: the
    # extraction is replaced above)
    monkeypatch.setattr(mt, "resolve_backend", lambda name, option: name)
    mt.minutiae_maps(images, np.array([0, 2]), backend="nbis")
    assert calls[4:] == ["nbis", "nbis"]
    assert mt.minutiae_maps(images, np.array([], dtype=int)).shape == (0, 2, 32, 32)
    with pytest.raises(ValueError, match="N, 1, S, S"):
        mt.minutiae_maps(torch.zeros(2, 32, 32), np.array([0]))


def test_training_with_the_minutiae_loss_lowers_it_and_keeps_the_encoder_alone():
    from fedprint.config import TrainConfig
    from fedprint.data.pairs import make_pairs
    from fedprint.data.stripes import stripe_records
    from fedprint.models.preprocess import InputSpec, to_tensor_batch
    from fedprint.models.siamese import build_encoder
    from fedprint.training.trainer import train_siamese

    recs = stripe_records(n_fingers=4, n_impressions=4, size=64, seed=2)
    x = to_tensor_batch([r.image for r in recs], InputSpec(size=64))
    net = build_encoder("compact", 16, width=4)
    keys = set(net.state_dict())
    cfg = TrainConfig(epochs=12, p=4, k=4, minutiae_weight=1.0, seed=0)
    hist = train_siamese(net, x, make_pairs(recs, np.arange(len(recs)), seed=0), cfg, progress=False)
    assert hist[-1]["minutiae_loss"] < hist[0]["minutiae_loss"]
    assert set(net.state_dict()) == keys  # the head is dropped after training
    middle = TrainConfig(epochs=2, p=4, k=4, minutiae_weight=1.0, minutiae_layer="middle", seed=0)
    assert "minutiae_loss" in train_siamese(net, x, make_pairs(recs, np.arange(len(recs)), seed=0), middle,
                                            progress=False)[-1]
    with pytest.raises(ValueError, match="minutiae_weight"):
        TrainConfig(sampler="pairs", minutiae_weight=1.0)
    with pytest.raises(ValueError, match="minutiae_layer"):
        TrainConfig(minutiae_layer="first")
    with pytest.raises(ValueError, match="minutiae_weight"):
        train_siamese(build_encoder("resnet18", 16), x, make_pairs(recs, np.arange(len(recs)), seed=0), cfg,
                      progress=False)
