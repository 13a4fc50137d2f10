"""CASIA-FingerprintV5 loader.

Layout relied on (the CASIA-FingerprintV5 release notes; public parsers split ``000_L0_0.bmp`` on ``_``
the same way, e.g. a CASIA parser that walks ``<person>/<hand>/`` and reads ``words[1][1]`` as the finger)::

    <root>/<subject 000-499>/<L|R>/<subject>_<L|R><finger 0-3>_<impression 0-4>.bmp

500 subjects, 4 fingers per hand (thumb, index, middle, ring = 0-3), 5 impressions each, 328x356 8-bit gray
BMP (URU4000 optical sensor). The subject folders may sit one level deeper (the archive unpacks into
``CASIA-FingerprintV5(BMP)/``): files are found recursively, and each must sit in ``<subject>/<hand>/``
matching its own name.

identity = ``"<subject>_<hand><finger>"`` (e.g. ``"000_L0"``), impression = the 0-based number in the name,
domain ``"casia_v5"``. The image size is not enforced (nothing is resized either way).
"""

from __future__ import annotations

import re
from pathlib import Path

from fedprint.data.datasets.scan import Scan, image_files
from fedprint.data.record import FingerprintRecord

DOMAIN = "casia_v5"
_NAME = re.compile(r"^(\d{3})_([LR])([0-3])_([0-4])$")
EXPECTED = "<subject 000-499>/<L|R>/<subject>_<L|R><finger 0-3>_<impression 0-4>.bmp"


def looks_like(root: Path) -> bool:
    """Cheap layout probe: a ``<ddd>/<L|R>/`` folder holding a CASIA-named image, at most one level down."""
    for base in (root, *sorted(p for p in root.iterdir() if p.is_dir())):
        for subject in sorted(base.iterdir()) if base.is_dir() else ():
            if not (subject.is_dir() and re.fullmatch(r"\d{3}", subject.name)):
                continue
            for hand in ("L", "R"):
                folder = subject / hand
                if folder.is_dir() and any(_NAME.match(p.stem) for p in image_files(folder)):
                    return True
    return False


def load_casia(
    root: str | Path, *, skip_bad: bool = False, report: list | None = None
) -> list[FingerprintRecord]:
    """Load a CASIA-FingerprintV5 folder.

    Parameters
    ----------
    root : str or Path
        Folder holding the subject folders (or their single parent folder).
    skip_bad, report
        See :class:`fedprint.data.datasets.scan.Scan`.

    Returns
    -------
    list of FingerprintRecord
        Sorted by identity then impression; domain ``"casia_v5"``.
    """
    scan = Scan("casia", root, skip_bad=skip_bad, report=report)
    for path in image_files(scan.root, recursive=True):
        m = _NAME.match(path.stem)
        if m is None:
            scan.bad(path, f"file name does not match {EXPECTED}")
            continue
        subject, hand, finger, impression = m.groups()
        if path.parent.name != hand or path.parent.parent.name != subject:
            scan.bad(path, f"file is not in its folder {subject}/{hand}/ (expected {EXPECTED})")
            continue
        scan.add(path, f"{subject}_{hand}{finger}", int(impression), DOMAIN)
    return scan.finish(EXPECTED)
