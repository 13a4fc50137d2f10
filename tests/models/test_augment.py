"""fedprint.models.augment: shapes, seeding, each part acts, disabled = identity."""

from __future__ import annotations

import pytest
import torch

from fedprint.models.augment import AugmentSpec, augment


def _batch() -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(48.0), torch.arange(48.0), indexing="ij")
    x = torch.sin(2 * torch.pi * xx / 6.0)[None, None].repeat(4, 1, 1, 1)
    return (x - x.mean()) / x.std()


def test_seeded_and_per_sample():
    x = _batch()
    a = augment(x, AugmentSpec(), torch.Generator().manual_seed(1))
    b = augment(x, AugmentSpec(), torch.Generator().manual_seed(1))
    assert a.shape == x.shape and torch.equal(a, b)
    assert not torch.allclose(a[0], a[1])  # every sample gets its own draw


def test_disabled_is_identity_and_rotation_rotates():
    x = _batch()
    off = AugmentSpec.off()
    assert not off.enabled and torch.equal(augment(x, off, torch.Generator()), x)
    rot = augment(x, AugmentSpec(rotation_deg=90, translation=0, scale=0, elastic=0, contrast=0, noise=0,
                                 erase_p=0), torch.Generator().manual_seed(0))
    # vertical stripes turned by up to 90 degrees: the column-wise variance pattern changes
    assert not torch.allclose(rot, x, atol=0.1)


def test_bad_spec_and_bad_batch():
    with pytest.raises(ValueError, match="AugmentSpec.noise"):
        AugmentSpec(noise=-1)
    with pytest.raises(ValueError, match="erase_p"):
        AugmentSpec(erase_p=2)
    with pytest.raises(ValueError, match=r"\(N, 1, S, S\)"):
        augment(torch.zeros(2, 3, 8, 8), AugmentSpec(), torch.Generator())


def _texture_only(t: float) -> AugmentSpec:
    return AugmentSpec(rotation_deg=0, translation=0, scale=0, elastic=0, contrast=0, noise=0, erase_p=0, texture=t)


def test_sensor_texture_keeps_the_ridges_standardised_and_seeded():
    x = _batch().repeat(8, 1, 1, 1)
    a = augment(x, _texture_only(1.0), torch.Generator().manual_seed(3))
    b = augment(x, _texture_only(1.0), torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    mean, std = a.mean(dim=(1, 2, 3)), a.std(dim=(1, 2, 3))
    assert torch.allclose(mean, torch.zeros(len(a)), atol=1e-4) and torch.allclose(std, torch.ones(len(a)), atol=1e-3)
    corr = ((a - mean.view(-1, 1, 1, 1)) * x).mean(dim=(1, 2, 3)) / x.std()
    # the ridge pattern survives (a texture, not a new image), yet every sample is changed, and differently
    assert float(corr.min()) > 0.3 and float(corr.max()) < 0.995
    assert not torch.allclose(a[0], a[1])


def test_sensor_texture_strength_scales_the_change():
    x = _batch().repeat(16, 1, 1, 1)
    change = {t: float((augment(x, _texture_only(t), torch.Generator().manual_seed(0)) - x).pow(2).mean())
              for t in (0.0, 0.2, 1.0)}
    assert change[0.0] == 0.0 and 0 < change[0.2] < change[1.0]


def test_sensor_texture_pores_whiten_ridges():
    from fedprint.models.augment import _spots

    n, h, w = 2, 64, 64
    m = _spots(n, h, w, torch.tensor([0.0, 0.02]), torch.Generator().manual_seed(0))
    assert float(m[0].sum()) == 0.0
    frac = float((m[1] > 0).float().mean())
    assert 0.02 < frac < 0.02 * 9  # each seed grows to at most a 3 x 3 spot


def test_texture_spec_bounds():
    with pytest.raises(ValueError, match="AugmentSpec.texture"):
        AugmentSpec(texture=1.5)


def test_train_config_augmentation_bounds():
    from fedprint.config.train import TrainConfig

    assert TrainConfig(texture=0.5, scale_jitter=0.2, translation=0.2, elastic=0.05).texture == 0.5
    for bad in ({"texture": 1.5}, {"texture": -0.1}, {"scale_jitter": 1.0}, {"translation": 1.0},
                {"translation": -0.1}, {"elastic": 0.2}, {"elastic": -0.01}, {"rotation": -1}, {"rotation": 181},
                {"window": 1.5}, {"window": -0.1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TrainConfig(**bad)


def test_training_augmentation_follows_the_train_config():
    from fedprint.config.train import TrainConfig
    from fedprint.training.trainer import augment_spec

    spec = augment_spec(TrainConfig(translation=0.2, scale_jitter=0.1, texture=0.5, elastic=0.04, rotation=10,
                                    window=0.3))
    assert (spec.translation, spec.scale, spec.texture, spec.elastic, spec.rotation_deg, spec.window) == (
        0.2, 0.1, 0.5, 0.04, 10, 0.3)
    assert spec.noise == AugmentSpec().noise  # the rest keeps its defaults
    assert augment_spec(TrainConfig()) == AugmentSpec()  # the default run is unchanged
    assert not augment_spec(TrainConfig(augment=False)).enabled


def _mean_dot_offset(side: int, **strength: float) -> float:
    """Mean distance (px) from the centre at which a bright centre dot lands under one placement part alone."""
    x = torch.zeros(64, 1, side, side)
    x[:, :, side // 2, side // 2] = 1.0
    off = {k: 0.0 for k in ("rotation_deg", "translation", "scale", "elastic", "contrast", "noise", "erase_p")}
    out = augment(x, AugmentSpec(**{**off, **strength}), torch.Generator().manual_seed(0))[:, 0]
    idx = out.flatten(1).argmax(1)
    c = side // 2
    return float(torch.hypot(idx // side - float(c), idx % side - float(c)).mean())


def test_larger_translation_moves_the_print_further():
    assert _mean_dot_offset(33, translation=0.2) > 1.6 * _mean_dot_offset(33, translation=0.1) > 0


def test_stronger_elastic_field_displaces_the_print_further():
    assert _mean_dot_offset(65, elastic=0.05) > 2 * _mean_dot_offset(65, elastic=0.015) > 0


def test_capture_window_keeps_one_rectangle_of_half_to_nine_tenths_of_each_side():
    off = {k: 0.0 for k in ("rotation_deg", "translation", "scale", "elastic", "contrast", "noise", "erase_p")}
    x = torch.ones(256, 1, 40, 40)
    out = augment(x, AugmentSpec(**off, window=1.0), torch.Generator().manual_seed(0))[:, 0]
    kept = out != 0
    rows, cols = kept.any(2).sum(1), kept.any(1).sum(1)
    assert torch.equal(kept.sum((1, 2)), rows * cols)  # one solid rectangle
    assert int(rows.min()) >= 20 and int(rows.max()) <= 37 and int(cols.min()) >= 20  # 50-90 % of 40 px, +1
    assert float(rows.float().std()) > 3  # a random size per image
    some = augment(x, AugmentSpec(**off, window=0.5), torch.Generator().manual_seed(0))[:, 0]
    assert 0.35 < float((some != 0).all(2).all(1).float().mean()) < 0.65  # the probability is honoured
    with pytest.raises(ValueError, match="AugmentSpec.window"):
        AugmentSpec(window=1.2)
