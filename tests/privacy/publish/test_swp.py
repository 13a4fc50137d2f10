"""Liu et al. 2021 mechanisms (SWP / sort-SWP): paper DA and noise formulas, empirical privacy of the sound variants."""

import numpy as np
import pytest

from fedprint.privacy.publish import swp
from fedprint.privacy.publish.empirical import epsilon_lower_bound

MECHS = [swp.publish_swp, swp.publish_sort_swp]


@pytest.fixture
def image():
    y, x = np.mgrid[:16, :18]
    return np.clip(128 + 100 * np.sin(x / 1.5 + y / 4.0), 0, 255).astype(np.uint8)


def _spy(monkeypatch):
    scales = []
    real = swp.laplace

    def spy(rng, scale, size=None):
        scales.append(scale)
        return real(rng, scale, size)

    monkeypatch.setattr(swp, "laplace", spy)
    return scales


@pytest.mark.parametrize("threshold", [-np.inf, np.inf, 10.0, 200.0])
def test_swp_paper_da_budget_and_noise_scale(image, monkeypatch, threshold):
    scales = _spy(monkeypatch)
    eps = 2.0
    pub = swp.publish_swp(image, None, eps, np.random.default_rng(0), "paper", window_size=10, threshold=threshold)
    k = pub.details["n_windows"]
    published, eps_i = np.array(pub.details["published"]), np.array(pub.details["window_epsilons"])
    assert published[0] and eps_i[0] == pytest.approx(eps / k)  # Algorithm 1 line 2
    left = eps
    for j in range(k):  # Eqs. 19–20
        if published[j]:
            assert eps_i[j] == pytest.approx(left / (k - j))
            left -= eps_i[j]
        else:
            assert eps_i[j] == 0
    assert eps_i.sum() <= eps + 1e-12  # Thm 8
    dq = float(image.max()) - float(image.min())  # §3.1: ΔQ = x_max − x_min of the image
    assert scales == pytest.approx([dq / e for e in eps_i[published]])
    if threshold == np.inf:
        assert published.sum() == 1
    if threshold == -np.inf:
        assert published.all() and np.allclose(eps_i, eps / k)


def test_paper_similarity_cases():
    a = np.arange(20, dtype=float)
    assert swp.paper_similarity(a, a, 7.0)[0] == 7.0  # μ < 0.078n → θ = θ'
    b = a[::-1].copy()
    d = np.sqrt(((a - b) ** 2).sum())
    rho = 1.0  # same set of gray levels
    mu = 20  # every average-hash bit flips
    assert swp.paper_similarity(a, b, 7.0)[0] == pytest.approx(d / (rho + swp.SIGMA) / np.log10(max(20 - mu, 2)))


def test_sort_swp_paper_budget_split(image, monkeypatch):
    scales = _spy(monkeypatch)
    eps = 3.0
    pub = swp.publish_sort_swp(image, None, eps, np.random.default_rng(0), "paper", window_size=12)
    k = pub.details["n_windows"]
    e1, e2, e3 = pub.details["epsilon_sort"], pub.details["epsilon_first"], pub.details["epsilon_swp"]
    assert e1 + e2 + e3 == pytest.approx(eps) and e2 == pytest.approx(e3 / k)  # Algorithm 3, ε2 = ε3/k
    dq = float(image.max()) - float(image.min())
    assert scales[0] == pytest.approx(dq / e2)  # SAS line 1
    assert sorted(pub.details["order"]) == list(range(k)) and pub.details["order"][0] == 0


def test_anneal_sorts_at_low_temperature():
    v = np.random.default_rng(0).random(12)
    order = swp._anneal(v, np.arange(12), np.random.default_rng(1), 1e-6, 0.999, 1e-9)
    assert np.all(np.diff(v[order]) >= 0)


def test_unpermute_inverts_the_permutation():
    stream = np.arange(23.0)
    wins = swp._windows(23, 5)
    order = np.array([0, 3, 1, 2, 4])
    perm = np.concatenate([stream[wins[i]] for i in order])
    assert np.array_equal(swp._unpermute(perm, wins, order), stream)


# -------------------------------------------------------------------------------------------- sound: empirical
def _runs(fn, img, eps, n, seed, pixel):
    rng = np.random.default_rng(seed)
    kw = {"anneal": False} if fn is swp.publish_sort_swp else {}  # annealing is post-processing; skipped for speed
    return np.array([fn(img, None, eps, rng, "sound", window_size=4, **kw).image.flat[pixel] for _ in range(n)],
                    float)


