"""DP-RKLAP (Liu, Zhi et al., Alg. 4 + Alg. 5): RKLAP regions noised one by one with a dynamically allocated budget.

The regions are the RKLAP bands (:mod:`fedprint.privacy.publish.rklap`), one per cluster of >= 5 minutiae, with density
``I_i = M_i / Q_i`` (Eq. 37). The budget is ``epsilon = epsilon_1 + epsilon_2``: epsilon_1 orders the regions by
an exponential mechanism on I_i (Alg. 4 steps 4-7.5), epsilon_2 is spent region by region with the Q-ratio rule of
Eqs. (38)-(44) (:func:`fedprint.privacy.publish.regions.allocate_budget`), the last region taking the remainder.

paper
    ``epsilon_1`` (option ``epsilon_order``; default ``min(1, epsilon / 10)``: the paper only says "a value less
    than 1 is sufficient") draws the order with ``P ∝ exp(epsilon_1 I_i / (2 Delta u))``, ``Delta u`` =
    ``score_sensitivity`` (default 1: I_i lies in (0, 1]). Region j, in order, gets Lap(Q_j / epsilon_j) on all its
    pixels (Alg. 5 step 5.5: a pixel in two overlapping bands gets both draws). The paper's minimum,
    ``epsilon_2 >= Q / 256``, is enforced. Not DP at the paper's epsilon (Q_j is not a sensitivity).

sound
    Neighbouring relation: the minutiae table fixed and one pixel value inside the mask changed, values in
    [0, 255]. Mechanism: regions ordered by decreasing density (deterministic); overlaps are made disjoint by
    giving each pixel to the first region in that order that covers it (``details["owner"]``); regions left with no
    pixel are dropped; Alg. 4 weights w_j are computed on the owned sizes; region j's pixels each get
    Lap(255 / epsilon_j).

    *Proof.* The mask, the regions, the order and the ownership map are functions of the minutiae only (and of
    randomness independent of the pixels), so they are identically distributed for neighbours X, X'. Given them,
    the output is a vector of independent coordinates; only the changed pixel p differs in distribution, and its
    density ratio is ``exp(epsilon_j (|o_p - X'_p| - |o_p - X_p|) / 255) <= exp(epsilon_j)`` with j = owner(p).
    Hence the release is ``max_j epsilon_j``-DP (parallel composition over disjoint regions, not the sequential
    sum the paper uses); rounding and clipping are post-processing.

    *What epsilon_1 buys.* Under this relation the density scores are a function of the public mask, so the
    ordering — exponential mechanism or not — has privacy loss 0: epsilon_1 buys nothing. The sound default is
    therefore ``epsilon_order = 0`` (deterministic density order) and the whole budget goes to pixels. If
    ``epsilon_order > 0`` is passed, the order is drawn by the exponential mechanism as in the paper and
    epsilon_1 is still charged (conservatively) and removed from the pixel budget.

    *Scaling.* Because disjoint regions compose in parallel, splitting epsilon_2 so that ``sum epsilon_j =
    epsilon_2`` wastes budget. With ``rescale=True`` (default) the Alg. 4 weights are kept as relative budgets and
    scaled so that ``max epsilon_j = epsilon_2``; the guarantee is then exactly epsilon. With ``rescale=False``
    the paper's split is used (``sum epsilon_j = epsilon_2``) and the charged epsilon is
    ``epsilon_1 + max_j epsilon_j`` (< epsilon).

    Pixels outside the mask and the mask itself (derived from the raw minutiae, so it reveals where they are) are
    released exactly in both variants.
"""

from __future__ import annotations

import numpy as np

from fedprint.privacy.publish.base import Publication, check_epsilon, clip_uint8
from fedprint.privacy.publish.masked import check_options, paper_guarantee, prepare, sound_guarantee
from fedprint.privacy.publish.primitives import exponential_ordering
from fedprint.privacy.publish.regions import (
    MIN_CLUSTER_SIZE,
    add_laplace,
    allocate_budget,
    density_order,
    owner_map,
    paper_minimum_epsilon,
    rklap_regions,
    sound_scale,
    union_mask,
)


