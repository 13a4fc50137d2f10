"""Tests for models.preprocess: resizing, border-median padding, normalisation, description, errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from fedprint.models.preprocess import (
    InputSpec,
    describe,
    gabor_normalize,
    prepare,
    print_coverage,
    ridge_normalize,
    to_tensor_batch,
)
from fedprint.models.ridges import ridge_period, segment_print

#: Real samples beside the repository (../shared/data/real), absent outside this workplace.
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "real"


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


# ---------------------------------------------------------------------------------------- the "print" pipeline
PRINT = InputSpec(size=128, crop="print", dpi=250.0)


def _check_crops(images: list[np.ndarray], dpi: float) -> None:
    """The network inputs keep ridges resolved (median period >= 4 px; fingers with naturally fine ridges, ~7 px at
    500 dpi, may sit at 3.5 px) and sit on the print: at least half print, or holding most of a small print."""
    periods = []
    for img in images:
        crop = prepare(img, PRINT, dpi)
        assert crop.shape == (128, 128) and crop.dtype == np.uint8
        periods.append(ridge_period(crop))
        coverage, captured = print_coverage(img, PRINT, dpi)
        assert coverage >= 0.5 or captured >= 0.8, (coverage, captured)  # mostly print, or most of the print
    assert np.median(periods) >= 4.0 and min(periods) >= 3.5, periods


@pytest.mark.parametrize("profile", ["socofing", "casia", "nist_sd10"])
def test_every_synthetic_profile_keeps_ridges_and_the_print(profile):
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile

    prof = get_profile(profile)
    recs = finger_records(prof, 0, 2, seed=0) + finger_records(prof, 1, 2, seed=0)
    assert all(r.dpi == prof.dpi for r in recs)
    _check_crops([r.image for r in recs], prof.dpi)


def test_shrinking_a_whole_frame_would_alias_the_ridges():
    """The reason for the print pipeline: the legacy whole-image resize of an 832x768 frame to 128 px leaves
    ridge periods under 2 px (aliased)."""
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile

    rec = finger_records(get_profile("nist_sd10"), 0, 1, seed=0)[0]
    assert ridge_period(rec.image) / (max(rec.image.shape) / 128) < 2.0  # below Nyquist: aliased
    assert ridge_period(prepare(rec.image, PRINT, rec.dpi)) >= 4.0


def test_crop_is_centred_on_the_print_not_the_frame():
    img = np.full((400, 400), 230, np.uint8)
    yy, xx = np.mgrid[0:400, 0:400]
    blob = (yy - 300) ** 2 + (xx - 100) ** 2 < 70 ** 2  # a striped "print" in the lower-left corner
    img[blob] = (128 + 90 * np.sin(2 * np.pi * xx / 5.0))[blob].astype(np.uint8)
    spec = InputSpec(size=96, crop="print", dpi=250.0)
    assert print_coverage(img, spec, 250.0)[0] > 0.6  # mostly print although 90 % of the frame is background
    assert segment_print(img).mean() < 0.15


def test_print_pipeline_resamples_to_the_working_resolution():
    img = np.tile((128 + 90 * np.sin(2 * np.pi * np.arange(300) / 10.0)).astype(np.uint8), (300, 1))
    crop = prepare(img, PRINT, 500.0)  # 10 px at 500 dpi -> 5 px at 250 dpi
    assert abs(ridge_period(crop) - 5.0) < 0.5
    assert describe(PRINT)["dpi"] == 250.0 and describe(PRINT)["crop"] == "print"
    assert InputSpec.from_description(describe(PRINT)) == PRINT


@pytest.mark.skipif(not (REAL / "fvc_300x300_b").is_dir(), reason="real fingerprint samples absent")
def test_real_fvc_crops_keep_ridges_and_the_print():
    from fedprint.data.datasets import load_dataset

    recs = load_dataset("fvc", REAL / "fvc_300x300_b")[::5]
    assert all(r.dpi == 500.0 for r in recs)
    _check_crops([r.image for r in recs], 500.0)


@pytest.mark.skipif(not (REAL / "socofing_sample" / "Real").is_dir(), reason="real fingerprint samples absent")
def test_real_socofing_crops_keep_ridges():
    from fedprint.data.datasets import LAYOUT_DPI
    from fedprint.data.datasets.imread import read_gray

    paths = sorted((REAL / "socofing_sample" / "Real").glob("*.BMP"))
    _check_crops([read_gray(p) for p in paths], LAYOUT_DPI["socofing"])


def _stripes(size: int = 96, period: float = 4.5, angle: float = 0.6) -> np.ndarray:
    yy, xx = np.mgrid[:size, :size].astype(np.float32)
    return np.cos(2 * np.pi * (xx * np.cos(angle) + yy * np.sin(angle)) / period)


def test_ridge_normalization_removes_contrast_background_and_gradient():
    """Two 'sensors' seeing one ridge pattern — one dark and low-contrast on a bright gradient, one
    high-contrast — give nearly the same ridge input; standardisation alone leaves them apart."""
    ridges = _stripes()
    yy = np.mgrid[:96, :96][0].astype(np.float32)
    a = np.clip(128 + 100 * ridges, 0, 255).astype(np.uint8)
    b = np.clip(60 + 0.8 * yy + 25 * ridges, 0, 255).astype(np.uint8)  # dim, low contrast, background gradient
    ra, rb = ridge_normalize(a), ridge_normalize(b)
    inner = (slice(12, -12), slice(12, -12))
    assert np.corrcoef(ra[inner].ravel(), rb[inner].ravel())[0, 1] > 0.97
    assert np.abs(ra[inner] - rb[inner]).mean() < 0.15
    sa = to_tensor_batch([a, b], InputSpec(size=96))[:, 0].numpy()
    assert np.abs(sa[0][inner] - sa[1][inner]).mean() > 3 * np.abs(ra[inner] - rb[inner]).mean()


def test_ridge_normalization_of_blank_and_of_a_batch():
    assert np.abs(ridge_normalize(np.full((64, 64), 200, np.uint8))).max() < 1e-3
    x = to_tensor_batch([np.clip(128 + 100 * _stripes(), 0, 255).astype(np.uint8)],
                        InputSpec(size=96, crop="print", normalization="ridge"), 500.0)
    assert x.shape == (1, 1, 96, 96) and x.dtype == torch.float32 and float(x.abs().max()) <= 3.0
    assert "band-pass" in describe(InputSpec(normalization="ridge"))["normalization_formula"]


def _creased(size: int = 128, width: int = 4):
    """A striped print on a flat background with a pale crease ``width`` px wide across its ridges, and the rows
    of the crease."""
    ridges = _stripes(size, angle=0.3)
    img = np.full((size, size), 200.0, np.float32)
    inside = np.zeros((size, size), bool)
    inside[16:-16, 16:-16] = True
    img[inside] = 128 + 90 * ridges[inside]
    rows = slice(size // 2 - width // 2, size // 2 - width // 2 + width)
    img[rows, 16:-16] = 200.0  # the crease: no ridge contact at all
    return np.clip(img, 0, 255).astype(np.uint8), ridges, rows


def test_gabor_normalization_bridges_a_crease_that_ridge_normalization_keeps():
    """Across a crease narrower than a ridge period the Gabor map continues the ridges (correlates with the
    ridges the crease hid); the band-passed print has a hole there."""
    img, ridges, rows = _creased()
    cols = slice(32, -32)
    truth = ridges[rows, cols].ravel()  # the maps follow the grey level: bright valleys positive
    g, r = gabor_normalize(img), ridge_normalize(img)
    assert np.corrcoef(g[rows, cols].ravel(), truth)[0, 1] > 0.9
    assert np.corrcoef(r[rows, cols].ravel(), truth)[0, 1] < 0.6
    # elsewhere on the print the map is the ridge pattern itself
    body = (slice(24, 48), cols)
    assert np.corrcoef(g[body].ravel(), ridges[body].ravel())[0, 1] > 0.95


def test_gabor_normalization_is_zero_off_the_print_and_follows_the_resolution():
    img, _, _ = _creased()
    g = gabor_normalize(img)
    assert g.dtype == np.float32 and float(np.abs(g).max()) <= 3.0
    assert float(np.abs(g[:6]).max()) < 0.05 and float(np.abs(g[:, -6:]).max()) < 0.05  # flat frame -> 0
    assert float(g[16:-16, 16:-16].std()) > 0.7
    assert np.abs(gabor_normalize(np.full((64, 64), 200, np.uint8))).max() == 0.0
    # a crop that is all print, its contrast falling from right to left (pressure), keeps all of it (Otsu's
    # split of the local std into "print" and "not" cuts the fainter half off: correlation 0.71)
    full = _stripes(128, angle=0.3)
    g_full = gabor_normalize(np.clip(128 + np.linspace(55, 100, 128)[None, :] * full, 0, 255).astype(np.uint8))
    assert np.corrcoef(g_full[8:-8, 8:-8].ravel(), full[8:-8, 8:-8].ravel())[0, 1] > 0.95
    # the same ridges at 500 dpi (period 9 px) and a 500-dpi working resolution: the filters scale with it
    wide = np.clip(128 + 90 * _stripes(128, period=9.0), 0, 255).astype(np.uint8)
    g500 = gabor_normalize(wide, dpi=500.0)
    assert np.corrcoef(g500[24:-24, 24:-24].ravel(), _stripes(128, period=9.0)[24:-24, 24:-24].ravel())[0, 1] > 0.9
    x = to_tensor_batch([img], InputSpec(size=96, crop="print", normalization="gabor"), 250.0)
    assert x.shape == (1, 1, 96, 96) and x.dtype == torch.float32
    assert "Gabor" in describe(InputSpec(normalization="gabor"))["normalization_formula"]
