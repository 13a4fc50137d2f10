"""Sliding-window publication SWP, the SAS sort and sort-SWP, optional mean/median filter (Liu et al. 2021).

The image is flattened row-major to a stream and cut into ``k = ⌈HW/|W|⌉`` disjoint windows (the last one may be
shorter). A window is published with Laplace noise unless it is similar to the last published window, in which case
that one is repeated (Algorithm 1). Sort-SWP first orders the windows by similarity to the first published window
(SAS, Algorithm 2), runs SWP on that order and un-permutes (Algorithm 3).

``variant="paper"`` (NOT DP): similarity θ of the EM mechanism (Eqs. 11–17) between the last *published* window and
the *raw* next window; DA budget (Eqs. 18–20): the first window gets ε/k, each newly published window
ε_left / (windows left); noise Lap(ΔQ/ε_i) per value with ΔQ = max − min of the image (§3.1; data-dependent).
SAS: W'_1 = W_1 + Lap(ΔQ/ε2), θ_j to all raw windows, exponential-mechanism ordering with score 1/(θ + σ) and
Δu = 1, then simulated annealing (Eq. 27) on the raw θ; ε = ε1 + ε2 + ε3 with ε2 = ε3/k. Readings we had to choose:
θ = φ·d/(ρ + σ) (σ "ensures the denominator is not 0"; with Eq. 16's first case this gives θ = θ' for near-identical
windows), ρ the Jaccard index of the two windows' sets of gray levels, μ the Hamming distance of their average
hashes (bit = value > window mean; the paper combines Hamming distance "with a perceptual hash"), lg(n − μ) with
n − μ clamped to >= 2 (Eq. 16 is undefined below), and one annealing pass (T0 → T_min by γ) after the full
exponential ordering (the listing never resets T). The replace-or-publish decisions and the annealing read raw
data, and the noise scale depends on the image range: no DP guarantee.

``variant="sound"`` — neighbours: :data:`~fedprint.privacy.publish.primitives.PIXEL_NEIGHBOURS`; ε = ε_sort + ε_test +
ε_pub.

*Publication.* A published window adds Lap(255/ε_pub) to each of its values. Every pixel lies in exactly one window,
so by parallel composition this is ε_pub-DP — no budget split over windows is needed (the paper's DA and its LAP
baseline's ε/(mn) split are needlessly wasteful under this relation).

*Reuse test (sparse vector).* The similarity of window j to the last published window P (already noisy, clipped,
public) is q_j = ‖W_j − P‖₂/√|W|; a one-pixel change moves q_j by <= Δ = 255/√|W|. Between two publications we run
AboveThreshold (Dwork & Roth, Alg. 1 / Thm 3.23) with its own budget ε_test: noisy threshold θ' + Lap(2Δ/ε_test),
each query q_j + Lap(4Δ/ε_test); "above" (dissimilar) → publish and restart with a fresh noisy threshold; "below"
→ repeat P. Each such segment is ε_test-DP.

*Why the total is ε.* Condition on everything released before window j: window j's mechanism (its test and, if
chosen, its publication) reads only W_j and public values. The output density therefore factorises over windows
and, for neighbours differing in a pixel of window j*, only the factors of j* differ: those of one AboveThreshold
segment (<= e^{ε_test}) and of one Laplace publication (<= e^{ε_pub}). Adaptive parallel composition gives
(ε_test + ε_pub)-DP for SWP.

*Sort-SWP.* W_1 is published first (ε_pub, reused as SWP's first window). The scores
s_j = q_j(W_j, W'_1) + Lap(Δ/ε_sort) are released for all other full windows: one pixel moves one score by <= Δ,
so the score vector is ε_sort-DP
(Laplace mechanism, L1 sensitivity Δ). The order is the ascending order of the noisy scores (report-noisy-max
style), refined by the paper's annealing *on the noisy scores only* (post-processing). SWP on that public order
then costs ε_test + ε_pub as above, and un-permuting is post-processing: ε_sort + ε_test + ε_pub = ε.

The optional mean / median filter (Liu et al. 2021 §4.2) is applied to the released uint8 image: post-processing.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from fedprint.privacy.publish.base import Guarantee, Publication, check_epsilon, check_image, check_variant, clip_uint8
from fedprint.privacy.publish.primitives import PIXEL_NEIGHBOURS, PIXEL_RANGE, exponential_ordering, laplace

DEFAULT_WINDOW = 56  # Liu et al. 2021 §4.3 (ORL)
PAPER_THRESHOLD = 10.0  # θ' of Liu et al. 2021 §3.4's example
SOUND_THRESHOLD = 60.0  # θ' of the sound test: RMS gray-level difference to the last published window
SIGMA = 0.9  # σ of Eq. 14, "between 0.8 and 1"
FILTERS = (None, "mean", "median")


# ---------------------------------------------------------------------------------------------------------- common
def _check_options(image: np.ndarray, epsilon: float, variant: str, window_size: int, post_filter: str | None,
                   filter_size: int) -> tuple[np.ndarray, float]:
    check_image(image)
    epsilon = check_epsilon(epsilon)
    check_variant(variant)
    if isinstance(window_size, bool) or not isinstance(window_size, int | np.integer) \
            or not 1 <= window_size <= image.size:
        raise ValueError(f"window_size: expected an integer in [1, {image.size}] (pixels of the image), "
                         f"got {window_size!r}")
    if post_filter not in FILTERS:
        raise ValueError(f"post_filter: expected one of {FILTERS}, got {post_filter!r}")
    if not isinstance(filter_size, int | np.integer) or filter_size < 1 or filter_size % 2 == 0:
        raise ValueError(f"filter_size: expected an odd integer >= 1, got {filter_size!r}")
    return image.reshape(-1).astype(np.float64), epsilon


def _post_filter(img: np.ndarray, post_filter: str | None, size: int) -> np.ndarray:
    if post_filter == "mean":
        return clip_uint8(ndimage.uniform_filter(img.astype(np.float64), size, mode="reflect"))
    if post_filter == "median":
        return ndimage.median_filter(img, size, mode="reflect")
    return img


def _fractions(**fr: float) -> None:
    for name, v in fr.items():
        if not 0 < v < 1:
            raise ValueError(f"{name}: expected a number in (0, 1), got {v}")
    if sum(fr.values()) >= 1:
        raise ValueError(f"{' + '.join(fr)} must be < 1 (the rest is the publication budget), got {sum(fr.values())}")


# ----------------------------------------------------------------------------------------------------------- paper
def paper_similarity(published: np.ndarray, raw: np.ndarray, threshold: float, sigma: float = SIGMA) -> np.ndarray:
    """θ of Liu et al. 2021's EM mechanism (Eqs. 11–17) between rows of ``published`` and ``raw`` (same shape (..., n)).

    θ = φ·d/(ρ + σ): d Euclidean distance (Eq. 11), ρ Jaccard index of the gray-level sets (Eq. 13), φ from the
    Hamming distance μ of the average hashes (Eq. 16): θ'(ρ+σ)/d if μ < 0.078n, 1 if μ <= 0.156n, else
    1/lg(max(n − μ, 2)).
    """
    x = np.clip(np.rint(np.atleast_2d(published)), 0, 255).astype(np.int64)
    y = np.clip(np.rint(np.atleast_2d(raw)), 0, 255).astype(np.int64)
    n = x.shape[1]
    d = np.sqrt(((x - y) ** 2).sum(axis=1))
    rows = np.arange(len(x))[:, None]
    px = np.zeros((len(x), 256), bool)
    py = np.zeros((len(y), 256), bool)
    px[rows, x] = True
    py[rows, y] = True
    rho = (px & py).sum(1) / (px | py).sum(1)
    mu = ((x > x.mean(1, keepdims=True)) != (y > y.mean(1, keepdims=True))).sum(1)
    theta = d / (rho + sigma)
    theta = np.where(mu > 0.156 * n, theta / np.log10(np.maximum(n - mu, 2)), theta)
    return np.where(mu < 0.078 * n, threshold, theta)  # φ = θ'(ρ+σ)/d ⇒ θ = θ'


def _windows(n_values: int, size: int) -> list[slice]:
    return [slice(s, min(s + size, n_values)) for s in range(0, n_values, size)]


def _swp_paper(stream: np.ndarray, wins: list[slice], epsilon: float, dq: float, threshold: float,
               rng: np.random.Generator, sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Algorithm 1 with DA (Eqs. 18–20); returns released stream, published flags, per-window ε_i (0 if reused)."""
    k = len(wins)
    out = np.empty_like(stream)
    published = np.zeros(k, bool)
    eps_i = np.zeros(k)
    eps_left = epsilon
    last = None
    for j, w in enumerate(wins):
        raw = stream[w]
        if last is not None and paper_similarity(last[: len(raw)], raw, threshold, sigma)[0] <= threshold:
            out[w] = last[: len(raw)]
            continue
        eps_i[j] = eps_left / (k - j)  # Eq. 19: remaining budget over the windows left (ε/k for the first)
        eps_left -= eps_i[j]  # Eq. 20
        last = raw + laplace(rng, dq / eps_i[j], len(raw))
        out[w] = last
        published[j] = True
    return out, published, eps_i