def publish_dp_rklap(
    image: np.ndarray,
    minutiae: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    variant: str = "sound",
    *,
    epsilon_order: float | None = None,
    score_sensitivity: float = 1.0,
    rescale: bool = True,
    n_clusters: int | None = None,
    linkage: str = "ward",
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    max_degree: int = 6,
    **options,
) -> Publication:
    """Publish ``image`` with region-wise Laplace noise on the RKLAP bands, budget split by Alg. 4.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
    minutiae : ndarray, shape (n, 4)
        ``x, y, direction, type``; only x, y are used; every minutia must lie inside the image.
    epsilon : float
        Total budget ``epsilon_1 + epsilon_2``, > 0. Paper variant: ``epsilon - epsilon_1 >= Q / 256``.
    rng : numpy.random.Generator
    variant : {"sound", "paper"}
    epsilon_order : float, optional
        epsilon_1 of the exponential-mechanism ordering, ``0 <= epsilon_order < epsilon``. Default: paper
        ``min(1, epsilon / 10)``; sound 0 (the ordering reads only the public mask; see module docstring).
    score_sensitivity : float, default 1.0
        Delta u of the density score in the exponential mechanism, > 0.
    rescale : bool, default True
        Sound only: scale the Alg. 4 budgets so that the largest equals epsilon_2 (parallel composition).
    n_clusters, linkage, min_cluster_size, max_degree
        Region options, see :func:`fedprint.privacy.publish.rklap.publish_rklap`.

    Returns
    -------
    Publication
        ``details``: ``mask``, ``protected_pixels`` Q, ``protected_fraction``, ``order`` (region indices in
        allocation order), ``regions`` (per region: n_minutiae, box, n_pixels, degree, band, density, epsilon,
        noise_scale, and for sound: owned_pixels), ``epsilon_order``; sound also ``owner`` (int (H, W), -1 outside
        the mask) so the per-pixel epsilon is ``[r["epsilon"] for r in regions][owner]``.

    Raises
    ------
    ValueError
        Bad image / epsilon / variant / options, minutiae outside the image, no cluster of >= 5 minutiae,
        ``epsilon_order`` outside [0, epsilon), or (paper) epsilon below its minimum.
    """
    check_options(options, (), "dp_rklap")
    image, xy = prepare(image, minutiae, epsilon, variant)
    epsilon = float(epsilon)
    if epsilon_order is None:
        eps1 = min(1.0, epsilon / 10.0) if variant == "paper" else 0.0
    else:
        eps1 = float(epsilon_order)
        if not (np.isfinite(eps1) and 0.0 <= eps1 < epsilon):
            raise ValueError(f"epsilon_order: expected 0 <= epsilon_order < epsilon = {epsilon}, got {epsilon_order}")
    if not score_sensitivity > 0:
        raise ValueError(f"score_sensitivity: expected > 0, got {score_sensitivity}")
    eps2 = epsilon - eps1

    regions = rklap_regions(xy, image.shape, n_clusters=n_clusters, method=linkage,
                            min_cluster_size=min_cluster_size, max_degree=max_degree)
    mask = union_mask(regions, image.shape)
    q = int(mask.sum())
    sizes = np.array([r.n_pixels for r in regions], dtype=np.float64)
    density = np.array([r.n_minutiae for r in regions]) / sizes
    outside = len(xy) - len(np.unique(np.concatenate([r.members for r in regions])))
    summaries = [r.summary() | {"density": float(d)} for r, d in zip(regions, density, strict=True)]

    if variant == "paper":
        check_epsilon(eps2, minimum=paper_minimum_epsilon(q), name="epsilon - epsilon_order (epsilon_2)")
        order = exponential_ordering(rng, density, eps1, score_sensitivity)
        eps_j = np.zeros(len(regions))
        eps_j[order] = allocate_budget(sizes[order], eps2)
        scales = sizes / eps_j
        out = image.astype(np.float64)
        for i in order:  # Alg. 5 step 5: region by region, overlapping pixels get every covering region's draw
            add_laplace(out[regions[i].slices], regions[i].box_mask, scales[i], rng)
        spent = epsilon
        guarantee = paper_guarantee(
            epsilon, float(np.max(255.0 / scales)),
            f"paper: exponential mechanism ordering with epsilon_1 = {eps1:g}, then Lap(Q_j / epsilon_j) per region "
            f"with sum epsilon_j = epsilon_2 = {eps2:g} (sequential)")
        extra = {}
    else:
        order = exponential_ordering(rng, density, eps1, score_sensitivity) if eps1 > 0 else density_order(density)
        owner = owner_map(regions, order, image.shape)
        owned = np.bincount(owner[owner >= 0], minlength=len(regions)).astype(np.float64)
        live = [int(i) for i in order if owned[i] > 0]
        weights = np.zeros(len(regions))
        weights[live] = allocate_budget(owned[live], 1.0)
        eps_j = eps2 * (weights / weights.max() if rescale else weights)
        scales = np.full(len(regions), np.inf)
        scales[live] = [sound_scale(e) for e in eps_j[live]]
        out = image.astype(np.float64)
        add_laplace(out, mask, scales[owner[mask]], rng)
        spent = eps1 + float(eps_j.max())
        guarantee = sound_guarantee(
            spent,
            "ordering reads only the public mask (privacy loss 0"
            + (f"; epsilon_1 = {eps1:g} charged anyway" if eps1 > 0 else "") + "); overlaps made disjoint, "
            f"each pixel gets Lap(255 / epsilon_j) of its region; parallel over disjoint regions, so the cost is "
            f"max_j epsilon_j = {eps_j.max():g}" + (" (budgets rescaled so that max = epsilon_2)" if rescale else ""))
        for i, s in enumerate(summaries):
            s["owned_pixels"] = int(owned[i])
        extra = {"owner": owner}
    for i, s in enumerate(summaries):
        s["epsilon"] = float(eps_j[i])
        s["noise_scale"] = float(scales[i])
    details = {"mask": mask, "protected_pixels": q, "protected_fraction": q / mask.size,
               "order": [int(i) for i in order], "regions": summaries, "epsilon_order": eps1,
               "minutiae_outside_clusters": int(outside)} | extra
    return Publication(mechanism="dp_rklap", variant=variant, image=clip_uint8(out), points=None,
                       spent_epsilon=spent, spent_delta=0.0, guarantee=guarantee, details=details)
