"""Issue 24 item 8: the point set's noise is an exact discrete Laplace law on the integer grid (δ = 0).

numpy's ``rng.laplace`` is a float transform of a 53-bit uniform: |noise| <= 36.04 scales, so with snapping some
grid points were unreachable from a neighbour (δ ≈ 1e−16). The sampler now draws Canonne, Kamath & Steinke's
discrete Laplace from uniform random integers only. Checked here: the sampler's law against the exact pmf
(a half-scale variant must be flagged), its Bernoulli(e^−γ) building block, its unbounded support, and the
point set's released noise in grid cells for a neighbouring pair (same scale; a half-noise variant flagged).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedprint.privacy.publish import pointset
from fedprint.privacy.publish.primitives import bernoulli_exp, discrete_laplace, discrete_laplace_pmf


def _fits_pmf(samples: np.ndarray, scale) -> bool:
    """Chi-square goodness of fit of integer samples to the discrete Laplace pmf (tails pooled)."""
    top = max(2, int(4 * float(scale)))
    ys = np.arange(-top, top + 1)
    p = discrete_laplace_pmf(ys, scale)
    observed = np.array([np.sum(samples == y) for y in ys] + [np.sum(np.abs(samples) > top)])
    expected = np.append(p, 1 - p.sum()) * len(samples)
    keep = expected >= 5
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-3


@pytest.mark.parametrize("scale", [Fraction(7, 10), Fraction(5, 2), 3, 0.3])
def test_sampler_matches_the_exact_pmf_and_a_half_scale_is_flagged(scale):
    rng = np.random.default_rng(11)  # tests inject a generator; the user paths use OS entropy
    good = np.array([discrete_laplace(rng, scale) for _ in range(6000)])
    assert _fits_pmf(good, scale)
    assert abs(good.mean()) < 0.1 + 4 * float(scale) / np.sqrt(len(good))  # centred
    half = np.array([discrete_laplace(rng, Fraction(scale) / 2) for _ in range(6000)])
    assert not _fits_pmf(half, scale)  # the broken variant (half the noise) is caught


@pytest.mark.parametrize(("num", "den"), [(0, 1), (3, 10), (1, 1), (5, 2)])
def test_bernoulli_exp_is_exp_minus_gamma(num, den):
    rng = np.random.default_rng(12)
    draws = np.array([bernoulli_exp(rng, num, den) for _ in range(20000)])
    p = np.exp(-num / den)
    assert abs(draws.mean() - p) <= 4 * np.sqrt(p * (1 - p) / len(draws)) + 1e-12


class _Script:
    """A byte source that replays a script (white box: drives the sampler to a chosen output)."""

    def __init__(self, script: list[int]) -> None:
        self.script = list(script)

    def bytes(self, n: int) -> bytes:  # the sampler reads bytes in order, one per draw below 256
        out, self.script = self.script[:n], self.script[n:]
        return bytes(out + [0] * (n - len(out)))


def test_support_is_unbounded_beyond_numpys_36_scales():
    # scale 1: U = 0 (no draw) accepted; each [0x00, 0x40] is one Bernoulli(e^-1) success (K = 3), 0x80 stops;
    # the last 0x80 is the sign: positive
    y = discrete_laplace(_Script([0x00, 0x40] * 40 + [0x80, 0x80]), 1)
    assert y == 40 > 36.04  # rng.laplace(0, 1) can never return more than 36.04


def _cell_noise(epsilon: float, runs: int, rng) -> np.ndarray:
    """Noise, in grid cells (2^-30), of one group's released sum — neighbours: the value 0 vs 1 − 2^-30."""
    out = []
    for v in (0.0, 1.0 - 2.0 ** -30):
        values = np.array([0.25, 0.5, v])
        truth = np.floor(values * 2**30).sum()
        noise = [round(m[0] * 3 * 2**30 - truth) for m, _ in
                 (pointset.noisy_group_means(values, 3, epsilon, rng) for _ in range(runs))]
        out.append(np.array(noise, np.float64))
    return np.array(out)


def test_point_set_noise_is_discrete_laplace_in_cells_for_both_neighbours():
    eps = 2.0
    noise = _cell_noise(eps, 1500, np.random.default_rng(13))
    scale = 2**30 / eps  # L / ε cells: sensitivity L − 1 cells
    for side in noise:  # the same law whatever the data
        assert np.mean(side == 0) < 0.01  # no atom at 0
        # |noise| / scale ~ Exp(1); the old snapping put the noise on a lattice of half scales (KS p ~ 1e-210)
        assert stats.kstest(np.abs(side) / scale, "expon").pvalue > 1e-3
        assert np.all(side == np.round(side))  # on the integer grid


def test_point_set_half_noise_variant_is_flagged(monkeypatch):
    original = pointset.sum_noise_scales
    monkeypatch.setattr(pointset, "sum_noise_scales", lambda *a: [b / 2 for b in original(*a)])
    noise = _cell_noise(2.0, 1500, np.random.default_rng(14))
    assert stats.kstest(np.abs(noise[0]) / (2**30 / 2.0), "expon").pvalue < 1e-3


def test_released_scale_is_the_same_for_a_neighbouring_pair():
    img = np.zeros((64, 64), np.uint8)
    a = np.array([[10.0, 10.0, 1.0, 1.0]] * 6)
    b = a.copy()
    b[5, :3] = [63.0, 63.0, 6.0]  # one minutia replaced
    pa, pb = (pointset.publish_pointset(img, m, 1.0, np.random.default_rng(15), k=2) for m in (a, b))
    assert pa.details["noise_scale_cells"] == pb.details["noise_scale_cells"] == [2.0**30] * 3
    assert pa.details["group_sizes"] == pb.details["group_sizes"]
    assert all(isinstance(s, int) for s in pa.details["noisy_sums"]) and pa.guarantee.delta == 0.0