def _anneal(values: np.ndarray, order: np.ndarray, rng: np.random.Generator, t0: float, gamma: float,
            t_min: float) -> np.ndarray:
    """Eq. 27 / SAS lines 11–24 on ``values[order]``: swap neighbours i, i+1 if out of ascending order, else with
    probability exp(dE/T); T ← γT until T <= T_min (⌈log(T_min/T0)/log γ⌉ steps, bounded)."""
    if not (t0 > t_min > 0 and 0 < gamma < 1):
        raise ValueError(f"annealing: need t0 > t_min > 0 and 0 < gamma < 1, got {t0}, {t_min}, {gamma}")
    order = order.copy()
    if len(order) < 2:
        return order
    steps = int(np.ceil(np.log(t_min / t0) / np.log(gamma)))
    picks = rng.integers(0, len(order) - 1, steps)
    coins = rng.random(steps)
    temps = t0 * gamma ** np.arange(steps)
    v = values[order]
    for i, u, t in zip(picks, coins, temps, strict=True):
        de = v[i] - v[i + 1]
        if de >= 0 or np.exp(de / t) > u:
            v[i], v[i + 1] = v[i + 1], v[i]
            order[i], order[i + 1] = order[i + 1], order[i]
    return order


def _paper_guarantee(epsilon: float, what: str, composition: str) -> Guarantee:
    return Guarantee(
        dp=False, epsilon=epsilon, delta=0.0, neighbouring="Liu et al. 2021 Def. 1: images differing in one pixel",
        protected=f"nothing provably ({what} as printed in Liu et al. 2021)",
        released_exactly="which windows were repeated (decided on raw pixels); the noise scale (the image's "
                         "gray-level range)" + ("; the window order (annealed on raw similarities)"
                                                if what == "sort-SWP" else ""),
        composition=composition,
        caveats="the replace-or-publish decision compares raw windows, the annealing sorts raw similarities, and "
                "ΔQ = max − min of the image: none of these is differentially private")


