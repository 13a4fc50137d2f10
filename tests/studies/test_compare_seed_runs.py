"""studies/compare_seed_runs.py: two --seeds runs paired by seed, per method and institution."""

from __future__ import annotations

import json

import pytest

from studies.compare_seed_runs import compare, main, per_seed


def _run(tmp_path, name: str, eers: dict[int, tuple[float, float]]):
    folder = tmp_path / name
    folder.mkdir()
    per = {str(s): {"fedavg": [{"client": "a", "eer": ea, "fmr100": 0.5}, {"client": "b", "eer": eb, "fmr100": 0.3}]}
           for s, (ea, eb) in eers.items()}
    (folder / "summary.json").write_text(json.dumps({"per_seed": per}))
    return folder


def test_differences_are_paired_by_seed_and_averaged_over_institutions(tmp_path):
    a = _run(tmp_path, "a", {0: (0.10, 0.20), 1: (0.30, 0.20), 2: (0.50, 0.20)})
    b = _run(tmp_path, "b", {0: (0.08, 0.20), 1: (0.28, 0.20), 2: (0.48, 0.20), 3: (0.0, 0.0)})  # seed 3: unpaired
    rows = {r["institution"]: r for r in compare(per_seed(a), per_seed(b))}
    assert rows["a"]["seeds"] == 3
    # a large spread between seeds, but the same -2 points on each: the paired interval is exactly -2
    assert rows["a"]["B − A EER, points [95 % CI]"] == "-2.0 [-2.0, -2.0]"
    assert rows["average"]["B − A EER, points [95 % CI]"] == "-1.0 [-1.0, -1.0]"
    assert rows["b"]["A EER %"] == "20.0"


def test_missing_runs_and_disjoint_seeds_are_named(tmp_path, capsys):
    assert main([str(tmp_path / "nope"), str(tmp_path / "nope")]) == 2
    assert "summary.json" in capsys.readouterr().err
    a, b = _run(tmp_path, "a", {0: (0.1, 0.1)}), _run(tmp_path, "b", {1: (0.1, 0.1)})
    with pytest.raises(ValueError, match="no common seed"):
        compare(per_seed(a), per_seed(b))
