"""The β-aware attacker: undo FP-DFSN's affine step on a reconstruction (Yan et al. 2025 Eq. 10).

FP-DFSN releases I_diff = (1 − β)·I − β·noise·mask (see :mod:`fedprint.privacy.fpdfsn`). An attacker who knows β (a
published hyper-parameter) and holds a gray-level reconstruction of I_diff computes Î = I_diff / (1 − β): exact
outside the minutia disks (up to the uint8 rounding, ≤ 0.5/(1 − β) gray levels, and clipping at 0), and
I − β/(1 − β)·noise inside them. :func:`inpaint_noise_disks` goes one step further: it re-finds the minutiae on Î
with the defender's own extractor, rebuilds the disks and fills them from their surroundings.

What the network input keeps of this depends on the client's normalisation (:mod:`fedprint.models.preprocess`):

* ``unit_range`` keeps gray levels, so a recovered input maps back to I_diff exactly and the β-aware division
  is what turns it into I (:func:`invert_network_input`);
* ``standardize`` (FedPrint's default) divides out every gain, including FP-DFSN's (1 − β): the network input
  of I_diff equals that of I outside the disks up to the change in mean/std the noise causes. The division is
  then absorbed by the per-image standardisation - the β-aware attacker gains nothing over the naive one, and
  the naive one already sees the raw ridge pattern outside the disks.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch

from fedprint.attacks.recon_metrics import check_invertible
from fedprint.privacy.fpdfsn import FPDFSNParams, invert_fpdfsn, neighbourhood_mask, sharpen, to_uint8


def beta_aware_inversion(recon_gray: np.ndarray, beta: float, *, clip: bool = True) -> np.ndarray:
    """Î = recon / (1 − β) (Eq. 10 solved for I outside the noise mask), float64 gray levels.

    Parameters
    ----------
    recon_gray : ndarray, shape (H, W)
        Reconstruction of the FP-DFSN image I_diff on the 0–255 scale (uint8 or float).
    beta : float
        FP-DFSN's β in [0, 1).
    clip : bool
        Clip the result to [0, 255] (default True; an attacker knows I is an 8-bit image).
    """
    out = invert_fpdfsn(np.asarray(recon_gray), beta)
    return np.clip(out, 0.0, 255.0) if clip else out


def invert_network_input(x: torch.Tensor | np.ndarray, beta: float, normalization: str,
                         *, reference_gray: np.ndarray | None = None) -> np.ndarray:
    """β-aware attack on a recovered *network input* of an FP-DFSN image; returns Î in gray levels.

    ``unit_range``: g = (x + 1)·127.5 is I_diff, Î = g / (1 − β). ``standardize``: the input carries no gain,
    so Î is the z-normalised x mapped onto ``reference_gray``'s mean and std (the evaluator's oracle affine of
    :mod:`fedprint.attacks.recon_metrics`) - the division by (1 − β) is a no-op after standardisation.
    """
    from fedprint.attacks.recon_metrics import network_to_gray, znorm

    check_invertible(normalization)
    if normalization == "unit_range":
        return beta_aware_inversion(network_to_gray(x, "unit_range"), beta)
    if not 0.0 <= beta < 1.0:
        raise ValueError(f"beta must be in [0, 1), got {beta}")
    if reference_gray is None:
        raise ValueError("reference_gray: required with normalization='standardize'")
    ref = np.asarray(reference_gray, dtype=np.float64)
    return np.clip(znorm(x) * ref.std() + ref.mean(), 0.0, 255.0)


def estimated_noise_mask(inverted_gray: np.ndarray, params: FPDFSNParams, *, extractor=None) -> np.ndarray:
    """The attacker's estimate of FP-DFSN's noise mask: the defender's pipeline (sharpen, the minutiae of the
    defender's backend ``params.backend``, disks of ``params.radius``) run on the β-inverted reconstruction."""
    from fedprint.privacy.fpdfsn import minutiae_extractor

    extractor = minutiae_extractor(getattr(params, "backend", "auto")) if extractor is None else extractor
    img = to_uint8(np.asarray(inverted_gray, dtype=np.float64))
    minutiae = np.asarray(extractor(to_uint8(sharpen(img, params.d0)), border=params.border),
                          dtype=np.float64).reshape(-1, 4)
    return neighbourhood_mask(img.shape, minutiae, params.radius)


def inpaint_noise_disks(inverted_gray: np.ndarray, mask: np.ndarray, *, radius_px: float = 3.0) -> np.ndarray:
    """Fill the (estimated) noise disks from their surroundings (cv2.INPAINT_TELEA), float64 gray levels.

    Parameters
    ----------
    inverted_gray : ndarray, shape (H, W)
        β-inverted reconstruction (:func:`beta_aware_inversion`).
    mask : ndarray of bool, shape (H, W)
        Pixels to replace (e.g. :func:`estimated_noise_mask`).
    radius_px : float
        Inpainting neighbourhood radius in pixels (default 3).
    """
    img = np.asarray(inverted_gray, dtype=np.float64)
    mask = np.asarray(mask)
    if mask.shape != img.shape or mask.dtype != bool:
        raise ValueError(f"mask: expected bool of shape {img.shape}, got {mask.dtype} {mask.shape}")
    if not mask.any():
        return img.copy()
    filled = cv2.inpaint(to_uint8(img), mask.astype(np.uint8), float(radius_px), cv2.INPAINT_TELEA)
    out = img.copy()
    out[mask] = filled[mask]
    return out
