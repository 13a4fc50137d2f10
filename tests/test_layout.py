"""One installed package: every module under its ``fedprint.`` name, nothing else at the top level."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import fedprint

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: The names the folders had before they became fedprint.<name> (and the ones they have at the root).
BARE = (*fedprint.SUBPACKAGES, "fedprint_config", "fedprint_cli", "bench")


def source_packages() -> set[str]:
    """Every ``fedprint.*`` package of the source tree (a folder with ``__init__.py`` under a subpackage)."""
    found = {"fedprint"}
    for name in fedprint.SUBPACKAGES:
        for init in (ROOT / name).rglob("__init__.py"):
            found.add("fedprint." + ".".join(init.parent.relative_to(ROOT).parts))
    return found


def source_modules() -> list[str]:
    mods = []
    for name in fedprint.SUBPACKAGES:
        for py in sorted((ROOT / name).rglob("*.py")):
            parts = py.relative_to(ROOT).with_suffix("").parts
            mods.append("fedprint." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return mods


def test_pyproject_maps_every_folder_and_lists_every_package() -> None:
    tool = PYPROJECT["tool"]["setuptools"]
    assert set(tool["packages"]) == source_packages()
    assert tool["package-dir"] == {"fedprint": "fedprint", **{f"fedprint.{n}": n for n in fedprint.SUBPACKAGES}}
    apps = PYPROJECT["tool"]["flwr"]["app"]["components"]
    assert apps == {"serverapp": "fedprint.server.server_app:app", "clientapp": "fedprint.client.client_app:app"}


def test_the_container_build_context_lets_every_subpackage_through() -> None:
    allowed = {line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    assert {"fedprint", *fedprint.SUBPACKAGES} <= allowed


def test_every_module_imports_by_its_fedprint_name_and_no_bare_name_outside_the_checkout(tmp_path) -> None:
    code = ("import importlib, importlib.util, sys\n"
            "mods, bare = sys.argv[1].split(','), sys.argv[2].split(',')\n"
            "for m in mods: importlib.import_module(m)\n"
            "print(','.join(b for b in bare if importlib.util.find_spec(b) is not None))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code, ",".join(source_modules()), ",".join(BARE)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "", f"importable under a bare name outside the checkout: {out.stdout.strip()}"


def test_a_wheel_holds_the_fedprint_package_and_nothing_else(tmp_path) -> None:
    # Built from a copy of the tracked files: a build in the checkout leaves fedprint.egg-info there, which then
    # shadows the installed distribution's metadata for every later import from the checkout.
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    src = tmp_path / "src"
    for name in filter(None, files.split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                          str(tmp_path), str(src)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = tmp_path.glob("fedprint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"fedprint", wheel.name.split("-")[0] + "-" +
                                                wheel.name.split("-")[1] + ".dist-info"}
    assert "fedprint/server/server_app.py" in names and "fedprint/models/pretrained/fedprint-synthetic.pt" in names
    assert "fedprint/experiments/demo.toml" in names and not any(n.startswith("fedprint/studies") for n in names)


def test_tests_mirror_the_package() -> None:
    """``tests/<package>/test_<module>.py``: every test folder is a package folder of the tree (or studies/)."""
    tests = ROOT / "tests"
    folders = {p.parent.relative_to(tests) for p in tests.rglob("test_*.py")} - {Path(".")}
    assert folders and all((ROOT / f).is_dir() and f.parts[0] in (*fedprint.SUBPACKAGES, "studies") for f in folders), \
        sorted(map(str, folders))
