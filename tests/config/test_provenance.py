"""Run provenance: every run directory says what produced it (fedprint.config.provenance, fedprint.config.rundir)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fedprint.config.provenance import PACKAGES, provenance, provenance_markdown
from fedprint.config.rundir import new_run_dir, report_provenance

ROOT = Path(__file__).resolve().parents[2]


def test_provenance_records_command_versions_and_hardware() -> None:
    p = provenance(["fedprint", "demo", "--quiet"])
    assert p["command"] == "fedprint demo --quiet"
    assert set(PACKAGES) <= set(p["packages"])
    assert p["packages"]["numpy"] == __import__("numpy").__version__
    assert p["hardware"]["cpu_count"] >= 1
    json.dumps(p)  # serialisable as written into provenance.json


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="not a git checkout")
def test_git_commit_is_the_checkout_head() -> None:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert provenance()["git"]["commit"] == head


def test_new_run_dir_writes_provenance_and_report_section(tmp_path: Path) -> None:
    run = new_run_dir(tmp_path, "exp")
    record = json.loads((run / "provenance.json").read_text())
    assert record["packages"]["torch"] is not None
    md = report_provenance(run)
    assert md.startswith("## Provenance") and record["command"] in md
    assert "provenance.json" in provenance_markdown(record)
