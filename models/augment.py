"""Batched, seeded augmentation of network inputs that mimics how impressions of one finger differ.

Applied on the fly to each training batch (N, 1, S, S) of normalised inputs, every sample with its own draw:

* **placement**: rotation (uniform ±``rotation_deg``), translation (uniform ±``translation`` of S per axis) and
  a small scale change — a finger is never put down twice the same way;
* **plastic distortion**: a smooth random displacement field (a coarse grid of Gaussian offsets, bicubically
  upsampled; rms ``elastic`` of S), the skin stretching non-linearly under pressure (Cappelli et al. 2001 [1]_);
* **contrast / dryness**: a random gain and offset, a random gamma-like bend of the ridge profile
  (dry prints: thin, faint ridges; wet prints: thick, dark ones) and additive sensor noise;
* **partial contact**: with probability ``erase_p`` a random rectangle is blanked (a smudge or lifted part);
* **capture window** (``window``, off by default): with that probability only a random rectangle of 50-90 % of each
  side is kept and the rest blanked — a sensor window smaller than the finger (FVC2000 DB1's 15 mm square, a
  phone's sensor), where the print's outline is the window's edge and two impressions share only part of the skin;
* **sensor texture** (``texture``, off by default): domain randomisation towards real sensors, whose prints next to
  synthetic ones show pores and broken ridges, ridge width that varies across the print, creases, blur or
  near-binary ink, and uneven contrast (:func:`sensor_texture`).

One ``torch.nn.functional.grid_sample`` call warps the whole batch (rotation, translation, scale and the
displacement field together); padding is 0, the mean of a standardised input. Everything is vectorised; the
random draws come from the ``torch.Generator`` passed in, so a seeded run is reproducible.

References
----------
.. [1] R. Cappelli, D. Maio, D. Maltoni, "Modelling plastic distortion in fingerprint images", ICAPR 2001.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class AugmentSpec:
    """Augmentation strengths (0 switches a part off).

    Attributes
    ----------
    rotation_deg : float
        Maximum absolute rotation in degrees (default 20).
    translation : float
        Maximum shift per axis as a fraction of the input side (default 0.1).
    scale : float
        Maximum relative scale change (default 0.05: factors in [0.95, 1.05]).
    elastic : float
        RMS of the smooth displacement field as a fraction of the input side (default 0.015).
    contrast : float
        Maximum relative gain change and offset (default 0.3).
    noise : float
        Standard deviation of additive noise, in units of the input's standard deviation (default 0.1).
    erase_p : float
        Probability of blanking one random rectangle of up to a quarter of the input (default 0.25).
    texture : float
        Strength of the sensor-texture randomisation in [0, 1] (default 0: off; :func:`sensor_texture`).
    window : float
        Probability in [0, 1] of keeping only a random capture window of 50-90 % of each side (default 0: off).
    """

    rotation_deg: float = 20.0
    translation: float = 0.1
    scale: float = 0.05
    elastic: float = 0.015
    contrast: float = 0.3
    noise: float = 0.1
    erase_p: float = 0.25
    texture: float = 0.0
    window: float = 0.0

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"AugmentSpec.{k}: expected a finite number >= 0, got {v!r}")
        for k in ("erase_p", "texture", "window"):
            if getattr(self, k) > 1:
                raise ValueError(f"AugmentSpec.{k}: expected a value in [0, 1], got {getattr(self, k)}")

    @classmethod
    def off(cls) -> AugmentSpec:
        """No augmentation at all."""
        return cls(**{k: 0.0 for k in asdict(cls())})

    @property
    def enabled(self) -> bool:
        return any(v > 0 for v in asdict(self).values())


def _uniform(n: int, half: float, g: torch.Generator) -> torch.Tensor:
    return (torch.rand(n, generator=g) * 2 - 1) * half


def augment(x: torch.Tensor, spec: AugmentSpec, generator: torch.Generator,
            carry: torch.Tensor | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Augmented copy of a batch of normalised inputs.

    Parameters
    ----------
    x : Tensor, float32, shape (N, 1, S, S)
    spec : AugmentSpec
    generator : torch.Generator
        Source of every random draw (seeded by the caller).
    carry : Tensor, shape (N, C, S, S), optional
        Maps that must stay aligned with the inputs (e.g. :func:`fedprint.models.minutiae_map.splat` targets): they get
        the
        same warp and the same erased rectangle, none of the intensity changes. The random draws are the same
        with or without it.

    Returns
    -------
    Tensor, float32, shape (N, 1, S, S)
        The augmented inputs; with ``carry``, the tuple ``(inputs, carried maps)``.
    """
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"augment: expected a (N, 1, S, S) batch, got shape {tuple(x.shape)}")
    if carry is not None and (carry.ndim != 4 or carry.shape[0] != x.shape[0] or carry.shape[2:] != x.shape[2:]):
        raise ValueError(f"augment: carry must be (N, C, S, S) like the batch {tuple(x.shape)}, got "
                         f"{tuple(carry.shape)}")
    if not spec.enabled:
        return x if carry is None else (x, carry)
    n, _, h, w = x.shape
    g = generator
    angle = _uniform(n, math.radians(spec.rotation_deg), g)
    scale = 1.0 + _uniform(n, spec.scale, g)
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 1], theta[:, 1, 0], theta[:, 1, 1] = cos, -sin, sin, cos
    theta[:, :, 2] = _uniform(2 * n, 2 * spec.translation, g).view(n, 2)  # grid units: the side spans 2
    grid = F.affine_grid(theta, [n, 1, h, w], align_corners=False)
    if spec.elastic > 0:
        coarse = torch.randn(n, 2, 4, 4, generator=g) * (2 * spec.elastic)
        field = F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=False)
        grid = grid + field.permute(0, 2, 3, 1)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    if carry is not None:
        carry = F.grid_sample(carry.float(), grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    if spec.contrast > 0:
        gain = 1.0 + _uniform(n, spec.contrast, g).view(n, 1, 1, 1)
        offset = _uniform(n, spec.contrast, g).view(n, 1, 1, 1)
        bend = _uniform(n, spec.contrast, g).view(n, 1, 1, 1)  # > 0 darkens ridges (wet), < 0 thins them (dry)
        out = gain * (out + bend * (out.abs() - 0.8)) + offset
    if spec.noise > 0:
        out = out + torch.randn(out.shape, generator=g) * spec.noise
    if spec.erase_p > 0:
        hit = torch.rand(n, generator=g) < spec.erase_p
        if bool(hit.any()):
            out, carry = _blank(out, carry, _boxes(n, h, w, 0.0, 0.5, g) & hit.view(n, 1, 1))
    if spec.window > 0:  # drawn after the erase, so runs without a window keep their draws
        hit = torch.rand(n, generator=g) < spec.window
        if bool(hit.any()):
            out, carry = _blank(out, carry, ~_boxes(n, h, w, 0.5, 0.9, g) & hit.view(n, 1, 1))
    if spec.texture > 0:
        out = sensor_texture(out, spec.texture, g)
    return out.contiguous() if carry is None else (out.contiguous(), carry.contiguous())


def _blank(out: torch.Tensor, carry: torch.Tensor | None, mask: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``out`` and ``carry`` set to 0 (the standardised mean) where the (n, h, w) ``mask`` is true."""
    m = mask.unsqueeze(1)
    return out.masked_fill(m, 0.0), None if carry is None else carry.masked_fill(m, 0.0)


def _boxes(n: int, h: int, w: int, lo: float, hi: float, g: torch.Generator) -> torch.Tensor:
    """(n, h, w) boolean masks of one random axis-aligned rectangle each, its sides about uniform fractions in
    [``lo``, ``hi``] of the input's (at least 1 px), placed uniformly inside the input."""
    eh = (torch.rand(n, generator=g) * (hi - lo) * h + lo * h).long().add(1).clamp(max=h)
    ew = (torch.rand(n, generator=g) * (hi - lo) * w + lo * w).long().add(1).clamp(max=w)
    y0 = (torch.rand(n, generator=g) * (h - eh + 1).float()).long()
    x0 = (torch.rand(n, generator=g) * (w - ew + 1).float()).long()
    rows = torch.arange(h).view(1, h, 1)
    cols = torch.arange(w).view(1, 1, w)
    return ((rows >= y0.view(n, 1, 1)) & (rows < (y0 + eh).view(n, 1, 1))
            & (cols >= x0.view(n, 1, 1)) & (cols < (x0 + ew).view(n, 1, 1)))


def _smooth_field(n: int, h: int, w: int, cells: int, g: torch.Generator) -> torch.Tensor:
    """(n, 1, h, w) smooth random field of unit-order amplitude: a cells x cells Gaussian grid, upsampled."""
    return F.interpolate(torch.randn(n, 1, cells, cells, generator=g), size=(h, w), mode="bicubic",
                         align_corners=False)


def _spots(n: int, h: int, w: int, density: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """(n, 1, h, w) mask in [0, 1] of small round spots (2-3 px across), ``density`` spots per pixel per sample."""
    seeds = (torch.rand(n, 1, h, w, generator=g) < density.view(n, 1, 1, 1)).float()
    return F.max_pool2d(seeds, 3, stride=1, padding=1) * 0.5 + seeds * 0.5


def _creases(n: int, h: int, w: int, strength: float, g: torch.Generator) -> torch.Tensor:
    """(n, 1, h, w) mask in [0, 1] of up to three thin straight creases (white lines) per sample."""
    j = 3
    yy = torch.linspace(-1, 1, h).view(1, 1, h, 1)
    xx = torch.linspace(-1, 1, w).view(1, 1, 1, w)
    phi = torch.rand(n, j, 1, 1, generator=g) * math.pi
    cy, cx = (torch.rand(2, n, j, 1, 1, generator=g) * 1.2 - 0.6)
    across = (xx - cx) * torch.sin(phi) - (yy - cy) * torch.cos(phi)
    along = (xx - cx) * torch.cos(phi) + (yy - cy) * torch.sin(phi)
    half_width = (0.5 + torch.rand(n, j, 1, 1, generator=g) * 1.0) * 2.0 / w  # 0.5-1.5 px
    half_length = 0.2 + torch.rand(n, j, 1, 1, generator=g) * 0.8
    present = (torch.rand(n, j, 1, 1, generator=g) < 0.35 * strength).float()
    line = torch.clamp(1.5 - across.abs() / half_width, 0, 1) * (along.abs() < half_length).float()
    return (line * present).amax(dim=1, keepdim=True)


def _blur(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Per-sample Gaussian blur of (N, 1, S, S) with standard deviations ``sigma`` (px; 0: unchanged)."""
    n = x.shape[0]
    r = torch.arange(-2, 3, dtype=x.dtype).view(1, 5)
    k1 = torch.exp(-0.5 * (r / sigma.clamp_min(1e-3).view(n, 1)) ** 2)
    k1 = k1 / k1.sum(dim=1, keepdim=True)
    k2 = (k1.view(n, 5, 1) * k1.view(n, 1, 5)).unsqueeze(1)
    return F.conv2d(x.transpose(0, 1), k2, padding=2, groups=n).transpose(0, 1)


def sensor_texture(x: torch.Tensor, strength: float, generator: torch.Generator) -> torch.Tensor:
    """Sensor and skin texture of real prints on a batch of normalised inputs (ridges dark, i.e. negative).

    Synthetic ridges are smooth, continuous and of even width; prints from real sensors are not. Every sample
    draws its own amount of each effect, scaled by ``strength``:

    1. **uneven pressure / moisture**: a smooth local offset (ridges locally thicker where it is negative, thinner
       where positive) and a smooth local contrast gain (faint and dark regions);
    2. **ink response**: ``tanh(k x) / tanh(k)`` with a random ``k`` in [0.3, 3]: from soft grey ridges to
       near-binary ones (inked cards, thresholded images);
    3. **pores and broken ridges**: small bright spots on ridge pixels; **dirt**: small dark spots in valleys;
    4. **creases**: up to three thin bright lines across the print;
    5. **optics**: a Gaussian blur of up to 1 px, then pixel noise;
    6. per-sample standardisation, so the input statistics match those of unaugmented inputs.

    Parameters
    ----------
    x : Tensor, float32, shape (N, 1, S, S)
        Normalised inputs (zero mean, unit variance, dark ridges negative).
    strength : float
        In [0, 1]; 0 returns ``x`` unchanged.
    generator : torch.Generator
        Source of every random draw.

    Returns
    -------
    Tensor, float32, shape (N, 1, S, S)

    References
    ----------
    .. [1] R. Cappelli, D. Maio, D. Maltoni, "SFinGe: an approach to synthetic fingerprint generation", 2004
       (the noise model of the impression: pores, scratches, dry / wet ridges).
    .. [2] J. Tobin et al., "Domain randomization for transferring deep neural networks from simulation to the
       real world", IROS 2017.
    """
    if strength <= 0:
        return x
    n, _, h, w = x.shape
    g = generator
    u = lambda: torch.rand(n, 1, 1, 1, generator=g)  # noqa: E731 - one per-sample amount
    t = float(strength)
    out = x + (0.6 * t * u()) * _smooth_field(n, h, w, 5, g)
    out = out * torch.exp((0.4 * t * u()) * _smooth_field(n, h, w, 4, g))
    k = 0.3 + 2.7 * u()
    out = torch.tanh(k * out) / torch.tanh(k)
    pores = _spots(n, h, w, (0.03 * t * u()).flatten(), g) * (out < 0)
    dirt = _spots(n, h, w, (0.01 * t * u()).flatten(), g) * (out > 0)
    out = out + 1.5 * pores - 1.5 * dirt
    out = torch.maximum(out, _creases(n, h, w, t, g) * 1.5)
    out = _blur(out, (1.0 * t * u()).flatten())
    out = out + torch.randn(out.shape, generator=g) * (0.25 * t * u())
    mean = out.mean(dim=(1, 2, 3), keepdim=True)
    std = out.std(dim=(1, 2, 3), keepdim=True).clamp_min(1e-3)
    return (out - mean) / std
