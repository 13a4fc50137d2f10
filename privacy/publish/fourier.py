"""Zhang et al. 2018 (Zhang, Fu, Meng 2018): DP image publication in the Fourier domain — FIP, EMK, BEMK.

* **FIP** keeps a k×k block of DFT coefficients, adds Laplace noise to their real and imaginary parts, zero-fills the
  rest of the spectrum and inverts (Zhang et al. 2018 §3.2, steps 1–8).
* **EMK** picks k with the exponential mechanism, score −U(W, k) = −(RE(k) + noise error) (Eqs. 12–13), then runs FIP.
* **BEMK** does the same on the real (half) spectrum, ``rfft2`` / ``irfft2`` (Eq. 7 and the BEMK listing).

``variant="paper"`` follows the paper literally: Eq. 5/6 normalisation (1/(mn) forward, unscaled inverse), the
literal top-left k×k corner of the unshifted spectrum, Δ1F^k = √k·Δ2W with Δ2W the largest column L2 norm *of the
image itself* (Thm 3), ΔU = (1 + √k)·Δ1W with Δ1W the largest column L1 norm of the image (Thm 4, k = the largest
candidate), and ε used in full by both the selection and the Laplace step (as in the EMK/BEMK listings). It is NOT
differentially private: the sensitivities are computed from the image itself (a neighbour has a different noise
scale, which is itself a leak), Thm 3's √k should be k for a k×k block (Hölder over k² coefficients), and the
listings spend ε twice.

``variant="sound"`` (proved below), neighbours = :data:`~fedprint.privacy.publish.primitives.PIXEL_NEIGHBOURS` (one
pixel;
the paper's Def. 1 uses one pixel *column* — under that relation the same release is (m·ε)-DP by group privacy):

* Orthonormal DFT (``norm="ortho"``), low-frequency block ``B_k = {(u, v): |u| < k, |v| < k}`` in centred frequency
  (k ≤ K = min(⌈m/2⌉, ⌈n/2⌉)), so B_k has N = (2k−1)² coefficients (BEMK: rows ``|u| < k``, columns ``0 ≤ v < k`` of the
  ``rfft2`` half spectrum, N = (2k−1)·k).
* Sensitivity. A one-pixel change δ (``|δ| ≤ 255``) at (x, y) changes every orthonormal coefficient by
  δ·e^{−iφ(u,v)}/√(mn), so the real and imaginary parts together move by
  ``|δ|(|cos φ| + |sin φ|)/√(mn) ≤ √2·255/√(mn)``.

  Summed over the released block: **Δ1 = √2 · N · 255 / √(mn)** (L1 over all 2N real numbers). The Laplace mechanism
  with Lap(Δ1/ε2) on each of them is ε2-DP; zero-fill, inverse DFT, real part, rounding and clipping are
  post-processing.
* EMK/BEMK score. RE(W, k) = ‖W − P_k W‖_F, where P_k is the orthogonal projection onto the (conjugate-symmetric)
  block B_k (Parseval). ``|RE(W, k) − RE(W', k)| ≤ ‖P_k^⊥(W − W')‖_F ≤ ‖W − W'‖_F ≤ 255``. The noise error
  LE(k) = √E‖noise in the image‖² depends only on (shape, k, ε2): FIP LE = b·√(2N), BEMK LE = b·√(2(2k−1)(4k−3))
  with b = Δ1(k)/ε2. So u(W, k) = −(RE + LE) has sensitivity 255 and the exponential mechanism with ε1 is ε1-DP.
* Composition: sequential, ε = ε1 (choice of k) + ε2 (Laplace), ε1 = ``select_fraction``·ε (default 0.1); both are
  reported. FIP with a caller-chosen k spends all of ε on the Laplace step.
"""

from __future__ import annotations

import numpy as np

from fedprint.privacy.publish.base import Guarantee, Publication, check_epsilon, check_image, check_variant, clip_uint8
from fedprint.privacy.publish.primitives import PIXEL_NEIGHBOURS, PIXEL_RANGE, exponential_mechanism, laplace

_PAPER_CAVEAT = (
    "Zhang et al. 2018 compute the sensitivities from the image itself (Δ2W = largest column L2 norm, Δ1W = largest "
    "column "
    "L1 norm), so the noise scale depends on the private data; Thm 3's √k should be k for a k×k block; the EMK/BEMK "
    "listings use the full ε in both the selection and the Laplace step")


