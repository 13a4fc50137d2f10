"""FIP / EMK / BEMK (Zhang et al. 2018): paper noise formulas, empirical privacy of the sound variants, basics."""

import numpy as np
import pytest

from fedprint.privacy.publish import fourier
from fedprint.privacy.publish.empirical import epsilon_lower_bound
from fedprint.privacy.publish.primitives import exponential_mechanism_logits

MECHS = [fourier.publish_fip, fourier.publish_emk, fourier.publish_bemk]


@pytest.fixture
def image():
    y, x = np.mgrid[:24, :20]
    return np.clip(128 + 90 * np.sin(x / 2.0) * np.cos(y / 3.0), 0, 255).astype(np.uint8)


def _spy(monkeypatch):
    """Record every Laplace scale the module draws with."""
    scales = []
    real = fourier.laplace

    def spy(rng, scale, size=None):
        scales.append(scale)
        return real(rng, scale, size)

    monkeypatch.setattr(fourier, "laplace", spy)
    return scales


def _halve_noise(monkeypatch):
    real = fourier.laplace
    monkeypatch.setattr(fourier, "laplace", lambda rng, scale, size=None: real(rng, scale / 2, size))


# ------------------------------------------------------------------------------------------------ paper formulas
def test_fip_paper_noise_is_sqrt_k_times_largest_column_l2_norm_over_eps(image, monkeypatch):
    scales = _spy(monkeypatch)
    pub = fourier.publish_fip(image, None, 0.5, np.random.default_rng(0), "paper", k=5)
    expected = np.sqrt(5) * np.sqrt((image.astype(float) ** 2).sum(axis=0)).max() / 0.5  # Thm 3: √k·Δ2W / ε
    assert scales == [pytest.approx(expected)] * 2  # real and imaginary parts
    assert pub.details["noise_scale"] == pytest.approx(expected)
    assert not pub.guarantee.dp and "NOT differentially private" in pub.guarantee.statement()


