"""A backend's minutiae with FedPrint's border filter T_d: the consumers' one call into the minutiae backends.

The crossing-number extractor drops minutiae closer than T_d pixels to the foreground border itself (Yan et al.
2025, the T_d of Eq. 9; :func:`fedprint.data.minutiae.minutiae_from_skeleton`). MINDTCT and LEADER have no such
parameter, so for them the same filter is applied to their output: the foreground is FedPrint's own
:func:`fedprint.data.minutiae.segment` of the image given, the distance :func:`fedprint.data.minutiae.border_distance`
(the image surround counts as outside), and a minutia at its rounded pixel is kept when that distance is >= T_d.
For ``"crossing"`` the extractor is called with ``border`` (and ``min_separation``) directly, so its output is the
one :func:`fedprint.data.minutiae.extract_minutiae` always gave.
"""

from __future__ import annotations

import numpy as np

from fedprint.data.minutiae import border_distance, extract_minutiae, segment
from fedprint.data.minutiae_backends import extract, resolve_backend


def keep_within_border(minutiae: np.ndarray, image: np.ndarray, border: float,
                       mask: np.ndarray | None = None) -> np.ndarray:
    """The rows of ``minutiae`` at least ``border`` px from the foreground border of ``image``.

    Parameters
    ----------
    minutiae : ndarray, shape (n, k >= 2)
        ``x`` (column), ``y`` (row), ... in pixels of ``image``.
    image : ndarray of uint8, shape (H, W)
    border : float
        T_d in pixels (>= 0; 0 keeps every minutia inside the image).
    mask : ndarray of bool, shape (H, W), optional
        Foreground; default :func:`fedprint.data.minutiae.segment` of ``image``.
    """
    if border < 0:
        raise ValueError(f"border: expected a non-negative number of pixels, got {border}")
    m = np.asarray(minutiae, dtype=np.float64)
    if len(m) == 0 or border == 0:
        return m
    mask = segment(image) if mask is None else mask
    dist = border_distance(mask, image.shape)
    cols = np.clip(np.rint(m[:, 0]).astype(int), 0, image.shape[1] - 1)
    rows = np.clip(np.rint(m[:, 1]).astype(int), 0, image.shape[0] - 1)
    return m[dist[rows, cols] >= border]


def extract_within_border(image: np.ndarray, backend: str | None, *, border: int = 10, dpi: float = 500.0,
                          min_separation: float = 6.0, option: str = "--minutiae-backend") -> np.ndarray:
    """The ``backend``'s minutiae of ``image`` farther than ``border`` px from the foreground border.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
        Grayscale fingerprint, ridges dark.
    backend : {"auto", "nbis", "leader", "crossing"} or None
        :func:`fedprint.data.minutiae_backends.resolve_backend` (refused with one line naming ``option``).
    border : int, optional
        T_d in pixels (default 10, the crossing-number extractor's).
    dpi : float, optional
        Resolution of ``image`` (MINDTCT scales its parameters by it; default 500).
    min_separation : float, optional
        The crossing-number extractor's spurious-pair distance (:func:`fedprint.data.minutiae.remove_spurious`);
        MINDTCT and LEADER remove false minutiae their own way and ignore it.
    option : str, optional
        The option or key that chose ``backend``, named in the error.

    Returns
    -------
    ndarray of float64, shape (n, 5)
        ``x, y, direction, type, quality`` (:data:`fedprint.data.minutiae_backends.COLUMNS`).

    Examples
    --------
    >>> import numpy as np
    >>> extract_within_border(np.full((64, 64), 200, np.uint8), "crossing", border=10).shape
    (0, 5)
    """
    name = resolve_backend(backend, option)
    if name == "crossing":
        m = extract_minutiae(image, border=int(border), min_separation=min_separation)
        return np.column_stack([m, np.ones(len(m))]) if len(m) else np.zeros((0, 5))
    return keep_within_border(extract(image, name, dpi=dpi), image, border)
