"""studies/classical_over_seeds.py: a --classical-pairs train experiment over seeds, per sensor."""

from __future__ import annotations

import csv
import json

import pytest

from studies.classical_over_seeds import load_runs, main, summary, table


def _run(tmp_path, seed: int, eers: dict[str, tuple[float, float]]):
    """A train run folder: sensor -> (deep EER, classical EER) on the classical subset."""
    folder = tmp_path / f"s{seed}"
    folder.mkdir()
    with open(folder / "classical_comparison.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ["model", "client", "pairs", "genuine", "deep_eer", "classical_eer", "fused_eer"])
        w.writeheader()
        for c, (d, k) in eers.items():
            w.writerow({"model": "centralized", "client": c, "pairs": 400, "genuine": 200, "deep_eer": d,
                        "classical_eer": k, "fused_eer": min(d, k)})
    per = [{"client": c, "eer": d, "fmr100": 2 * d, "n_genuine": 600, "n_impostor": 10000}
           for c, (d, _) in eers.items()]
    (folder / "metrics.json").write_text(json.dumps({"per_client": per}))
    (folder / "config.json").write_text(json.dumps({"run": {"name": "x", "seed": seed}}))
    return folder


def test_per_sensor_rows_pair_deep_and_classical_by_seed(tmp_path):
    # given out of seed order: rows follow the seeds
    f = [_run(tmp_path, 1, {"a": (0.06, 0.08), "b": (0.02, 0.01)}),
         _run(tmp_path, 0, {"a": (0.03, 0.05), "b": (0.01, 0.01)})]
    runs = load_runs(f)
    rows = {r["sensor"]: r for r in table(runs)}
    assert rows["a"]["deep EER %, seeds 0/1"] == "3.0 / 6.0"
    assert rows["a"]["classical EER %"] == "5.0 / 8.0"
    # -2 points on both seeds: the paired interval is exactly -2
    assert rows["a"]["deep − classical, points [95 % CI]"] == "-2.0 [-2.0, -2.0]"
    assert rows["b"]["at or below"] == "yes / no"  # a tie counts as at or below
    assert rows["b"]["fused EER % (beside, never instead)"] == "1.0 / 1.0"
    assert rows["a"]["deep EER % (FNMR@FMR1 %), all pairs"] == "3.0 (6.0) / 6.0 (12.0)"
    assert rows["a"]["all held-out pairs (genuine / impostor)"] == "600 / 10,000"  # the same on both seeds: once
    assert summary(runs) == ("at or below the classical matcher on 2 / 1 of 2 sensors (seeds 0 / 1); "
                             "on every seed: 1 of 2")


def test_bad_inputs_are_named(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "classical_comparison.csv" in capsys.readouterr().err
    a = _run(tmp_path, 0, {"a": (0.1, 0.1)})
    with pytest.raises(ValueError, match="same seed"):
        load_runs([a, a])
    b = _run(tmp_path, 1, {"z": (0.1, 0.1)})
    with pytest.raises(ValueError, match="holds sensors"):
        load_runs([a, b])
