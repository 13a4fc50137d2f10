"""Mechanism names -> publication functions, imported lazily (one broken or heavy module does not block others).

Every entry implements the :class:`fedprint.privacy.publish.base.Mechanism` interface.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from fedprint.privacy.publish.base import Publication

#: name -> (module, function, needs minutiae) of every mechanism FedPrint defines.
#: Image mechanisms release ``Publication.image``; point-set mechanisms (:data:`POINT_MECHANISMS`) ``points``.
_ENTRIES: dict[str, tuple[str, str, bool]] = {
    "lap": ("fedprint.privacy.publish.lap", "publish_lap", False),
    "klap": ("fedprint.privacy.publish.klap", "publish_klap", True),
    "rklap": ("fedprint.privacy.publish.rklap", "publish_rklap", True),
    "dp-rklap": ("fedprint.privacy.publish.dp_rklap", "publish_dp_rklap", True),
    "fip": ("fedprint.privacy.publish.fourier", "publish_fip", False),
    "emk": ("fedprint.privacy.publish.fourier", "publish_emk", False),
    "bemk": ("fedprint.privacy.publish.fourier", "publish_bemk", False),
    "swp": ("fedprint.privacy.publish.swp", "publish_swp", False),
    "sort-swp": ("fedprint.privacy.publish.swp", "publish_sort_swp", False),
    "pointset": ("fedprint.privacy.publish.pointset", "publish_pointset", True),
}
POINT_MECHANISMS = frozenset({"pointset"})


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class _LazyMechanisms(Mapping):
    """name -> publication function; lists only mechanisms whose module is installed, imports on access."""

    def __init__(self) -> None:
        self._names = [k for k, v in _ENTRIES.items() if _available(v[0])]

    def __getitem__(self, name: str) -> Callable[..., Publication]:
        module, func, _ = _entry(name)
        return getattr(importlib.import_module(module), func)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _entry(name: str) -> tuple[str, str, bool]:
    if name not in MECHANISMS._names:
        raise ValueError(f"mechanism: unknown {name!r}; known mechanisms: {', '.join(known())}")
    return _ENTRIES[name]


#: Mechanism name -> function, for the mechanisms whose implementing module is present (fixed order).
MECHANISMS = _LazyMechanisms()


def known() -> list[str]:
    """Names of the available mechanisms, in a fixed order.

    Returns
    -------
    list of str
        The names :func:`get` and :func:`publish` accept (those whose implementing module is present).

    Examples
    --------
    >>> known()
    ['lap', 'klap', 'rklap', 'dp-rklap', 'fip', 'emk', 'bemk', 'swp', 'sort-swp', 'pointset']
    """
    return list(MECHANISMS)


def get(name: str) -> Callable[..., Publication]:
    """The publication function registered as ``name``, imported on first use.

    Parameters
    ----------
    name : str
        A mechanism name (:func:`known`).

    Returns
    -------
    callable
        ``f(image, minutiae, epsilon, rng, variant="sound", **options) -> Publication``, the interface of
        :mod:`fedprint.privacy.publish.base`.

    Raises
    ------
    ValueError
        If ``name`` is not a known mechanism (the message lists the known ones).

    Examples
    --------
    >>> get("swp").__name__
    'publish_swp'
    >>> get("dp")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: mechanism: unknown 'dp'; known mechanisms: lap, klap, ...
    """
    return MECHANISMS[name]


def needs_minutiae(name: str) -> bool:
    """True if the mechanism reads the minutiae table (the CLI / query handler must extract them)."""
    return _entry(name)[2]


def releases_points(name: str) -> bool:
    """True if the mechanism releases a point set rather than an image."""
    _entry(name)
    return name in POINT_MECHANISMS


def publish(name: str, image: np.ndarray | None, minutiae: np.ndarray | None, epsilon: float,
            rng: np.random.Generator, variant: str = "sound", **options) -> Publication:
    """Run mechanism ``name`` with the common signature (see :mod:`fedprint.privacy.publish.base`).

    Parameters
    ----------
    name : str
        A mechanism name (:func:`known`).
    image : ndarray, uint8, shape (H, W), or None
        The grayscale print (point-set mechanisms ignore it and accept None).
    minutiae : ndarray, float64, shape (n, 4), or None
        Minutiae table ``x, y, direction, type``; needed when :func:`needs_minutiae` is True.
    epsilon : float
        The privacy budget of this release, > 0.
    rng : numpy.random.Generator
        Every random choice is drawn from it.
    variant : {"sound", "paper"}
        ``"sound"``: the variant proved differentially private in the mechanism's docstring; ``"paper"``: the
        paper's own sensitivities and ε semantics, which may NOT be differentially private (the returned
        guarantee says which).
    **options
        Mechanism-specific options (see its function).

    Returns
    -------
    Publication
        The released image (or point set), the ε and δ spent, and the
        :class:`~fedprint.privacy.publish.base.Guarantee` that states in plain words what the release protects and
        what it does not.

    Raises
    ------
    ValueError
        If ``name`` is unknown, or the mechanism refuses its inputs (bad image, ε, variant or option).

    Examples
    --------
    Laplace noise on every pixel (LAP): the sound variant is ε-DP under one-pixel neighbours, the paper's
    variant at its own ε is not.

    >>> import numpy as np
    >>> image = np.full((32, 32), 128, np.uint8)
    >>> release = publish("lap", image, None, 1.0, np.random.default_rng(0))
    >>> release.image.shape, release.spent_epsilon, release.guarantee.dp
    ((32, 32), 1.0, True)
    >>> release.guarantee.statement()[:45]
    'Guarantee: 1-DP. Neighbouring inputs: images '
    >>> publish("lap", image, None, 4.0, np.random.default_rng(0), variant="paper").guarantee.dp
    False
    """
    return get(name)(image, minutiae, epsilon, rng, variant, **options)
