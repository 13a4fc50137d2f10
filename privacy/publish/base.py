"""The one interface every DP publication mechanism implements, and the statement of what it guarantees.

A mechanism is a function::

    publish(image, minutiae, epsilon, rng, variant="sound", **options) -> Publication

* ``image``: uint8 (H, W) grayscale fingerprint (ignored by point-set mechanisms, which may take ``None``);
* ``minutiae``: float64 (n, 4) table ``x, y, direction, type`` (ignored by whole-image mechanisms);
* ``epsilon``: the total privacy budget of this release, > 0 (mechanisms that split it say how);
* ``rng``: ``numpy.random.Generator`` — every random choice is drawn from it;
* ``variant``: ``"paper"`` (faithful to the paper, including its own sensitivity and ε semantics, which may
  NOT be differentially private) or ``"sound"`` (proved in the docstring, checked by an empirical test).

The :class:`Guarantee` is what reports and the ledger print: it must never claim ε-DP for a release that is not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np

VARIANTS = ("paper", "sound")


@dataclass(frozen=True)
class Guarantee:
    """What a release actually guarantees, in plain words.

    Attributes
    ----------
    dp : bool
        True only if the release is (ε, δ)-DP under ``neighbouring`` with the stated ε and δ (proved).
    epsilon, delta : float
        The ε and δ actually provided (for ``dp=False``: the paper's nominal ε, with ``dp`` saying it is not a
        DP guarantee).
    neighbouring : str
        The neighbouring relation, e.g. "images differing in one pixel, values in [0, 255]".
    protected : str
        What the guarantee covers, e.g. "pixel values inside the released mask".
    released_exactly : str
        What is released without protection, e.g. "pixels outside the mask; the mask itself (computed from the
        raw minutiae)". Empty only if nothing is.
    composition : str
        How ε was split/composed inside the mechanism (sequential / parallel) — one sentence.
    caveats : str
        Anything else a user must know (e.g. "the paper's sensitivity is data-dependent; this is not DP").
    """

    dp: bool
    epsilon: float
    delta: float
    neighbouring: str
    protected: str
    released_exactly: str
    composition: str = ""
    caveats: str = ""

    def statement(self) -> str:
        """One paragraph for reports and CLI output."""
        head = (f"({self.epsilon:g}, {self.delta:g})-DP" if self.delta else f"{self.epsilon:g}-DP") if self.dp \
            else f"NOT differentially private (paper's nominal epsilon = {self.epsilon:g})"
        parts = [f"Guarantee: {head}.", f"Neighbouring inputs: {self.neighbouring}.",
                 f"Protected: {self.protected}.",
                 f"Released without protection: {self.released_exactly or 'nothing'}."]
        if self.composition:
            parts.append(f"Composition: {self.composition}.")
        if self.caveats:
            parts.append(f"Caveats: {self.caveats}.")
        return " ".join(parts)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class Publication:
    """Result of one release.

    Attributes
    ----------
    mechanism, variant : str
    image : ndarray uint8 (H, W) or None
        The released image (clipped to [0, 255]) for image mechanisms.
    points : ndarray float64 (n, k) or None
        The released point set (e.g. minutiae x, y[, direction]) for point-set mechanisms.
    spent_epsilon, spent_delta : float
        What the ledger must charge for this release (the sound ε, or for a non-DP paper variant the nominal ε).
    guarantee : Guarantee
    details : dict
        Mechanism-specific diagnostics (mask, regions, chosen k, per-region ε, ...), JSON-able where possible.
    """

    mechanism: str
    variant: str
    image: np.ndarray | None
    points: np.ndarray | None
    spent_epsilon: float
    spent_delta: float
    guarantee: Guarantee
    details: dict = field(default_factory=dict)


class Mechanism(Protocol):
    def __call__(self, image: np.ndarray | None, minutiae: np.ndarray | None, epsilon: float,
                 rng: np.random.Generator, variant: str = "sound", **options) -> Publication: ...


def check_epsilon(epsilon: float, *, minimum: float = 0.0, name: str = "epsilon") -> float:
    """ε must be a finite number > 0 and >= a mechanism's documented ``minimum``."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float | np.floating) or not np.isfinite(epsilon):
        raise ValueError(f"{name}: expected a finite number > 0, got {epsilon!r}")
    if epsilon <= 0:
        raise ValueError(f"{name}: must be > 0, got {epsilon}")
    if epsilon < minimum:
        raise ValueError(f"{name}: {epsilon} is below this mechanism's documented minimum {minimum}")
    return float(epsilon)


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    return variant


def check_image(image: np.ndarray, name: str = "image") -> np.ndarray:
    """A non-empty 2-D uint8 image."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 2 or image.size == 0:
        got = f"{getattr(image, 'dtype', type(image).__name__)} {getattr(image, 'shape', '')}"
        raise ValueError(f"{name}: expected a non-empty 2-D uint8 grayscale image, got {got}")
    return image


def check_minutiae(minutiae: np.ndarray, *, minimum: int = 1, name: str = "minutiae") -> np.ndarray:
    """An (n, 4) float table with at least ``minimum`` rows (minutiae-based mechanisms need some)."""
    m = np.asarray(minutiae, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] < 2:
        raise ValueError(f"{name}: expected an (n, 4) table x, y, direction, type, got shape {m.shape}")
    if len(m) < minimum:
        raise ValueError(f"{name}: this mechanism needs at least {minimum} minutiae, the image has {len(m)}")
    return m


def clip_uint8(x: np.ndarray) -> np.ndarray:
    """Round and clip a float image to uint8 [0, 255] (post-processing: preserves any DP guarantee)."""
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)
