"""Batched, seeded augmentation of network inputs that mimics how impressions of one finger differ.

Applied on the fly to each training batch (N, 1, S, S) of normalised inputs, every sample with its own draw:

* **placement**: rotation (uniform ±``rotation_deg``), translation (uniform ±``translation`` of S per axis) and
  a small scale change — a finger is never put down twice the same way;
* **plastic distortion**: a smooth random displacement field (a coarse grid of Gaussian offsets, bicubically
  upsampled; rms ``elastic`` of S), the skin stretching non-linearly under pressure (Cappelli et al. 2001);
* **contrast / dryness**: a random gain and offset, a random gamma-like bend of the ridge profile
  (dry prints: thin, faint ridges; wet prints: thick, dark ones) and additive sensor noise;
* **partial contact**: with probability ``erase_p`` a random rectangle is blanked (a smudge or lifted part).

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
    """

    rotation_deg: float = 20.0
    translation: float = 0.1
    scale: float = 0.05
    elastic: float = 0.015
    contrast: float = 0.3
    noise: float = 0.1
    erase_p: float = 0.25

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"AugmentSpec.{k}: expected a finite number >= 0, got {v!r}")
        if self.erase_p > 1:
            raise ValueError(f"AugmentSpec.erase_p: expected a probability in [0, 1], got {self.erase_p}")

    @classmethod
    def off(cls) -> AugmentSpec:
        """No augmentation at all."""
        return cls(**{k: 0.0 for k in asdict(cls())})

    @property
    def enabled(self) -> bool:
        return any(v > 0 for v in asdict(self).values())


def _uniform(n: int, half: float, g: torch.Generator) -> torch.Tensor:
    return (torch.rand(n, generator=g) * 2 - 1) * half


def augment(x: torch.Tensor, spec: AugmentSpec, generator: torch.Generator) -> torch.Tensor:
    """Augmented copy of a batch of normalised inputs.

    Parameters
    ----------
    x : Tensor, float32, shape (N, 1, S, S)
    spec : AugmentSpec
    generator : torch.Generator
        Source of every random draw (seeded by the caller).

    Returns
    -------
    Tensor, float32, shape (N, 1, S, S)
    """
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"augment: expected a (N, 1, S, S) batch, got shape {tuple(x.shape)}")
    if not spec.enabled:
        return x
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
            eh = (torch.rand(n, generator=g) * 0.5 * h).long() + 1
            ew = (torch.rand(n, generator=g) * 0.5 * w).long() + 1
            y0 = (torch.rand(n, generator=g) * (h - eh + 1).float()).long()
            x0 = (torch.rand(n, generator=g) * (w - ew + 1).float()).long()
            rows = torch.arange(h).view(1, h, 1)
            cols = torch.arange(w).view(1, 1, w)
            box = ((rows >= y0.view(n, 1, 1)) & (rows < (y0 + eh).view(n, 1, 1))
                   & (cols >= x0.view(n, 1, 1)) & (cols < (x0 + ew).view(n, 1, 1)) & hit.view(n, 1, 1))
            out = out.masked_fill(box.unsqueeze(1), 0.0)
    return out.contiguous()
