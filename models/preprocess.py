"""Fixed-size network input from fingerprint images of any size and resolution.

Loaders never resize (``data.record``); this module is the one explicit, recorded place where images become
the (N, 1, S, S) float32 tensors the Siamese encoder consumes. :func:`describe` returns every choice made here
so a run directory (and a model file) records exactly how its inputs were built.

Two pipelines (``InputSpec.crop``):

* ``"print"`` (what experiments use; :func:`prepare`): **resample** each image from its own resolution
  (``dpi`` of its record: every loader and synthetic profile states it) to the working resolution
  ``InputSpec.dpi`` (default 250 dpi: a 500-dpi ridge period of ~9 px becomes ~4.5 px, still resolved;
  ``cv2.INTER_AREA`` when shrinking, ``INTER_CUBIC`` when enlarging), **segment** the print
  (:func:`fedprint.models.ridges.segment_print`), **crop** an S x S window centred on the print's centroid (padding with
  the image's border median where the window leaves the image), then normalise. The network sees ridges at a
  known scale, never the empty frame. An image whose dpi is unknown (None) is taken as already at working
  resolution.
* ``"full"`` (legacy; attacks' comparison models and toy tests): resize the whole image so its longer side is S
  (aspect kept, border-median padding) — ridges alias away on large frames, so experiments do not use it.

**Normalise** each input to zero mean and unit variance over its S x S pixels (``"standardize"``, default; a
constant image maps to zeros), map the byte range linearly to [-1, 1] (``"unit_range"``), or keep only the ridge
pattern (``"ridge"``, :func:`ridge_normalize`): a band-pass around the ridge frequency followed by local contrast
normalisation, so that what differs between sensors and between synthetic and real prints — background level and
gradients, contrast, dryness / wetness, blur below the ridge scale — is removed before the network sees the print;
or go one step further (``"gabor"``, :func:`gabor_normalize`): the ridge pattern redrawn by an oriented Gabor filter
bank steered by the print's own orientation field, so creases, pores, scars and broken ridges are bridged and every
sensor's (and the generator's) prints become the same kind of clean sinusoidal ridge map.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import torch

from fedprint.models.ridges import gabor_enhance, local_std, orientation_field, ridge_period, segment_print

NORMALIZATIONS = ("standardize", "unit_range", "ridge", "gabor")
CROPS = ("print", "full")
#: Standard deviations below this (in grey levels) count as a constant image in ``"standardize"``.
_STD_FLOOR = 1e-6


@dataclass(frozen=True)
class InputSpec:
    """How images become network inputs.

    Attributes
    ----------
    size : int
        Side S of the square input, in pixels (default 128). At least 8.
    keep_aspect : bool
        ``crop = "full"`` only. True (default): resize the longer side to S and pad the shorter one.
        False: resize straight to S x S, distorting the aspect ratio.
    normalization : str
        ``"standardize"`` (default; per-image zero mean, unit variance), ``"unit_range"`` (x / 127.5 - 1),
        ``"ridge"`` (:func:`ridge_normalize`) or ``"gabor"`` (:func:`gabor_normalize`).
    crop : str
        ``"full"`` (default, legacy whole-image resize) or ``"print"`` (resample to ``dpi``, crop on the print;
        what experiments use — see the module docstring).
    dpi : float
        ``crop = "print"`` only: working resolution in dots per inch (default 250).
    """

    size: int = 128
    keep_aspect: bool = True
    normalization: str = "standardize"
    crop: str = "full"
    dpi: float = 250.0

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int | np.integer) or self.size < 8:
            raise ValueError(f"InputSpec.size: expected an integer >= 8 (pixels), got {self.size!r}")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"InputSpec.normalization: expected one of {NORMALIZATIONS}, "
                             f"got {self.normalization!r}")
        if self.crop not in CROPS:
            raise ValueError(f"InputSpec.crop: expected one of {CROPS}, got {self.crop!r}")
        if not (isinstance(self.dpi, int | float) and 50 <= float(self.dpi) <= 2000):
            raise ValueError(f"InputSpec.dpi: expected a resolution in [50, 2000] dots per inch, got {self.dpi!r}")

    @classmethod
    def from_description(cls, d: dict) -> InputSpec:
        """The spec recorded by :func:`describe` (run directories, model files)."""
        return cls(size=int(d["size"]), keep_aspect=bool(d.get("keep_aspect", True)),
                   normalization=str(d.get("normalization", "standardize")), crop=str(d.get("crop", "full")),
                   dpi=float(d.get("dpi", 250.0)))


def describe(spec: InputSpec) -> dict:
    """Everything about the input pipeline a run must record to be reproducible (JSON-serialisable)."""
    norm = {"standardize": "per image (x - mean) / std over all S*S pixels incl. padding; std<1e-6 -> zeros",
            "unit_range": "x / 127.5 - 1 (uint8 [0, 255] -> [-1, 1])",
            "ridge": "fedprint.models.preprocess.ridge_normalize: DoG band-pass G(0.6s) - G(3.2s), / local RMS (4s px, "
                     "floored at 1/4 of its 90th percentile), clip [-3, 3]; s = dpi / 250",
            "gabor": "fedprint.models.preprocess.gabor_normalize: ridge_normalize, then 16 oriented even Gabor filters "
                     "(envelope sigma 0.45 / 0.8 periods across / along the ridges; orientation from the gradient "
                     "structure tensor over 5s px; period = models.ridges.ridge_period clipped to [3.5s, 8s] px), "
                     "x the mask local std (15s px) > 0.4 x its 95th percentile smoothed over 2s px, / std on that "
                     "mask, clip [-3, 3]; s = dpi / 250",
            }[spec.normalization]
    common = {"size": int(spec.size), "crop": spec.crop, "normalization": spec.normalization,
              "normalization_formula": norm, "input_dtype": "uint8, 2-D (H, W), with its dpi",
              "output": f"torch.float32, shape (N, 1, {spec.size}, {spec.size})"}
    if spec.crop == "print":
        return {**common, "dpi": float(spec.dpi), "keep_aspect": True,
                "resample": f"to {spec.dpi:g} dpi (factor dpi_work / dpi_image; unknown dpi: no resampling); "
                            "cv2.INTER_AREA shrinking, cv2.INTER_CUBIC enlarging",
                "segmentation": "models.ridges.segment_print (local std over 15 px, Otsu, open/close, largest "
                                "component)",
                "crop_window": "S x S centred on the foreground centroid (image centre if no foreground), "
                               "kept inside the image when it is larger than S",
                "pad": "constant value = median of the resampled image's 1-px border"}
    pad = ("constant value = median of the resized image's 1-px border; centred (odd pixel bottom/right)"
           if spec.keep_aspect else "none (aspect ratio not kept)")
    return {**common, "keep_aspect": bool(spec.keep_aspect),
            "resize": "longer side -> size" if spec.keep_aspect else "both sides -> size",
            "interpolation_shrink": "cv2.INTER_AREA", "interpolation_enlarge": "cv2.INTER_LINEAR", "pad": pad}


def _check_image(img: np.ndarray, i: int) -> None:
    if not isinstance(img, np.ndarray):
        raise ValueError(f"images[{i}]: expected a numpy array, got {type(img).__name__}")
    if img.dtype != np.uint8:
        raise ValueError(f"images[{i}]: expected dtype uint8, got {img.dtype}")
    if img.ndim != 2:
        raise ValueError(f"images[{i}]: expected a 2-D grayscale image (H, W), got shape {img.shape}")
    if img.size == 0:
        raise ValueError(f"images[{i}]: empty image of shape {img.shape}")


def _square(img: np.ndarray, spec: InputSpec) -> np.ndarray:
    """One uint8 image -> uint8 (S, S): aspect-preserving resize then border-median padding."""
    s = int(spec.size)
    h, w = img.shape
    if not spec.keep_aspect:
        interp = cv2.INTER_AREA if (h >= s and w >= s) else cv2.INTER_LINEAR
        return cv2.resize(img, (s, s), interpolation=interp)
    scale = s / max(h, w)
    nh, nw = max(1, min(s, round(h * scale))), max(1, min(s, round(w * scale)))
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    r = cv2.resize(img, (nw, nh), interpolation=interp) if (nh, nw) != (h, w) else img
    if nh == s and nw == s:
        return np.ascontiguousarray(r)
    border = np.concatenate([r[0], r[-1], r[:, 0], r[:, -1]])
    value = int(np.median(border))
    top, left = (s - nh) // 2, (s - nw) // 2
    return cv2.copyMakeBorder(r, top, s - nh - top, left, s - nw - left, cv2.BORDER_CONSTANT, value=value)


def _border_median(img: np.ndarray) -> int:
    return int(np.median(np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]])))


def _locate(image: np.ndarray, spec: InputSpec, dpi: float | None) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Resampled image, its print mask and the top-left corner (y0, x0) of the S x S crop window."""
    s = int(spec.size)
    img = image
    if dpi is not None:
        if not (isinstance(dpi, int | float | np.floating) and 50 <= float(dpi) <= 2000):
            raise ValueError(f"dpi: expected a resolution in [50, 2000] dots per inch, got {dpi!r}")
        f = float(spec.dpi) / float(dpi)
        if abs(f - 1.0) > 1e-3:
            h, w = image.shape
            size = (max(1, round(w * f)), max(1, round(h * f)))
            img = cv2.resize(image, size, interpolation=cv2.INTER_AREA if f < 1 else cv2.INTER_CUBIC)
    h, w = img.shape
    mask = segment_print(img)
    if mask.any():
        ys, xs = np.nonzero(mask)
        cy, cx = float(ys.mean()), float(xs.mean())
    else:
        cy, cx = (h - 1) / 2.0, (w - 1) / 2.0
    # Centred on the print, kept inside the image along each axis where the image is large enough.
    y0, x0 = int(round(cy - s / 2.0)), int(round(cx - s / 2.0))
    y0 = min(max(y0, 0), h - s) if h >= s else (h - s) // 2
    x0 = min(max(x0, 0), w - s) if w >= s else (w - s) // 2
    return img, mask, y0, x0


