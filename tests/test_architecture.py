"""The import contracts of pyproject.toml ([tool.importlinter]) hold: layers point down, no cycles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import fedprint

ROOT = Path(__file__).resolve().parents[1]


def installed_tree(dest: Path) -> Path:
    """The ``fedprint`` package laid out as a wheel installs it (each root folder of
    :data:`fedprint.SUBPACKAGES` inside ``fedprint/``), its ``*.py`` files only; returns the folder holding it.

    import-linter finds a package's modules by walking its one folder, which in a source tree holds only
    ``fedprint/__init__.py``."""
    pkg = dest / "fedprint"
    shutil.copytree(ROOT / "fedprint", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for name in fedprint.SUBPACKAGES:
        shutil.copytree(ROOT / name, pkg / name, ignore=lambda d, names: [n for n in names if not (
            n.endswith(".py") or (Path(d) / n).is_dir()) or n == "__pycache__"])
    return dest


def test_import_contracts_are_kept(tmp_path) -> None:
    tree = installed_tree(tmp_path / "tree")
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "importlinter.cli"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([*cmd, "--no-cache", "--config", str(ROOT / "pyproject.toml")], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout
