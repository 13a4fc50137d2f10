"""LAP (Liu, Zhi et al., Alg. 1): Laplace noise on every pixel of the fingerprint image.

paper
    ``X'_pq = X_pq + Lap(Delta Q / epsilon)`` with ``Delta Q = m * n`` (Eqs. 8-9) and the paper's minimum
    ``epsilon >= m * n / 256`` (Eq. 11, so that the scale is <= 256). ``m * n`` is a pixel count, not a DP
    sensitivity: the release is reported as NOT DP at the paper's epsilon (it is ``255 * epsilon / (m n)``-DP
    under one-pixel neighbours).
sound
    Neighbouring images differ in one pixel value, values in [0, 255], so the L1 sensitivity of the identity query
    is 255. Each pixel gets an independent Lap(255 / epsilon): for neighbours X, X' differing at pixel p the
    output densities differ only in coordinate p, with ratio ``exp(epsilon (|o_p - X'_p| - |o_p - X_p|) / 255)
    <= exp(epsilon)`` — epsilon-DP (parallel composition over disjoint pixels); rounding / clipping is
    post-processing. No minimum epsilon (any epsilon > 0). Nothing is released exactly.
"""

from __future__ import annotations

import numpy as np

from fedprint.privacy.publish.base import Guarantee, Publication, check_epsilon, check_image, check_variant, clip_uint8
from fedprint.privacy.publish.masked import NOT_DP_REASON, check_options
from fedprint.privacy.publish.regions import add_laplace, paper_minimum_epsilon, sound_scale


def publish_lap(
    image: np.ndarray,
    minutiae: np.ndarray | None,
    epsilon: float,
    rng: np.random.Generator,
    variant: str = "sound",
    **options,
) -> Publication:
    """Publish ``image`` with Laplace noise on every pixel (LAP, Liu, Zhi et al. Alg. 1).

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
    minutiae : ignored (may be None)
    epsilon : float
        Budget, > 0; the paper variant also requires ``epsilon >= H * W / 256`` (Eq. 11).
    rng : numpy.random.Generator
    variant : {"sound", "paper"}
        paper: scale ``H W / epsilon``, not DP. sound: scale ``255 / epsilon``, epsilon-DP (module docstring).
    **options
        None accepted.

    Returns
    -------
    Publication
        ``image`` uint8; ``details``: ``noise_scale``, ``protected_pixels``, ``protected_fraction`` (1.0).
    """
    check_options(options, (), "lap")
    check_variant(variant)
    image = check_image(image)
    mask = np.ones(image.shape, dtype=bool)
    n = image.size
    neighbouring = "images differing in one pixel value, values in [0, 255]"
    if variant == "paper":
        epsilon = check_epsilon(epsilon, minimum=paper_minimum_epsilon(n))
        scale = n / epsilon
        guarantee = Guarantee(
            dp=False, epsilon=epsilon, delta=0.0, neighbouring=neighbouring,
            protected="every pixel value (no DP proof for the paper's epsilon)", released_exactly="",
            composition="one Laplace draw per pixel, scale m n / epsilon",
            caveats=f"{NOT_DP_REASON} (here Delta Q = m n = {n}); under one-pixel neighbours the same noise is "
                    f"{255.0 / scale:.6g}-DP")
    else:
        epsilon = check_epsilon(epsilon)
        scale = sound_scale(epsilon)
        guarantee = Guarantee(
            dp=True, epsilon=epsilon, delta=0.0, neighbouring=neighbouring,
            protected="every pixel value", released_exactly="",
            composition="parallel over disjoint pixels, each Lap(255 / epsilon)",
            caveats="no minimum epsilon; small epsilon destroys the image (noise scale 255 / epsilon grey levels)")
    noisy = image.astype(np.float64)
    add_laplace(noisy, mask, scale, rng)
    details = {"noise_scale": scale, "protected_pixels": n, "protected_fraction": 1.0}
    return Publication(mechanism="lap", variant=variant, image=clip_uint8(noisy), points=None,
                       spent_epsilon=epsilon, spent_delta=0.0, guarantee=guarantee, details=details)
