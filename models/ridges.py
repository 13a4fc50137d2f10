"""Ridge period, print segmentation, orientation and oriented enhancement of a grayscale fingerprint image
(vectorised numpy / OpenCV).

* :func:`ridge_period` — the dominant ridge period in pixels, from the radially averaged power spectrum of the
  print's central region (ridges are a narrow-band texture: one ring in the spectrum) [1]_.
* :func:`segment_print` — the foreground mask: local grey-level standard deviation (:func:`local_std`) over about two
  ridge periods,
  Otsu-thresholded, cleaned by morphology, largest component kept.
* :func:`orientation_field` — ridge orientation and coherence from the gradient structure tensor.
* :func:`gabor_enhance` — an oriented Gabor filter bank [2]_, each pixel keeping the response of its own orientation
  (used by the minutiae extractor, :mod:`fedprint.data.minutiae`, and the ``"gabor"`` input normalisation,
  :mod:`fedprint.models.preprocess`).

Real prints at 500 dpi have ridge periods of about 7–12 px (about 0.45 mm); a network input must keep at least
~4 px per period or the ridge pattern aliases away, which is what :mod:`fedprint.models.preprocess` guarantees.

References
----------
.. [1] D. Maltoni, D. Maio, A. K. Jain, S. Prabhakar, "Handbook of Fingerprint Recognition", 2nd ed., Springer,
   2009, Sec. 3.3 (local ridge frequency) and 3.5 (segmentation by local variance).
.. [2] L. Hong, Y. Wan, A. K. Jain, "Fingerprint image enhancement: algorithm and performance evaluation",
   IEEE TPAMI 20(8), 1998 (oriented Gabor enhancement).
"""

from __future__ import annotations

import cv2
import numpy as np


def _check(image: np.ndarray) -> np.ndarray:
    if not isinstance(image, np.ndarray) or image.ndim != 2 or image.size == 0:
        raise ValueError(f"image: expected a non-empty 2-D grayscale array, got {getattr(image, 'shape', image)!r}")
    return image.astype(np.float32)


