"""Fixed-size network input from fingerprint images of any size: resize, pad to a square, normalise.

Loaders never resize (``data.record``); this module is the one explicit, recorded place where images become
the (N, 1, S, S) float32 tensors the Siamese encoder consumes. :func:`describe` returns every choice made here
so a run directory records exactly how its inputs were built.

Choices (fixed, documented, recorded by :func:`describe`):

* **Resize** so the longer side becomes ``S`` (aspect ratio kept) with ``cv2.INTER_AREA`` when shrinking (the
  common case: 300-800 px scans down to 128 px; area averaging avoids aliasing the ridge pattern) and
  ``cv2.INTER_LINEAR`` when enlarging (``INTER_AREA`` degenerates to nearest-neighbour there).
* **Pad** the shorter side symmetrically (the odd pixel goes to the bottom/right) with a constant: the *median
  of the resized image's one-pixel border*. Fingerprint scans have a light background at the border, but not
  always white 255 (SOCOFing backgrounds are grey, synthetic or FP-DFSN-processed images differ again), so the
  border median matches the image's own background instead of drawing an artificial frame the network could
  key on.
* **Normalise** each image to zero mean and unit variance over all its S x S pixels (padding included), the
  default ``"standardize"``: it removes sensor gain/offset differences between domains and the rescaling that
  FP-DFSN (seed 003 Eq. 10) applies. A constant image (variance 0) maps to all zeros. ``"unit_range"`` instead
  maps the fixed byte range linearly, x / 127.5 - 1, to [-1, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import torch

NORMALIZATIONS = ("standardize", "unit_range")
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
        True (default): resize the longer side to S and pad the shorter one (see module docstring).
        False: resize straight to S x S, distorting the aspect ratio.
    normalization : str
        ``"standardize"`` (default; per-image zero mean, unit variance) or ``"unit_range"`` (x / 127.5 - 1).
    """

    size: int = 128
    keep_aspect: bool = True
    normalization: str = "standardize"

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int | np.integer) or self.size < 8:
            raise ValueError(f"InputSpec.size: expected an integer >= 8 (pixels), got {self.size!r}")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"InputSpec.normalization: expected one of {NORMALIZATIONS}, "
                             f"got {self.normalization!r}")


def describe(spec: InputSpec) -> dict:
    """Everything about the input pipeline a run must record to be reproducible (JSON-serialisable)."""
    pad = ("constant value = median of the resized image's 1-px border; centred (odd pixel bottom/right)"
           if spec.keep_aspect else "none (aspect ratio not kept)")
    norm = {"standardize": "per image (x - mean) / std over all S*S pixels incl. padding; std<1e-6 -> zeros",
            "unit_range": "x / 127.5 - 1 (uint8 [0, 255] -> [-1, 1])"}[spec.normalization]
    return {
        "size": int(spec.size),
        "keep_aspect": bool(spec.keep_aspect),
        "resize": "longer side -> size" if spec.keep_aspect else "both sides -> size",
        "interpolation_shrink": "cv2.INTER_AREA",
        "interpolation_enlarge": "cv2.INTER_LINEAR",
        "pad": pad,
        "normalization": spec.normalization,
        "normalization_formula": norm,
        "input_dtype": "uint8, 2-D (H, W)",
        "output": f"torch.float32, shape (N, 1, {spec.size}, {spec.size})",
    }


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


def to_tensor_batch(images: Sequence[np.ndarray], spec: InputSpec | None = None) -> torch.Tensor:
    """Preprocess a list of grayscale images into one network input batch.

    Parameters
    ----------
    images : sequence of ndarray, uint8, shape (H_i, W_i)
        Grayscale fingerprint images; sizes may differ between images.
    spec : InputSpec, optional
        Input specification (default ``InputSpec()``: 128 px, aspect kept, per-image standardisation).

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
    # Resizing is per image (sizes differ); everything after it works on the stacked batch.
    batch = np.stack([_square(img, spec) for img in images]).astype(np.float32)
    if spec.normalization == "standardize":
        mean = batch.mean(axis=(1, 2), keepdims=True)
        std = batch.std(axis=(1, 2), keepdims=True)
        scaled = (batch - mean) / np.maximum(std, _STD_FLOOR)
        batch = np.where(std > _STD_FLOOR, scaled, 0.0).astype(np.float32)
    else:
        batch = batch / np.float32(127.5) - np.float32(1.0)
    return torch.from_numpy(np.ascontiguousarray(batch[:, None]))
