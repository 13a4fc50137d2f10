"""Tests for models.preprocess: resizing, border-median padding, normalisation, description, errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from models.preprocess import InputSpec, describe, to_tensor_batch

REAL = Path("/work/shared/data/real")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_shape_dtype_and_mixed_sizes(rng):
    imgs = [rng.integers(0, 256, (300, 300), dtype=np.uint8), rng.integers(0, 256, (103, 96), dtype=np.uint8),
            rng.integers(0, 256, (40, 70), dtype=np.uint8)]
    x = to_tensor_batch(imgs, InputSpec(size=64))
    assert x.shape == (3, 1, 64, 64) and x.dtype == torch.float32 and x.is_contiguous()


def test_aspect_kept_and_padded_with_border_median():
    img = np.full((100, 50), 200, np.uint8)
    img[:, 0] = 180  # left border column: the border median is still 200
    img[40:60, 20:30] = 10  # dark blob in the middle must survive, not be stretched
    x = to_tensor_batch([img], InputSpec(size=128, normalization="unit_range"))[0, 0].numpy()
    back = np.rint((x + 1) * 127.5)
    # 100x50 -> 128x64 content, centred with 32 px of padding either side.
    assert np.all(back[:, :32] == 200) and np.all(back[:, 96:] == 200)
    assert back[64, 64] < 50  # blob centre
    assert np.all(back[:, 32] <= 200)  # the former border column lies inside the content, not in the pad


def test_keep_aspect_false_fills_square():
    img = np.zeros((100, 50), np.uint8)
    x = to_tensor_batch([img], InputSpec(size=32, keep_aspect=False, normalization="unit_range"))
    assert torch.all(x == -1.0)  # no padding value (border median would also be 0: check the describe too)
    assert describe(InputSpec(keep_aspect=False))["pad"].startswith("none")


def test_standardize_zero_mean_unit_var_and_constant_image(rng):
    imgs = [rng.integers(0, 256, (80, 80), dtype=np.uint8), np.full((80, 80), 77, np.uint8)]
    x = to_tensor_batch(imgs, InputSpec(size=32))
    assert abs(float(x[0].mean())) < 1e-5 and abs(float(x[0].std(unbiased=False)) - 1) < 1e-4
    assert torch.all(x[1] == 0)


def test_unit_range_bounds():
    img = np.array([[0, 255], [255, 0]], np.uint8).repeat(8, 0).repeat(8, 1)
    x = to_tensor_batch([img], InputSpec(size=16, normalization="unit_range"))
    assert float(x.min()) == -1.0 and float(x.max()) == 1.0


def test_describe_is_json_and_records_choices():
    d = describe(InputSpec(size=96))
    json.dumps(d)
    assert d["size"] == 96 and d["interpolation_shrink"] == "cv2.INTER_AREA" and "median" in d["pad"]
    assert d["normalization"] == "standardize"


@pytest.mark.parametrize("bad, msg", [
    ([], "empty"),
    ([np.zeros((10, 10), np.float32)], "uint8"),
    ([np.zeros((10, 10, 3), np.uint8)], "2-D"),
    ([np.zeros((0, 10), np.uint8)], "empty image"),
    (["not an array"], "numpy array"),
])
def test_bad_inputs(bad, msg):
    with pytest.raises(ValueError, match=msg):
        to_tensor_batch(bad)


@pytest.mark.parametrize("kwargs", [{"size": 4}, {"size": 64.0}, {"normalization": "zscore"}])
def test_bad_spec(kwargs):
    with pytest.raises(ValueError, match="InputSpec"):
        InputSpec(**kwargs)


@pytest.mark.skipif(not (REAL / "socofing_sample" / "Real").is_dir(),
                    reason="real fingerprint samples absent")
def test_real_socofing_image_padded_with_its_background():
    path = sorted((REAL / "socofing_sample" / "Real").glob("*.BMP"))[0]
    img = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    assert img is not None and img.shape[0] != img.shape[1]
    x = to_tensor_batch([img], InputSpec(size=128, normalization="unit_range"))[0, 0].numpy()
    back = np.rint((x + 1) * 127.5)
    # SOCOFing is taller than wide: the left/right pad columns hold one constant, the image's border median.
    assert np.unique(back[:, 0]).size == 1
    scale = 128 / max(img.shape)
    new_wh = (round(img.shape[1] * scale), round(img.shape[0] * scale))
    r = cv2.resize(img, new_wh, interpolation=cv2.INTER_AREA)
    border = np.concatenate([r[0], r[-1], r[:, 0], r[:, -1]])
    assert back[0, 0] == int(np.median(border))