@pytest.mark.parametrize("half", [False, True])
def test_emk_bemk_paper_scores_and_score_sensitivity(image, monkeypatch, half):
    seen = {}
    real = fourier.exponential_mechanism

    def spy(rng, scores, epsilon, sensitivity):
        seen.update(scores=scores, epsilon=epsilon, sensitivity=sensitivity)
        return real(rng, scores, epsilon, sensitivity)

    monkeypatch.setattr(fourier, "exponential_mechanism", spy)
    scales = _spy(monkeypatch)
    eps = 0.9
    pub = (fourier.publish_bemk if half else fourier.publish_emk)(image, None, eps, np.random.default_rng(1), "paper")
    m, n = image.shape
    x = image.astype(float)
    spec = np.fft.rfft2(x) / (m * n) if half else np.fft.fft2(x) / (m * n)  # Eq. 5
    kmax = min(m, n // 2 + 1) if half else min(m, n)
    d2 = np.sqrt((x ** 2).sum(axis=0)).max()
    weight = 2.0 if half else 1.0
    for k in (1, 3, kmax):
        outside = (np.abs(spec) ** 2).sum() - (np.abs(spec[:k, :k]) ** 2).sum()
        u = np.sqrt(weight * outside) + 2 * k * np.sqrt(k) * d2 / eps  # Eq. 12 / BEMK step 5
        assert seen["scores"][k - 1] == pytest.approx(-u)
    assert seen["epsilon"] == eps  # the listing's ε, not ε1
    assert seen["sensitivity"] == pytest.approx((1 + np.sqrt(kmax)) * x.sum(axis=0).max())  # Thm 4
    k = pub.details["k"]
    assert scales == [pytest.approx(np.sqrt(k) * d2 / eps)] * 2


# ------------------------------------------------------------------------------------------ sound: sensitivities
@pytest.mark.parametrize("half", [False, True])
def test_sound_noise_error_formula_matches_simulation(half):
    zero = np.zeros((12, 10), np.uint8)
    rng = np.random.default_rng(3)
    energy = [(fourier._sound_release(zero, 2, 1.0, half, rng)[0] ** 2).sum() for _ in range(4000)]
    assert np.sqrt(np.mean(energy)) == pytest.approx(float(fourier.sound_noise_error((12, 10), 2, 1.0, half)),
                                                     rel=0.03)


def test_sound_block_l1_sensitivity_bound_holds_for_every_pixel():
    m, n, k = 9, 8, 3
    for half in (False, True):
        bound = fourier.sound_sensitivity((m, n), k, half)
        worst = 0.0
        for p in range(m * n):  # test-only loop over the 72 positions of a one-pixel change of 255
            d = np.zeros(m * n)
            d[p] = 255
            d = d.reshape(m, n)
            spec = np.fft.rfft2(d, norm="ortho") if half else np.fft.fft2(d, norm="ortho")
            rows = fourier._freq_abs(m) < k
            cols = np.arange(spec.shape[1]) < k if half else fourier._freq_abs(n) < k
            block = spec[rows][:, cols]
            worst = max(worst, np.abs(block.real).sum() + np.abs(block.imag).sum())
        assert worst <= bound + 1e-9 and worst > bound / 1.5  # honest and not absurdly loose


def test_sound_em_selection_is_eps1_dp_on_neighbours():
    rng = np.random.default_rng(5)
    eps1, eps2 = 0.3, 0.7
    for _ in range(20):
        a = rng.integers(0, 256, (14, 12)).astype(np.uint8)
        b = a.copy()
        b[rng.integers(14), rng.integers(12)] = rng.choice([0, 255])
        for half in (False, True):
            ks = np.arange(1, fourier.max_k(a.shape) + 1)
            la, lb = (exponential_mechanism_logits(
                -(fourier.reconstruction_errors(im) + fourier.sound_noise_error(im.shape, ks, eps2, half)),
                eps1, 255.0) for im in (a, b))
            assert np.abs(fourier.reconstruction_errors(a) - fourier.reconstruction_errors(b)).max() <= 255 + 1e-9
            assert np.abs(la - lb).max() <= eps1 + 1e-9


# -------------------------------------------------------------------------------------------- sound: empirical
def _runs(fn, img, eps, n, seed, **kw):
    rng = np.random.default_rng(seed)
    return np.array([fn(img, None, eps, rng, "sound", **kw).image[0, 0] for _ in range(n)], float)


@pytest.mark.parametrize("fn, size, kw", [(fourier.publish_fip, 4, {"k": 1}),
                                          (fourier.publish_emk, 2, {"select_fraction": 0.05}),
                                          (fourier.publish_bemk, 2, {"select_fraction": 0.05})])
def test_sound_empirical_privacy_and_halved_noise_is_caught(fn, size, kw, monkeypatch):
    eps, n = 1.0, 5_000
    a = np.full((size, size), 128, np.uint8)
    a[0, 0] = 0
    b = a.copy()
    b[0, 0] = 255
    thresholds = np.linspace(60, 200, 8)
    good = epsilon_lower_bound(_runs(fn, a, eps, n, 1, **kw), _runs(fn, b, eps, n, 2, **kw), thresholds)
    _halve_noise(monkeypatch)
    bad = epsilon_lower_bound(_runs(fn, a, eps, n, 3, **kw), _runs(fn, b, eps, n, 4, **kw), thresholds)
    print(f"{fn.__name__}: eps_lb correct {good:.3f}, halved {bad:.3f}")
    assert good <= eps
    assert bad > eps


# ------------------------------------------------------------------------------------------------------- basics
@pytest.mark.parametrize("fn", MECHS)
@pytest.mark.parametrize("variant", ["paper", "sound"])
def test_deterministic_uint8_same_shape(fn, variant, image):
    p1 = fn(image, None, 1.0, np.random.default_rng(7), variant)
    p2 = fn(image, None, 1.0, np.random.default_rng(7), variant)
    assert p1.image.dtype == np.uint8 and p1.image.shape == image.shape
    assert np.array_equal(p1.image, p2.image) and p1.details["k"] == p2.details["k"]
    assert p1.spent_epsilon == 1.0 and p1.guarantee.dp == (variant == "sound")


def test_sound_emk_reports_split_and_prefers_large_k_at_high_eps(image):
    pub = fourier.publish_bemk(image, None, 1e6, np.random.default_rng(0))
    assert pub.details["epsilon_select"] + pub.details["epsilon_laplace"] == pytest.approx(1e6)
    k = pub.details["k"]
    assert k >= fourier.max_k(image.shape) - 1
    rms = np.sqrt(((pub.image.astype(float) - image) ** 2).mean())  # almost no noise: only the low-pass error
    assert rms <= fourier.reconstruction_errors(image)[k - 1] / np.sqrt(image.size) + 0.6


@pytest.mark.parametrize("fn", MECHS)
def test_errors(fn, image):
    rng = np.random.default_rng(0)
    for eps in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="epsilon"):
            fn(image, None, eps, rng)
    for bad in (image.astype(float), image[None], np.zeros((0, 3), np.uint8)):
        with pytest.raises(ValueError, match="image"):
            fn(bad, None, 1.0, rng)
    with pytest.raises(ValueError, match="variant"):
        fn(image, None, 1.0, rng, "fast")


def test_k_out_of_range(image):
    rng = np.random.default_rng(0)
    for k in (0, fourier.max_k(image.shape) + 1, 2.5):
        with pytest.raises(ValueError, match="k"):
            fourier.publish_fip(image, None, 1.0, rng, k=k)
    with pytest.raises(ValueError, match="k"):
        fourier.publish_fip(image, None, 1.0, rng, "paper", k=min(image.shape) + 1)
    with pytest.raises(ValueError, match="select_fraction"):
        fourier.publish_emk(image, None, 1.0, rng, select_fraction=1.0)
