"""SOCOFing (Sokoto Coventry Fingerprint Dataset; Shehu et al. 2018, arXiv:1807.10609) loader.

Layout relied on (Kaggle distribution ``ruizgara/socofing``; the sample in
``shared/data/real/socofing_sample`` follows it, and public loaders parse it the same way)::

    <root>/Real/<subject>__<M|F>_<Left|Right>_<thumb|index|middle|ring|little>_finger.BMP
    <root>/Altered/Altered-<Easy|Medium|Hard>/<same stem>_<CR|Obl|Zcut>.BMP

600 subjects x 10 fingers, ONE real impression per finger; the altered images are synthetic alterations
(obliteration ``Obl``, central rotation ``CR``, z-cut ``Zcut``) of that impression at three levels. Hence:

* identity = ``"<subject>__<sex>_<hand>_<finger>"`` (e.g. ``"1__M_Left_index"``), impression = 0 for every
  image;
* an altered image has the SAME identity and impression as the real image it alters and
  ``alteration = "<level>/<kind>"`` (e.g. ``"Easy/CR"``) — it is not an independent impression. An altered
  image whose real image is absent (a partial copy) is still loaded, under the identity its name gives.

Names are matched case-sensitively as above, suffixes case-insensitively. The ``Real/`` BMPs are 32-bit with
equal colour channels and an inert alpha channel; :func:`fedprint.data.datasets.imread.read_gray` documents how that is
read.
"""

from __future__ import annotations

import re
from pathlib import Path

from fedprint.data.datasets.imread import IMAGE_SUFFIXES
from fedprint.data.datasets.scan import Scan, image_files, require_dir
from fedprint.data.record import FingerprintRecord

DOMAIN = "socofing"
_STEM = r"(\d+)__([MF])_(Left|Right)_(thumb|index|middle|ring|little)_finger"
_REAL = re.compile(rf"^{_STEM}$")
_ALTERED = re.compile(rf"^{_STEM}_(CR|Obl|Zcut)$")
_LEVEL_DIR = re.compile(r"^Altered-(Easy|Medium|Hard)$")
EXPECTED = (
    "Real/<subject>__<M|F>_<Left|Right>_<finger>_finger.BMP and "
    "Altered/Altered-<level>/<stem>_<CR|Obl|Zcut>.BMP"
)


def looks_like(root: Path) -> bool:
    """Cheap layout probe for :func:`fedprint.data.datasets.detect_layout`."""
    return (root / "Real").is_dir() or (root / "Altered").is_dir()


def _identity(m: re.Match) -> str:
    subject, sex, hand, finger = m.group(1, 2, 3, 4)
    return f"{int(subject)}__{sex}_{hand}_{finger}"


def load_socofing(
    root: str | Path,
    *,
    skip_bad: bool = False,
    report: list | None = None,
    altered: bool | None = None,
) -> list[FingerprintRecord]:
    """Load a SOCOFing folder.

    Parameters
    ----------
    root : str or Path
        Folder holding ``Real/`` (required) and ``Altered/``.
    skip_bad, report
        See :class:`fedprint.data.datasets.scan.Scan`.
    altered : bool or None
        None (default): load ``Altered/`` when present. True: ``Altered/`` is required. False: real images
        only.

    Returns
    -------
    list of FingerprintRecord
        Sorted by identity, impression, then real before altered (alterations in name order); domain
        ``"socofing"``.
    """
    scan = Scan("socofing", root, skip_bad=skip_bad, report=report)
    real_dir = require_dir(scan.root / "Real", "Real/ with the unaltered SOCOFing images")
    for path in image_files(real_dir):
        m = _REAL.match(path.stem)
        if m is None:
            scan.bad(path, "file name does not match <subject>__<M|F>_<Left|Right>_<finger>_finger.BMP")
            continue
        scan.add(path, _identity(m), 0, DOMAIN)

    altered_dir = scan.root / "Altered"
    if altered is True:
        require_dir(altered_dir, "Altered/ with Altered-Easy|Medium|Hard/ (altered=True)")
    if altered is not False and altered_dir.is_dir():
        for level_dir in sorted(altered_dir.iterdir()):
            lm = _LEVEL_DIR.match(level_dir.name)
            if not level_dir.is_dir() or lm is None:
                if level_dir.is_dir() or level_dir.suffix.lower() in IMAGE_SUFFIXES:
                    why = "unexpected entry in Altered/; expected folders Altered-<Easy|Medium|Hard>"
                    scan.bad(level_dir, why)
                continue
            for path in image_files(level_dir):
                m = _ALTERED.match(path.stem)
                if m is None:
                    why = "file name does not match <subject>__<M|F>_<hand>_<finger>_finger_<CR|Obl|Zcut>"
                    scan.bad(path, why)
                    continue
                scan.add(path, _identity(m), 0, DOMAIN, alteration=f"{lm.group(1)}/{m.group(5)}")
    return scan.finish(EXPECTED)
