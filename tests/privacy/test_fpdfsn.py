"""Tests for privacy.fpdfsn (Yan et al. 2025 Eqs. 8–10) and privacy.fpdfsn_cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedprint.privacy.fpdfsn import (
    FPDFSNParams,
    apply_difference,
    fpdfsn,
    invert_fpdfsn,
    neighbourhood_mask,
    sharpen,
    to_uint8,
)
from fedprint.privacy.fpdfsn_cache import FPDFSNCache
from fedprint.privacy.similarity import psnr

REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "real"


def _fingerprint_like(h: int = 96, w: int = 112, period: float = 9.0, seed: int = 0) -> np.ndarray:
    """Concentric ridges with a slow illumination gradient, uint8."""
    yy, xx = np.mgrid[0:h, 0:w].astype(float)
    r = np.hypot(yy - h / 2, xx - w / 2)
    img = 128 + 90 * np.cos(2 * np.pi * r / period) + 30 * (xx / w - 0.5)
    img += np.random.default_rng(seed).normal(0, 3, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


MINUTIAE = np.array([[20.0, 30.0, 0.0, 1.0], [60.0, 50.0, 1.0, 3.0], [90.0, 70.0, 2.0, 1.0]])


def _fixed_extractor(minutiae: np.ndarray = MINUTIAE):
    calls = []

    def extractor(image: np.ndarray, *, border: int = 10) -> np.ndarray:
        assert image.dtype == np.uint8 and image.ndim == 2
        calls.append(border)
        return minutiae.copy()

    extractor.calls = calls
    return extractor


# ---------------------------------------------------------------- Eq. 8


def test_highpass_removes_constant_image():
    const = np.full((64, 80), 173, np.uint8)
    assert np.abs(sharpen(const, 5.0, keep_mean=False)).max() < 1e-9  # pure Eq. 8: nothing left
    np.testing.assert_allclose(sharpen(const, 5.0, keep_mean=True), 173.0, atol=1e-9)  # mean restored


def test_highpass_keeps_ridges_and_removes_slow_variation():
    h = w = 64
    yy, xx = np.mgrid[0:h, 0:w]
    slow = 40 * np.cos(2 * np.pi * 1 * xx / w)  # 1 cycle per image
    fast = 40 * np.cos(2 * np.pi * 16 * yy / h)  # 16 cycles per image (ridge-like)
    img = np.clip(np.rint(128 + slow + fast), 0, 255).astype(np.uint8)
    out = sharpen(img, 4.0, keep_mean=False)
    amp_slow = 2 * np.mean(out * np.cos(2 * np.pi * xx / w))
    amp_fast = 2 * np.mean(out * np.cos(2 * np.pi * 16 * yy / h))
    assert amp_fast == pytest.approx(40 * (1 - np.exp(-(16**2) / (2 * 4**2))), abs=0.5)
    assert abs(amp_slow) < 40 * 0.05  # H(1) = 1 - exp(-1/32) ≈ 0.03
    assert abs(out.mean()) < 1e-9


def test_sharpen_matches_literal_eq8_for_even_size():
    img = _fingerprint_like(64, 80)
    h, w = img.shape
    y, x = np.mgrid[0:h, 0:w]
    sign = (-1.0) ** (x + y)
    d2 = (y - h / 2) ** 2 + (x - w / 2) ** 2
    hp = 1 - np.exp(-d2 / (2 * 7.0**2))
    literal = np.fft.ifft2(np.fft.fft2(img * sign) * hp).real * sign
    np.testing.assert_allclose(sharpen(img, 7.0, keep_mean=False), literal, atol=1e-8)


# ---------------------------------------------------------------- Eq. 10


def test_beta_zero_returns_original_image():
    img = _fingerprint_like()
    res = fpdfsn(img, FPDFSNParams(beta=0.0, sigma2=900.0), 1, extractor=_fixed_extractor())
    np.testing.assert_array_equal(res.image, img)
    assert res.n_minutiae == 3 and res.noise_mask.any()


def test_noise_only_inside_mask_and_border_passed():
    img = _fingerprint_like()
    params = FPDFSNParams(beta=0.5, radius=6.0, border=7)
    ext = _fixed_extractor()
    res = fpdfsn(img, params, 3, extractor=ext)
    assert ext.calls == [7]
    deterministic = to_uint8(0.5 * img.astype(float))
    outside = ~res.noise_mask
    np.testing.assert_array_equal(res.image[outside], deterministic[outside])
    assert np.mean(res.image[res.noise_mask] != deterministic[res.noise_mask]) > 0.5
    # mask = union of disks of radius 6 around the (x, y) minutiae
    rows, cols = np.nonzero(res.noise_mask)
    d = np.min(np.hypot(cols[:, None] - MINUTIAE[:, 0], rows[:, None] - MINUTIAE[:, 1]), axis=1)
    assert d.max() <= 6.0
    assert res.noise_mask.sum() == pytest.approx(3 * np.pi * 36, rel=0.1)


def test_noise_variance_matches_sigma2_on_255_scale():
    img = np.full((120, 120), 128, np.uint8)
    mask = np.ones(img.shape, bool)
    sigma2, beta = 400.0, 0.5
    diff = apply_difference(img, mask, beta, sigma2, np.random.default_rng(0))
    # I_diff = (1 - β) I - β·noise: variance β²σ² = 100 (a [0,1]-scale or σ-vs-σ² mix-up is far off)
    assert np.var(diff) == pytest.approx(beta**2 * sigma2, rel=0.05)
    assert np.mean(diff) == pytest.approx((1 - beta) * 128, abs=0.3)
    # the same through fpdfsn, where the uint8 output is unclipped here (64 ± 6σ stays in range)
    res = fpdfsn(img, FPDFSNParams(beta=beta, sigma2=sigma2, radius=30.0), 0,
                 extractor=_fixed_extractor(np.array([[60.0, 60.0, 0.0, 1.0]])))
    inside = res.image[res.noise_mask].astype(float)
    assert np.var(inside) == pytest.approx(beta**2 * sigma2 + 1 / 12, rel=0.12)


def test_determinism_with_seed():
    img = _fingerprint_like()
    p = FPDFSNParams()
    a = fpdfsn(img, p, 11, extractor=_fixed_extractor())
    b = fpdfsn(img, p, np.random.default_rng(11), extractor=_fixed_extractor())
    c = fpdfsn(img, p, 12, extractor=_fixed_extractor())
    np.testing.assert_array_equal(a.image, b.image)
    assert not np.array_equal(a.image, c.image)


def test_no_minutiae_is_processed_and_counted():
    img = _fingerprint_like()
    res = fpdfsn(img, FPDFSNParams(beta=0.3), 0, extractor=_fixed_extractor(np.zeros((0, 4))))
    assert res.n_minutiae == 0 and res.minutiae.shape == (0, 4)
    assert not res.noise_mask.any()
    np.testing.assert_array_equal(res.image, to_uint8(img - 0.3 * img.astype(float)))


def test_mask_radius_zero_is_the_minutia_pixels():
    mask = neighbourhood_mask((60, 70), MINUTIAE[:2], 0.0)
    assert mask.sum() == 2 and mask[30, 20] and mask[50, 60] and not mask[49, 59]


# ---------------------------------------------------------------- inversion: not a privacy mechanism


def test_invert_recovers_original_outside_mask():
    img = _fingerprint_like()
    beta = 0.5
    mask = neighbourhood_mask(img.shape, MINUTIAE, 8.0)
    rng = np.random.default_rng(5)
    diff = apply_difference(img, mask, beta, 650.25, rng)
    rec = invert_fpdfsn(diff, beta)
    outside = ~mask
    np.testing.assert_allclose(rec[outside], img[outside], atol=1e-9)  # exact (float I_diff)
    noise = np.random.default_rng(5).normal(0, np.sqrt(650.25), size=int(mask.sum()))
    np.testing.assert_allclose(rec[mask], img[mask] - beta / (1 - beta) * noise, atol=1e-9)
    # from the released uint8 image: only rounding error (≤ 0.5/(1-β) = 1 level)
    res = fpdfsn(img, FPDFSNParams(beta=beta), 5, extractor=_fixed_extractor())
    rec8 = invert_fpdfsn(res.image, beta)
    out8 = ~res.noise_mask
    assert np.abs(rec8[out8] - img[out8]).max() <= 1.0
    assert psnr(img, rec8, out8) > 48.0
    assert psnr(img, res.image) < 15.0  # while the released image itself "looks" very different
    with pytest.raises(ValueError, match="beta"):
        invert_fpdfsn(res.image, 1.0)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kwargs, name",
    [({"beta": 1.5}, "beta"), ({"beta": -0.1}, "beta"), ({"sigma2": -1.0}, "sigma2"), ({"d0": 0.0}, "d0"),
     ({"radius": -1.0}, "radius"), ({"border": -2}, "border"), ({"d0": float("nan")}, "d0")],
)
def test_param_validation(kwargs, name):
    with pytest.raises(ValueError, match=name):
        FPDFSNParams(**kwargs)


@pytest.mark.parametrize(
    "image", [np.zeros((0, 5), np.uint8), np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8), np.float32)]
)
def test_image_validation(image):
    with pytest.raises(ValueError, match="image"):
        fpdfsn(image, FPDFSNParams(), 0, extractor=_fixed_extractor())


# ---------------------------------------------------------------- cache


def _counting_compute():
    calls = []

    def compute(image, params, rng):
        calls.append(1)
        return fpdfsn(image, params, rng, extractor=_fixed_extractor())

    compute.calls = calls
    return compute


def test_cache_hit_identical_and_no_recompute(tmp_path):
    img = _fingerprint_like()
    p = FPDFSNParams()
    compute = _counting_compute()
    cache = FPDFSNCache(tmp_path, compute=compute)
    a = cache.get_or_compute(img, p, 7)
    b = cache.get_or_compute(img.copy(), p, 7)
    assert (cache.hits, cache.misses, len(compute.calls)) == (1, 1, 1)
    assert b is a
    # a fresh cache on the same directory reads from disk without recomputing
    cache2 = FPDFSNCache(tmp_path, compute=compute)
    c = cache2.get_or_compute(img, p, 7)
    assert (cache2.disk_hits, cache2.misses, len(compute.calls)) == (1, 0, 1)
    np.testing.assert_array_equal(c.image, a.image)
    np.testing.assert_array_equal(c.noise_mask, a.noise_mask)
    np.testing.assert_array_equal(c.minutiae, a.minutiae)
    assert c.n_minutiae == a.n_minutiae
    assert not list(tmp_path.glob("*.tmp"))
    from fedprint.data.atomic_io import creation_mode  # not mkstemp's 0600: a cache shared like any other file

    assert {f.stat().st_mode & 0o777 for f in tmp_path.glob("*.npz")} == {creation_mode()}
    # a different seed or params is a miss and differs
    d = cache.get_or_compute(img, p, 8)
    cache.get_or_compute(img, FPDFSNParams(beta=0.4), 7)
    assert cache.misses == 3 and not np.array_equal(d.image, a.image)


def test_cache_memory_only_and_seed_validation():
    img = _fingerprint_like()
    cache = FPDFSNCache(None, compute=_counting_compute(), max_memory_entries=1)
    cache.get_or_compute(img, FPDFSNParams(), 0)
    cache.get_or_compute(img, FPDFSNParams(), 1)
    cache.get_or_compute(img, FPDFSNParams(), 0)  # evicted: recomputed, same result
    assert cache.misses == 3 and len(cache) == 1
    with pytest.raises(ValueError, match="seed"):
        cache.get_or_compute(img, FPDFSNParams(), -1)


# ---------------------------------------------------------------- real data + real extractor


@pytest.mark.skipif(not (REAL / "fvc_300x300_b" / "101_1.tif").is_file(), reason="real samples absent")
def test_real_fvc_image_with_crossing_number_extractor():
    cv2 = pytest.importorskip("cv2")
    img = cv2.imread(str(REAL / "fvc_300x300_b" / "101_1.tif"), cv2.IMREAD_GRAYSCALE)
    res = fpdfsn(img, FPDFSNParams(backend="crossing"), 0)
    assert 5 <= res.n_minutiae <= 150 and res.backend == "crossing"
    assert 0.0 < res.noise_mask.mean() < 0.5
    border = FPDFSNParams().border
    # the extractor's T_d: distance to the nearest outside pixel >= border (column 0 has distance 1)
    xy = res.minutiae[:, :2]
    assert np.all((xy >= border - 1) & (xy <= np.array(img.shape[::-1]) - border))
