"""Run-directory writers: atomic, numpy-aware, never leave temporaries behind."""

import json

import numpy as np
import pytest

from fedprint.config.rundir import markdown_table, new_run_dir
from fedprint.data.atomic_io import write_csv, write_json


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


def test_written_files_are_readable_by_other_users(tmp_path):
    """mkstemp's 0600 must not reach the result: a ClientApp container (uid 49999) reads the data read-only."""
    import os

    from fedprint.data.atomic_io import atomic_write_bytes, creation_mode

    old = os.umask(0o022)
    try:
        assert creation_mode() == 0o644
        for path in (write_json(tmp_path / "a.json", {"x": 1}), write_csv(tmp_path / "b.csv", [{"x": 1}]),
                     atomic_write_bytes(tmp_path / "sub" / "c.bin", b"x")):
            assert path.stat().st_mode & 0o777 == 0o644, path
        write_json(tmp_path / "a.json", {"x": 2})  # a replace, too
        assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)  # a user who wants private files says so with the umask, as for any other program
        assert write_json(tmp_path / "p.json", {}).stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