# ----------------------------------------------------------------------------------------------------------- sound
def max_k(shape: tuple[int, int]) -> int:
    """Largest k with a non-overlapping centred block ``|u|, |v| < k``: K = min(⌈m/2⌉, ⌈n/2⌉)."""
    return min((shape[0] + 1) // 2, (shape[1] + 1) // 2)


def _freq_abs(n: int) -> np.ndarray:
    """|frequency| of each unshifted DFT index 0..n−1: min(i, n − i)."""
    i = np.arange(n)
    return np.minimum(i, n - i)


def block_size(k: int, half: bool) -> int:
    """Number N of complex coefficients in the sound block: (2k−1)² (full) or (2k−1)·k (real half spectrum)."""
    return (2 * k - 1) * (k if half else 2 * k - 1)


def sound_sensitivity(shape: tuple[int, int], k: int, half: bool) -> float:
    """L1 sensitivity of the real and imaginary parts of the orthonormal block: √2·N·255/√(mn)."""
    return float(np.sqrt(2.0) * block_size(k, half) * PIXEL_RANGE / np.sqrt(shape[0] * shape[1]))


def sound_noise_error(shape: tuple[int, int], k: int | np.ndarray, epsilon2: float, half: bool) -> np.ndarray:
    """LE(k) = √E‖image-domain noise‖²_F of the sound release (data-independent; see module docstring)."""
    k = np.asarray(k, np.float64)
    n_block = (2 * k - 1) * (k if half else 2 * k - 1)
    b = np.sqrt(2.0) * n_block * PIXEL_RANGE / np.sqrt(shape[0] * shape[1]) / epsilon2
    energy = 2 * (2 * k - 1) * (4 * k - 3) if half else 2 * n_block
    return b * np.sqrt(energy)


def reconstruction_errors(image: np.ndarray) -> np.ndarray:
    """RE(k) = ‖W − P_k W‖_F for k = 1..K (centred block ``|u|, |v| < k``; orthonormal DFT, Parseval)."""
    m, n = image.shape
    energy = np.abs(np.fft.fft2(image.astype(np.float64), norm="ortho")) ** 2
    ring = np.maximum(_freq_abs(m)[:, None], _freq_abs(n)[None, :])  # block B_k = {ring < k}
    per_ring = np.bincount(ring.ravel(), weights=energy.ravel())
    inside = np.cumsum(per_ring)[: max_k(image.shape)]
    return np.sqrt(np.maximum(energy.sum() - inside, 0.0))


def _sound_release(image: np.ndarray, k: int, epsilon2: float, half: bool,
                   rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Float release of the sound FIP (half=False) / BEMK (half=True) block, and the Laplace scale used."""
    m, n = image.shape
    scale = sound_sensitivity(image.shape, k, half) / epsilon2
    x = image.astype(np.float64)
    rows = _freq_abs(m) < k
    if half:
        spec = np.fft.rfft2(x, norm="ortho")
        mask = rows[:, None] & (np.arange(spec.shape[1]) < k)[None, :]
    else:
        spec = np.fft.fft2(x, norm="ortho")
        mask = rows[:, None] & (_freq_abs(n) < k)[None, :]
    n_block = int(mask.sum())
    noisy = np.zeros_like(spec)
    noisy[mask] = spec[mask] + laplace(rng, scale, n_block) + 1j * laplace(rng, scale, n_block)
    out = np.fft.irfft2(noisy, s=(m, n), norm="ortho") if half else np.fft.ifft2(noisy, norm="ortho").real
    return out, scale


def _check_k(k: int, upper: int, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= upper:
        raise ValueError(f"{name}: expected an integer in [1, {upper}] for this image, got {k!r}")
    return int(k)


def _sound_guarantee(epsilon: float, composition: str, released: str) -> Guarantee:
    return Guarantee(
        dp=True, epsilon=epsilon, delta=0.0, neighbouring=PIXEL_NEIGHBOURS,
        protected="every pixel value (the whole image is released only through the noisy low-frequency block)",
        released_exactly=released, composition=composition,
        caveats="under Zhang et al. 2018's own relation (images differing in one pixel column of m pixels) the same "
                "release is (m·ε)-DP by group privacy; the bound √2·N·255/√(mn) is a worst case over pixel "
                "positions and is loose by up to √2")


def _default_k(shape: tuple[int, int]) -> int:
    return int(np.clip(min(shape) // 32, 1, max_k(shape)))


def _select_k_sound(image: np.ndarray, epsilon1: float, epsilon2: float, half: bool,
                    rng: np.random.Generator) -> tuple[int, np.ndarray]:
    ks = np.arange(1, max_k(image.shape) + 1)
    scores = -(reconstruction_errors(image) + sound_noise_error(image.shape, ks, epsilon2, half))
    return int(ks[exponential_mechanism(rng, scores, epsilon1, PIXEL_RANGE)]), scores


# ----------------------------------------------------------------------------------------------------------- paper
def paper_delta2(image: np.ndarray) -> float:
    """Zhang et al. 2018's Δ2W: the largest column L2 norm of the image itself (Thm 3 proof) — data-dependent."""
    return float(np.sqrt((image.astype(np.float64) ** 2).sum(axis=0)).max())


def paper_delta1(image: np.ndarray) -> float:
    """Zhang et al. 2018's Δ1W: the largest column L1 norm of the image itself (§3.1) — data-dependent."""
    return float(image.astype(np.float64).sum(axis=0).max())


def _paper_spectrum(image: np.ndarray, half: bool) -> np.ndarray:
    x = image.astype(np.float64)
    return np.fft.rfft2(x, norm="forward") if half else np.fft.fft2(x, norm="forward")  # Eq. 5: 1/(mn)


def paper_max_k(shape: tuple[int, int], half: bool) -> int:
    """Candidate range of the paper: 1..min(m, n) (EMK) or 1..min(m, n/2 + 1) (BEMK, q = n/2 + 1)."""
    return min(shape[0], shape[1] // 2 + 1) if half else min(shape)


def paper_scores(image: np.ndarray, epsilon: float, half: bool) -> np.ndarray:
    """−U(W, k) for k = 1..K (Zhang et al. 2018, Eq. 12 / BEMK step 5), RE over the literal top-left k×k corner."""
    energy = np.abs(_paper_spectrum(image, half)) ** 2 * (2.0 if half else 1.0)
    kmax = paper_max_k(image.shape, half)
    ks = np.arange(1, kmax + 1)
    corner = np.cumsum(np.cumsum(energy, axis=0), axis=1)[ks - 1, ks - 1]
    re = np.sqrt(np.maximum(energy.sum() - corner, 0.0))
    return -(re + 2 * ks * np.sqrt(ks) * paper_delta2(image) / epsilon)


def _paper_release(image: np.ndarray, k: int, epsilon: float, half: bool,
                   rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """FIP steps 1–8 as printed: top-left k×k, Lap(Δ1F^k/ε) on real and imaginary parts, Δ1F^k = √k·Δ2W."""
    m, n = image.shape
    scale = np.sqrt(k) * paper_delta2(image) / epsilon
    spec = _paper_spectrum(image, half)
    noisy = np.zeros_like(spec)
    noisy[:k, :k] = spec[:k, :k] + laplace(rng, scale, (k, k)) + 1j * laplace(rng, scale, (k, k))
    out = np.fft.irfft2(noisy, s=(m, n), norm="forward") if half else np.fft.ifft2(noisy, norm="forward").real
    return out, float(scale)


def _paper_guarantee(epsilon: float, what: str) -> Guarantee:
    return Guarantee(
        dp=False, epsilon=epsilon, delta=0.0,
        neighbouring="Zhang et al. 2018 Def. 1: images differing in one pixel column",
        protected=f"nothing provably ({what} as printed in Zhang et al. 2018)",
        released_exactly="the noise scale, which is a function of the raw image",
        composition="the listing uses the full ε for the selection of k and again for the Laplace step"
        if what != "FIP" else "single Laplace step with ε",
        caveats=_PAPER_CAVEAT)


# ----------------------------------------------------------------------------------------------------------- API
def publish_fip(image: np.ndarray, minutiae: np.ndarray | None, epsilon: float, rng: np.random.Generator,
                variant: str = "sound", *, k: int | None = None) -> Publication:
    """FIP: Laplace-noised k×k low-frequency DFT block, zero-filled and inverted (Zhang et al. 2018 §3.2).

    Parameters
    ----------
    image : ndarray uint8 (H, W)
    minutiae : ignored (may be None)
    epsilon : float
        Total budget (> 0), all spent on the Laplace step.
    rng : numpy.random.Generator
    variant : {"sound", "paper"}
    k : int, optional
        Block size. Sound: the centred block ``|u|, |v| < k``, 1 <= k <= min(⌈H/2⌉, ⌈W/2⌉); paper: the literal top-left
        k×k corner, 1 <= k <= min(H, W). Default: min(H, W) // 32 clipped to the sound range (depends on the
        public shape only).
    """
    check_image(image)
    epsilon = check_epsilon(epsilon)
    check_variant(variant)
    if k is None:
        k = _default_k(image.shape)
    if variant == "paper":
        k = _check_k(k, paper_max_k(image.shape, half=False))
        out, scale = _paper_release(image, k, epsilon, False, rng)
        return Publication("fip", variant, clip_uint8(out), None, epsilon, 0.0, _paper_guarantee(epsilon, "FIP"),
                           {"k": k, "noise_scale": scale, "delta2_image": paper_delta2(image)})
    k = _check_k(k, max_k(image.shape))
    out, scale = _sound_release(image, k, epsilon, False, rng)
    g = _sound_guarantee(epsilon, f"one Laplace mechanism, ε = {epsilon:g}, on the 2·(2k−1)² real numbers of the "
                                  f"block (k = {k} fixed by the caller)", "the image shape and k")
    return Publication("fip", variant, clip_uint8(out), None, epsilon, 0.0, g,
                       {"k": k, "noise_scale": scale, "l1_sensitivity": sound_sensitivity(image.shape, k, False)})


def _publish_em(name: str, half: bool, image: np.ndarray, epsilon: float, rng: np.random.Generator,
                variant: str, select_fraction: float) -> Publication:
    check_image(image)
    epsilon = check_epsilon(epsilon)
    check_variant(variant)
    if variant == "paper":
        kmax = paper_max_k(image.shape, half)
        du = (1 + np.sqrt(kmax)) * paper_delta1(image)  # Thm 4 with the largest candidate k
        if du <= 0:
            raise ValueError("image: Zhang et al. 2018's ΔU = (1 + √k)·Δ1W is 0 for an all-black image; the paper's "
                             "exponential mechanism is undefined")
        scores = paper_scores(image, epsilon, half)
        k = exponential_mechanism(rng, scores, epsilon, du) + 1
        out, scale = _paper_release(image, k, epsilon, half, rng)
        return Publication(name, variant, clip_uint8(out), None, epsilon, 0.0,
                           _paper_guarantee(epsilon, name.upper()),
                           {"k": k, "noise_scale": scale, "score_sensitivity": float(du), "k_max": kmax})
    if not 0 < select_fraction < 1:
        raise ValueError(f"select_fraction: expected a number in (0, 1), got {select_fraction}")
    eps1 = select_fraction * epsilon
    eps2 = epsilon - eps1
    k, _ = _select_k_sound(image, eps1, eps2, half, rng)
    out, scale = _sound_release(image, k, eps2, half, rng)
    g = _sound_guarantee(
        epsilon, f"sequential: ε1 = {eps1:g} for k (exponential mechanism, score −(RE + LE), sensitivity 255) + "
                 f"ε2 = {eps2:g} for the Laplace block", "the image shape; k (chosen privately with ε1)")
    return Publication(name, variant, clip_uint8(out), None, epsilon, 0.0, g,
                       {"k": k, "k_max": max_k(image.shape), "epsilon_select": eps1, "epsilon_laplace": eps2,
                        "noise_scale": scale, "l1_sensitivity": sound_sensitivity(image.shape, k, half)})


def publish_emk(image: np.ndarray, minutiae: np.ndarray | None, epsilon: float, rng: np.random.Generator,
                variant: str = "sound", *, select_fraction: float = 0.1) -> Publication:
    """EMK: k chosen by the exponential mechanism on −U(W, k) = −(RE(k) + LE(k)), then FIP (Zhang et al. 2018,
    Eqs. 12–16).

    ``select_fraction`` (sound only): ε1 = select_fraction·ε for the choice of k, ε2 = ε − ε1 for the Laplace step.
    The paper variant uses the full ε for both, as its listing does.
    """
    return _publish_em("emk", False, image, epsilon, rng, variant, select_fraction)


def publish_bemk(image: np.ndarray, minutiae: np.ndarray | None, epsilon: float, rng: np.random.Generator,
                 variant: str = "sound", *, select_fraction: float = 0.1) -> Publication:
    """BEMK: EMK on the real half spectrum (``rfft2``/``irfft2``), Zhang et al. 2018 Eq. 7 and the BEMK listing.

    Same budget split as :func:`publish_emk`; the block has (2k−1)·k coefficients instead of (2k−1)², so the
    sensitivity and the noise are about half of EMK's for the same k.
    """
    return _publish_em("bemk", True, image, epsilon, rng, variant, select_fraction)
