"""NIST mated-impression fingerprint databases (SD4 / SD9 / SD10 / SD14 style) converted to 8-bit gray PNG.

What was verified, and what was not:

* NIST SD4 (FIGS, 2000 fingers x 2 rollings, 512x512 8-bit, PNG in ``sd04/png_txt/figs_<0-7>/``) names the two
  rollings of one finger ``f0001_01.png`` and ``s0001_01.png`` (first / second), each with a ``.txt`` label
  file (public SD4 readers and the SD4 readme). Pairs are matched on the part after the prefix.
* SD9 / SD14 name mated card prints ``f<7 digits>`` / ``s<7 digits>`` (SD9 user's guide, sample
  ``f0000001.pct``).
* SD10 itself is distributed as IHead/WSQ files, not PNG. NIST's NBIS source (``get_sd_class``) parses SD10
  ids as two characters followed by the sequence number, versus one character for SD9/SD14; the exact SD10
  letters could not be confirmed here, so SD10 is supported only once converted to PNG under the
  SD4/SD14-style naming below — other names are reported as not matching rather than guessed.

Layout accepted (files found recursively, so ``figs_<n>/`` sub-folders are fine; non-image files are
ignored)::

    <root>/**/<f|s><digits>[_<digits>].png      (also .bmp / .tif)

identity = the name without its prefix (e.g. ``"0001_01"``); impression 0 for ``f`` (first), 1 for ``s``
(second). Domain: ``"nist_sd<N>"`` when a folder name on the path says ``sd<N>`` / ``sd0<N>`` (e.g. ``sd04``
-> ``"nist_sd4"``), else ``"nist"``.
"""

from __future__ import annotations

import re
from pathlib import Path

from fedprint.data.datasets.scan import Scan, image_files, is_image
from fedprint.data.record import FingerprintRecord

_NAME = re.compile(r"^([fs])(\d+(?:_\d+)?)$")
_SD_DIR = re.compile(r"^(?:nist[_-]?)?sd[_-]?0*(\d+)(?:\D.*)?$", re.IGNORECASE)
EXPECTED = "<f|s><digits>[_<digits>].png, f = first and s = second impression of a finger"


def domain_for(path: Path) -> str:
    """``"nist_sd<N>"`` from the innermost folder named like ``sd04`` / ``NIST_SD10``, else ``"nist"``."""
    for part in reversed(path.absolute().parent.parts):
        m = _SD_DIR.match(part)
        if m:
            return f"nist_sd{int(m.group(1))}"
    return "nist"


def looks_like(root: Path, max_depth: int = 3) -> bool:
    """Cheap layout probe: a NIST-named image within ``max_depth`` folder levels."""
    level = [root]
    for _ in range(max_depth + 1):
        nxt = []
        for d in level:
            for p in sorted(d.iterdir()):
                if p.is_dir():
                    nxt.append(p)
                elif is_image(p) and _NAME.match(p.stem):
                    return True
        level = nxt
    return False


def load_nist(
    root: str | Path, *, skip_bad: bool = False, report: list | None = None
) -> list[FingerprintRecord]:
    """Load NIST f/s mated impressions (SD4-style ``f0001_01.png``, SD9/SD14-style ``f0000001.png``).

    Parameters
    ----------
    root : str or Path
        Folder searched recursively.
    skip_bad, report
        See :class:`fedprint.data.datasets.scan.Scan`.

    Returns
    -------
    list of FingerprintRecord
        Sorted by identity then impression (f before s).
    """
    scan = Scan("nist_sd10", root, skip_bad=skip_bad, report=report)
    for path in image_files(scan.root, recursive=True):
        m = _NAME.match(path.stem)
        if m is None:
            scan.bad(path, f"file name does not match {EXPECTED}")
            continue
        scan.add(path, m.group(2), 0 if m.group(1) == "f" else 1, domain_for(path))
    return scan.finish(EXPECTED)
