"""Laplace noise on a minutiae-derived mask (Liu, Zhi et al.'s KLAP and RKLAP) and the guarantee statements they share
with DP-RKLAP.

Why the paper's variants are not DP, and what the sound ones prove
------------------------------------------------------------------
The paper sets the Laplace scale to ``Delta Q / epsilon`` with ``Delta Q = Q``, the number of protected pixels
(Eqs. 9, 19, 31). Q counts pixels; it is not the L1 sensitivity of any query over neighbouring images. Under the
neighbouring relation used here — the minutiae table fixed (hence the mask fixed) and one pixel value inside the
mask changed within [0, 255] — the released vector differs in one coordinate by at most 255, so the L1 sensitivity
is 255. Adding independent Lap(255 / epsilon) to every masked pixel then gives, for any output o,
``p(o | X) / p(o | X') = exp((|o_p - X'_p| - |o_p - X_p|) * epsilon / 255) <= exp(epsilon)`` (only the changed
pixel p contributes; all other coordinates have identical densities), i.e. epsilon-DP; rounding and clipping to
uint8 are post-processing. (Seen under this same relation, the paper's Lap(Q / epsilon) is ``255 epsilon / Q``-DP;
with Q >> 255 that is far more noise than its nominal epsilon needs — but the paper's stated epsilon with its own
"sensitivity" is not a DP statement, so the paper variant reports ``dp=False``.)

What no variant protects: pixels outside the mask are released exactly, and the mask (hence the cluster boxes
and regression bands) is computed from the raw minutiae without noise, so the released mask leaks where the
minutiae are. Minutiae of clusters with fewer than 5 members lie outside every region.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fedprint.privacy.publish.base import (
    Guarantee,
    Publication,
    check_epsilon,
    check_image,
    check_variant,
    clip_uint8,
)
from fedprint.privacy.publish.regions import (
    Region,
    add_laplace,
    check_coordinates,
    paper_minimum_epsilon,
    sound_scale,
    union_mask,
)

SOUND_NEIGHBOURING = ("the same minutiae table (hence the same mask) and images differing in one pixel value "
                      "inside the mask, values in [0, 255]")
MASK_LEAK = ("pixels outside the mask; the mask itself (cluster boxes / regression bands), computed from the raw "
             "minutiae without noise, so the minutiae locations leak through it")
SMALL_CLUSTERS = ("minutiae of clusters with fewer than 5 members, or (RKLAP, DP-RKLAP) of a cluster whose fitted band "
                  "holds no pixel, get no region of their own (details 'minutiae_outside_clusters' counts them)")
NOT_DP_REASON = "sensitivity = number of protected pixels is not a DP sensitivity"


def check_options(options: dict, allowed: Sequence[str], mechanism: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"{mechanism}: unknown option(s) {unknown}; expected some of {sorted(allowed)}")


def sound_guarantee(epsilon: float, composition: str, caveats: str = "") -> Guarantee:
    return Guarantee(dp=True, epsilon=float(epsilon), delta=0.0, neighbouring=SOUND_NEIGHBOURING,
                     protected="pixel values inside the mask", released_exactly=MASK_LEAK,
                     composition=composition, caveats="; ".join(c for c in (caveats, SMALL_CLUSTERS) if c))


def paper_guarantee(epsilon: float, equivalent_epsilon: float, composition: str, extra: str = "") -> Guarantee:
    caveat = (f"{NOT_DP_REASON}; under the sound neighbouring relation ({SOUND_NEIGHBOURING}) the same noise is at "
              f"most {equivalent_epsilon:.6g}-DP for the masked pixels (255 / noise scale)")
    return Guarantee(dp=False, epsilon=float(epsilon), delta=0.0, neighbouring=SOUND_NEIGHBOURING,
                     protected="pixel values inside the mask (no DP proof for the paper's epsilon)",
                     released_exactly=MASK_LEAK, composition=composition,
                     caveats="; ".join(c for c in (caveat, extra, SMALL_CLUSTERS) if c))


def prepare(image: np.ndarray, minutiae: np.ndarray, epsilon: float, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate the common arguments of the minutiae-based mechanisms; returns ``(image, xy)``."""
    check_variant(variant)
    check_image(image)
    check_epsilon(epsilon)
    if minutiae is None:
        raise ValueError("minutiae: this mechanism needs the image's minutiae table (n, 4), got None")
    return image, check_coordinates(minutiae, image.shape)


def publish_masked(
    mechanism: str,
    build: Callable[[np.ndarray, tuple[int, int]], list[Region]],
    image: np.ndarray,
    minutiae: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    variant: str,
) -> Publication:
    """KLAP / RKLAP body: regions from ``build(xy, shape)``, mask = their union, Laplace on the mask.

    paper: Lap(Q / epsilon) with Q = mask size, and the paper's minimum epsilon >= Q / 256 is enforced.
    sound: Lap(255 / epsilon), epsilon-DP for the masked pixels (proof in the module docstring).
    """
    image, xy = prepare(image, minutiae, epsilon, variant)
    regions = build(xy, image.shape)
    mask = union_mask(regions, image.shape)
    q = int(mask.sum())
    if variant == "paper":
        check_epsilon(epsilon, minimum=paper_minimum_epsilon(q))
        scale = q / epsilon
        guarantee = paper_guarantee(epsilon, 255.0 / scale, "one Laplace draw per masked pixel, scale Q / epsilon")
    else:
        scale = sound_scale(epsilon)
        guarantee = sound_guarantee(epsilon, "parallel over the disjoint masked pixels, each Lap(255 / epsilon)")
    noisy = image.astype(np.float64)
    add_laplace(noisy, mask, scale, rng)
    outside = len(xy) - len(np.unique(np.concatenate([r.members for r in regions])))
    details = {"mask": mask, "protected_pixels": q, "protected_fraction": q / mask.size, "noise_scale": scale,
               "regions": [r.summary() for r in regions], "minutiae_outside_clusters": int(outside)}
    return Publication(mechanism=mechanism, variant=variant, image=clip_uint8(noisy), points=None,
                       spent_epsilon=float(epsilon), spent_delta=0.0, guarantee=guarantee, details=details)
