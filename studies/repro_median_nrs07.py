"""Fang's thesis Fig. 4.10: the DP median read off the point-set release vs NRS07's smooth-sensitivity median.

A study comparator, not product code. Run (writes ``docs/studies/reproduction/002_fig410.{png,json,md}``)::

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python -m studies.repro_median_nrs07 --trials 1000

Setting (thesis Sec. 4.6.3). n = 129 values in [0, Λ], Λ = 1: 66 exponential draws min–max scaled to [0, 1] plus
63 ones, kept only when the median's local sensitivity LS(x) = max(x_m − x_{m−1}, x_{m+1} − x_m) (m = 65) is within
``tol`` of 0.1 or 0.3 — the thesis says it "constructs a data set with a particular local sensitivity" this way but
not how the value is hit, so we read it as rejection sampling. Every trial draws a fresh data set (seeded: the data
choice is reproducible) and fresh mechanism noise (OS entropy), so the trials are i.i.d. and the distribution-free
binomial interval of the median absolute error is valid. Neighbours, for both mechanisms: the same n, one value
replaced by any other value of [0, Λ] (bounded DP); both are ε-DP with δ = 0.

The thesis's median. Its mechanism releases the sorted sequence (Sec. 4.3): group means of the sorted values +
Lap(1/(kε)) (A2–A3), isotonic regression and upsampling (B1); the median is the ⌈n/2⌉-th value of that
reconstruction ("our mechanism outputs the sorted sequence differentially privately, and thus naturally gives the
median"). We run the product's code (:func:`fedprint.privacy.publish.pointset.noisy_group_means`, exact discrete
Laplace on the integer group sums, then :func:`~fedprint.privacy.publish.pointset.reconstruct`) with k from the
thesis's Table 4.1 (nearest row n = 2,000, as the thesis says it looks k up there; ``paper_k``) and with the product's
simulated k (``choose_k``, seeded as the product seeds it).

NRS07's median (Nissim, Raskhodnikova & Smith, "Smooth sensitivity and sampling in private data analysis", STOC
2007; section numbers of the full version). For x sorted, x_i = 0 for i < 1 and x_i = Λ for i > n,

    A^(k)(x) = max_{t=0..k+1} (x_{m+t} − x_{m+t−k−1})   (the largest LS over data sets at Hamming distance ≤ k),
    S*(x)   = max_{k=0..n} e^{−kξ} A^(k)(x)              (the ξ-smooth sensitivity of the median, Def. 2.2 / Prop. 3.4).

Every (k, t) term is a pair i = m+t−k−1 ≤ m ≤ j = m+t with weight e^{−ξ(j−i−1)}; clipping i to 0 or j to n+1 keeps
the gap and lowers k, so S*(x) = max_{0≤i≤m≤j≤n+1, i<j} (x_j − x_i)·e^{−ξ(j−i−1)} exactly (:func:`smooth_sensitivity`,
O(n²) on a (m+1)×(n+2−m) grid; NRS07 give an O(n log n) algorithm, not needed at n = 129).

Release: med(x) + (S*(x)/α)·Z with Z of density h(z) ∝ 1/(1 + |z|^γ) and ξ = β. NRS07 Lemma 2.6: if h is
(α, β)-admissible — sliding, Pr[Z ∈ S] ≤ e^{ε/2} Pr[Z ∈ S + Δ] for |Δ| ≤ α, and dilation,
Pr[Z ∈ S] ≤ e^{ε/2} Pr[Z ∈ e^λ S] for |λ| ≤ β — and S is a β-smooth upper bound on LS, the release is ε-DP. Sketch:
for neighbours x, y, |med(y) − med(x)| ≤ LS(x) ≤ S(x) and S(y) ≤ e^β S(x), so
med(y) + S(y)Z/α = med(x) + (S(x)/α)(e^λ Z + Δ) with |Δ| ≤ α, |λ| ≤ β: one slide and one dilation, e^{ε/2} each.
For h ∝ 1/(1 + |z|^γ), γ > 1, NRS07 (Lemma 2.7; their median example is the Cauchy case, med + 6S*/ε·η with
ε/6-smooth S*) give α = β = ε/(2(γ+1)). We use γ = 2 (their example) and γ = 4 (finite variance), and do not rest on
the recalled constant: the test checks both conditions pointwise — the sliding loss is sup_z log h(z)/h(z+Δ) ≤
α·max_z γ|z|^{γ−1}/(1+|z|^γ) and the dilation loss is (γ−1)|λ| — which hold with room for these α, β. The thesis
quotes none of NRS07's constants and says it "empirically chose the best parameters for the known mechanisms", so
every figure shows both γ and the verdict uses the better one at each ε. A third NRS07 line, Laplace noise with
α = ε/2, β = ε/(2 ln(2/δ)) (NRS07 Lemma 2.9, recalled, not checked here), is (ε, δ)-DP with δ = 1e-6: a reference
only, weaker in privacy than the rest. NRS07's release is clipped to [0, Λ] (post-processing, free; the thesis's
reconstruction is clipped too); unclipped errors are in the JSON.

Error measure. The thesis plots an undefined "noise level"; we report the mean |released − true median| (bounded
once clipped, so a normal 95% interval is valid) and keep the median |error| with its binomial interval in the JSON.
The median is degenerate for clipped NRS07: with heavy-tailed noise of scale S*/α ≫ 1 − med the clipped output is
≈ 0 or ≈ 1, so the median of its errors jumps between ≈ 1 − med and ≈ med.

Best k. Table 4.1 has no row near n = 129 (its nearest row, n = 2,000, gives k = 44 at ε ≤ 0.5: two groups, and the
median is read off the lower group's mean), so we also report the point set at the k of :data:`K_GRID` with the lowest
mean error on separate tuning data — the same advantage the thesis gave its comparators.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import binom

from fedprint.privacy.publish.pointset import _simulated_k, noisy_group_means, paper_k, reconstruct

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "docs" / "studies" / "reproduction"
N, N_EXP, N_ONES = 129, 66, 63
TARGETS = (0.1, 0.3)
EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0)
GAMMAS = (2, 4)
#: δ of the reference (ε, δ) Laplace variant of NRS07 (not comparable in privacy: the others have δ = 0).
DELTA = 1e-6
#: max of (1 + z²)/(1 + z⁴) (at z² = √2 − 1): the envelope constant of the γ = 4 rejection sampler.
_ENVELOPE_4 = (1.0 + math.sqrt(2.0)) / 2.0


# ------------------------------------------------------------------------------------------- NRS07 median
def _median_rank(n: int) -> int:
    if n < 1 or n % 2 == 0:
        raise ValueError(f"n: expected an odd number of values (median x_m, m = (n+1)/2), got {n}")
    return (n + 1) // 2


def local_sensitivity(values: np.ndarray, upper: float = 1.0) -> float:
    """LS of the median under replacement: max(x_m − x_{m−1}, x_{m+1} − x_m), x_0 = 0, x_{n+1} = Λ (NRS07 Sec. 3)."""
    x = np.concatenate([[0.0], np.sort(np.asarray(values, np.float64)), [upper]])
    m = _median_rank(len(x) - 2)
    return float(max(x[m] - x[m - 1], x[m + 1] - x[m]))


def smooth_sensitivity(values: np.ndarray, xi: float, upper: float = 1.0) -> float:
    """Exact ξ-smooth sensitivity S*(x) of the median on [0, Λ] (NRS07 Def. 2.2, Prop. 3.4), in O(n²).

    Parameters
    ----------
    values : ndarray
        n values in [0, ``upper``], n odd.
    xi : float
        Smoothness ξ = β > 0.
    upper : float
        Λ, the top of the domain (the bottom is 0).

    Returns
    -------
    float
        max over 0 ≤ i ≤ m ≤ j ≤ n+1, i < j, of (x_j − x_i)·e^{−ξ(j−i−1)}, which equals
        max_k e^{−kξ} max_{t=0..k+1} (x_{m+t} − x_{m+t−k−1}) (module docstring).
    """
    v = np.sort(np.asarray(values, np.float64))
    if v.size and (v[0] < 0 or v[-1] > upper):
        raise ValueError(f"values: expected values in [0, {upper}]")
    n = len(v)
    m = _median_rank(n)
    x = np.concatenate([[0.0], v, [upper]])
    i = np.arange(0, m + 1)[:, None]
    j = np.arange(m, n + 2)[None, :]
    k = j - i - 1
    weighted = np.where(k >= 0, (x[j] - x[i]) * np.exp(-xi * np.maximum(k, 0)), 0.0)
    return float(weighted.max())


def admissible(epsilon: float, gamma: float) -> tuple[float, float]:
    """(α, β) = (ε/(2(γ+1)), ε/(2(γ+1))) for h ∝ 1/(1+|z|^γ) (NRS07 Lemma 2.7; checked pointwise in the tests)."""
    a = epsilon / (2.0 * (gamma + 1.0))
    return a, a


def generalized_cauchy(rng: np.random.Generator, gamma: int, size: int) -> np.ndarray:
    """``size`` draws of density h(z) ∝ 1/(1+|z|^γ): γ = 2 standard Cauchy; γ = 4 by rejection from a Cauchy
    proposal (accept with probability (1+z²)/((1+z⁴)·M), M = (1+√2)/2 the ratio's maximum: exact)."""
    if gamma == 2:
        return rng.standard_cauchy(size)
    if gamma != 4:
        raise ValueError(f"gamma: 2 or 4 are implemented, got {gamma}")
    out = np.empty(0)
    while out.size < size:
        z = rng.standard_cauchy(2 * (size - out.size) + 8)
        keep = rng.uniform(0.0, _ENVELOPE_4, z.size) < (1.0 + z**2) / (1.0 + z**4)
        out = np.concatenate([out, z[keep]])
    return out[:size]


def nrs07_median(values: np.ndarray, epsilon: float, rng: np.random.Generator, *, gamma: int = 2,
                 upper: float = 1.0) -> float:
    """One ε-DP release med(x) + (S*(x)/α)·Z, Z ~ h_γ, S* the β-smooth sensitivity (NRS07 Lemma 2.6, Sec. 3)."""
    alpha, beta = admissible(epsilon, gamma)
    s = smooth_sensitivity(values, beta, upper)
    return float(np.median(values) + s / alpha * generalized_cauchy(rng, gamma, 1)[0])


# ------------------------------------------------------------------------------------- the thesis's median
def pointset_median(values: np.ndarray, k: int, epsilon: float, rng: np.random.Generator) -> float:
    """The median of the point-set release (thesis A2–A3, B1): the ⌈n/2⌉-th value of ↑_k IR(S̃), via the product's
    :func:`noisy_group_means` (exact discrete Laplace, sound scale Lap(1/ε) per sum) and :func:`reconstruct`."""
    means, sizes = noisy_group_means(values, k, epsilon, rng)
    return float(reconstruct(means, sizes)[_median_rank(len(values)) - 1])


# ---------------------------------------------------------------------------------------------- the data
def thesis_dataset(target: float, rng: np.random.Generator, tol: float = 0.005, batch: int = 512) -> np.ndarray:
    """66 exponential draws min–max scaled to [0, 1] plus 63 ones, kept when |LS(x) − target| ≤ tol (Sec. 4.6.3)."""
    while True:
        e = np.sort(rng.exponential(1.0, (batch, N_EXP)), axis=1)
        u = (e - e[:, :1]) / (e[:, -1:] - e[:, :1])
        m = _median_rank(N) - 1  # 0-based: x_m is u[:, 64], x_{m+1} = u[:, 65] = 1, x_{m-1} = u[:, 63]
        ls = np.maximum(u[:, m] - u[:, m - 1], u[:, m + 1] - u[:, m])
        hit = np.flatnonzero(np.abs(ls - target) <= tol)
        if hit.size:
            return np.concatenate([u[hit[0]], np.ones(N_ONES)])


# ------------------------------------------------------------------------------------------- statistics
def median_interval(err: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median of i.i.d. ``err`` from binomial order statistics."""
    s = np.sort(np.asarray(err, np.float64))
    n = len(s)
    lo = int(binom.ppf((1 - level) / 2, n, 0.5))
    hi = int(binom.ppf((1 + level) / 2, n, 0.5))
    return float(s[max(lo - 1, 0)]), float(s[min(hi, n - 1)])


def summary(err: np.ndarray) -> dict:
    """Mean |error| with a normal 95% interval (errors are bounded in [0, Λ] once clipped) and the median |error|
    with its binomial interval."""
    err = np.asarray(err, np.float64)
    lo, hi = median_interval(err)
    half = 1.96 * float(err.std(ddof=1)) / math.sqrt(len(err))
    return {"mean_abs_err": float(err.mean()), "mean_ci95": [float(err.mean()) - half, float(err.mean()) + half],
            "median_abs_err": float(np.median(err)), "median_ci95": [lo, hi], "q25": float(np.quantile(err, 0.25)),
            "q75": float(np.quantile(err, 0.75))}


def product_k(n: int, epsilon: float) -> int:
    """The k the product's sound variant uses (:func:`fedprint.privacy.publish.pointset._simulated_k`)."""
    return _simulated_k(n, float(epsilon))


#: Group sizes tried for the best-k (oracle) point-set curve.
K_GRID = (1, 2, 3, 4, 5, 6, 8, 10, 11, 13, 16, 20, 22, 26, 32, 43, 64)


def datasets(target: float, trials: int, seed: int, tol: float) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, int(round(target * 1000))])
    return [thesis_dataset(target, rng, tol) for _ in range(trials)]


