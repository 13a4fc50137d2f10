"""Atomic file writes: a temporary file in the same folder, fsync, then ``os.replace``.

A process killed mid-write never leaves a truncated JSON, CSV, report or checkpoint behind: readers see either
the old file or the new one. Used by run directories, the generator's manifests and checkpoints.

Permissions: ``tempfile.mkstemp`` creates its file with mode 0600, which ``os.replace`` would carry over to the
result — a generated dataset then cannot be read by any other user, e.g. the ClientApp container that runs as
uid 49999 and mounts the folder read-only. :func:`temp_file_beside` gives the temporary file the mode a plain
``open(path, "w")`` would: 0666 minus the umask (0644 by default; ``umask 077`` keeps a user's files private).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def creation_mode() -> int:
    """The permission bits ``open(path, "w")`` gives a new file: 0666 minus the process umask."""
    try:  # Linux >= 4.7 reports the umask without changing it (os.umask would, for every thread)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def temp_file_beside(path: str | Path, suffix: str = "") -> tuple[int, str]:
    """``(fd, name)`` of a new temporary file in ``path``'s folder with mode :func:`creation_mode`.

    For an atomic replace of ``path`` (``os.replace(name, path)``): the result has the permissions a plain
    ``open(path, "w")`` gives, not ``mkstemp``'s 0600.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, creation_mode())
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return fd, tmp


@contextlib.contextmanager
def atomic_writer(path: str | Path, suffix: str = "") -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` only when the block ends without error (parents created; mode as
    :func:`temp_file_beside`): written beside it, synced, then renamed over it; removed on any failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_beside(path, suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_writer`)."""
    with atomic_writer(path) as fh:
        fh.write(data)
    return Path(path)


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


def check_new_folder(path: str | Path, option: str = "--out") -> Path:
    """``path`` must be a new or empty folder (the ``--out`` contract); raises before any work is done.

    Raises
    ------
    FileExistsError
        ``path`` is a file, or a folder that is not empty.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{option}: {path} is a file; expected a new or empty folder")
    if path.is_dir() and any(path.iterdir()):
        raise FileExistsError(f"{option}: {path} exists and is not empty; give a new or empty folder")
    return path


@contextlib.contextmanager
def staged_folder(path: str | Path, option: str = "--out") -> Iterator[Path]:
    """Write a folder's files into a hidden staging folder beside it and move it into place only on success.

    A command that fails or is interrupted half-way leaves no half-written ``path`` (the staging folder is
    removed); ``path`` itself must be new or empty (:func:`check_new_folder`, checked again at the end).
    """
    path = check_new_folder(path, option)
    path.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-", dir=path.parent))
    try:
        yield stage
        check_new_folder(path, option)
        if path.is_dir():
            path.rmdir()
        os.replace(stage, path)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