@pytest.mark.parametrize("fn", MECHS)
def test_sound_empirical_privacy_and_halved_noise_is_caught(fn, monkeypatch):
    eps, n = 1.0, 4_000
    a = np.full((4, 4), 128, np.uint8)
    a[0, 0] = 0
    b = a.copy()
    b[0, 0] = 255
    thresholds = np.linspace(30, 250, 8)
    good = epsilon_lower_bound(_runs(fn, a, eps, n, 1, 0), _runs(fn, b, eps, n, 2, 0), thresholds)
    # a pixel in a later window: released only if its window passes the sparse-vector test
    a2, b2 = a.copy(), a.copy()
    a2[0, 0] = b2[0, 0] = 128
    a2[1, 1], b2[1, 1] = 0, 255
    later = epsilon_lower_bound(_runs(fn, a2, eps, n, 5, 5), _runs(fn, b2, eps, n, 6, 5), thresholds)
    real = swp.laplace
    monkeypatch.setattr(swp, "laplace", lambda rng, scale, size=None: real(rng, scale / 2, size))
    bad = epsilon_lower_bound(_runs(fn, a, eps, n, 3, 0), _runs(fn, b, eps, n, 4, 0), thresholds)
    print(f"{fn.__name__}: eps_lb correct {good:.3f} (later window {later:.3f}), halved {bad:.3f}")
    assert good <= eps and later <= eps
    assert bad > eps


def _reuse_decisions(img: np.ndarray, n: int, seed: int) -> np.ndarray:
    """1.0 where window 1 (row 1, pixel 5 = (1, 1)) was NOT published (row 1 repeats row 0), per run."""
    rng = np.random.default_rng(seed)
    runs = [swp.publish_swp(img, None, 40.0, rng, "sound", window_size=4, test_fraction=0.1, threshold=200.0).image
            for _ in range(n)]
    return np.array([float(np.array_equal(r[1], r[0])) for r in runs])


@pytest.mark.parametrize("halve", [False, True])
def test_sparse_vector_test_scale_is_audited_through_a_tested_pixel(monkeypatch, halve):
    """Audit pixel 5, whose window is released only through the AboveThreshold reuse test (pixel 0's window is
    always published, so auditing it cannot see the test's noise).

    The statistic "row 1 repeats row 0" is a function of the test's first answer alone (row 0 and its noisy
    release are the same for both neighbours). That answer is q + Z_q >= T + Z_T with Z_q ~ Lap(4Δ/ε_test); a
    neighbour moves q by at most Δ, so shifting Z_q alone bounds this event's privacy loss by ε_test/4 (= 1 here:
    ε = 40, ε_test = 0.1·ε). Halving the test's noise doubles that bound and must be caught."""
    if halve:
        real = swp.laplace
        k = 4  # windows of the 4x4 image: the query / threshold draws have size k, the publication noise 16
        monkeypatch.setattr(swp, "laplace",
                            lambda rng, scale, size=None: real(rng, scale / 2 if size == k else scale, size))
    a = np.zeros((4, 4), np.uint8)
    b = a.copy()
    b[1, 1] = 255
    lb = epsilon_lower_bound(_reuse_decisions(a, 4000, 11), _reuse_decisions(b, 4000, 12), [0.5])
    bound = 0.1 * 40.0 / 4
    print(f"reuse test audit (halved={halve}): eps_lb {lb:.3f}, bound for this event {bound:g}")
    assert (lb > bound) if halve else (lb <= bound)


# ------------------------------------------------------------------------------------------------------- basics
@pytest.mark.parametrize("fn", MECHS)
@pytest.mark.parametrize("variant", ["paper", "sound"])
@pytest.mark.parametrize("post_filter", [None, "median", "mean"])
def test_deterministic_uint8_same_shape(fn, variant, post_filter, image):
    p1, p2 = (fn(image, None, 2.0, np.random.default_rng(7), variant, window_size=7, post_filter=post_filter)
              for _ in range(2))
    assert p1.image.dtype == np.uint8 and p1.image.shape == image.shape
    assert np.array_equal(p1.image, p2.image) and p1.details["published"] == p2.details["published"]
    assert p1.guarantee.dp == (variant == "sound")


@pytest.mark.parametrize("fn", MECHS)
def test_sound_reuse_repeats_last_published_window(fn, image):
    pub = fn(image, None, 1.0, np.random.default_rng(0), window_size=6, threshold=1e9)  # always "similar"
    stream = pub.image.reshape(-1)
    assert sum(pub.details["published"]) == 1
    first = stream[:6]
    assert all(np.array_equal(stream[s:s + 6], first[: len(stream[s:s + 6])]) for s in range(0, stream.size, 6))
    eps_parts = [v for key, v in pub.details.items() if key.startswith("epsilon_")]
    assert sum(eps_parts) == pytest.approx(1.0)


@pytest.mark.parametrize("fn", MECHS)
def test_errors(fn, image):
    rng = np.random.default_rng(0)
    for eps in (0, -2.0):
        with pytest.raises(ValueError, match="epsilon"):
            fn(image, None, eps, rng)
    for w in (0, image.size + 1, 2.5):
        with pytest.raises(ValueError, match="window_size"):
            fn(image, None, 1.0, rng, window_size=w)
    with pytest.raises(ValueError, match="image"):
        fn(image.astype(np.int16), None, 1.0, rng)
    with pytest.raises(ValueError, match="post_filter"):
        fn(image, None, 1.0, rng, post_filter="gauss")
    with pytest.raises(ValueError, match="test_fraction"):
        fn(image, None, 1.0, rng, test_fraction=1.5)
