"""FVC2000 / FVC2002 / FVC2004 (Fingerprint Verification Competition) loader.

Layout relied on (the FVC distributions; the FVC sample in ``shared/data/real/fvc_300x300_b`` and public
FVC parsers, e.g. ``parse_fvc_filename`` helpers and the pgafis sample table keyed ``101_1``, use these
names)::

    <root>/[<DBn_A|DBn_B>/]<finger>_<impression>.tif

Set A holds fingers 1-100, set B fingers 101-110, 8 impressions each, numbered from 1. Hence:

* impression = the number in the name minus 1 (``101_1.tif`` -> impression 0); ``_0`` is rejected;
* identity = the finger number (``"101"``) when the files sit directly in ``root``; files in sub-folders
  (several DB sets loaded at once, whose finger numbers repeat) get the folder path as prefix, e.g.
  ``"DB1_A/1"``;
* domain = ``"fvc<year>_db<n>"`` when the absolute path names the competition (a folder containing
  ``FVC2004``) and the database (a folder ``DB1``/``DB1_A``/``DB1_B``), ``"fvc<year>"`` or ``"fvc_db<n>"``
  when only one is known, else ``"fvc"``.

``.tif``/``.tiff`` are the distributed format; ``.bmp``/``.png`` conversions are accepted too.
"""

from __future__ import annotations

import re
from pathlib import Path

from fedprint.data.datasets.scan import Scan, image_files, is_image
from fedprint.data.record import FingerprintRecord

_NAME = re.compile(r"^(\d+)_(\d+)$")
_YEAR = re.compile(r"fvc[\s_-]?(2000|2002|2004)", re.IGNORECASE)
_DB = re.compile(r"^db[\s_-]?(\d+)(?:[\s_-]?[ab])?$", re.IGNORECASE)
EXPECTED = "[DBn_A|DBn_B/]<finger>_<impression 1-based>.tif"


def domain_for(path: Path) -> str:
    """Domain tag from the folders on ``path`` (see module docstring)."""
    year = db = None
    for part in path.absolute().parent.parts:
        if (m := _YEAR.search(part)) is not None:
            year = m.group(1)
        if (m := _DB.match(part)) is not None:
            db = int(m.group(1))
    if year and db is not None:
        return f"fvc{year}_db{db}"
    if year:
        return f"fvc{year}"
    return f"fvc_db{db}" if db is not None else "fvc"


def looks_like(root: Path) -> bool:
    """Cheap layout probe: an FVC-named image in ``root`` or one folder level below."""
    for d in (root, *sorted(p for p in root.iterdir() if p.is_dir())):
        if any(is_image(p) and _NAME.match(p.stem) for p in d.iterdir()):
            return True
    return False


def load_fvc(
    root: str | Path, *, skip_bad: bool = False, report: list | None = None
) -> list[FingerprintRecord]:
    """Load an FVC database folder (one ``DBn_X`` set, or a folder of several, searched recursively).

    Parameters
    ----------
    root : str or Path
        Folder holding ``<finger>_<impression>.tif`` files or ``DBn_A``/``DBn_B`` folders of them.
    skip_bad, report
        See :class:`fedprint.data.datasets.scan.Scan`.

    Returns
    -------
    list of FingerprintRecord
        Sorted by identity then impression.
    """
    scan = Scan("fvc", root, skip_bad=skip_bad, report=report)
    for path in image_files(scan.root, recursive=True):
        m = _NAME.match(path.stem)
        if m is None:
            scan.bad(path, f"file name does not match {EXPECTED}")
            continue
        finger, number = int(m.group(1)), int(m.group(2))
        if number < 1:
            scan.bad(path, f"impression number {number} in the name; FVC numbers impressions from 1")
            continue
        rel = path.parent.relative_to(scan.root).as_posix()
        identity = str(finger) if rel == "." else f"{rel}/{finger}"
        scan.add(path, identity, number - 1, domain_for(path))
    return scan.finish(EXPECTED)
