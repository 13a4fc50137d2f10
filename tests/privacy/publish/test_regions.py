"""Liu, Zhi et al. mechanisms (LAP, KLAP, RKLAP, DP-RKLAP): Table 3 allocation, paper noise scale, empirical privacy of
the sound variants (and that the audit catches half the noise), Table 1 in shape, and input errors."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.privacy.publish import regions
from fedprint.privacy.publish.dp_rklap import publish_dp_rklap
from fedprint.privacy.publish.empirical import epsilon_lower_bound
from fedprint.privacy.publish.klap import publish_klap
from fedprint.privacy.publish.lap import publish_lap
from fedprint.privacy.publish.regions import allocate_budget, rklap_regions
from fedprint.privacy.publish.rklap import publish_rklap

MECHANISMS = {"lap": publish_lap, "klap": publish_klap, "rklap": publish_rklap, "dp_rklap": publish_dp_rklap}


def _minutiae(xy) -> np.ndarray:
    xy = np.asarray(xy, dtype=np.float64)
    return np.column_stack([xy, np.zeros(len(xy)), np.ones(len(xy))])


@pytest.fixture(scope="module")
def small_case():
    """48x64 mid-gray image with two clusters of 6 minutiae (two regions, overlapping boxes not required)."""
    a = [(6, 8), (10, 11), (14, 12), (18, 16), (22, 17), (26, 21)]
    b = [(36, 30), (40, 32), (44, 37), (48, 38), (52, 42), (57, 44)]
    return np.full((48, 64), 128, dtype=np.uint8), _minutiae(a + b)


@pytest.fixture(scope="module")
def synthetic_print():
    """Synthetic 256x393 right loop (W=256, H=393, as FVC2004 DB2) and its ground-truth minutiae."""
    from fedprint.data.synth.master import make_master

    m = make_master(0, seed=0, size=(393, 256), pattern_prior={"right_loop": 1.0})
    img = (255 - (m.ridges + 1) * 127.5).astype(np.uint8)  # ridges dark
    assert 20 <= len(m.minutiae) <= 40
    return img, m.minutiae


# (1) Table 3 -----------------------------------------------------------------------------------------------------

def test_table3_allocation_reproduced():
    # Table 2 region sizes Q_0..Q_3 = 8146, 1110, 3679, 1076; Table 3 allocates in the order 3, 1, 2, 0.
    sizes = [1076, 1110, 3679, 8146]
    eps = allocate_budget(sizes, 1.0)
    assert eps.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(eps, [2 * 1076 / 14011, (1 - 2 * 1076 / 14011) * 2 * 1110 / 12935,
                                     0.35056995, 0.35056995], rtol=1e-6)
    pct = np.round(100 * eps[:3], 2)
    # The paper rounds each allocation to 0.01 % and keeps the column summing to 100 %, so the last entry is
    # 100 - 15.36 - 14.53 - 35.06 = 35.05 (unrounded: 35.057 %).
    table = [*pct, round(100 - pct.sum(), 2)]
    assert table == [15.36, 14.53, 35.06, 35.05]
    remaining = np.round(100 - np.cumsum(table), 2)
    assert list(remaining) == [84.64, 70.11, 35.05, 0.0]
    assert list(14011 - np.cumsum(sizes)) == [12935, 11825, 8146, 0]  # "remaining pixels" row


def test_allocation_branches_and_errors():
    # Q_j > Q_left / 2 -> omega = Q_j / Q_left; Q_left/4 < Q_j <= Q_left/2 -> 1/2.
    np.testing.assert_allclose(allocate_budget([60, 40], 2.0), [1.2, 0.8])
    np.testing.assert_allclose(allocate_budget([30, 70], 1.0), [0.5, 0.5])
    with pytest.raises(ValueError, match="sizes"):
        allocate_budget([], 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        allocate_budget([1, 2], 0.0)


# (2) paper noise = Lap(Q / epsilon) ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["lap", "klap", "rklap"])
def test_paper_noise_matches_formula(name, synthetic_print):
    img, minutiae = synthetic_print
    gray = np.full_like(img, 128)
    probe = MECHANISMS[name](gray, minutiae, 1e6, np.random.default_rng(0), variant="paper")
    q = probe.details["protected_pixels"]
    eps = 20 * q / 256  # scale Q / eps = 12.8 grey levels: clipping at 0 / 255 has probability ~5e-5
    pub = MECHANISMS[name](gray, minutiae, eps, np.random.default_rng(1), variant="paper")
    assert pub.details["noise_scale"] == pytest.approx(q / eps)
    mask = np.ones(img.shape, bool) if name == "lap" else pub.details["mask"]
    diff = pub.image.astype(float) - 128
    assert np.all(diff[~mask] == 0)  # outside the mask: released exactly
    assert np.std(diff[mask]) == pytest.approx(np.sqrt(2) * q / eps, rel=0.05)
    assert not pub.guarantee.dp and "not a DP sensitivity" in pub.guarantee.caveats


def test_paper_dp_rklap_noise_per_region(synthetic_print):
    img, minutiae = synthetic_print
    gray = np.full_like(img, 128)
    regs = rklap_regions(minutiae[:, :2], img.shape)
    q = sum(r.n_pixels for r in regs)
    eps = 1.0 + 400 * q / 256  # epsilon_order 1, the rest large enough that each region's scale is small
    pub = publish_dp_rklap(gray, minutiae, eps, np.random.default_rng(2), variant="paper", epsilon_order=1.0)
    info, order = pub.details["regions"], pub.details["order"]
    sizes = np.array([r["n_pixels"] for r in info], float)
    np.testing.assert_allclose([info[i]["epsilon"] for i in order], allocate_budget(sizes[order], eps - 1.0))
    cover = np.zeros(img.shape, int)
    for r in regs:
        cover[r.slices] += r.box_mask
    diff = pub.image.astype(float) - 128
    for i, r in enumerate(regs):
        only = np.zeros(img.shape, bool)
        only[r.slices] = r.box_mask
        only &= cover == 1
        scale = info[i]["n_pixels"] / info[i]["epsilon"]  # Lap(Q_j / eps_j), Alg. 5 step 5.5
        assert info[i]["noise_scale"] == pytest.approx(scale)
        if only.sum() >= 400:
            assert np.std(diff[only]) == pytest.approx(np.sqrt(2) * scale, rel=0.12)


# (3) empirical privacy of the sound variants ------------------------------------------------------------------------

def _audit(name, image, minutiae, eps, n=1200, seed=0):
    """Release pixel p of neighbouring images (p = 0 vs p = 255) n times each; return (eps_lb, eps of pixel p)."""
    f = MECHANISMS[name]
    probe = f(image, minutiae, eps, np.random.default_rng(0))
    if name == "dp_rklap":  # the pixel of the region with the largest epsilon_j (per-pixel eps = eps_owner)
        eps_j = np.array([r["epsilon"] for r in probe.details["regions"]])
        rows, cols = np.nonzero(probe.details["owner"] == int(np.argmax(eps_j)))
        eps_p = float(eps_j.max())
    else:
        rows, cols = np.nonzero(probe.details.get("mask", np.ones(image.shape, bool)))
        eps_p = eps
    p = rows[len(rows) // 2], cols[len(cols) // 2]
    a, b = image.copy(), image.copy()
    a[p], b[p] = 0, 255
    rng = np.random.default_rng(seed)
    sa = np.array([f(a, minutiae, eps, rng).image[p] for _ in range(n)], float)
    sb = np.array([f(b, minutiae, eps, rng).image[p] for _ in range(n)], float)
    return epsilon_lower_bound(sa, sb, [0.5, 127.5, 254.5]), eps_p


@pytest.mark.parametrize("name", ["lap", "klap", "rklap", "dp_rklap"])
def test_sound_variant_empirical_privacy(name, small_case, monkeypatch, capsys):
    image, minutiae = small_case
    eps = 2.0  # with 1200 runs per input: eps_lb ~ 1.6 for the correct scale, ~ 3 for half the noise (4-DP)
    good, eps_p = _audit(name, image, minutiae, eps)
    assert eps_p == pytest.approx(eps)
    monkeypatch.setattr(regions, "PIXEL_SENSITIVITY", 255.0 / 2)  # half the noise: really 2 eps-DP
    bad, _ = _audit(name, image, minutiae, eps, seed=1)
    with capsys.disabled():
        print(f"\n{name} sound: eps = {eps}, eps_lb correct noise = {good:.3f}, eps_lb half noise = {bad:.3f}")
    assert good <= eps
    assert bad > eps


def test_sound_dp_rklap_budget_and_ownership(synthetic_print):
    img, minutiae = synthetic_print
    pub = publish_dp_rklap(img, minutiae, 2.0, np.random.default_rng(0))
    owner, info = pub.details["owner"], pub.details["regions"]
    assert np.array_equal(owner >= 0, pub.details["mask"])  # every masked pixel has exactly one owner
    assert sum(r["owned_pixels"] for r in info) == pub.details["protected_pixels"]
    eps_j = np.array([r["epsilon"] for r in info])
    assert pub.guarantee.dp and pub.spent_epsilon == pytest.approx(2.0) and eps_j.max() == pytest.approx(2.0)
    for r in info:
        if r["owned_pixels"]:
            assert r["noise_scale"] == pytest.approx(255.0 / r["epsilon"])
    split = publish_dp_rklap(img, minutiae, 2.0, np.random.default_rng(0), rescale=False)
    eps_split = [r["epsilon"] for r in split.details["regions"]]
    assert sum(eps_split) == pytest.approx(2.0) and split.spent_epsilon == pytest.approx(max(eps_split))
    assert "mask itself" in pub.guarantee.statement() and "leak" in pub.guarantee.statement()


# (4) Table 1 in shape -----------------------------------------------------------------------------------------------

def test_table1_protected_fractions(synthetic_print, capsys):
    img, minutiae = synthetic_print
    eps = img.size / 256
    frac = {name: f(img, minutiae, eps, np.random.default_rng(0), variant="paper").details["protected_fraction"]
            for name, f in MECHANISMS.items()}
    with capsys.disabled():
        print(f"\nTable 1 (synthetic 256x393, {len(minutiae)} minutiae): "
              + ", ".join(f"{k} {100 * v:.2f}%" for k, v in frac.items()))
    assert frac["lap"] == 1.0 > frac["klap"] > frac["rklap"] > 0
    assert frac["dp_rklap"] == frac["rklap"]


# (5) errors ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(MECHANISMS))
@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon(name, eps, small_case):
    image, minutiae = small_case
    with pytest.raises(ValueError, match="epsilon"):
        MECHANISMS[name](image, minutiae, eps, np.random.default_rng(0))


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_paper_minimum_epsilon(name, small_case):
    image, minutiae = small_case
    with pytest.raises(ValueError, match="minimum"):
        MECHANISMS[name](image, minutiae, 0.05, np.random.default_rng(0), variant="paper")


@pytest.mark.parametrize("name", ["klap", "rklap", "dp_rklap"])
def test_minutiae_errors(name, small_case):
    image, minutiae = small_case
    f, rng = MECHANISMS[name], np.random.default_rng(0)
    with pytest.raises(ValueError, match="fewer than one cluster of 5"):
        f(image, minutiae[:4], 1.0, rng)
    with pytest.raises(ValueError, match="no cluster of >= 5"):
        f(image, minutiae, 1.0, rng, n_clusters=4)  # 12 minutiae in 4 clusters: none reaches 5
    with pytest.raises(ValueError, match="outside"):
        f(image, minutiae + [100, 0, 0, 0], 1.0, rng)
    with pytest.raises(ValueError, match="minutiae"):
        f(image, None, 1.0, rng)
    with pytest.raises(ValueError, match="unknown option"):
        f(image, minutiae, 1.0, rng, colour="red")


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_bad_image_and_variant(name, small_case):
    image, minutiae = small_case
    f, rng = MECHANISMS[name], np.random.default_rng(0)
    for bad in (image.astype(np.float32), np.stack([image] * 3, -1), np.zeros((0, 5), np.uint8)):
        with pytest.raises(ValueError, match="image"):
            f(bad, minutiae, 1.0, rng)
    with pytest.raises(ValueError, match="variant"):
        f(image, minutiae, 1.0, rng, variant="exact")


def test_dp_rklap_epsilon_order_checked(small_case):
    image, minutiae = small_case
    with pytest.raises(ValueError, match="epsilon_order"):
        publish_dp_rklap(image, minutiae, 1.0, np.random.default_rng(0), epsilon_order=1.0)
    pub = publish_dp_rklap(image, minutiae, 1.0, np.random.default_rng(0), epsilon_order=0.25)
    assert pub.spent_epsilon == pytest.approx(1.0) and "charged anyway" in pub.guarantee.composition


@pytest.mark.parametrize("variant", ["paper", "sound"])
def test_dp_rklap_drops_a_band_without_pixels(variant):
    """Five collinear minutiae on y = 0.5 x + 0.3: the exact fit leaves a band of half-width ~0 that holds no pixel
    centre. That region protects nothing; it must not divide by Q_j = 0 (NaN noise scale / guarantee) and its
    minutiae are reported as outside every region."""
    import warnings

    rng = np.random.default_rng(0)
    img = (rng.random((160, 160)) * 255).astype(np.uint8)
    line = np.array([[x, 0.5 * x + 0.3, 0.0, 1.0] for x in (20, 22, 24, 26, 28)])
    blob = np.column_stack([rng.uniform(100, 130, 6), rng.uniform(100, 130, 6), np.zeros(6), np.ones(6)])
    m = np.vstack([line, blob])
    boxes = regions.klap_regions(m[:, :2], img.shape, n_clusters=2)
    bands = [regions.band_mask(*regions.fit_band(m[b.members, :2])[::2], b.box) for b in boxes]
    assert sorted(int(b.sum()) for b in bands)[0] == 0  # the collinear cluster's band holds no pixel centre
    assert [r.n_pixels for r in rklap_regions(m[:, :2], img.shape, n_clusters=2)] == [555]  # dropped there
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero / invalid value on the way
        pub = publish_dp_rklap(img, m, 1000.0, rng, variant=variant, n_clusters=2)
    assert pub.details["minutiae_outside_clusters"] == 5
    assert [r["n_pixels"] for r in pub.details["regions"]] == [555]
    assert all(np.isfinite(r["noise_scale"]) for r in pub.details["regions"])
    assert "band holds no pixel" in pub.guarantee.caveats
