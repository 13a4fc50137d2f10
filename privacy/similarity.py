"""Image-similarity measures for privacy audits: PSNR, SSIM and LPIPS (AlexNet), all on the 0–255 scale.

Yan et al. 2025 (Table 5, Fig. 3) reports these between original and processed / reconstructed fingerprints. Its
"PSNR 122 dB" is impossible for 8-bit images: the smallest non-zero MSE between two H×W uint8 images is one
pixel off by one gray level, MSE = 1/(H·W), so the largest finite PSNR is 10·log10(255²·H·W) — about 97.7 dB
for a 300×300 image (:func:`max_finite_psnr`). Identical images have PSNR = +inf.

LPIPS uses the ``lpips`` package (v0.1 linear layers, shipped in its wheel) on top of torchvision's ImageNet
AlexNet. The AlexNet weights are read only from the torch hub cache
(``torch.hub.get_dir()/checkpoints/alexnet-owt-7be5be79.pth``); nothing is downloaded and nothing is left
randomly initialised: if the file is absent :class:`LPIPSUnavailable` is raised, and every parameter of the
network is checked to have been loaded from one of the two weight files.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

import numpy as np
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

#: Gray-level range every measure here assumes (8-bit images; float inputs must be on the same 0–255 scale).
DATA_RANGE = 255.0
#: File name torchvision uses for the ImageNet AlexNet weights (``AlexNet_Weights.IMAGENET1K_V1``).
ALEXNET_CHECKPOINT = "alexnet-owt-7be5be79.pth"


class LPIPSUnavailable(RuntimeError):
    """LPIPS cannot be computed because the ImageNet AlexNet weights are not in the torch hub cache."""

    def __init__(self, path: Path, reason: str = "file not found"):
        self.path = Path(path)
        super().__init__(
            f"LPIPS (AlexNet) unavailable: {reason}: {self.path}. Place torchvision's ImageNet AlexNet "
            f"weights ({ALEXNET_CHECKPOINT}) there; they are never downloaded or replaced by random weights."
        )


def _check_pair(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a)
    b = np.asarray(b)
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2 or x.size == 0:
            raise ValueError(f"{name}: expected a non-empty 2-D gray image, got shape {x.shape}")
        if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
            raise ValueError(f"{name}: expected a real-valued image (uint8 or float on 0–255), got {x.dtype}")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    return a.astype(np.float64), b.astype(np.float64)


def max_finite_psnr(shape: tuple[int, int]) -> float:
    """Largest finite PSNR (dB) between two 8-bit images of ``shape``: one pixel differs by one level."""
    n = int(np.prod(shape))
    return float(10.0 * np.log10(DATA_RANGE**2 * n))


def psnr(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None, data_range: float = DATA_RANGE) -> float:
    """Peak signal-to-noise ratio 10·log10(data_range² / MSE) in dB; ``inf`` for identical images.

    The one PSNR of FedPrint (:mod:`fedprint.attacks.recon_metrics` calls it with an explicit ``data_range``).

    Parameters
    ----------
    a, b : ndarray, shape (H, W)
        Gray images on the same scale (uint8, or float for unquantised intermediates).
    mask : ndarray of bool, shape (H, W), optional
        Restrict the MSE to these pixels (e.g. outside the FP-DFSN noise mask); must select at least one.
    data_range : float, default 255
        Peak value range of the images (255 for gray levels, 1 for [0, 1] images).
    """
    a, b = _check_pair(a, b)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != a.shape or mask.dtype != bool or not mask.any():
            raise ValueError(f"mask must be a bool array of shape {a.shape} selecting at least one pixel")
        a, b = a[mask], b[mask]
    if np.array_equal(a, b):
        return float("inf")  # skimage would divide by zero (and warn) here
    return float(peak_signal_noise_ratio(a, b, data_range=data_range))


def ssim(a: np.ndarray, b: np.ndarray, data_range: float = DATA_RANGE) -> float:
    """Structural similarity (Wang et al. 2004, skimage defaults: 7×7 uniform window); ``data_range`` as
    :func:`psnr` (default 255). The one SSIM of FedPrint."""
    a, b = _check_pair(a, b)
    if min(a.shape) < 7:
        raise ValueError(f"ssim needs images of at least 7×7 pixels, got {a.shape}")
    return float(structural_similarity(a, b, data_range=data_range))


#: Environment variable naming torchvision's ImageNet AlexNet checkpoint file (overrides the torch hub cache).
WEIGHTS_ENV = "FEDPRINT_ALEXNET_WEIGHTS"


def alexnet_checkpoint_path() -> Path:
    """Where the ImageNet AlexNet weights are read: ``$FEDPRINT_ALEXNET_WEIGHTS`` when set, else
    ``torch.hub.get_dir()/checkpoints/alexnet-owt-7be5be79.pth`` (torchvision's own cache location)."""
    given = os.environ.get(WEIGHTS_ENV, "").strip()
    if given:
        return Path(given).expanduser()
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / ALEXNET_CHECKPOINT


@functools.lru_cache(maxsize=2)
def _lpips_model(checkpoint: str, mtime_ns: int):
    """Build LPIPS(alex, v0.1) with every weight loaded explicitly (cached per checkpoint file version)."""
    del mtime_ns  # only part of the cache key, so a replaced file is re-read
    import lpips
    import torch

    try:  # read the file first: a bad one fails before any network is built
        trunk = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt / truncated file
        raise LPIPSUnavailable(Path(checkpoint), f"cannot read checkpoint ({exc})") from exc
    # pnet_rand=True makes lpips call tv.alexnet(pretrained=False): no download; its placeholder initial
    # values are all overwritten below (and checked).  pretrained=False stops lpips's own non-strict (silent)
    # linear-layer load.  fork_rng: building the placeholders must not advance torch's global generator,
    # or computing a metric mid-run would change the training that follows.
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore", UserWarning)
        model = lpips.LPIPS(pretrained=False, net="alex", version="0.1", pnet_rand=True, verbose=False)

    lin_path = Path(lpips.__file__).parent / "weights" / "v0.1" / "alex.pth"
    if not lin_path.is_file():
        raise LPIPSUnavailable(lin_path, "lpips linear-layer weights missing from the lpips package")
    lin = torch.load(lin_path, map_location="cpu", weights_only=True)

    # torchvision alexnet `features.<i>.*` -> lpips `net.slice<k>.<i>.*` (lpips.pretrained_networks slices)
    slice_of = {0: 1, 3: 2, 6: 3, 8: 4, 10: 5}
    state = {}
    for key, value in trunk.items():
        parts = key.split(".")
        if parts[0] == "features" and int(parts[1]) in slice_of:
            state[f"net.slice{slice_of[int(parts[1])]}.{parts[1]}.{parts[2]}"] = value
    state.update(lin)
    # named_parameters/_buffers list each tensor once: state_dict() would also list the `lins.<k>` aliases
    # of the `lin<k>` layers, which the v0.1 file (correctly) does not contain.
    expected = {k for k, _ in model.named_parameters()} | {
        k for k, _ in model.named_buffers() if not k.startswith("scaling_layer.")  # constant buffers
    }
    missing = expected - state.keys()
    unexpected = state.keys() - expected
    if missing or unexpected:
        raise LPIPSUnavailable(
            Path(checkpoint), f"weights do not match LPIPS-alex (missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)})"
        )
    try:
        model.load_state_dict(state, strict=False)  # non-strict only for scaling_layer buffers / lins aliases
    except RuntimeError as exc:  # shape mismatch
        raise LPIPSUnavailable(Path(checkpoint), f"weights do not fit LPIPS-alex ({exc})") from exc
    loaded = dict(model.named_parameters()) | dict(model.named_buffers())
    not_from_file = sorted(k for k in expected if not torch.equal(loaded[k], state[k].to(loaded[k].dtype)))
    if not_from_file:  # defensive: nothing may keep its random placeholder value
        raise LPIPSUnavailable(Path(checkpoint), f"parameters not loaded from the weight files: {not_from_file}")
    model.eval()
    return model


def lpips_distance(a: np.ndarray, b: np.ndarray) -> float:
    """LPIPS distance (AlexNet trunk, v0.1 linear layers) between two gray images on the 0–255 scale.

    Gray images are replicated to 3 channels and mapped to [-1, 1] as LPIPS expects. Lower = more similar.

    Raises
    ------
    LPIPSUnavailable
        If the ImageNet AlexNet weights are not at :func:`alexnet_checkpoint_path` (or do not fit).
    """
    a, b = _check_pair(a, b)
    if min(a.shape) < 32:
        raise ValueError(f"lpips_distance needs images of at least 32×32 pixels, got {a.shape}")
    path = alexnet_checkpoint_path()
    if not path.is_file():
        raise LPIPSUnavailable(path)
    import torch

    model = _lpips_model(str(path), os.stat(path).st_mtime_ns)

    def to_tensor(x: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy((x / 127.5 - 1.0).astype(np.float32))
        return t[None, None].expand(1, 3, *x.shape)

    with torch.no_grad():
        return float(model(to_tensor(a), to_tensor(b)).item())


def image_similarity(a: np.ndarray, b: np.ndarray) -> dict:
    """PSNR (dB), SSIM and LPIPS between ``a`` and ``b``.

    Returns ``{"psnr", "ssim", "lpips"}``; when the AlexNet weights are absent ``"lpips"`` is ``None`` and
    ``"lpips_note"`` says why (never a made-up value).
    """
    out: dict = {"psnr": psnr(a, b), "ssim": ssim(a, b)}
    try:
        out["lpips"] = lpips_distance(a, b)
    except LPIPSUnavailable as exc:
        out["lpips"] = None
        out["lpips_note"] = str(exc)
    return out
