"""studies.repro_median_nrs07: NRS07's smooth sensitivity of the median, its noise, and the thesis's median."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import integrate, stats

from studies import repro_median_nrs07 as rm


def _brute_force_smooth_sensitivity(x: np.ndarray, xi: float, upper: int) -> float:
    """S*(x) from the definitions on an integer grid {0..upper} (exact there: every breakpoint is an integer):
    LS(y) = max over one replaced value of |med(y') − med(y)|, A^(k) = max LS(y) over d(x, y) ≤ k."""
    n = len(x)
    grid = np.arange(upper + 1, dtype=np.float64)
    ys = np.array(list(itertools.product(grid, repeat=n)))
    dist = (ys != x).sum(axis=1)
    # every single replacement of every y: position p set to value v
    rep = np.repeat(ys[:, None, None, :], n, axis=1).repeat(len(grid), axis=2)
    for p in range(n):
        rep[:, p, :, p] = grid
    ls = np.abs(np.median(rep, axis=3) - np.median(ys, axis=1)[:, None, None]).max(axis=(1, 2))
    return max(np.exp(-k * xi) * ls[dist <= k].max() for k in range(n + 1))


@pytest.mark.parametrize("x", [[1, 2, 2, 5, 6], [0, 0, 3, 3, 6], [2, 3, 4, 4, 4], [6, 6, 6, 6, 6], [1, 4, 5]])
@pytest.mark.parametrize("xi", [0.05, 1.0])
def test_smooth_sensitivity_equals_brute_force_and_bounds_local_sensitivity(x, xi):
    x = np.array(x, np.float64)
    s = rm.smooth_sensitivity(x, xi, upper=6.0)
    assert s == pytest.approx(_brute_force_smooth_sensitivity(x, xi, 6), abs=1e-12)
    assert s >= rm.local_sensitivity(x, upper=6.0) - 1e-12


def test_smooth_sensitivity_is_beta_smooth_on_neighbours():
    rng = np.random.default_rng(1)
    for _ in range(200):
        x = rng.uniform(0, 1, 9)
        y = x.copy()
        y[rng.integers(9)] = rng.uniform()
        assert rm.smooth_sensitivity(y, 0.3) <= np.exp(0.3) * rm.smooth_sensitivity(x, 0.3) + 1e-12


@pytest.mark.parametrize("gamma", rm.GAMMAS)
def test_noise_is_admissible_pointwise(gamma):
    """NRS07 Lemma 2.6's two conditions at α = β = ε/(2(γ+1)), each loss ≤ ε/2, checked on a dense grid of z."""
    eps = 1.0
    alpha, beta = rm.admissible(eps, gamma)
    z = np.concatenate([-np.geomspace(1e-4, 1e4, 4000), [0.0], np.geomspace(1e-4, 1e4, 4000)])
    logh = lambda u: -np.log1p(np.abs(u) ** gamma)  # noqa: E731
    for d in np.linspace(-alpha, alpha, 21):
        assert np.max(logh(z) - logh(z + d)) <= eps / 2
    for lam in np.linspace(-beta, beta, 21):  # Pr[Z ∈ S] vs Pr[Z ∈ e^λ S]: density h(u) vs e^λ h(e^λ u)
        assert np.max(logh(z) - logh(np.exp(lam) * z) - lam) <= eps / 2 + 1e-12


def test_gamma4_sampler_has_the_right_law():
    z = rm.generalized_cauchy(np.random.default_rng(2), 4, 20_000)
    norm = 2 * np.pi / (4 * np.sin(np.pi / 4))

    def cdf(t):
        return 0.5 + np.sign(t) * integrate.quad(lambda u: 1 / (1 + u**4), 0, abs(t))[0] / norm

    assert stats.kstest(z, np.vectorize(cdf)).pvalue > 1e-3


def test_thesis_dataset_and_medians():
    rng = np.random.default_rng(3)
    x = rm.thesis_dataset(0.3, rng)
    assert len(x) == rm.N and np.sum(x == 1.0) >= rm.N_ONES and x.min() == 0.0
    assert abs(rm.local_sensitivity(x) - 0.3) <= 0.005
    # k = 1 at a huge ε: the point-set median is the true median to within the grid
    assert rm.pointset_median(x, 1, 1e9, rng) == pytest.approx(np.median(x), abs=1e-6)
    assert rm.nrs07_median(x, 1e6, rng) == pytest.approx(np.median(x), abs=1e-3)


def test_run_is_small_and_complete(tmp_path):
    res = rm.run(10, epsilons=(0.5, 1.0), targets=rm.TARGETS, tune_trials=4)
    row = res["results"]["0.1"]["by_eps"]["1.0"]
    assert set(rm.LABELS) <= set(row)
    for r in (row[name] for name in rm.LABELS):
        assert r["median_ci95"][0] <= r["median_abs_err"] <= r["median_ci95"][1]
        assert r["mean_ci95"][0] <= r["mean_abs_err"] <= r["mean_ci95"][1]
    rm.plot(res, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
    res["verdict_checks"], res["command"], res["seconds"] = rm.verdict(res), "python -m studies.repro_median_nrs07", 0
    rm.write_md(res, tmp_path / "f.md")
    assert "## Verdict" in (tmp_path / "f.md").read_text()