def ridge_period(image: np.ndarray, *, min_period: float = 2.5, max_period: float = 20.0,
                 region: float = 0.6) -> float:
    """Dominant ridge period of a fingerprint image, in pixels.

    Parameters
    ----------
    image : ndarray, shape (H, W)
        Grayscale image (any dtype).
    min_period, max_period : float
        Search band in pixels (defaults 2.5 and 20): periods outside it are not ridges.
    region : float
        Side of the central square analysed, as a fraction of the shorter image side (default 0.6), so that
        borders and background do not dominate.

    Returns
    -------
    float
        The period 1/f at the peak of the radially averaged, Hann-windowed power spectrum within the band.
    """
    img = _check(image)
    h, w = img.shape
    s = max(16, int(min(h, w) * region))
    y0, x0 = (h - s) // 2, (w - s) // 2
    c = img[y0:y0 + s, x0:x0 + s]
    c = (c - c.mean()) * np.outer(np.hanning(c.shape[0]), np.hanning(c.shape[1]))
    power = np.abs(np.fft.fftshift(np.fft.fft2(c))) ** 2
    yy, xx = np.indices(power.shape)
    r = np.hypot((yy - c.shape[0] // 2) / c.shape[0], (xx - c.shape[1] // 2) / c.shape[1])
    bins = np.clip((r * 2 * s).astype(int), 0, None)  # radial bins of width 1/(2s) cycles/px
    radial = np.bincount(bins.ravel(), power.ravel()) / np.maximum(np.bincount(bins.ravel()), 1)
    freqs = (np.arange(len(radial)) + 0.5) / (2 * s)
    band = (freqs >= 1.0 / max_period) & (freqs <= 1.0 / min_period)
    if not band.any():
        raise ValueError(f"ridge_period: image {image.shape} too small for periods in [{min_period}, {max_period}]")
    k = np.flatnonzero(band)[np.argmax(radial[band])]
    return float(1.0 / freqs[k])


def local_std(image: np.ndarray, window: int) -> np.ndarray:
    """Grey-level standard deviation over a ``window`` x ``window`` box around each pixel (float32, same shape;
    ridges vary, background and padding do not)."""
    img = _check(image)
    k = (int(window), int(window))
    mean = cv2.blur(img, k)
    return np.sqrt(np.maximum(cv2.blur(img * img, k) - mean * mean, 0.0))


def segment_print(image: np.ndarray, *, window: int = 15) -> np.ndarray:
    """Boolean foreground mask of the print (ridge area) of a grayscale image.

    Parameters
    ----------
    image : ndarray, shape (H, W)
    window : int
        Side in pixels of the local standard-deviation window (default 15, about two ridge periods at 250 dpi).

    Returns
    -------
    ndarray of bool, shape (H, W)
        True on the print. All False when the image has no texture (e.g. a constant image).
    """
    img = _check(image)
    k = (int(window), int(window))
    std = local_std(img, window)
    if float(std.max()) < 1.0:
        return np.zeros(img.shape, bool)
    std8 = np.clip(std * (255.0 / float(std.max())), 0, 255).astype(np.uint8)
    _, fg = cv2.threshold(std8, 0, 1, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, k)
    fg = cv2.morphologyEx(cv2.morphologyEx(fg, cv2.MORPH_OPEN, kernel), cv2.MORPH_CLOSE, kernel)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(fg, connectivity=8)
    if n <= 1:
        return np.zeros(img.shape, bool)
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return labels == largest


def orientation_field(image: np.ndarray, sigma: float = 7.0) -> tuple[np.ndarray, np.ndarray]:
    """Ridge orientation (radians modulo pi, image axes) and coherence in [0, 1] from the gradient structure tensor.

    Parameters
    ----------
    image : ndarray, shape (H, W)
        Grayscale image (any numeric dtype).
    sigma : float, default 7.0
        Gaussian window (pixels) over which the tensor is averaged.
    """
    img = image.astype(np.float64)
    gx = cv2.Sobel(img, cv2.CV_64F, 1, 0, ksize=3)
    gy = cv2.Sobel(img, cv2.CV_64F, 0, 1, ksize=3)
    gxx = cv2.GaussianBlur(gx * gx, (0, 0), sigma)
    gyy = cv2.GaussianBlur(gy * gy, (0, 0), sigma)
    gxy = cv2.GaussianBlur(gx * gy, (0, 0), sigma)
    # The dominant gradient direction is 1/2 atan2(2gxy, gxx - gyy); ridges run perpendicular to it.
    theta = 0.5 * np.arctan2(2 * gxy, gxx - gyy) + np.pi / 2
    coh = np.sqrt((gxx - gyy) ** 2 + 4 * gxy**2) / np.maximum(gxx + gyy, 1e-9)
    return np.mod(theta, np.pi), coh


def gabor_enhance(
    image: np.ndarray,
    mask: np.ndarray,
    orientation: np.ndarray,
    period: float,
    n_orient: int = 16,
    sigma_across: float = 0.45,
    sigma_along: float = 0.8,
) -> np.ndarray:
    """Oriented Gabor enhancement: filter with ``n_orient`` even Gabor kernels, keep each pixel's own orientation.

    Parameters
    ----------
    image : ndarray of float64, shape (H, W)
        Locally normalised image (zero mean, unit variance in the foreground).
    mask : ndarray of bool
    orientation : ndarray of float
        Ridge orientation in radians modulo pi (:func:`orientation_field`).
    period : float
        Ridge period in pixels.
    n_orient : int, default 16
        Number of quantised orientations (filter bank size).
    sigma_across, sigma_along : float, default 0.45, 0.8
        Gaussian envelope sigmas across and along the ridges, as fractions of the period (a longer envelope
        along the ridge bridges creases and pores).
    """
    sa, sl = sigma_across * period, sigma_along * period
    half = int(np.ceil(3 * max(sa, sl)))
    yy, xx = np.mgrid[-half : half + 1, -half : half + 1].astype(np.float64)
    bins = np.round(orientation / np.pi * n_orient).astype(int) % n_orient
    out = np.zeros_like(image)
    for b in range(n_orient):
        th = b * np.pi / n_orient
        # coordinate across the ridges (perpendicular to the ridge direction th)
        u = -xx * np.sin(th) + yy * np.cos(th)
        v = xx * np.cos(th) + yy * np.sin(th)  # coordinate along the ridges
        kern = np.exp(-(u**2) / (2 * sa**2) - v**2 / (2 * sl**2)) * np.cos(2 * np.pi * u / period)
        kern -= kern.mean()
        resp = cv2.filter2D(image, cv2.CV_64F, kern, borderType=cv2.BORDER_REFLECT)
        sel = bins == b
        out[sel] = resp[sel]
    return np.where(mask, out, 0.0)
