"""FP-DFSN: fingerprint perturbation by noise at the minutiae and an image difference (Yan et al. 2025, Eqs. 8–10).

Pipeline for a gray uint8 image I (client side, before training):

1. **Sharpen** (Eq. 8): Gaussian high-pass H = 1 − exp(−D²/(2·D0²)) on the centred spectrum (:func:`sharpen`).
2. **Minutiae** (Eq. 9) on the sharpened image, dropping those closer than T_d to the foreground border
   (:func:`fedprint.data.minutiae_border.extract_within_border`), by the backend ``FPDFSNParams.backend``
   (``[minutiae] backend``; :mod:`fedprint.data.minutiae_backends`): MINDTCT (nbis-py) by default where installed,
   the paper's crossing number otherwise. The noise lands where the chosen extractor finds minutiae.
3. **Noise and difference** (Eq. 10): I_noisy = I + N(0, σ²) on a disk of radius r around every minutia
   (elsewhere I), I_diff = I − β·I_noisy (:func:`apply_difference`). As in the paper, I is the *original*
   image; the sharpened image only serves minutiae extraction. So β = 0 returns I unchanged.

What this is and is not
-----------------------
FP-DFSN is a perturbation, **NOT differential privacy**: there is no privacy parameter ε and no bound on what
an observer learns. Expanding Eq. 10,

    I_diff = (1 − β)·I − β·noise·mask,

so anyone who knows β (a published hyper-parameter) recovers I = I_diff / (1 − β) **exactly outside the
minutia neighbourhoods**, and inside them up to the additive noise −β/(1 − β)·noise (:func:`invert_fpdfsn`;
measured in ``tests/test_fpdfsn.py``). The uint8 output adds only rounding error (≤ 0.5/(1 − β) gray levels).
The ridge pattern outside the disks — most of the fingerprint — is released intact up to a gain of (1 − β).

Output mapping to uint8: the literal I_diff of Eq. 10 is rounded and clipped to [0, 255] (no rescaling).
It lies in [−β·max(noise), (1 − β)·255], so the image is darkened by the factor (1 − β) and the negative
noise excursions at dark ridge pixels clip to 0. We keep the literal values rather than a data-dependent
min–max stretch so the map stays the paper's and its invertibility is plain to see.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from scipy import ndimage

from fedprint.data.minutiae_backends import resolve_backend


@dataclass(frozen=True)
class FPDFSNParams:
    """FP-DFSN hyper-parameters (the paper gives only β = 0.5; the others are "tuned" there, chosen here).

    Attributes
    ----------
    d0 : float
        Cut-off D0 of the Gaussian high-pass (Eq. 8), in pixels of the centred spectrum (DFT index units,
        i.e. cycles per image side). Default 10: at 500 dpi ridges repeat every ~9 px, i.e. ~33 cycles
        across a 300-px image, where H = 0.996; slow illumination/pressure variation (≤ 5 cycles,
        H ≤ 0.12) is removed.
    border : int
        T_d, minimum distance in pixels of a kept minutia from the foreground border (passed to the
        extractor's ``border``). Default 10 px (about one ridge period; the extractor's own default).
    radius : float
        Radius in pixels of the Euclidean disk around each minutia that receives noise (the paper's
        "neighbourhood size"; a disk of radius r covers a (2r + 1)-px wide patch). 0 = the minutia pixel only.
        Default 8 px: a disk about one ridge period across on each side, covering the ridge ending /
        bifurcation itself.
    sigma2 : float
        Noise variance σ² in gray levels² on the **0–255 scale** (σ² = var01 · 255² for a variance ``var01``
        on [0, 1]). Default 650.25 = 0.01 · 255², i.e. σ = 25.5 gray levels, the variance of
        ``skimage.util.random_noise``'s default Gaussian mode.
    beta : float
        β of Eq. 10, in [0, 1]. Default 0.5 (the paper's value).
    backend : str
        The minutiae extractor of step 2 (:mod:`fedprint.data.minutiae_backends`): ``"auto"`` (default) is
        resolved on construction to what it means here (``"nbis"`` where nbis-py is installed, else
        ``"crossing"``, the paper's crossing number), so the parameters, and a cache key built from them, name
        the extractor actually used. MINDTCT and LEADER get the T_d filter applied to their output
        (:func:`fedprint.data.minutiae_border.keep_within_border`); images are taken as 500 dpi.
    """

    d0: float = 10.0
    border: int = 10
    radius: float = 8.0
    sigma2: float = 650.25
    beta: float = 0.5
    backend: str = "auto"

    def __post_init__(self) -> None:
        # frozen: "auto" is replaced by its meaning here, so equal params mean the same extractor
        object.__setattr__(self, "backend", resolve_backend(self.backend, "backend"))
        for name in ("d0", "radius", "sigma2", "beta"):
            value = getattr(self, name)
            # numbers.Real also admits numpy scalars (e.g. a β read from a numpy array of per-client values)
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if isinstance(self.border, bool | np.bool_) or not isinstance(self.border, numbers.Integral):
            raise ValueError(f"border must be an integer number of pixels, got {self.border!r}")
        if self.d0 <= 0:
            raise ValueError(f"d0 must be > 0 (cut-off in px of the centred spectrum), got {self.d0}")
        if self.border < 0:
            raise ValueError(f"border must be >= 0 px, got {self.border}")
        if self.radius < 0:
            raise ValueError(f"radius must be >= 0 px, got {self.radius}")
        if self.sigma2 < 0:
            raise ValueError(f"sigma2 must be >= 0 (gray levels² on the 0–255 scale), got {self.sigma2}")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {self.beta}")

    def to_dict(self) -> dict:
        """Plain-JSON form (used as part of the cache key)."""
        d = asdict(self)
        return {k: (int(v) if k == "border" else v if k == "backend" else float(v)) for k, v in d.items()}


@dataclass(frozen=True)
class FPDFSNResult:
    """Output of :func:`fpdfsn`.

    Attributes
    ----------
    image : ndarray, uint8, shape (H, W)
        I_diff of Eq. 10, rounded and clipped to [0, 255] (see the module docstring).
    minutiae : ndarray, float64, shape (n, 4)
        Minutiae found on the sharpened image: columns x (column), y (row), direction (rad), type.
    n_minutiae : int
        n; 0 means the noise step was a no-op and ``image`` is round((1 − β)·I).
    noise_mask : ndarray, bool, shape (H, W)
        Pixels that received noise (union of the disks of radius ``params.radius``).
    backend : str or None
        The minutiae backend that found ``minutiae`` (``params.backend``); None for a caller's own extractor.
    """

    image: np.ndarray
    minutiae: np.ndarray
    n_minutiae: int
    noise_mask: np.ndarray
    backend: str | None = None


def _check_image(image: np.ndarray, name: str = "image") -> np.ndarray:
    if not isinstance(image, np.ndarray):
        raise ValueError(f"{name}: expected a numpy array, got {type(image).__name__}")
    if image.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D gray image, got shape {image.shape}")
    if image.size == 0:
        raise ValueError(f"{name}: image is empty (shape {image.shape})")
    if image.dtype != np.uint8:
        raise ValueError(f"{name}: expected dtype uint8, got {image.dtype}")
    return image


def gaussian_highpass(shape: tuple[int, int], d0: float) -> np.ndarray:
    """H(u, v) = 1 − exp(−D²/(2·D0²)) on the *unshifted* DFT grid (D = distance to the zero frequency, px)."""
    if d0 <= 0:
        raise ValueError(f"d0 must be > 0, got {d0}")
    h, w = shape
    # Signed frequency indices: the distance D from the centre that (−1)^{x+y} centring would give.
    u = np.fft.fftfreq(h) * h
    v = np.fft.fftfreq(w) * w
    d2 = u[:, None] ** 2 + v[None, :] ** 2
    return 1.0 - np.exp(-d2 / (2.0 * d0**2))


def sharpen(image: np.ndarray, d0: float, *, keep_mean: bool = True) -> np.ndarray:
    """Gaussian high-pass sharpening of Eq. 8; returns float64 gray levels.

    Eq. 8 multiplies by (−1)^{x+y} (centring the spectrum), FFTs, multiplies by H = 1 − exp(−D²/(2·D0²)) with
    D the distance to the centre, inverse-FFTs and multiplies by (−1)^{x+y} again. That is identical to
    filtering the unshifted spectrum with H evaluated at the signed frequencies, which we do because it is
    also exact for odd image sizes (where the (−1)^{x+y} modulation is a half-bin shift, not a centring).
    The FFT is circular (no padding).

    A pure high-pass has H(0) = 0, so the result has zero mean and negative values. With ``keep_mean=True``
    (default) the DC coefficient is passed unchanged (H(0) := 1), i.e. the high-frequency-emphasis form
    "image mean + high-pass detail": the output stays in (roughly) the input's gray range, slow illumination
    changes are removed and ridges keep their contrast. ``keep_mean=False`` returns Eq. 8 literally.

    Parameters
    ----------
    image : ndarray, uint8, shape (H, W)
    d0 : float
        Cut-off in pixels of the centred spectrum (> 0).
    keep_mean : bool
        Restore the image mean (DC term); see above.
    """
    _check_image(image)
    hp = gaussian_highpass(image.shape, d0)
    if keep_mean:
        hp[0, 0] = 1.0
    return np.fft.ifft2(np.fft.fft2(image.astype(np.float64)) * hp).real


def neighbourhood_mask(shape: tuple[int, int], minutiae: np.ndarray, radius: float) -> np.ndarray:
    """Boolean mask of pixels within Euclidean distance ``radius`` (px) of a minutia (rounded x, y)."""
    mask = np.zeros(shape, dtype=bool)
    pts = np.asarray(minutiae, dtype=np.float64).reshape(-1, 4) if np.size(minutiae) else np.zeros((0, 4))
    if len(pts) == 0:
        return mask
    cols = np.clip(np.rint(pts[:, 0]).astype(int), 0, shape[1] - 1)
    rows = np.clip(np.rint(pts[:, 1]).astype(int), 0, shape[0] - 1)
    seeds = np.ones(shape, dtype=bool)
    seeds[rows, cols] = False
    # Distance of every pixel to its nearest minutia: one exact EDT instead of a loop over minutiae.
    return ndimage.distance_transform_edt(seeds) <= radius


def apply_difference(
    image: np.ndarray, noise_mask: np.ndarray, beta: float, sigma2: float, rng: np.random.Generator
) -> np.ndarray:
    """Eq. 10 in float64: I_noisy = I + N(0, σ²)·mask, returns I_diff = I − β·I_noisy (not clipped).

    ``sigma2`` is in gray levels² on the 0–255 scale. Noise is drawn only for the mask pixels, in row-major
    order, so the output depends on the generator state and the mask only.
    """
    _check_image(image)
    if noise_mask.shape != image.shape or noise_mask.dtype != bool:
        raise ValueError(
            f"noise_mask must be bool of shape {image.shape}, got {noise_mask.dtype} {noise_mask.shape}"
        )
    i = image.astype(np.float64)
    noisy = i.copy()
    noisy[noise_mask] += rng.normal(0.0, math.sqrt(sigma2), size=int(noise_mask.sum()))
    return i - beta * noisy


def to_uint8(i_diff: np.ndarray) -> np.ndarray:
    """Map I_diff to uint8 the way :func:`fpdfsn` does: round to nearest, clip to [0, 255]."""
    return np.clip(np.rint(i_diff), 0, 255).astype(np.uint8)


def minutiae_extractor(backend: str = "auto") -> Callable[..., np.ndarray]:
    """Step 2 by ``backend``: ``extractor(uint8 image, border=T_d) -> (n, 4)`` table x, y, direction, type.

    ``"crossing"`` is :func:`fedprint.data.minutiae.extract_minutiae` with ``border`` itself (the paper's Eq. 9);
    the other backends' output is filtered by the same T_d (:mod:`fedprint.data.minutiae_border`).
    """
    from fedprint.data.minutiae_border import extract_within_border

    name = resolve_backend(backend, "backend")

    def extractor(image: np.ndarray, *, border: int = 10) -> np.ndarray:
        return extract_within_border(image, name, border=border)[:, :4]

    extractor.backend = name
    return extractor


def fpdfsn(
    image: np.ndarray,
    params: FPDFSNParams | None = None,
    rng: np.random.Generator | int = 0,
    *,
    extractor: Callable[..., np.ndarray] | None = None,
) -> FPDFSNResult:
    """Apply FP-DFSN (Yan et al. 2025 [1]_, Eqs. 8–10) to one gray fingerprint image.

    FP-DFSN is a perturbation, NOT differential privacy: I_diff = (1 − β)·I − β·noise·mask, so knowing β
    recovers I exactly outside the minutia neighbourhoods (and inside up to the noise); see the module
    docstring and :func:`invert_fpdfsn`.

    Parameters
    ----------
    image : ndarray, uint8, shape (H, W)
        Gray fingerprint (0 = black ridge, 255 = white background).
    params : FPDFSNParams, optional
        Hyper-parameters; defaults documented on :class:`FPDFSNParams`.
    rng : numpy.random.Generator or int
        Source of the Gaussian noise (an int seeds a new generator).
    extractor : callable, optional
        ``extractor(uint8 image, border=T_d) -> (n, 4)`` minutiae table; default
        :func:`minutiae_extractor` of ``params.backend``.

    Returns
    -------
    FPDFSNResult
        The perturbed image I_diff (uint8, same shape), the minutiae found and the noise mask. An image with no
        minutiae is still processed (``n_minutiae == 0``, empty noise mask).

    Raises
    ------
    ValueError
        If ``image`` is not a non-empty 2-D uint8 array, or ``extractor`` returns something other than an
        (n, 4) table.

    See Also
    --------
    invert_fpdfsn : undoes it, knowing only β.
    fedprint.privacy.publish.registry : the differentially private publication mechanisms.

    References
    ----------
    .. [1] Y. Yan, X. Xie, H. Ren, Y. Cao, H. Chang, "Privacy-Preserving Fingerprint Recognition via Federated
       Adaptive Domain Generalization", Computers, Materials & Continua, 2025, Eqs. 8–10.

    Examples
    --------
    Perturb a synthetic print; the same ``rng`` seed gives the same output:

    >>> import numpy as np
    >>> from fedprint.data.synth.generate import finger_records
    >>> from fedprint.data.synth.profiles import get_profile
    >>> image = finger_records(get_profile("casia"), finger=0, impressions=1, seed=0)[0].image
    >>> result = fpdfsn(image, FPDFSNParams(beta=0.5), rng=0)
    >>> result.image.shape == image.shape, result.image.dtype, result.n_minutiae > 0
    (True, dtype('uint8'), True)
    >>> np.array_equal(fpdfsn(image, FPDFSNParams(beta=0.5), rng=0).image, result.image)
    True

    It protects nothing outside the minutia neighbourhoods: knowing β recovers the print there, up to the uint8
    rounding (at most 0.5 / (1 − β) = 1 gray level):

    >>> back = invert_fpdfsn(result.image, beta=0.5)
    >>> outside = ~result.noise_mask
    >>> float(np.abs(back[outside] - image[outside]).max()) <= 1.0
    True
    """
    _check_image(image)
    params = FPDFSNParams() if params is None else params
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    backend = params.backend if extractor is None else None
    extractor = minutiae_extractor(params.backend) if extractor is None else extractor

    sharpened = to_uint8(sharpen(image, params.d0))
    minutiae = np.asarray(extractor(sharpened, border=params.border), dtype=np.float64)
    if minutiae.size == 0:
        minutiae = minutiae.reshape(0, 4)
    if minutiae.ndim != 2 or minutiae.shape[1] != 4:
        raise ValueError(f"extractor must return an (n, 4) minutiae table (x, y, direction, type), "
                         f"got shape {minutiae.shape}")
    mask = neighbourhood_mask(image.shape, minutiae, params.radius)
    i_diff = apply_difference(image, mask, params.beta, params.sigma2, rng)
    return FPDFSNResult(image=to_uint8(i_diff), minutiae=minutiae, n_minutiae=len(minutiae), noise_mask=mask,
                        backend=backend)


def invert_fpdfsn(i_diff: np.ndarray, beta: float) -> np.ndarray:
    """Undo Eq. 10 knowing only β: Î = I_diff / (1 − β), float64 gray levels (not clipped).

    Demonstrates that FP-DFSN is not a privacy mechanism: outside the noise mask Î = I exactly for the float
    I_diff (up to the ≤ 0.5/(1 − β) rounding of the uint8 output); inside, Î = I − β/(1 − β)·noise, plus
    clipping where I_diff < 0 was clipped to 0. β = 1 destroys the image (I_diff = −noise·mask) and raises.
    """
    i_diff = np.asarray(i_diff)
    if i_diff.ndim != 2 or i_diff.size == 0:
        raise ValueError(f"i_diff: expected a non-empty 2-D image, got shape {i_diff.shape}")
    if not 0.0 <= beta < 1.0:
        raise ValueError(f"beta must be in [0, 1) to invert (β = 1 leaves only the noise), got {beta}")
    return i_diff.astype(np.float64) / (1.0 - beta)
