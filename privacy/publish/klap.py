"""KLAP (Liu, Zhi et al., Alg. 2): Laplace noise only inside padded boxes around clusters of minutiae.

Minutiae are clustered by AGNES (:func:`fedprint.privacy.publish.regions.cluster_minutiae`), clusters of >= 5 minutiae
(M_i > 4) are kept, each gets its bounding box padded by the smallest intra-cluster coordinate interval
(Eqs. 14-16), and the mask is the union of the boxes, ``Q`` pixels (Eq. 19).

paper
    Lap(Q / epsilon) on the masked pixels (Eq. 21 with Delta Q_KLAP = Q), minimum ``epsilon >= Q / 256`` (Eq. 20).
    Not DP at the paper's epsilon (Q is not a sensitivity).
sound
    Lap(255 / epsilon) on every masked pixel: epsilon-DP for the masked pixel values under one-pixel neighbours
    with the minutiae (hence the mask) fixed; proof in :mod:`fedprint.privacy.publish.masked`. Pixels outside the mask
    and
    the mask itself (which reveals where the minutiae are) are released exactly.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from fedprint.privacy.publish.base import Publication
from fedprint.privacy.publish.masked import check_options, publish_masked
from fedprint.privacy.publish.regions import MIN_CLUSTER_SIZE, klap_regions


def publish_klap(
    image: np.ndarray,
    minutiae: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    variant: str = "sound",
    *,
    n_clusters: int | None = None,
    linkage: str = "ward",
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    **options,
) -> Publication:
    """Publish ``image`` with Laplace noise on the union of the KLAP cluster boxes.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
    minutiae : ndarray, shape (n, 4)
        ``x, y, direction, type``; only x, y are used; every minutia must lie inside the image.
    epsilon : float
        Budget, > 0; the paper variant also requires ``epsilon >= Q / 256`` (Eq. 20).
    rng : numpy.random.Generator
    variant : {"sound", "paper"}
    n_clusters, linkage, min_cluster_size
        AGNES options, see :func:`fedprint.privacy.publish.regions.cluster_minutiae`.

    Returns
    -------
    Publication
        ``details``: ``mask`` (bool (H, W)), ``protected_pixels`` Q, ``protected_fraction``, ``noise_scale``,
        ``regions`` (per cluster: n_minutiae, box, n_pixels), ``minutiae_outside_clusters``.

    Raises
    ------
    ValueError
        Bad image / epsilon / variant / options, minutiae outside the image, or no cluster of >= 5 minutiae.
    """
    check_options(options, (), "klap")
    build = partial(klap_regions, n_clusters=n_clusters, method=linkage, min_cluster_size=min_cluster_size)
    return publish_masked("klap", build, image, minutiae, epsilon, rng, variant)