def pointset_errors(sets: list[np.ndarray], k: int, eps: float, noise: np.random.Generator) -> np.ndarray:
    return np.array([abs(pointset_median(x, k, eps, noise) - np.median(x)) for x in sets])


def best_k(sets: list[np.ndarray], eps: float, noise: np.random.Generator) -> tuple[int, dict]:
    """k of :data:`K_GRID` with the lowest mean |error| on ``sets`` (a tuning set: the thesis tuned its comparators
    with knowledge of the data, and Table 4.1 has no row near n = 129)."""
    err = {k: float(pointset_errors(sets, k, eps, noise).mean()) for k in K_GRID}
    return min(err, key=err.get), err


def run(trials: int, *, seed: int = 0, epsilons=EPSILONS, targets=TARGETS, tol: float = 0.005,
        tune_trials: int = 200) -> dict:
    """|error| of every mechanism over ``trials`` i.i.d. (data set, noise) draws per (LS, ε); the best k is picked on
    ``tune_trials`` other data sets (data seed + 1) so the reported error is not the minimum of a noisy sweep."""
    noise = np.random.default_rng()  # OS entropy: the mechanisms' privacy noise
    out: dict = {"n": N, "trials": trials, "tune_trials": tune_trials, "data_seed": seed, "tol": tol, "upper": 1.0,
                 "delta_laplace": DELTA, "epsilons": list(epsilons), "k_grid": list(K_GRID),
                 "k_paper": {str(e): paper_k(N, e) for e in epsilons},
                 "k_product": {str(e): product_k(N, e) for e in epsilons}, "results": {}}
    for target in targets:
        sets = datasets(target, trials, seed, tol)
        tune = datasets(target, tune_trials, seed + 1, tol)
        med = np.array([np.median(x) for x in sets])
        res: dict = {"ls_mean": float(np.mean([local_sensitivity(x) for x in sets])),
                     "true_median_mean": float(med.mean()), "by_eps": {}}
        for eps in epsilons:
            kb, sweep = best_k(tune, eps, noise)
            row: dict = {"tuning_mean_abs_err_by_k": {str(k): v for k, v in sweep.items()}}
            for name, k in (("pointset_paper_k", out["k_paper"][str(eps)]),
                            ("pointset_product_k", out["k_product"][str(eps)]), ("pointset_best_k", kb)):
                row[name] = summary(pointset_errors(sets, k, eps, noise)) | {"k": k}
            for name, gamma in (("nrs07_gamma2", 2), ("nrs07_gamma4", 4), ("nrs07_laplace", None)):
                alpha, beta = admissible(eps, gamma) if gamma else (eps / 2, eps / (2 * math.log(2 / DELTA)))
                s = np.array([smooth_sensitivity(x, beta) for x in sets])
                z = generalized_cauchy(noise, gamma, trials) if gamma else noise.laplace(0.0, 1.0, trials)
                raw = np.abs(s / alpha * z)
                clipped = np.abs(np.clip(med + s / alpha * z, 0.0, 1.0) - med)
                row[name] = summary(clipped) | {
                    "alpha": alpha, "beta": beta, "smooth_sens_mean": float(s.mean()),
                    "unclipped": {k: v for k, v in summary(raw).items() if k in ("median_abs_err", "median_ci95")}}
            res["by_eps"][str(eps)] = row
        out["results"][str(target)] = res
    return out


