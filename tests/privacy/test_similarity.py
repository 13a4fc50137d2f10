"""PSNR / SSIM / LPIPS on the 0–255 scale; LPIPS never downloads and never uses random weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedprint.privacy import similarity
from fedprint.privacy.similarity import (
    ALEXNET_CHECKPOINT,
    LPIPSUnavailable,
    image_similarity,
    lpips_distance,
    max_finite_psnr,
    psnr,
    ssim,
)


@pytest.fixture
def img() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(48, 40)).astype(np.uint8)


@pytest.fixture
def no_download(monkeypatch):
    """Any attempt to fetch weights fails the test."""

    def boom(*args, **kwargs):
        raise AssertionError(f"download attempted: {args}")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", boom)
    monkeypatch.setattr(torch.hub, "download_url_to_file", boom)


def test_psnr_identical_is_inf(img):
    assert psnr(img, img.copy()) == math.inf


def test_psnr_one_level_single_pixel_closed_form(img):
    b = img.copy()
    b[5, 7] = img[5, 7] + 1 if img[5, 7] < 255 else 254
    expected = 10 * math.log10(255**2 * img.size)
    assert psnr(img, b) == pytest.approx(expected, rel=1e-12)
    assert max_finite_psnr(img.shape) == pytest.approx(expected, rel=1e-12)
    # the maximum finite PSNR of a 300×300 8-bit image (the paper's 122 dB is impossible)
    assert max_finite_psnr((300, 300)) == pytest.approx(97.673, abs=0.001)


def test_psnr_known_mse():
    a = np.full((20, 30), 100, np.uint8)
    assert psnr(a, a + 10) == pytest.approx(10 * math.log10(255**2 / 100), rel=1e-9)


def test_ssim_identical_is_one_and_drops_with_noise(img):
    assert ssim(img, img.copy()) == pytest.approx(1.0, abs=1e-12)
    noisy = np.clip(img + np.random.default_rng(1).normal(0, 40, img.shape), 0, 255)
    assert ssim(img, noisy) < 0.9


def test_input_validation(img):
    with pytest.raises(ValueError, match="same shape"):
        psnr(img, img[:-1])
    with pytest.raises(ValueError, match="2-D"):
        ssim(img[None], img[None])
    with pytest.raises(ValueError, match="7×7"):
        ssim(img[:5, :5], img[:5, :5])
    with pytest.raises(ValueError, match="32×32"):
        lpips_distance(img[:16, :16], img[:16, :16])


def test_lpips_unavailable_without_weights(img, tmp_path, monkeypatch, no_download):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    with pytest.raises(LPIPSUnavailable) as info:
        lpips_distance(img, img)
    assert info.value.path == tmp_path / "checkpoints" / ALEXNET_CHECKPOINT
    sim = image_similarity(img, img)
    assert sim["lpips"] is None and ALEXNET_CHECKPOINT in sim["lpips_note"]
    assert sim["psnr"] == math.inf and sim["ssim"] == pytest.approx(1.0)


def test_lpips_corrupt_checkpoint_is_unavailable(img, tmp_path, monkeypatch, no_download):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / ALEXNET_CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(LPIPSUnavailable, match="cannot read"):
        lpips_distance(img, img)


def test_lpips_loads_every_weight_from_the_files(img, tmp_path, monkeypatch, no_download):
    """With a (stand-in) AlexNet checkpoint present: no download, every parameter equals a file value, and the
    global torch generator is not advanced by building the network."""
    import lpips
    import torchvision

    torch.manual_seed(123)
    trunk = {k: v for k, v in torchvision.models.alexnet(weights=None).state_dict().items()
             if k.startswith("features.")}
    (tmp_path / "checkpoints").mkdir()
    torch.save(trunk, tmp_path / "checkpoints" / ALEXNET_CHECKPOINT)
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))

    state_before = torch.random.get_rng_state()
    other = np.ascontiguousarray(img[::-1])
    d_same = lpips_distance(img, img)
    d_diff = lpips_distance(img, other)
    assert torch.equal(torch.random.get_rng_state(), state_before)
    assert d_same == pytest.approx(0.0, abs=1e-7) and d_diff > 1e-3
    assert lpips_distance(img, other) == d_diff  # deterministic (eval mode, no dropout)

    path = similarity.alexnet_checkpoint_path()
    model = similarity._lpips_model(str(path), path.stat().st_mtime_ns)
    slice_of = {0: 1, 3: 2, 6: 3, 8: 4, 10: 5}
    for key, value in trunk.items():
        _, idx, kind = key.split(".")
        layer = getattr(model.net, f"slice{slice_of[int(idx)]}")._modules[idx]
        assert torch.equal(getattr(layer, kind), value), key
    lin = torch.load(f"{lpips.__path__[0]}/weights/v0.1/alex.pth", map_location="cpu", weights_only=True)
    for key, value in lin.items():
        assert torch.equal(model.state_dict()[key], value), key


def test_alexnet_weights_path_from_environment(tmp_path, monkeypatch) -> None:
    from fedprint.privacy.similarity import WEIGHTS_ENV, LPIPSUnavailable, alexnet_checkpoint_path, lpips_distance

    given = tmp_path / "alexnet.pth"
    monkeypatch.setenv(WEIGHTS_ENV, str(given))
    assert alexnet_checkpoint_path() == given
    img = np.full((32, 32), 128, np.uint8)
    with pytest.raises(LPIPSUnavailable, match="alexnet.pth"):  # absent: unavailable, never random weights
        lpips_distance(img, img)
