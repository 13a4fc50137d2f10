"""DP point-set publication (Fang 2013 Ch. 4): Hilbert curve, sorting sensitivity, PAVA, privacy audit, k choice."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fedprint.privacy.publish import pointset
from fedprint.privacy.publish.empirical import epsilon_lower_bound
from fedprint.privacy.publish.pointset import (
    choose_k,
    from_line,
    group_sizes,
    hilbert_cells,
    hilbert_index,
    noisy_group_means,
    paper_k,
    publish_pointset,
    reconstruct,
    to_line,
)


@pytest.mark.parametrize(("dims", "order"), [(2, 5), (3, 3)])
def test_hilbert_round_trip_and_locality(dims, order):
    h = np.arange(1 << (dims * order))
    cells = hilbert_cells(h, order, dims)
    assert np.array_equal(hilbert_index(cells, order), h)
    assert len(np.unique(cells, axis=0)) == len(h)  # a bijection onto the grid
    assert np.all(np.abs(np.diff(cells, axis=0)).sum(axis=1) == 1)  # consecutive cells are grid neighbours


def test_line_round_trip_at_cell_centres():
    rng = np.random.default_rng(0)
    cells = rng.integers(0, 1 << 6, (100, 3))
    centres = (cells + 0.5) / (1 << 6)
    t = to_line(centres, order=6)
    assert t.min() >= 0 and t.max() < 1
    assert np.allclose(from_line(t, 3, order=6), centres)
    with pytest.raises(ValueError, match="unit_points"):
        to_line(np.array([[1.5, 0.2]]), order=6)


def test_sorting_has_sensitivity_one_for_any_partition():
    rng = np.random.default_rng(1)
    for _ in range(200):
        d1 = rng.uniform(0, 1, 30)
        d2 = d1.copy()
        i, a = rng.integers(30), rng.uniform(0, 1)
        d2[i] = a
        diff = np.abs(np.sort(d1) - np.sort(d2)).sum()
        assert diff == pytest.approx(abs(a - d1[i]))  # Thm 1: exactly |A - x_i| <= 1
        cuts = np.sort(rng.choice(np.arange(1, 30), 5, replace=False))  # Cor. 2: any partition of the ranks
        s1 = np.add.reduceat(np.sort(d1), np.r_[0, cuts])
        s2 = np.add.reduceat(np.sort(d2), np.r_[0, cuts])
        assert np.abs(s1 - s2).sum() <= abs(a - d1[i]) + 1e-12


def test_pava_reconstruction_is_monotone_and_clipped():
    rng = np.random.default_rng(2)
    sizes = group_sizes(130, 3)
    assert sizes.sum() == 130 and set(sizes) <= {3, 4} and len(sizes) == 43
    out = reconstruct(rng.normal(0.5, 0.6, 43), sizes)
    assert len(out) == 130 and np.all(np.diff(out) >= 0) and out.min() >= 0 and out.max() <= 1
    mono = np.linspace(0.1, 0.9, 10)
    assert np.allclose(reconstruct(mono, np.ones(10, int)), mono)  # already monotone: unchanged


def _neighbours(order=5):
    """Four minutiae at the start of the curve; the neighbour moves one to the curve's far end (Δ sum ≈ 1)."""
    side = 1 << order
    end = hilbert_cells([side * side - 1], order, 2)[0] + 0.5
    a = np.array([[0.5, 0.5, 0.0, 1.0]] * 4)
    b = a.copy()
    b[3, :2] = end
    return a, b, (side, side)


def _audit(epsilon, runs=3000):
    a, b, dom = _neighbours()
    rng = np.random.default_rng(3)
    last = [[publish_pointset(None, m, epsilon, rng, k=2, order=5, direction=False, domain=dom)
             .details["noisy_means"][-1] for _ in range(runs)] for m in (a, b)]
    return epsilon_lower_bound(np.array(last[0]), np.array(last[1]), np.linspace(-0.5, 1.0, 7))


def test_empirical_privacy_correct_scale_passes():
    assert _audit(1.0) <= 1.0


def test_empirical_privacy_halved_scale_is_caught(monkeypatch):
    original = pointset.sum_noise_scales
    monkeypatch.setattr(pointset, "sum_noise_scales", lambda *a: [b / 2 for b in original(*a)])
    assert _audit(1.0) > 1.0