# ----------------------------------------------------------------------------------------------------------- sound
def _swp_sound(stream: np.ndarray, wins: list[slice], order: np.ndarray, first: np.ndarray | None,
               eps_test: float, eps_pub: float, threshold: float, window_size: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sound SWP over windows in ``order`` (first published window given or drawn); returns stream and flags."""
    k = len(order)
    out = np.empty_like(stream)
    delta = PIXEL_RANGE / np.sqrt(window_size)
    pub_noise = laplace(rng, PIXEL_RANGE / eps_pub, stream.size)  # one draw per value, used if its window publishes
    query_noise = laplace(rng, 4 * delta / eps_test, k)
    threshold_noise = laplace(rng, 2 * delta / eps_test, k)  # a fresh noisy threshold after each publication
    published = np.zeros(k, bool)
    w0 = wins[order[0]]
    last = first if first is not None else np.clip(stream[w0] + pub_noise[w0], 0, 255)
    out[w0] = last
    published[0] = True
    noisy_threshold = threshold + threshold_noise[0]
    for j in range(1, k):
        w = wins[order[j]]
        raw = stream[w]
        q = np.sqrt(((raw - last[: len(raw)]) ** 2).sum()) / np.sqrt(window_size)
        if q + query_noise[j] >= noisy_threshold:  # "above": dissimilar → publish, restart AboveThreshold
            last = np.clip(raw + pub_noise[w], 0, 255)
            out[w] = last
            published[j] = True
            noisy_threshold = threshold + threshold_noise[j]
        else:
            out[w] = last[: len(raw)]
    return out, published


def _sound_guarantee(epsilon: float, composition: str, released: str) -> Guarantee:
    return Guarantee(
        dp=True, epsilon=epsilon, delta=0.0, neighbouring=PIXEL_NEIGHBOURS, protected="every pixel value",
        released_exactly=released, composition=composition,
        caveats="protects one pixel; a whole ridge or region of r pixels is protected at r·ε (group privacy)")


# ----------------------------------------------------------------------------------------------------------- API
def publish_swp(image: np.ndarray, minutiae: np.ndarray | None, epsilon: float, rng: np.random.Generator,
                variant: str = "sound", *, window_size: int = DEFAULT_WINDOW, threshold: float | None = None,
                test_fraction: float = 0.2, post_filter: str | None = None, filter_size: int = 3) -> Publication:
    """SWP: sliding-window publication with similarity-based reuse (Liu et al. 2021 Algorithm 1).

    Parameters
    ----------
    image : ndarray uint8 (H, W)
    minutiae : ignored (may be None)
    epsilon : float
        Total budget (> 0). Sound: ε_test = test_fraction·ε for the reuse tests, ε_pub = ε − ε_test for the noise.
        Paper: split over windows by DA (Eqs. 18–20).
    rng : numpy.random.Generator
    variant : {"sound", "paper"}
    window_size : int
        ``|W|``, values per window, ``1 <= |W| <= H·W`` (default 56, Liu et al. 2021's ORL setting).
    threshold : float, optional
        θ'. Paper: on the EM similarity θ (default 10, the paper's example). Sound: on the RMS gray-level difference
        q (default 60).
    test_fraction : float
        Sound only: share of ε spent on the sparse-vector reuse tests, in (0, 1).
    post_filter : {None, "mean", "median"}, filter_size : odd int
        Optional filter on the released image (post-processing).
    """
    stream, epsilon = _check_options(image, epsilon, variant, window_size, post_filter, filter_size)
    wins = _windows(stream.size, window_size)
    opts = {"window_size": int(window_size), "n_windows": len(wins), "post_filter": post_filter}
    if variant == "paper":
        theta = PAPER_THRESHOLD if threshold is None else float(threshold)
        dq = float(stream.max() - stream.min())
        out, published, eps_i = _swp_paper(stream, wins, epsilon, dq, theta, rng, SIGMA)
        img = _post_filter(clip_uint8(out.reshape(image.shape)), post_filter, filter_size)
        g = _paper_guarantee(epsilon, "SWP", "DA: ε_i = ε_left/(windows left) per published window, Σε_i <= ε "
                                             "(Thm 8), sequential composition over windows")
        return Publication("swp", variant, img, None, epsilon, 0.0, g,
                           {**opts, "threshold": theta, "delta_q": dq, "published": published.tolist(),
                            "window_epsilons": eps_i.tolist()})
    _fractions(test_fraction=test_fraction)
    theta = SOUND_THRESHOLD if threshold is None else float(threshold)
    eps_test = test_fraction * epsilon
    eps_pub = epsilon - eps_test
    out, published = _swp_sound(stream, wins, np.arange(len(wins)), None, eps_test, eps_pub, theta,
                                window_size, rng)
    img = _post_filter(clip_uint8(out.reshape(image.shape)), post_filter, filter_size)
    g = _sound_guarantee(epsilon, f"ε_test = {eps_test:g} (AboveThreshold reuse tests) + ε_pub = {eps_pub:g} "
                                  "(Laplace per published value); parallel over windows, sequential within one",
                         "the image shape; which windows were repeated (decided privately with ε_test)")
    return Publication("swp", variant, img, None, epsilon, 0.0, g,
                       {**opts, "threshold": theta, "epsilon_test": eps_test, "epsilon_publish": eps_pub,
                        "published": published.tolist()})


def publish_sort_swp(image: np.ndarray, minutiae: np.ndarray | None, epsilon: float, rng: np.random.Generator,
                     variant: str = "sound", *, window_size: int = DEFAULT_WINDOW, threshold: float | None = None,
                     sort_fraction: float = 0.1, test_fraction: float = 0.2, anneal: bool = True,
                     t0: float = 100.0, gamma: float = 0.99, t_min: float = 1e-3,
                     post_filter: str | None = None, filter_size: int = 3) -> Publication:
    """Sort-SWP: SAS ordering of the windows, SWP on that order, un-permute (Liu et al. 2021 Algorithms 2–3).

    The last window is kept in place when it is shorter than ``window_size``.

    Parameters
    ----------
    image, minutiae, epsilon, rng, variant, window_size, threshold, test_fraction, post_filter, filter_size
        As :func:`publish_swp`.
    sort_fraction : float
        Paper: ε1 = sort_fraction·ε for the exponential ordering, ε3 = (ε − ε1)·k/(k+1), ε2 = ε3/k. Sound: ε_sort =
        sort_fraction·ε for the noisy similarity scores, ε_test = test_fraction·ε, ε_pub = the rest.
    anneal : bool
        Simulated-annealing refinement (Eq. 27) of the ordering. Sound: it sees only the noisy scores
        (post-processing).
    t0, gamma, t_min : float
        The annealing's initial temperature, cooling factor in (0, 1) and stop temperature.
    """
    stream, epsilon = _check_options(image, epsilon, variant, window_size, post_filter, filter_size)
    wins = _windows(stream.size, window_size)
    k = len(wins)
    n_full = stream.size // window_size  # windows that may be permuted (all but a short tail)
    opts = {"window_size": int(window_size), "n_windows": k, "post_filter": post_filter}
    full = stream[: n_full * window_size].reshape(n_full, window_size)
    tail = np.arange(n_full, k)
    if variant == "paper":
        _fractions(sort_fraction=sort_fraction)
        theta = PAPER_THRESHOLD if threshold is None else float(threshold)
        dq = float(stream.max() - stream.min())
        eps1 = sort_fraction * epsilon
        eps3 = (epsilon - eps1) * k / (k + 1)
        eps2 = eps3 / k
        first = full[0] + laplace(rng, dq / eps2, window_size)  # SAS line 1
        sims = paper_similarity(np.broadcast_to(first, full[1:].shape), full[1:], theta, SIGMA) \
            if n_full > 1 else np.zeros(0)
        rest = exponential_ordering(rng, 1.0 / (sims + SIGMA), eps1, 1.0)  # SAS lines 4–10, Δu = 1
        if anneal:
            rest = _anneal(sims, rest, rng, t0, gamma, t_min)
        order = np.concatenate([[0], rest + 1, tail]).astype(int)
        perm_stream = np.concatenate([stream[wins[i]] for i in order])
        out_perm, published, eps_i = _swp_paper(perm_stream, wins, eps3, dq, theta, rng, SIGMA)
        out = _unpermute(out_perm, wins, order)
        img = _post_filter(clip_uint8(out.reshape(image.shape)), post_filter, filter_size)
        g = _paper_guarantee(epsilon, "sort-SWP", f"ε = ε1 {eps1:g} (ordering) + ε2 {eps2:g} (W'_1 in SAS) + "
                                                  f"ε3 {eps3:g} (SWP with DA), sequential")
        return Publication("sort-swp", variant, img, None, epsilon, 0.0, g,
                           {**opts, "threshold": theta, "delta_q": dq, "order": order.tolist(),
                            "published": published.tolist(), "epsilon_sort": eps1, "epsilon_first": eps2,
                            "epsilon_swp": eps3, "window_epsilons": eps_i.tolist()})
    _fractions(sort_fraction=sort_fraction, test_fraction=test_fraction)
    theta = SOUND_THRESHOLD if threshold is None else float(threshold)
    eps_sort, eps_test = sort_fraction * epsilon, test_fraction * epsilon
    eps_pub = epsilon - eps_sort - eps_test
    delta = PIXEL_RANGE / np.sqrt(window_size)
    first = np.clip(full[0] + laplace(rng, PIXEL_RANGE / eps_pub, window_size), 0, 255)
    scores = np.sqrt(((full[1:] - first) ** 2).sum(1)) / np.sqrt(window_size) \
        + laplace(rng, delta / eps_sort, n_full - 1)
    rest = np.argsort(scores, kind="stable")  # ascending noisy dissimilarity
    if anneal:
        rest = _anneal(scores, rest, rng, t0, gamma, t_min)
    order = np.concatenate([[0], rest + 1, tail]).astype(int)
    out, published = _swp_sound(stream, wins, order, first, eps_test, eps_pub, theta, window_size, rng)
    img = _post_filter(clip_uint8(out.reshape(image.shape)), post_filter, filter_size)
    g = _sound_guarantee(epsilon, f"ε_sort = {eps_sort:g} (noisy similarity scores, one per window) + ε_test = "
                                  f"{eps_test:g} (AboveThreshold reuse tests) + ε_pub = {eps_pub:g} (Laplace per "
                                  "published value); parallel over windows, sequential within one",
                         "the image shape; the window order (noisy scores) and which windows were repeated")
    return Publication("sort-swp", variant, img, None, epsilon, 0.0, g,
                       {**opts, "threshold": theta, "epsilon_sort": eps_sort, "epsilon_test": eps_test,
                        "epsilon_publish": eps_pub, "order": order.tolist(), "published": published.tolist()})


def _unpermute(out_perm: np.ndarray, wins: list[slice], order: np.ndarray) -> np.ndarray:
    """Algorithm 3 lines 4–11: the j-th window of the permuted stream goes back to window order[j]."""
    out = np.empty_like(out_perm)
    pos = 0
    for j in order:
        w = wins[j]
        n = w.stop - w.start
        out[w] = out_perm[pos: pos + n]
        pos += n
    return out
