"""studies/study_scoring.py: cohort score normalisation and the paired table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedprint.models.metrics import eer
from studies.study_scoring import main, paired_rows, snorm


def test_snorm_removes_a_per_print_offset_that_the_raw_score_carries():
    rng = np.random.default_rng(0)
    n, m = 200, 300
    bias = rng.normal(0, 1.0, n)  # some prints score high against everything ("wolves")
    cohort = bias[:, None] + rng.normal(0, 0.2, (n, m))
    a, b = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
    y = (rng.random(4000) < 0.2).astype(int)
    raw = 1.0 * y + 0.5 * (bias[a] + bias[b]) + rng.normal(0, 0.2, 4000)
    normed = snorm(raw, a, b, cohort)
    assert eer(normed, y, higher_is_genuine=True) < 0.5 * eer(raw, y, higher_is_genuine=True)


def test_snorm_against_one_shared_cohort_is_affine_and_keeps_the_ranking():
    rng = np.random.default_rng(1)
    cohort = np.tile(rng.normal(0, 1, 50), (10, 1))  # every print: the same cohort scores
    raw = rng.normal(0, 1, 30)
    a, b = rng.integers(0, 10, 30), rng.integers(0, 10, 30)
    expected = (raw - cohort[0].mean()) / cohort[0].std()
    np.testing.assert_allclose(snorm(raw, a, b, cohort), expected)
    top = np.sort(cohort[0])[::-1][:5]
    np.testing.assert_allclose(snorm(raw, a, b, cohort, top_k=5), (raw - top.mean()) / top.std())


def test_snorm_names_a_bad_top_k():
    with pytest.raises(ValueError, match="top_k: expected 2..4"):
        snorm(np.zeros(2), np.zeros(2, int), np.zeros(2, int), np.zeros((1, 4)), top_k=9)


def test_paired_rows_subtract_plain_split_by_split():
    rows = [{"variant": "v", "split": s, "scoring": how, "EER %": e, "FNMR@FMR1 %": f}
            for s, how, e, f in [(0, "plain", 5.0, 20.0), (0, "snorm", 6.0, 10.0),
                                 (1, "plain", 4.0, 10.0), (1, "snorm", 4.0, 15.0)]]
    (row,) = paired_rows(rows)
    assert row["scoring"] == "snorm" and row["splits"] == 2
    assert row["per split EER − plain"] == "+1.00, +0.00"
    assert row["EER − plain, points"].startswith("+0.5 [") and row["FNMR − plain, points"].startswith("-2.5 [")


def test_a_missing_run_folder_is_named(tmp_path, capsys):
    assert main(["--run", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--run" in err and "model_centralized.pt" in err


def test_bad_sizes_are_named(tmp_path, capsys):
    assert main(["--run", "x", "--out", str(tmp_path), "--sizes", "12x"]) == 2
    assert "--sizes" in capsys.readouterr().err


def test_ensemble_averages_the_runs_and_refuses_other_pairs(monkeypatch):
    import studies.study_scoring as study
    from fedprint.data.pairs import PairSet

    same = PairSet(np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([1, 0, 0]))
    other = PairSet(np.array([0, 1, 2]), np.array([1, 2, 4]), np.array([1, 0, 0]))
    from types import SimpleNamespace as Client

    table = {"a": (np.array([0.9, 0.1, 0.3]), Client(test_pairs=same)),
             "b": (np.array([0.5, 0.3, 0.1]), Client(test_pairs=same)),
             "c": (np.array([0.5, 0.3, 0.1]), Client(test_pairs=other))}
    monkeypatch.setattr(study, "plain_scores", lambda model, toml: table[model.name])
    scores, labels = study.ensemble(table["a"][0], same, [(Path("x/b"), Path("t"))])
    np.testing.assert_allclose(scores, [0.7, 0.2, 0.2])
    np.testing.assert_array_equal(labels, [1, 0, 0])
    with pytest.raises(ValueError, match="x drew other held-out pairs"):
        study.ensemble(table["a"][0], same, [(Path("x/c"), Path("t"))])