def _window(a: np.ndarray, y0: int, x0: int, s: int, fill) -> np.ndarray:
    h, w = a.shape
    out = np.full((s, s), fill, a.dtype)
    sy0, sx0, sy1, sx1 = max(y0, 0), max(x0, 0), min(y0 + s, h), min(x0 + s, w)
    out[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = a[sy0:sy1, sx0:sx1]
    return out


def prepare(image: np.ndarray, spec: InputSpec, dpi: float | None = None) -> np.ndarray:
    """One uint8 image at resolution ``dpi`` -> the uint8 (S, S) crop the network sees (before normalisation).

    ``crop = "print"``: resample to ``spec.dpi``, segment, crop S x S on the print (see module docstring).
    ``crop = "full"``: the legacy whole-image resize (``dpi`` is ignored).
    """
    _check_image(image, 0)
    if spec.crop == "full":
        return _square(image, spec)
    img, _, y0, x0 = _locate(image, spec, dpi)
    return _window(img, y0, x0, int(spec.size), _border_median(img))


def print_coverage(image: np.ndarray, spec: InputSpec, dpi: float | None = None) -> tuple[float, float]:
    """How well the ``crop = "print"`` window sits on the print: ``(coverage, captured)``.

    ``coverage``: fraction of the window on the segmented print (1.0: all print); ``captured``: fraction of the
    print's pixels inside the window (1.0: the whole print, e.g. when the print is smaller than the window).
    """
    _check_image(image, 0)
    img, mask, y0, x0 = _locate(image, spec, dpi)
    inside = _window(mask, y0, x0, int(spec.size), False)
    return float(inside.mean()), float(inside.sum() / mask.sum()) if mask.any() else 0.0


def ridge_normalize(crop: np.ndarray, dpi: float = 250.0) -> np.ndarray:
    """Sensor-independent ridge pattern of one grayscale crop at ``dpi``: float32, about unit local contrast.

    1. **Band-pass** (difference of Gaussians) around the ridge frequency: ``G(0.6 s) - G(3.2 s)`` with
       ``s = dpi / 250`` (pixels). At 250 dpi the ridge period is ~4.5 px (9 px at 500 dpi): the narrow Gaussian
       removes pixel noise, the wide one (period ~20 px passes at half amplitude) the background and its gradients.
    2. **Local contrast normalisation**: divide by the local RMS of the band-passed image (Gaussian window of
       ``4 s`` px), floored at a quarter of its 90th percentile (and at one grey level) so flat background is
       not blown up into noise.
    3. Clip to [-3, 3] (a dust speck or a crease edge cannot dominate the input).

    Parameters
    ----------
    crop : ndarray, uint8, shape (S, S)
    dpi : float
        Working resolution of the crop (``InputSpec.dpi``; default 250).

    Returns
    -------
    ndarray, float32, shape (S, S)
        About zero (< 1e-3) where the crop is constant (padding, blank images).

    References
    ----------
    .. [1] L. Hong, Y. Wan, A. K. Jain, "Fingerprint image enhancement: algorithm and performance evaluation",
       IEEE TPAMI 20(8), 1998 (normalisation before ridge filtering).
    """
    s = float(dpi) / 250.0
    f = crop.astype(np.float32)
    band = cv2.GaussianBlur(f, (0, 0), 0.6 * s) - cv2.GaussianBlur(f, (0, 0), 3.2 * s)
    rms = np.sqrt(cv2.GaussianBlur(band * band, (0, 0), 4.0 * s))
    floor = max(0.25 * float(np.percentile(rms, 90)), 1.0)  # below one grey level: quantisation noise
    return np.clip(band / np.maximum(rms, floor), -3.0, 3.0).astype(np.float32)


def _textured(crop: np.ndarray, s: float) -> np.ndarray:
    """Where ``crop`` has ridge texture: local std over ``15 s`` px above 40 % of its 95th percentile (all False
    on a crop with less than one grey level of texture)."""
    std = local_std(crop, int(round(15 * s)) | 1)
    ref = float(np.percentile(std, 95))
    return std > 0.4 * ref if ref >= 1.0 else np.zeros(crop.shape, bool)


def gabor_normalize(crop: np.ndarray, dpi: float = 250.0) -> np.ndarray:
    """Clean ridge map of one grayscale crop at ``dpi``: float32, unit standard deviation on the print.

    1. :func:`ridge_normalize` (band-pass + local contrast).
    2. **Orientation** ``theta`` of the ridges from the gradient structure tensor of that image, averaged over a
       Gaussian window of ``5 s`` px (:func:`fedprint.models.ridges.orientation_field`), and the **ridge period** ``T``
       from its power spectrum (:func:`fedprint.models.ridges.ridge_period`, clipped to ``[3.5 s, 8 s]`` px; ``4.5 s``
       where the crop is too small to tell), ``s = dpi / 250``.
    3. **Oriented Gabor enhancement** ([1]_; :func:`fedprint.models.ridges.gabor_enhance`): 16 even Gabor filters
       of period ``T`` with envelope sigmas ``0.45 T`` across and ``0.8 T`` along the ridges; each pixel keeps
       the response of the filter of its own orientation. The long envelope along the ridge bridges gaps
       narrower than about a period: creases, pores, dry breaks.
    4. Multiply by the print's mask smoothed over ``2 s`` px (no hard edge): pixels whose grey-level standard
       deviation over ``15 s`` px exceeds 40 % of its 95th percentile in the crop (not Otsu's split of
       :func:`fedprint.models.ridges.segment_print`, which cuts a crop that is all print in two); divide by the standard
       deviation on the print, clip to [-3, 3].

    What it cannot do: a crease wider than about two periods, or a region whose orientation the structure
    tensor gets wrong (very low quality), comes out as smooth but wrong ridges.

    Parameters
    ----------
    crop : ndarray, uint8, shape (S, S)
    dpi : float
        Working resolution of the crop (``InputSpec.dpi``; default 250).

    Returns
    -------
    ndarray, float32, shape (S, S)
        Zero where the crop has no print (padding, blank images).

    References
    ----------
    .. [1] L. Hong, Y. Wan, A. K. Jain, "Fingerprint image enhancement: algorithm and performance evaluation",
       IEEE TPAMI 20(8), 1998.
    """
    s = float(dpi) / 250.0
    mask = _textured(crop, s)
    if not mask.any():
        return np.zeros(crop.shape, np.float32)
    ridges = ridge_normalize(crop, dpi).astype(np.float64)
    theta, _ = orientation_field(ridges, sigma=5.0 * s)
    try:
        period = float(np.clip(ridge_period(ridges), 3.5 * s, 8.0 * s))
    except ValueError:  # too small a crop for a spectrum: the typical period at this resolution
        period = 4.5 * s
    enhanced = gabor_enhance(ridges, np.ones(mask.shape, bool), theta, period)
    enhanced *= cv2.GaussianBlur(mask.astype(np.float64), (0, 0), 2.0 * s)
    std = float(enhanced[mask].std())
    return np.clip(enhanced / max(std, 1e-6), -3.0, 3.0).astype(np.float32)


def normalize(crops: np.ndarray, spec: InputSpec) -> torch.Tensor:
    """uint8 (N, S, S) crops -> float32 (N, 1, S, S) network input (``spec.normalization``)."""
    batch = np.asarray(crops).astype(np.float32)
    if spec.normalization in ("ridge", "gabor"):
        dpi = float(spec.dpi) if spec.crop == "print" else 250.0
        fn = ridge_normalize if spec.normalization == "ridge" else gabor_normalize
        batch = np.stack([fn(c, dpi) for c in np.asarray(crops)]) if len(batch) else batch
    elif spec.normalization == "standardize":
        mean = batch.mean(axis=(1, 2), keepdims=True)
        std = batch.std(axis=(1, 2), keepdims=True)
        scaled = (batch - mean) / np.maximum(std, _STD_FLOOR)
        batch = np.where(std > _STD_FLOOR, scaled, 0.0).astype(np.float32)
    else:
        batch = batch / np.float32(127.5) - np.float32(1.0)
    return torch.from_numpy(np.ascontiguousarray(batch[:, None]))


def to_tensor_batch(images: Sequence[np.ndarray], spec: InputSpec | None = None,
                    dpi: float | Sequence[float | None] | None = None) -> torch.Tensor:
    """Preprocess a list of grayscale images into one network input batch.

    Parameters
    ----------
    images : sequence of ndarray, uint8, shape (H_i, W_i)
        Grayscale fingerprint images; sizes may differ between images.
    spec : InputSpec, optional
        Input specification (default ``InputSpec()``: 128 px, whole image, per-image standardisation).
    dpi : float or sequence of float, optional
        Resolution of the images (one value, or one per image; None = already at working resolution). Used
        by ``crop = "print"`` only.

    Returns
    -------
    Tensor, float32, shape (N, 1, S, S)

    Raises
    ------
    ValueError
        If ``images`` is empty, or an image is not a non-empty 2-D uint8 array.
    """
    spec = spec or InputSpec()
    if len(images) == 0:
        raise ValueError("images: expected at least one image, got an empty sequence")
    for i, img in enumerate(images):
        _check_image(img, i)
    dpis = list(dpi) if isinstance(dpi, list | tuple | np.ndarray) else [dpi] * len(images)
    if len(dpis) != len(images):
        raise ValueError(f"dpi: expected one value or {len(images)} values, got {len(dpis)}")
    # Resampling and cropping are per image (sizes differ); normalisation works on the stacked batch.
    return normalize(np.stack([prepare(img, spec, d) for img, d in zip(images, dpis, strict=True)]), spec)
