"""Loaders for real fingerprint databases; all yield :class:`fedprint.data.record.FingerprintRecord`.

Layouts (folder structure; details and sources in each module's docstring):

``socofing``
    ``Real/<subj>__<M|F>_<hand>_<finger>_finger.BMP`` and ``Altered/Altered-<lvl>/<stem>_<kind>.BMP``
``casia``
    ``<subj>/<L|R>/<subj>_<L|R><finger>_<impression>.bmp`` (CASIA-FingerprintV5)
``nist_sd10``
    ``**/<f|s><digits>[_<digits>].png`` (NIST SD4 / SD9 / SD10 / SD14 converted to PNG)
``fvc``
    ``[DBn_A|DBn_B/]<finger>_<impression>.tif`` (FVC2000 / 2002 / 2004; 1-based impressions)
``generic``
    ``<identity>/<impression>.<png|bmp|tif|tiff>``, plus ``manifest.json`` for synthetic datasets

Every loader validates each image (:func:`fedprint.data.datasets.imread.read_gray`), never resizes, and returns records
sorted by identity, impression and alteration. Bad input raises :class:`DatasetError` naming the file, or with
``skip_bad=True`` is logged, appended to ``report`` as ``(path, reason)`` and skipped. Problems that leave
nothing to load (missing root or required folder, invalid manifest, no file matching the layout) raise even
with ``skip_bad=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from fedprint.data.datasets import casia, fvc, generic, nist_sd10, socofing
from fedprint.data.datasets.imread import ImageReadError, read_gray
from fedprint.data.datasets.scan import DatasetError
from fedprint.data.record import FingerprintRecord

#: Layout name -> loader ``f(root, *, skip_bad=False, report=None, **options) -> list[FingerprintRecord]``.
LAYOUTS: dict[str, Callable[..., list[FingerprintRecord]]] = {
    "socofing": socofing.load_socofing,
    "casia": casia.load_casia,
    "nist_sd10": nist_sd10.load_nist,
    "fvc": fvc.load_fvc,
    "generic": generic.load_generic,
}

# Layout name -> module with ``looks_like(root) -> bool`` (structure probe) and ``EXPECTED`` (naming).
_MODULES = {"socofing": socofing, "casia": casia, "nist_sd10": nist_sd10, "fvc": fvc, "generic": generic}

__all__ = [
    "LAYOUTS",
    "DatasetError",
    "ImageReadError",
    "detect_layout",
    "load_dataset",
    "read_gray",
]


def detect_layout(root: str | Path) -> str:
    """Name of the one layout in :data:`LAYOUTS` whose structure ``root`` has.

    Probes look only at folder names and file names near the top of the tree (no image is decoded), so a match
    says the naming fits; :func:`load_dataset` still validates every file.

    Raises
    ------
    DatasetError
        ``root`` is not a folder, matches no layout, or matches several (pass the layout explicitly then).
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset root folder does not exist")
    matches = [name for name, module in _MODULES.items() if module.looks_like(root)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        expected = "; ".join(f"{name}: {module.EXPECTED}" for name, module in _MODULES.items())
        raise DatasetError(f"{root}: folder matches no known dataset layout (expected one of — {expected})")
    raise DatasetError(f"{root}: folder matches several layouts {matches}; pass the layout explicitly")


#: Resolution (dpi) of each layout's images when the user does not give one. SOCOFing's published 96x103 images
#: are downscaled scans: their ridge period is ~3.3 px against ~9.5 px at 500 dpi, i.e. about 170 dpi.
#: Generic folders: 500 dpi (the usual sensor resolution) unless a synthetic manifest says otherwise.
LAYOUT_DPI: dict[str, float] = {"socofing": 170.0, "casia": 500.0, "nist_sd10": 500.0, "fvc": 500.0,
                                "generic": 500.0}


def load_dataset(
    layout: str,
    root: str | Path,
    *,
    skip_bad: bool = False,
    report: list | None = None,
    dpi: float | None = None,
    **options,
) -> list[FingerprintRecord]:
    """Load every record of a dataset folder.

    Parameters
    ----------
    layout : str
        A key of :data:`LAYOUTS`, or ``"auto"`` to use :func:`detect_layout`.
    root : str or Path
        Dataset root folder.
    skip_bad : bool, default False
        False: the first bad file or folder raises :class:`DatasetError`. True: bad files are skipped, each
        logged as a warning (logger ``data.datasets``) and appended to ``report``.
    report : list or None
        Receives ``(path, reason)`` for each skipped file when ``skip_bad`` is True.
    dpi : float or None
        Resolution of the images in dots per inch; None (default): the layout's :data:`LAYOUT_DPI` (a synthetic
        manifest's own resolution for generated folders).
    **options
        Layout-specific options (``socofing``: ``altered``; ``generic``: ``domain``).

    Returns
    -------
    list of FingerprintRecord
        Sorted by identity (natural order), impression, then alteration (unaltered first).
    """
    if layout == "auto":
        layout = detect_layout(root)
    if layout not in LAYOUTS:
        raise ValueError(f"layout: unknown layout {layout!r}; expected one of {sorted(LAYOUTS)} or 'auto'")
    if dpi is not None and not (isinstance(dpi, int | float) and 50 <= float(dpi) <= 2000):
        raise ValueError(f"dpi: expected a resolution in [50, 2000] dots per inch, got {dpi!r}")
    records = LAYOUTS[layout](root, skip_bad=skip_bad, report=report, **options)
    default = LAYOUT_DPI.get(layout)
    return [r if (dpi is None and r.dpi is not None) else replace(r, dpi=float(dpi if dpi is not None else default))
            for r in records]
