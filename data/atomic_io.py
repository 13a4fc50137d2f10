"""Atomic file writes: a temporary file in the same folder, fsync, then ``os.replace``.

A process killed mid-write never leaves a truncated JSON, CSV, report or checkpoint behind: readers see either
the old file or the new one. Used by run directories, the generator's manifests and checkpoints.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (parents created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | Path, obj: Any) -> Path:
    """Atomic, pretty JSON (numpy scalars and arrays converted)."""
    return atomic_write_bytes(path, json.dumps(obj, indent=2, default=_default).encode())


def write_csv(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Atomic CSV of dict rows; the header is the union of keys in first-seen order."""
    rows = list(rows)
    header: list[str] = []
    for row in rows:
        header += [k for k in row if k not in header]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header)
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write_bytes(path, buf.getvalue().encode())


def write_text(path: str | Path, text: str) -> Path:
    """Atomic UTF-8 text file."""
    return atomic_write_bytes(path, text.encode())
