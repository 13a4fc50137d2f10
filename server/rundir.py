"""Run directories: each run writes config, metrics, plots, checkpoints and report.md into one folder.

All writes are atomic (temporary file in the same folder, then ``os.replace``), so a run killed mid-write
never leaves a truncated metrics file or checkpoint behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import time
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
    return atomic_write_bytes(path, text.encode())


def new_run_dir(parent: str | Path, name: str) -> Path:
    """Create ``<parent>/<name>-<UTC timestamp>`` (a numeric suffix if it already exists) and return it."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path(parent) / f"{name}-{stamp}"
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    path.mkdir(parents=True)
    return path


def markdown_table(rows: list[Mapping[str, Any]], columns: list[str] | None = None, digits: int = 4) -> str:
    """A GitHub-markdown table of dict rows (floats rounded to ``digits``)."""
    if not rows:
        return "_(no rows)_\n"
    columns = columns or list(rows[0])

    def fmt(v: Any) -> str:
        if isinstance(v, float | np.floating):
            return f"{v:.{digits}f}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"
