"""Run directories: each run writes config, metrics, plots, checkpoints and report.md into one folder.

All writes go through :mod:`fedprint.data.atomic_io`, so a run killed mid-write never leaves a truncated metrics file or
checkpoint behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedprint.config.provenance import provenance, provenance_markdown
from fedprint.data.atomic_io import write_json


def check_run_parent(parent: str | Path, option: str = "--out") -> Path:
    """Refuse, before any work, a run-directory parent that cannot hold a new folder.

    ``parent`` may not exist yet (it is created), but if it exists it must be a writable directory, and
    otherwise its nearest existing ancestor must be a writable directory.
    """
    p = Path(parent)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{option} {p}: exists and is not a folder")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {p}: cannot create a run directory there ({probe} is not a writable folder)")
    return p


def check_out_dir(out: str | Path, option: str = "--out") -> Path:
    """Refuse, before any work, an output folder a run cannot write into.

    ``--out`` has one meaning in every FedPrint command: the folder the command writes its results into. It
    may not exist yet (it is created); if it exists it must be an EMPTY folder, so a run never mixes its files
    with another's (``fedprint audit`` alone also accepts its own interrupted audit, to resume it).
    """
    p = Path(out)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise ValueError(f"{option} {p}: {'is not a folder' if not p.is_dir() else 'is not empty'}; give a new "
                         "or empty folder (the command writes its results into exactly that folder)")
    return check_run_parent(p, option)


def make_out_dir(out: str | Path | None, parent: str | Path, name: str, option: str = "--out") -> Path:
    """The folder a run writes into: ``out`` itself when given (see :func:`check_out_dir`), else a new
    ``<parent>/<name>-<UTC timestamp>`` (:func:`new_run_dir`). Both start with ``provenance.json``."""
    if out is None:
        return new_run_dir(parent, name)
    path = check_out_dir(out, option)
    path.mkdir(parents=True, exist_ok=True)
    write_json(path / "provenance.json", provenance())
    return path


@contextlib.contextmanager
def discarded_on_failure(out: str | Path | None, option: str = "--out") -> Iterator[Path | None]:
    """Check ``out`` (:func:`check_out_dir`) and remove what a failed or interrupted run wrote into it.

    ``out`` is new or empty when the run starts, so everything in it afterwards is the run's own: on any
    exception (Ctrl-C included) the folder is emptied (and removed when the run created it), so the same command
    can be run again into it. None (a timestamped run directory) passes through unchanged.
    """
    if out is None:
        yield None
        return
    path = check_out_dir(out, option)
    existed = path.is_dir()
    try:
        yield path
    except BaseException:
        if path.is_dir():
            if existed:
                for child in path.iterdir():
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)
        raise


def new_run_dir(parent: str | Path, name: str) -> Path:
    """Create ``<parent>/<name>-<UTC timestamp>`` (a numeric suffix if it already exists) and return it.

    The new folder starts with ``provenance.json`` (:func:`fedprint.config.provenance.provenance`: command,
    FedPrint version, git commit, package versions, threads, hardware), so every run can be reproduced from
    its folder.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path(parent) / f"{name}-{stamp}"
    path, k = base, 1
    while path.exists():
        path, k = Path(f"{base}-{k}"), k + 1
    path.mkdir(parents=True)
    write_json(path / "provenance.json", provenance())
    return path


def report_provenance(run_dir: str | Path) -> str:
    """The \"Provenance\" section of a run's report.md, from its ``provenance.json`` (recorded now if absent)."""
    path = Path(run_dir) / "provenance.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = provenance()
        write_json(path, record)
    return provenance_markdown(record)


def markdown_table(rows: list[Mapping[str, Any]], columns: list[str] | None = None, digits: int = 4) -> str:
    """A GitHub-markdown table of dict rows (floats rounded to ``digits``, None shown as "—")."""
    if not rows:
        return "_(no rows)_\n"
    columns = columns or list(rows[0])

    def fmt(v: Any) -> str:
        if v is None:  # a metric that could not be measured (e.g. FNMR at FMR 1 % with < 100 impostor pairs)
            return "—"
        if isinstance(v, float | np.floating):
            return f"{v:.{digits}f}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"
