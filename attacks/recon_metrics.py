"""Reconstruction quality for gradient-inversion audits: MSE, PSNR, SSIM, LPIPS, and "does it still verify".

Scales (be explicit: the network never sees gray levels)
--------------------------------------------------------
An attacker on a client's update recovers *network inputs* ``x`` (:mod:`fedprint.models.preprocess`), not gray images:

* ``normalization="unit_range"``: ``x = g / 127.5 - 1`` is invertible, ``g = (x + 1) * 127.5`` exactly.
* ``normalization="standardize"`` (FedPrint's default): ``x = (g - mean(g)) / std(g)`` per image. The mean and
  standard deviation are **lost**; only the print up to a gain and an offset is recoverable. These two scalars
  say next to nothing about the ridge pattern, so we report two views, always both:

  - **gray scale ("raw-scale")**: the reconstruction is z-normalised and mapped onto the gray-level mean and
    standard deviation of the reference it is compared with (an *oracle affine*: the evaluator lends the
    attacker the two lost scalars), then MSE / PSNR / SSIM / LPIPS on the 0-255 scale (data_range 255);
  - **normalised scale**: both images z-normalised (zero mean, unit variance), MSE on that scale and PSNR /
    SSIM with ``data_range = max - min`` of the z-normalised reference. Because the two views differ only by
    the reference's standard deviation, PSNR_gray - PSNR_norm = 20 log10(255 / (max - min of the reference
    in gray levels)).

Exactness: a reconstruction counts as **exact** when its gray-scale maximum absolute error is below 0.5 gray
level, i.e. rounding it gives the identical uint8 image (stricter than "PSNR > 60 dB").

References: the RAW (pre-FP-DFSN) image and the image the client actually trained on (I_diff of Yan et al. 2025
Eq. 10 when FP-DFSN is on; the raw image otherwise), both at network resolution (S x S, see
:func:`gray_at_input_size`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fedprint.models.preprocess import NORMALIZATIONS, InputSpec, to_tensor_batch
from fedprint.privacy import similarity
from fedprint.privacy.similarity import LPIPSUnavailable, lpips_distance

#: Gray-level error below which a reconstruction rounds to the identical uint8 image.
EXACT_TOL_GRAY = 0.5
_STD_FLOOR = 1e-6


def _as_float_image(x, name: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    x = np.squeeze(x)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"{name}: expected one non-empty 2-D image (extra axes of size 1 allowed), "
                         f"got shape {np.shape(x)}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: image contains NaN or inf")
    return x.astype(np.float64)


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = _as_float_image(a, "a"), _as_float_image(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    return a, b


def _data_range(a, data_range: float | None) -> float:
    if data_range is None:
        dtype = a.dtype if isinstance(a, np.ndarray | torch.Tensor) else np.asarray(a).dtype
        if dtype == np.uint8 or dtype == torch.uint8:
            return 255.0
        raise ValueError("data_range: required for non-uint8 images (255.0 for gray levels, 1.0 for [0, 1] "
                         "images); it is never guessed from the values")
    if not (np.isfinite(data_range) and data_range > 0):
        raise ValueError(f"data_range: expected a finite number > 0, got {data_range!r}")
    return float(data_range)


def mse(a, b) -> float:
    """Mean squared error between two images of equal shape (same units as the images, squared)."""
    a, b = _pair(a, b)
    return float(np.mean((a - b) ** 2))


def psnr(a, b, data_range: float | None = None) -> float:
    """PSNR in dB (:func:`fedprint.privacy.similarity.psnr`) with an explicit ``data_range``; ``inf`` for identical
    images.

    ``data_range``: 255 for gray levels, 1 for [0, 1] images. Inferred only for uint8 ``a`` (255); required
    otherwise (never guessed from the values).
    """
    r = _data_range(a, data_range)
    a, b = _pair(a, b)
    return similarity.psnr(a, b, data_range=r)


def ssim(a, b, data_range: float | None = None) -> float:
    """SSIM (:func:`fedprint.privacy.similarity.ssim`) with an explicit ``data_range`` (see :func:`psnr`)."""
    r = _data_range(a, data_range)
    a, b = _pair(a, b)
    return similarity.ssim(a, b, data_range=r)


def lpips_or_unavailable(a, b) -> tuple[float | None, str | None]:
    """LPIPS (AlexNet, gray images on the 0-255 scale) or ``(None, reason)`` when its weights are absent.

    Never substitutes random weights (see :mod:`fedprint.privacy.similarity`).
    """
    a, b = _pair(a, b)
    try:
        return lpips_distance(np.clip(a, 0, 255), np.clip(b, 0, 255)), None
    except LPIPSUnavailable as exc:
        return None, f"unavailable: {exc}"


def znorm(x) -> np.ndarray:
    """Zero mean, unit variance over all pixels (a constant image maps to zeros), float64."""
    x = _as_float_image(x, "x")
    s = x.std()
    return (x - x.mean()) / s if s > _STD_FLOOR else np.zeros_like(x)


#: Input normalisations the inversion attacks model differentiably (and can map back to gray levels).
INVERTIBLE_NORMALIZATIONS = ("standardize", "unit_range")


def check_invertible(normalization: str) -> None:
    """Refuse a normalisation the gradient-inversion attacks do not model, saying which ones they do."""
    if normalization in INVERTIBLE_NORMALIZATIONS:
        return
    if normalization in NORMALIZATIONS:
        raise ValueError(f"[model] normalization = {normalization!r}: the gradient-inversion attacks model the "
                         f"client's input normalisation only for {' and '.join(map(repr, INVERTIBLE_NORMALIZATIONS))}"
                         " (the ridge band-pass and local-RMS division are not modelled); audit a run trained with "
                         "one of those, or leave inversion / imprint out of --attacks")
    raise ValueError(f"normalization: expected one of {INVERTIBLE_NORMALIZATIONS}, got {normalization!r}")


def network_to_gray(x, normalization: str, reference=None) -> np.ndarray:
    """Map one network input back to gray levels (float64, not clipped or rounded).

    Parameters
    ----------
    x : array_like or Tensor, shape (S, S) (or with singleton axes)
        A network input (recovered or true).
    normalization : {"standardize", "unit_range"}
        How inputs were built (:class:`fedprint.models.preprocess.InputSpec`).
    reference : array_like, optional
        Gray image whose mean and standard deviation replace the ones standardisation discarded (the oracle
        affine of the module docstring). Required for ``"standardize"``, ignored for ``"unit_range"``.
    """
    check_invertible(normalization)
    x = _as_float_image(x, "x")
    if normalization == "unit_range":
        return (x + 1.0) * 127.5
    if reference is None:
        raise ValueError("reference: required with normalization='standardize' (the per-image mean and std "
                         "are not recoverable from the network input)")
    ref = _as_float_image(reference, "reference")
    return znorm(x) * ref.std() + ref.mean()


def gray_at_input_size(images: Sequence[np.ndarray], spec: InputSpec) -> np.ndarray:
    """uint8 images resized and padded exactly as the network input pipeline does, as float64 gray levels.

    Uses :func:`fedprint.models.preprocess.to_tensor_batch` with ``unit_range`` (an exact affine of the squared
    image), so the geometry is the pipeline's own. Shape (N, S, S).
    """
    s = InputSpec(size=spec.size, keep_aspect=spec.keep_aspect, normalization="unit_range")
    g = (to_tensor_batch(list(images), s)[:, 0].double().numpy() + 1.0) * 127.5
    return np.round(g, 3)  # float32 round trip: values are uint8 levels up to ~1e-5


def compare(recon_x, reference_gray, normalization: str, *, with_lpips: bool = True) -> dict:
    """All metrics of one reconstruction against one gray reference (module docstring: both scales).

    Parameters
    ----------
    recon_x : array_like or Tensor, shape (S, S)
        Reconstructed network input.
    reference_gray : array_like, shape (S, S)
        Reference image in gray levels (0-255) at network resolution.
    normalization : {"standardize", "unit_range"}

    Returns
    -------
    dict
        ``mse, psnr, ssim, lpips`` (gray scale, data_range 255; ``lpips`` None when unavailable with
        ``lpips_note``), ``max_abs_err`` (gray levels), ``exact`` (max_abs_err < 0.5), ``mse_norm, psnr_norm,
        ssim_norm`` (normalised scale), ``recon_gray`` (the gray-scale reconstruction used).
    """
    ref = _as_float_image(reference_gray, "reference_gray")
    return compare_gray(network_to_gray(recon_x, normalization, reference=ref), ref, with_lpips=with_lpips)


def compare_gray(recon_gray, reference_gray, *, with_lpips: bool = True) -> dict:
    """:func:`compare` for a reconstruction already on the gray scale (e.g. after the β-aware inversion)."""
    rec = _as_float_image(recon_gray, "recon_gray")
    ref = _as_float_image(reference_gray, "reference_gray")
    if rec.shape != ref.shape:
        raise ValueError(f"recon and reference must have the same shape, got {rec.shape}, {ref.shape}")
    err = float(np.max(np.abs(rec - ref)))
    out = {"mse": mse(rec, ref), "psnr": psnr(rec, ref, 255.0), "ssim": ssim(rec, ref, 255.0),
           "max_abs_err": err, "exact": bool(err < EXACT_TOL_GRAY)}
    if with_lpips:
        out["lpips"], note = lpips_or_unavailable(rec, ref)
        if note:
            out["lpips_note"] = note
    else:
        out["lpips"], out["lpips_note"] = None, "not computed (with_lpips=False)"
    zr, zx = znorm(ref), znorm(rec)
    rng = float(zr.max() - zr.min()) or 1.0
    out.update(mse_norm=mse(zx, zr), psnr_norm=psnr(zx, zr, rng), ssim_norm=ssim(zx, zr, rng), recon_gray=rec)
    return out


@torch.no_grad()
def verifies_against_owner(
    encoder: torch.nn.Module,
    recon_x: torch.Tensor,
    owner_x: torch.Tensor,
    threshold: float,
) -> dict:
    """Does a reconstructed print still verify against its owner's other impressions (Yan et al. 2025 Eq. 2)?

    Parameters
    ----------
    encoder : nn.Module
        The trained verifier's encoder (unit-norm embeddings).
    recon_x : Tensor, shape (1, S, S) or (1, 1, S, S)
        The reconstruction, as a network input.
    owner_x : Tensor, shape (k, 1, S, S)
        Network inputs of the owner's *other* impressions (k >= 1).
    threshold : float
        Distance threshold chosen on validation pairs (:func:`fedprint.models.metrics.choose_threshold`).

    Returns
    -------
    dict
        ``distances`` (k,), ``min_distance``, ``median_distance``, ``match_any`` (some impression accepted),
        ``match_rate`` (fraction of the k comparisons accepted).
    """
    if owner_x.ndim != 4 or owner_x.shape[0] == 0:
        raise ValueError(f"owner_x: expected (k >= 1, 1, S, S), got {tuple(owner_x.shape)}")
    rx = recon_x.reshape(1, *owner_x.shape[1:]).to(owner_x.dtype)
    was_training = encoder.training
    encoder.eval()
    try:
        e = encoder(torch.cat([rx, owner_x]))
    finally:
        encoder.train(was_training)
    d = torch.linalg.vector_norm(e[1:] - e[:1], dim=1).double().numpy()
    return {"distances": d, "min_distance": float(d.min()), "median_distance": float(np.median(d)),
            "match_any": bool((d <= threshold).any()), "match_rate": float((d <= threshold).mean())}


def classical_matcher_status() -> str:
    """Whether a classical (minutiae) matcher is available to verify reconstructions.

    The audit design asks for the matcher of ``data/realism.py``; that module does not exist yet, so this
    returns an explicit 'unavailable' string rather than a number.
    """
    try:
        import fedprint.data.realism  # noqa: F401
    except ImportError:
        return "unavailable: data.realism (classical matcher) does not exist yet"
    return "available: data.realism"
