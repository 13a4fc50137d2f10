"""Fingertip silhouette of a master fingerprint (SFinGe step 1).

SFinGe draws the fingertip as four elliptical arcs joined by a rectangle; here each quadrant is a superellipse
``|dx / a|^n + |dy / b|^n <= 1`` around a common centre, with its own half-width ``a`` (left / right), half-height
``b`` (top / bottom) and exponent ``n`` (round top, squarer bottom), all randomised within the canvas.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Silhouette:
    """Parameters of a fingertip silhouette, in pixels.

    Attributes
    ----------
    cx, cy : float
        Centre (x, y).
    left, right, top, bottom : float
        Half-extents from the centre towards each side.
    n_top, n_bottom : float
        Superellipse exponents of the upper and lower halves (2 = ellipse, larger = squarer).
    """

    cx: float
    cy: float
    left: float
    right: float
    top: float
    bottom: float
    n_top: float
    n_bottom: float

    @property
    def box(self) -> tuple[float, float, float, float]:
        """Bounding box ``(x0, y0, w, h)``."""
        return (self.cx - self.left, self.cy - self.top, self.left + self.right, self.top + self.bottom)

    def mask(self, shape: tuple[int, int]) -> np.ndarray:
        """Boolean foreground mask of shape ``(H, W)``."""
        h, w = shape
        y = np.arange(h, dtype=np.float32)[:, None] - np.float32(self.cy)
        x = np.arange(w, dtype=np.float32)[None, :] - np.float32(self.cx)
        ax = np.where(x < 0, np.float32(self.left), np.float32(self.right))
        by = np.where(y < 0, np.float32(self.top), np.float32(self.bottom))
        n = np.where(y < 0, np.float32(self.n_top), np.float32(self.n_bottom))
        return (np.abs(x / ax) ** n + np.abs(y / by) ** n) <= 1.0


def random_silhouette(shape: tuple[int, int], rng: np.random.Generator) -> Silhouette:
    """Draw a fingertip silhouette that fits the canvas.

    The width covers 72–94 % of the canvas width, the height 80–98 % of the canvas height (the bottom may
    reach the canvas edge, as a finger continues below a scan); left/right and top/bottom halves differ by up
    to about 10 %, and the centre is jittered within the remaining free space.

    Parameters
    ----------
    shape : (int, int)
        ``(H, W)`` of the canvas in pixels (both > 0).
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    Silhouette
    """
    h, w = shape
    if h <= 0 or w <= 0:
        raise ValueError(f"shape must be positive (H, W), got {shape}")
    width = w * rng.uniform(0.72, 0.94)
    height = h * rng.uniform(0.80, 0.98)
    lr = rng.uniform(0.45, 0.55)
    tb = rng.uniform(0.42, 0.50)
    left, right = width * lr, width * (1.0 - lr)
    top, bottom = height * tb, height * (1.0 - tb)
    cx = left + rng.uniform(0.0, 1.0) * (w - width)
    cy = top + rng.uniform(0.0, 1.0) * (h - height)
    return Silhouette(
        cx=float(cx),
        cy=float(cy),
        left=float(left),
        right=float(right),
        top=float(top),
        bottom=float(bottom),
        n_top=float(rng.uniform(2.0, 2.6)),
        n_bottom=float(rng.uniform(2.6, 4.0)),
    )
