"""Run-directory writers: atomic, numpy-aware, never leave temporaries behind."""

import json

import numpy as np
import pytest

from data.atomic_io import write_csv, write_json
from fedprint_config.rundir import markdown_table, new_run_dir


def test_json_and_csv(tmp_path):
    write_json(tmp_path / "m.json", {"a": np.float32(0.5), "b": np.arange(3)})
    assert json.loads((tmp_path / "m.json").read_text()) == {"a": 0.5, "b": [0, 1, 2]}
    write_csv(tmp_path / "m.csv", [{"x": 1}, {"x": 2, "y": 3}])
    assert (tmp_path / "m.csv").read_text().splitlines() == ["x,y", "1,", "2,3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv", "m.json"]


def test_failed_write_keeps_old_file(tmp_path):
    target = tmp_path / "m.json"
    write_json(target, {"ok": 1})
    with pytest.raises(TypeError):
        write_json(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_new_run_dir_is_unique(tmp_path):
    a, b = new_run_dir(tmp_path, "r"), new_run_dir(tmp_path, "r")
    assert a != b and a.is_dir() and b.is_dir()


def test_markdown_table():
    out = markdown_table([{"m": "x", "acc": 0.123456}])
    assert "| m | acc |" in out and "0.1235" in out
