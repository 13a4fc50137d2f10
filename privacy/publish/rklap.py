"""RKLAP (Liu, Zhi et al., Alg. 3): Laplace noise only on regression bands through the clusters of minutiae.

Per KLAP cluster (>= 5 minutiae) a polynomial ``y = h(x)`` is fitted, its degree chosen so that the maximum
residual is closest to the cluster's smallest pairwise distance (Eq. 25); the band half-width is
``dist = dist_max + dist_min`` (Eqs. 26-28); protected are the pixels with ``|y - h(x)| <= dist`` inside the
cluster's KLAP box (Eqs. 29-30). The mask is the union of the bands, Q pixels (Delta Q_RKLAP = Q, Eq. 31).

paper
    Lap(Q / epsilon) on the masked pixels (Eq. 33), minimum ``epsilon >= Q / 256`` (Eq. 32). Not DP.
sound
    Lap(255 / epsilon) on every masked pixel: epsilon-DP for the masked pixel values under one-pixel neighbours
    with the minutiae (hence the mask) fixed; proof in :mod:`fedprint.privacy.publish.masked`. Pixels outside the bands
    and the bands themselves (which trace the minutiae) are released exactly.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from fedprint.privacy.publish.base import Publication
from fedprint.privacy.publish.masked import check_options, publish_masked
from fedprint.privacy.publish.regions import MIN_CLUSTER_SIZE, rklap_regions


def publish_rklap(
    image: np.ndarray,
    minutiae: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    variant: str = "sound",
    *,
    n_clusters: int | None = None,
    linkage: str = "ward",
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    max_degree: int = 6,
    **options,
) -> Publication:
    """Publish ``image`` with Laplace noise on the union of the RKLAP regression bands.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
    minutiae : ndarray, shape (n, 4)
        ``x, y, direction, type``; only x, y are used; every minutia must lie inside the image.
    epsilon : float
        Budget, > 0; the paper variant also requires ``epsilon >= Q / 256`` (Eq. 32).
    rng : numpy.random.Generator
    variant : {"sound", "paper"}
    n_clusters, linkage, min_cluster_size
        AGNES options, see :func:`fedprint.privacy.publish.regions.cluster_minutiae`.
    max_degree : int, default 6
        Highest polynomial degree tried (:func:`fedprint.privacy.publish.regions.fit_band`).

    Returns
    -------
    Publication
        ``details`` as for KLAP, with ``degree`` and ``band`` (half-width, pixels) per region.

    Raises
    ------
    ValueError
        Bad image / epsilon / variant / options, minutiae outside the image, or no cluster of >= 5 minutiae.
    """
    check_options(options, (), "rklap")
    build = partial(rklap_regions, n_clusters=n_clusters, method=linkage, min_cluster_size=min_cluster_size,
                    max_degree=max_degree)
    return publish_masked("rklap", build, image, minutiae, epsilon, rng, variant)