# ------------------------------------------------------------------------------------------------ outputs
LABELS = {"pointset_paper_k": "point set, k from thesis Table 4.1", "pointset_product_k": "point set, product's k",
          "pointset_best_k": "point set, best k (tuned)", "nrs07_gamma2": "NRS07, Cauchy γ=2, α=β=ε/6",
          "nrs07_gamma4": "NRS07, γ=4, α=β=ε/10", "nrs07_laplace": f"NRS07, Laplace, (ε, δ={DELTA:g})"}
STYLES = ("o-", "s--", "D-", "^-", "v-", "x:")
THESIS, NRS_PURE = "pointset_best_k", ("nrs07_gamma2", "nrs07_gamma4")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = result["epsilons"]
    fig, axes = plt.subplots(1, len(result["results"]), figsize=(12, 4.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (target, res) in zip(axes, result["results"].items(), strict=True):
        for name, style in zip(LABELS, STYLES, strict=True):
            rows = [res["by_eps"][str(e)][name] for e in eps]
            y = np.array([r["mean_abs_err"] for r in rows])
            ci = np.array([r["mean_ci95"] for r in rows]).T
            ax.errorbar(eps, y, yerr=[y - ci[0], ci[1] - y], fmt=style, capsize=3, label=LABELS[name])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_title(f"local sensitivity {target} (n = {result['n']})")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(f"mean |error| of the median, clipped to [0, 1]\n({result['trials']} trials, 95% CI)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def verdict(result: dict) -> dict:
    """The thesis's claims checked on the measured mean |error|, thesis mechanism = best-k point set, NRS07 = the
    better pure-DP γ at each ε: (1) at LS = 0.3 it beats NRS07; (2) more so at LS 0.3 than at 0.1; (3) as ε falls
    its error grows more slowly (error at the smallest ε / error at the largest ε)."""
    eps = [str(e) for e in result["epsilons"]]
    per = {}
    for target, res in result["results"].items():
        b = res["by_eps"]
        ours = [b[e][THESIS]["mean_abs_err"] for e in eps]
        nrs = [min(b[e][g]["mean_abs_err"] for g in NRS_PURE) for e in eps]
        per[target] = {"thesis_better_at_eps": [e for e, o, n in zip(eps, ours, nrs, strict=True) if o < n],
                       "ratio_thesis_over_nrs07": [o / n for o, n in zip(ours, nrs, strict=True)],
                       "growth_thesis": ours[0] / ours[-1], "growth_nrs07": nrs[0] / nrs[-1]}
        # claim 3 against NRS07 as published (unclipped; its mean |error| is infinite for γ = 2, so medians)
        ours_med = [b[e][THESIS]["median_abs_err"] for e in eps]
        raw = [min(b[e][g]["unclipped"]["median_abs_err"] for g in NRS_PURE) for e in eps]
        per[target] |= {"growth_thesis_median": ours_med[0] / ours_med[-1], "growth_nrs07_unclipped": raw[0] / raw[-1]}
    hi, lo = per[str(max(TARGETS))], per[str(min(TARGETS))]
    claims = {"1_better_at_ls_0.3": len(hi["thesis_better_at_eps"]) > len(eps) / 2,
              "2_relatively_better_at_high_ls": float(np.mean(np.log(hi["ratio_thesis_over_nrs07"])))
              < float(np.mean(np.log(lo["ratio_thesis_over_nrs07"]))),
              "3_degrades_slower_vs_clipped": all(p["growth_thesis"] < p["growth_nrs07"] for p in per.values()),
              "3_degrades_slower_vs_unclipped": all(p["growth_thesis_median"] < p["growth_nrs07_unclipped"]
                                                    for p in per.values())}
    # Claim 3 is judged against NRS07 as published (unclipped): clipping caps its error near max(med, 1 − med), so
    # its growth ratio measures the cap, not the mechanism. Both readings are reported.
    ok = claims["1_better_at_ls_0.3"] and claims["2_relatively_better_at_high_ls"] and claims[
        "3_degrades_slower_vs_unclipped"]
    return {"per_ls": per, "claims": claims, "status": "reproduced in shape" if ok else "differs"}


def _cell(r: dict) -> str:
    return f"{r['mean_abs_err']:.3f} [{r['mean_ci95'][0]:.3f}, {r['mean_ci95'][1]:.3f}]"


def write_md(result: dict, path: Path) -> None:
    """The report: the thesis's description, our setting, the measured table and the verdict (all numbers from
    ``result``)."""
    v = result["verdict_checks"]
    eps = [str(e) for e in result["epsilons"]]
    lines = [
        "# 002 Fig. 4.10 — DP median: thesis point set vs NRS07 smooth sensitivity", "",
        "**Thesis (Sec. 4.6.3).** Synthetic sets of n = 129: 66 exponential draws scaled to the unit interval plus 63 "
        "ones, built to have local sensitivity 0.1 (Fig. 4.10a) and 0.3 (4.10b); the y-axis is \"the noise level\" / "
        "\"error of median\" vs ε. No numbers are given in the text (the figure is an image we do not have); the "
        "claims are: *comparable* to NRS07, *better when the local sensitivity is high*, and *when ε is smaller its "
        "accuracy decreases slower than the smooth sensitivity-based method*. The thesis names neither NRS07's noise "
        "law nor its constants, nor k for n = 129 (Table 4.1 starts at n = 2,000), and says it tuned the compared "
        "mechanisms' parameters with knowledge of the data.", "",
        "**Ours** (`studies/repro_median_nrs07.py`, docstring has the NRS07 proof sketch). Fresh data set per trial "
        f"(seeded, LS within ±{result['tol']} of the target by rejection), privacy noise from OS entropy; "
        f"{result['trials']} trials per (LS, ε); the best k is chosen from {result['k_grid']} on "
        f"{result['tune_trials']} other data sets. Neighbours: one of the n values replaced in [0, 1]; every "
        "mechanism but the Laplace reference is ε-DP with δ = 0. The point-set median is the 65th value of the "
        "product's reconstruction (`noisy_group_means` + `reconstruct`, exact discrete Laplace); NRS07 is med + "
        "(S*/α)·Z with the exact ξ = β smooth sensitivity (O(n²)), α = β = ε/(2(γ+1)), outputs clipped to [0, 1] "
        "(post-processing, as the point set's reconstruction is). Error: mean |released − true median| with a "
        "normal 95% interval; the median |error| is in the JSON but is degenerate for clipped NRS07 (it is ≈ 1 − med "
        "or ≈ med, so its median jumps between the two modes).", "",
        f"Command: `OMP_NUM_THREADS=1 nice -n 10 .venv/bin/{result['command']}` ({result['seconds']} s on 1 core).", "",
        "k: " + ", ".join(f"ε={e}: Table 4.1 {result['k_paper'][e]}, product {result['k_product'][e]}, best "
                          f"{result['results'][str(min(TARGETS))]['by_eps'][e][THESIS]['k']} / "
                          f"{result['results'][str(max(TARGETS))]['by_eps'][e][THESIS]['k']}" for e in eps)
        + " (best k at LS 0.1 / 0.3).", "",
        "![Fig. 4.10](002_fig410.png)", ""]
    for target, res in result["results"].items():
        lines += [f"## Local sensitivity {target} (measured mean LS {res['ls_mean']:.4f}, mean true median "
                  f"{res['true_median_mean']:.3f})", "",
                  "| mechanism | " + " | ".join(f"ε = {e}" for e in eps) + " |",
                  "|---|" + "---|" * len(eps)]
        for name in LABELS:
            lines.append(f"| {LABELS[name]} | " + " | ".join(_cell(res["by_eps"][e][name]) for e in eps) + " |")
        lines.append("| NRS07 γ=2 mean S* (smooth sensitivity) | "
                     + " | ".join(f"{res['by_eps'][e]['nrs07_gamma2']['smooth_sens_mean']:.3f}" for e in eps) + " |")
        lines.append("| NRS07 γ=2 unclipped median \\|error\\| | " + " | ".join(
            f"{res['by_eps'][e]['nrs07_gamma2']['unclipped']['median_abs_err']:.3f}" for e in eps) + " |")
        lines.append("")
    c = v["claims"]
    lines += ["## Verdict", "",
              f"**{v['status']}** (best-k point set vs the better pure-DP NRS07 at each ε):", "",
              f"1. better at LS 0.3 for most ε: {c['1_better_at_ls_0.3']} (better at ε = "
              f"{', '.join(v['per_ls'][str(max(TARGETS))]['thesis_better_at_eps']) or 'none'});",
              f"2. relatively better at LS 0.3 than at 0.1: {c['2_relatively_better_at_high_ls']} (geometric-mean "
              "error ratio ours/NRS07 " + " vs ".join(
                  f"{math.exp(float(np.mean(np.log(v['per_ls'][t]['ratio_thesis_over_nrs07'])))):.2f} at LS {t}"
                  for t in v["per_ls"]) + ");",
              f"3. degrades more slowly as ε falls (error at ε = {eps[0]} over ε = {eps[-1]}): against NRS07 as "
              f"published (unclipped, median |error|) {c['3_degrades_slower_vs_unclipped']} ("
              + "; ".join(f"LS {t}: ours {p['growth_thesis_median']:.2f}, NRS07 {p['growth_nrs07_unclipped']:.1f}"
                          for t, p in v["per_ls"].items())
              + f"); against clipped NRS07 (mean |error|) {c['3_degrades_slower_vs_clipped']} ("
              + "; ".join(f"LS {t}: ours {p['growth_thesis']:.2f}, NRS07 {p['growth_nrs07']:.2f}"
                          for t, p in v["per_ls"].items())
              + ") — clipping caps NRS07's error near max(med, 1 − med), so that ratio measures the cap.", ""]
    r3 = result["results"][str(max(TARGETS))]["by_eps"]
    scale = {e: r3[e]["nrs07_gamma2"]["smooth_sens_mean"] / r3[e]["nrs07_gamma2"]["alpha"] for e in eps}
    lines += ["## Why", "",
              f"NRS07 at n = {result['n']}: at LS {max(TARGETS)} the Cauchy noise scale S*/α is "
              + ", ".join(f"{scale[e]:.2f} (ε = {e})" for e in eps)
              + f" — wider than the domain [0, 1] for ε ≤ {max([e for e in eps if scale[e] > 1] or ['none'])}, and "
              "comparable to it above, because α = ε/6 and the 63 ones keep S* near "
              "LS or above (a few replaced values open a gap of width ≈ LS or more next to the median). Its clipped "
              "release is then close to a random endpoint. The point set's error is the generalisation error of "
              "reading the 65th value off a group mean plus Lap(1/ε)/k; it depends on how the groups fall around rank "
              f"65 (e.g. the product's k = {r3[eps[-1]]['pointset_product_k']['k']} at ε = {eps[-1]}: mean error "
              f"{r3[eps[-1]]['pointset_product_k']['mean_abs_err']:.2f} against "
              f"{r3[eps[-1]][THESIS]['mean_abs_err']:.2f} at k = {r3[eps[-1]][THESIS]['k']}), and Table 4.1's k "
              "(44 at ε ≤ 0.5, two groups) "
              "is far too large for n = 129. With a tuned k the point set is several times more accurate than pure-DP "
              "NRS07 at both local sensitivities (the thesis says \"comparable\", with its own method better at high "
              "LS): the direction of every claim holds, the size of the gap does not match \"comparable\", which may "
              "come from NRS07 constants or clipping the thesis does not state.", ""]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=1000, help="i.i.d. (data set, noise) draws per (LS, ε)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data sets only (noise: OS entropy)")
    p.add_argument("--out", type=Path, default=OUT_DIR)
    a = p.parse_args(argv)
    t0 = time.time()
    result = run(a.trials, seed=a.seed)
    result["verdict_checks"] = verdict(result)
    result["command"] = "python -m studies.repro_median_nrs07 " + shlex.join(argv if argv is not None else sys.argv[1:])
    result["seconds"] = round(time.time() - t0, 1)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "002_fig410.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, a.out / "002_fig410.png")
    write_md(result, a.out / "002_fig410.md")
    print(json.dumps(result["verdict_checks"], indent=1), f"{result['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
