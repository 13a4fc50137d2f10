"""Point-set and region releases take their minutiae from the chosen backend and record it (release, sidecar,
ledger, publish-eval); an unknown or uninstalled backend is one line naming the option, before anything is read."""

from __future__ import annotations

import csv
import importlib.util
import json

import numpy as np
import pytest
from scipy import ndimage

import fedprint.privacy.publish.release as release_mod
from fedprint.cli.main import main
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.privacy.ledger import Ledger
from fedprint.privacy.publish_eval import publish_eval


def _print(size: int = 160, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    xx = np.mgrid[:size, :size][1].astype(float)
    phase = ndimage.gaussian_filter(rng.normal(size=(size, size)), 12) * 600
    return np.clip(128 + 100 * np.cos(2 * np.pi * xx / 9 + phase), 0, 255).astype(np.uint8)


def _fake_extract(calls: list):
    def extract(image, backend, **kw):
        calls.append(backend)
        g = np.linspace(20, 140, 6)
        xy = np.array([(x, y) for x in g for y in g])
        return np.column_stack([xy, np.zeros(len(xy)), np.ones(len(xy)), np.full(len(xy), 0.5)])
    return extract


def test_release_uses_and_records_the_backend(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(release_mod, "extract", _fake_extract(calls))
    monkeypatch.setattr(release_mod, "resolve_backend", lambda name: name)  # nbis need not be installed
    ledger = Ledger(tmp_path / "l.json", 10.0)
    pub, res, _ = release_mod.release("pointset", _print(), 2.0, np.random.default_rng(0), "sound", ledger=ledger,
                                      unit="f1", minutiae_backend="nbis", protect="finger")
    assert calls == ["nbis"] and pub.details["minutiae_backend"] == "nbis"
    ledger.commit(res)
    assert ledger.history()[0]["minutiae_backend"] == "nbis"
    # an image mechanism reads no minutiae and records no backend
    pub, _, _ = release_mod.release("lap", _print(), 2.0, np.random.default_rng(0), "sound",
                                    minutiae_backend="nbis", allow_large_epsilon=True)
    assert calls == ["nbis"] and "minutiae_backend" not in pub.details


def test_release_crossing_is_the_crossing_number():
    from fedprint.data.minutiae import extract_minutiae

    img = _print()
    pub, _, _ = release_mod.release("pointset", img, 1e3, np.random.default_rng(0), "sound",
                                    minutiae_backend="crossing", allow_large_epsilon=True)
    assert pub.details["minutiae_backend"] == "crossing" and len(pub.points) == len(extract_minutiae(img))


@pytest.mark.parametrize("backend, words", [("mindtct", "expected auto or one of"), ("nbis", "not installed")])
def test_a_bad_backend_is_refused_before_the_image_is_read(tmp_path, monkeypatch, backend, words):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nbis" else real(name, *a))
    calls: list = []
    monkeypatch.setattr(release_mod, "extract", _fake_extract(calls))
    ledger = Ledger(tmp_path / "l.json", 10.0)
    with pytest.raises(ValueError, match=f"^--minutiae-backend: .*{words}"):
        release_mod.release("pointset", _print(), 2.0, np.random.default_rng(0), "sound", ledger=ledger, unit="f1",
                            minutiae_backend=backend, protect="finger")
    assert calls == [] and ledger.history() == [] and ledger.remaining("f1") == 10.0


def test_cli_publish_records_the_backend_and_refuses_a_bad_one(tmp_path, capsys):
    import cv2

    image = tmp_path / "print.png"
    cv2.imwrite(str(image), _print())
    out = tmp_path / "out.json"
    args = ["publish", "--mechanism", "pointset", "--protect", "finger", "--epsilon", "2", str(image), "-o", str(out)]
    assert main([*args, "--minutiae-backend", "crossing"]) == 0
    side = json.loads((tmp_path / "out.json.guarantee.json").read_text())
    assert side["minutiae_backend"] == "crossing" and side["details"]["minutiae_backend"] == "crossing"
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    assert main([*args[:-1], str(bad), "--minutiae-backend", "mindtct"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--minutiae-backend" in err and "mindtct" in err and len(err.splitlines()) == 1 and not bad.exists()


def test_publish_eval_names_its_backend(tmp_path):
    records = [r for f in range(3) for r in finger_records(get_profile("socofing"), f, 2, seed=0)]
    path = publish_eval(records, mechanisms=["pointset"], variants=["sound"], epsilons=[2.0], out_dir=tmp_path,
                        progress=False, minutiae_backend="crossing")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["minutiae_backend"] for r in rows} == {"crossing"}
    assert "Minutiae by the `crossing` backend" in (tmp_path / "report.md").read_text()
    with pytest.raises(ValueError, match="^--minutiae-backend"):
        publish_eval(records, mechanisms=["pointset"], epsilons=[2.0], out_dir=tmp_path / "x", progress=False,
                     minutiae_backend="bogus")
