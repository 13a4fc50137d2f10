"""``fedprint enroll`` and ``fedprint verify --template`` on real prints (skipped without them)."""

import json
from pathlib import Path

import pytest

import fedprint.cli.main as fedprint_cli

REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "real" / "fvc2002_db1_b"
if not REAL.is_dir():
    REAL = Path("/work/shared/data/real/fvc2002_db1_b")
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real prints (../shared/data/real) not present")


def _img(finger, imp):
    return str(REAL / f"{finger}_{imp}.tif")


def test_enroll_verify_pin_and_damage(tmp_path, monkeypatch, capsys):
    t = tmp_path / "t.json"
    imgs = [_img(101, i) for i in (1, 2, 3)]
    assert fedprint_cli.main(["enroll", *imgs, "--out", str(t)]) == 0
    doc = json.loads(t.read_text())
    assert doc["scheme"] == "vault" and set(doc["data"]) == {"xs", "ys", "salt", "digest", "helper", "kdf_salt"}
    assert fedprint_cli.main(["verify", _img(101, 1), "--template", str(t)]) == 0
    assert fedprint_cli.main(["verify", _img(105, 1), "--template", str(t)]) == 1
    assert fedprint_cli.main(["enroll", *imgs, "--out", str(t)]) == 2  # never overwritten
    bad = tmp_path / "bad.json"
    bad.write_text(t.read_text().replace('"degree": 8', '"degree": 7'))
    capsys.readouterr()
    assert fedprint_cli.main(["verify", _img(101, 1), "--template", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged template" in err[0]
    h = tmp_path / "h.json"
    monkeypatch.setenv("FEDPRINT_PIN", "2468")
    assert fedprint_cli.main(["enroll", *imgs, "--out", str(h), "--pin"]) == 0
    assert fedprint_cli.main(["verify", _img(101, 1), "--template", str(h)]) == 0
    monkeypatch.setenv("FEDPRINT_PIN", "2469")
    assert fedprint_cli.main(["verify", _img(101, 1), "--template", str(h)]) == 1  # wrong PIN refused
