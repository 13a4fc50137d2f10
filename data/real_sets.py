"""Where the real fingerprint sets live: one root folder holding one sub-folder per set (sensor).

The root is ``$FEDPRINT_REAL_SAMPLES`` when set (``fedprint simulate / train --real-samples DIR`` set it), else
``<project>/../shared/data/real``. Each sub-folder whose structure matches a known layout
(:func:`fedprint.data.datasets.detect_layout`: FVC, generic ``<id>/<imp>.png``, SOCOFing, ...) is one set, named by its
folder (``fcj2020_dev``, ``fvc2002_db1_b``, ...). A root that is itself a dataset folder (the older meaning of
the variable: one FVC folder) counts as one set.

The prints themselves are never part of the project: they are read from the root, and everything that needs them
says which folder is missing (:func:`real_set_dir`) or skips.
"""

from __future__ import annotations

import os
from pathlib import Path

from fedprint.data.datasets import DatasetError, detect_layout

#: Environment variable naming the root folder of the real fingerprint sets.
REAL_ENV = "FEDPRINT_REAL_SAMPLES"
#: Default root: the real sets beside a source checkout (``<project>/../shared/data/real``).
DEFAULT_REAL_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"


def real_root() -> Path:
    """The root folder of the real sets (``$FEDPRINT_REAL_SAMPLES``, else :data:`DEFAULT_REAL_ROOT`); it may not
    exist."""
    given = os.environ.get(REAL_ENV, "").strip()
    return Path(given).expanduser() if given else DEFAULT_REAL_ROOT


def set_real_root(path: str | Path | None) -> None:
    """Make ``path`` the real-set root of this process and of the processes it starts (a ``--real-samples``
    option); None leaves it as it is. Raises FileNotFoundError (one line) when ``path`` is not a folder."""
    if path is None:
        return
    p = Path(path).expanduser().resolve()
    if not p.is_dir():
        raise FileNotFoundError(f"--real-samples: {p} is not a folder (expected the root of the real fingerprint "
                                "sets, one sub-folder per set)")
    os.environ[REAL_ENV] = str(p)


def real_set_dirs(root: str | Path | None = None) -> list[tuple[Path, str]]:
    """Every real set under ``root`` (default :func:`real_root`) as ``(folder, layout)``, sorted by name.

    [] when the root does not exist; sub-folders matching no layout (or several) are left out. When no
    sub-folder is a set, the root itself is tried as one dataset folder.
    """
    root = Path(root) if root is not None else real_root()
    if not root.is_dir():
        return []
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            out.append((d, detect_layout(d)))
        except DatasetError:
            continue
    if out:
        return out
    try:  # no sub-folder is a set: the root may be one dataset folder itself
        return [(root, detect_layout(root))]
    except DatasetError:
        return []


def real_set_dir(name: str, root: str | Path | None = None) -> Path:
    """The folder of the real set ``name`` (a sub-folder of the root).

    Raises
    ------
    FileNotFoundError
        One line naming the missing folder and how to point FedPrint at the sets.
    """
    base = Path(root) if root is not None else real_root()
    path = base / name
    if not path.is_dir():
        raise FileNotFoundError(f"real set {name!r}: folder {path} not found (set ${REAL_ENV} or --real-samples to "
                                f"the folder holding the real sets, one sub-folder per set)")
    return path