def test_choose_k_grows_with_n_and_beats_the_paper_table():
    small = choose_k(200, 1.0, np.random.default_rng(0), trials=4)
    large = choose_k(5000, 1.0, np.random.default_rng(0), trials=4)
    assert 1 <= small < large <= 5000
    assert large > paper_k(5000, 1.0)  # Table 4.1 says 37: too small


def test_group_privacy_divides_epsilon():
    rng_minutiae = np.random.default_rng(4)
    m = np.c_[rng_minutiae.uniform(0, 100, (20, 2)), rng_minutiae.uniform(0, 2 * np.pi, 20), np.ones(20)]
    img = np.zeros((100, 100), np.uint8)
    fin = publish_pointset(img, m, 2.0, np.random.default_rng(5), k=4, protect="finger", size=20)
    per = publish_pointset(img, m, 2.0 / 20, np.random.default_rng(5), k=4)
    assert fin.details["epsilon_per_minutia"] == pytest.approx(0.1)
    # the same noise scale as ε / m per minutia (m = N = 20 here)
    assert np.allclose(fin.details["noise_scale_cells"], per.details["noise_scale_cells"])
    assert fin.spent_epsilon == 2.0 and "finger" in fin.guarantee.protected
    assert per.details["epsilon_finger"] == pytest.approx(2.0) and "group privacy" in per.guarantee.caveats


def test_paper_variant_noise_matches_thesis_formula():
    k = paper_k(103, 1.0)
    assert k == 29  # n below the table's first row: row n = 2,000, column ε = 1
    sizes = group_sizes(103, k)
    # Lap(1/(kε)) on each mean = |h_i|/(kε) on each sum; sound: 1/ε on each sum
    assert pointset.sum_noise_scales(sizes, k, 1.0, "paper") == [Fraction(int(n), k) for n in sizes]
    assert pointset.sum_noise_scales(sizes, k, 0.5, "sound") == [Fraction(2)] * len(sizes)
    t = np.random.default_rng(6).uniform(0, 1, 103)
    noisy, got = noisy_group_means(t, k, 1.0, np.random.default_rng(7), variant="paper", levels=1 << 20)
    assert np.array_equal(got, sizes) and noisy.shape == (len(sizes),)


def test_noisy_sums_are_released_on_the_integer_grid():
    """Floating-point attack (Mironov 2012): the released sums are exact integers (grid cells), no float noise."""
    t = np.random.default_rng(9).uniform(0, 1, 40)
    h = np.floor(t * (1 << 20)).astype(np.int64)
    for variant in ("sound", "paper"):
        sums, sizes = pointset.noisy_group_sums(h, 1 << 20, 4, 0.7, np.random.default_rng(10), variant=variant)
        assert all(isinstance(s, int) for s in sums) and len(sums) == len(sizes)


def test_release_shape_accuracy_and_bad_input():
    rng = np.random.default_rng(8)
    m = np.c_[rng.uniform(0, 200, (60, 2)), rng.uniform(0, 2 * np.pi, 60), np.ones(60)]
    img = np.zeros((200, 200), np.uint8)
    pub = publish_pointset(img, m, 1.0, np.random.default_rng(9))
    assert pub.points.shape == (60, 3) and pub.guarantee.dp and pub.image is None
    # nearly noise-free (2-D curve, cells of 0.2 px): the released multiset is the original one
    pub = publish_pointset(img, m, 1e7, np.random.default_rng(9), k=1, direction=False)
    assert pub.points.shape == (60, 2)
    assert np.abs(np.sort(pub.points[:, 0]) - np.sort(m[:, 0])).max() < 1.0
    for bad, match in [(dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(k=61), "k"),
                       (dict(variant="x"), "variant"), (dict(protect="x"), "protect")]:
        kwargs = dict(epsilon=1.0) | bad
        with pytest.raises(ValueError, match=match):
            publish_pointset(img, m, rng=rng, **kwargs)
    with pytest.raises(ValueError, match="domain"):
        publish_pointset(None, m, 1.0, rng)
    with pytest.raises(ValueError, match="inside the domain"):
        publish_pointset(np.zeros((50, 50), np.uint8), m, 1.0, rng)
    with pytest.raises(ValueError, match="minutiae"):
        publish_pointset(img, np.zeros((0, 4)), 1.0, rng)
