"""data.real_sets and recognition.real_samples: the real-set root, every set under it, pooled rows with pair counts.

Layout logic runs on tiny folders written here; the shipped real sets (../shared/data/real) are used when present
and skipped with a reason otherwise.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from fedprint.data.real_sets import DEFAULT_REAL_ROOT, REAL_ENV, real_root, real_set_dir, real_set_dirs, set_real_root
from fedprint.recognition.real_samples import POOLED, rate_row, real_sample_rows

SHIPPED_SETS = ("fcj2020_dev", "fvc2002_db1_b", "fvc2002_db3_b", "fvc_300x300_b", "pyfnprint_16x8")


def _write(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:120, :120]
    img = 128 + 100 * np.sin(xx / (3 + seed % 3) + yy / (5 + seed % 4)) + rng.normal(0, 5, (120, 120))
    cv2.imwrite(str(path), np.clip(img, 0, 255).astype(np.uint8))


def _tiny_root(tmp_path: Path) -> Path:
    root = tmp_path / "real"
    for f in range(3):  # an FVC-layout set and a generic one
        for i in range(2):
            _write(root / "sensor_fvc" / f"{101 + f}_{i + 1}.tif", 10 * f + i)
            _write(root / "sensor_gen" / f"p{f}" / f"{i}.png", 100 + 10 * f + i)
    (root / "notes").mkdir()  # a folder matching no layout is left out
    return root


def test_root_from_env_and_default(monkeypatch, tmp_path):
    monkeypatch.delenv(REAL_ENV, raising=False)
    assert real_root() == DEFAULT_REAL_ROOT
    assert DEFAULT_REAL_ROOT.parts[-3:] == ("shared", "data", "real")
    monkeypatch.setenv(REAL_ENV, str(tmp_path))
    assert real_root() == tmp_path
    with pytest.raises(FileNotFoundError, match="--real-samples: .*nope is not a folder"):
        set_real_root(tmp_path / "nope")


def test_every_set_under_the_root(tmp_path):
    root = _tiny_root(tmp_path)
    assert [(d.name, layout) for d, layout in real_set_dirs(root)] == [("sensor_fvc", "fvc"),
                                                                       ("sensor_gen", "generic")]
    # The older meaning (the variable names one dataset folder) still works: that folder is the one set.
    assert [(d.name, layout) for d, layout in real_set_dirs(root / "sensor_fvc")] == [("sensor_fvc", "fvc")]
    assert real_set_dirs(tmp_path / "absent") == []
    assert real_set_dir("sensor_gen", root) == root / "sensor_gen"
    with pytest.raises(FileNotFoundError, match=r"real set 'fcj2020_dev': folder .*fcj2020_dev not found"):
        real_set_dir("fcj2020_dev", root)


def test_rate_row_counts_pairs_and_hides_fnmr_below_100_impostors():
    d = np.array([0.1, 0.2, 0.9, 1.0, 0.15])
    lab = np.array([1, 1, 0, 0, 0])
    row = rate_row(d, lab)
    assert (row["genuine"], row["impostor"], row["FNMR@FMR1%"]) == (2, 3, None)
    assert row["EER"] == pytest.approx(1 / 3, abs=0.2) and 0 <= row["ROC AUC"] <= 1


def test_every_model_on_every_set_and_pooled(tmp_path):
    from fedprint.models.model_file import pretrained_path

    root = _tiny_root(tmp_path)
    rows = real_sample_rows({"shipped": pretrained_path()}, root)
    assert [r["real set"] for r in rows] == ["sensor_fvc", "sensor_gen", f"{POOLED} (2 sets)"]
    per_set = rows[:2]
    assert [(r["genuine"], r["impostor"]) for r in per_set] == [(3, 3), (3, 3)]  # FVC protocol on 3 fingers x 2
    pooled = rows[2]
    assert (pooled["genuine"], pooled["impostor"], pooled["images"]) == (6, 6, 12)
    assert real_sample_rows({"shipped": pretrained_path()}, tmp_path / "absent") == []


@pytest.mark.skipif(not all((real_root() / s).is_dir() for s in SHIPPED_SETS),
                    reason=f"real sets not present under {real_root()} (${REAL_ENV} or ../shared/data/real)")
def test_shipped_real_sets_are_found():
    found = {d.name: layout for d, layout in real_set_dirs()}
    assert {s: found.get(s) for s in SHIPPED_SETS} == {"fcj2020_dev": "generic", "fvc2002_db1_b": "fvc",
                                                        "fvc2002_db3_b": "fvc", "fvc_300x300_b": "fvc",
                                                        "pyfnprint_16x8": "generic"}


def test_report_heading_names_the_real_sets_a_run_trained_on(monkeypatch, tmp_path):
    # A real-sensor run scores every real set on all its pairs; the sets it trained on must not be headed
    # "never used in training" (their training fingers are inside those pairs).
    from fedprint.config.experiment import SourceSection
    from fedprint.lab.report import real_sample_heading, trained_real_sets

    root = _tiny_root(tmp_path)
    monkeypatch.setenv(REAL_ENV, str(root))
    synth = SourceSection()
    assert trained_real_sets([synth]) == []
    assert "never used in training" in real_sample_heading([synth])
    real = SourceSection(kind="real", name="sensor_gen")
    by_path = SourceSection(kind="dataset", layout="fvc", root=str(root / "sensor_fvc"))
    assert trained_real_sets([real, synth]) == ["sensor_gen"]
    assert trained_real_sets([by_path]) == ["sensor_fvc"]
    heading = real_sample_heading([real, by_path])
    assert "never used in training" not in heading.splitlines()[0]
    assert "sensor_fvc, sensor_gen" in heading and "not held-out" in heading
    # a set held out by [partition] unseen trains nothing: not named among the trained-on ones
    assert trained_real_sets([real, by_path], unseen=("sensor_gen",)) == ["sensor_fvc"]
    assert "never used in training" in real_sample_heading([real], unseen=("sensor_gen",))
