"""studies/study_ensemble.py: members and their mean cosine, paired by split; bad options named."""

from __future__ import annotations

import numpy as np
import pytest

from studies.study_ensemble import _cached, main, over_sets, parse_ensembles, scored_rows, summary_rows


def test_averaging_members_with_independent_errors_lowers_the_eer():
    rng = np.random.default_rng(0)
    y = (rng.random(4000) < 0.2).astype(int)
    members = {m: y + rng.normal(0, 0.6, y.size) for m in "ABC"}  # same signal, independent noise
    rows = scored_rows(0, "set", members, y, [["A", "B", "C"]])
    alone = {r["scoring"]: r["EER %"] for r in rows[:3]}
    (ens,) = rows[3:]
    assert ens["scoring"] == "A + B + C" and ens["genuine"] == int(y.sum()) and ens["impostor"] == int((y == 0).sum())
    assert ens["members' mean EER %"] == pytest.approx(np.mean(list(alone.values())))
    assert ens["members' mean FNMR@FMR1 %"] == pytest.approx(np.mean([r["FNMR@FMR1 %"] for r in rows[:3]]))
    assert ens["EER %"] < min(alone.values()) - 2  # noise std / sqrt(3): a clearly lower EER


def test_averaging_identical_members_changes_nothing():
    rng = np.random.default_rng(1)
    y = (rng.random(500) < 0.3).astype(int)
    s = y + rng.normal(0, 1, y.size)
    rows = scored_rows(2, "set", {"A": s, "B": s.copy()}, y, [["A", "B"]])
    assert rows[2]["EER %"] == pytest.approx(rows[0]["EER %"]) and rows[2]["split"] == 2


def _row(split, how, e, members=None):
    r = {"split": split, "pairs": "p", "scoring": how, "EER %": e, "FNMR@FMR1 %": 2 * e}
    if members is not None:
        r["members' mean EER %"], r["members' mean FNMR@FMR1 %"] = members, 2 * members + 1
    return r


def test_summary_pairs_each_ensemble_with_its_members_and_the_reference_by_split():
    rows = [_row(0, "A", 5.0), _row(0, "B", 6.0), _row(0, "A + B", 4.5, 5.5),
            _row(1, "A", 3.0), _row(1, "B", 4.0), _row(1, "A + B", 3.0, 3.5)]
    by = {r["scoring"]: r for r in summary_rows(rows, "B")}
    assert by["A"]["EER − members' mean, points"] == "" and by["A"]["splits"] == 2
    ens = by["A + B"]
    assert ens["EER % [95 % CI]"].startswith("3.75 [")
    assert ens["EER − members' mean, points"].startswith("-0.8 [")  # -1.0 and -0.5
    assert ens["FNMR − members' mean, points"].startswith("-2.5 [")  # -3.0 and -2.0
    assert ens["EER − B, points"].startswith("-1.2 [")  # -1.5 and -1.0: paired with B, not with A
    assert by["B"]["EER − B, points"] == ""


def test_parse_ensembles_defaults_to_all_and_names_bad_ones():
    assert parse_ensembles([], ["A", "B", "C"]) == [["A", "B", "C"]]
    assert parse_ensembles(["A+C"], ["A", "B", "C"]) == [["A", "C"]]
    with pytest.raises(ValueError, match=r"--ensemble A\+Z.*unknown: Z"):
        parse_ensembles(["A+Z"], ["A", "B"])
    with pytest.raises(ValueError, match="--ensemble A: expected two or more of the members"):
        parse_ensembles(["A"], ["A", "B"])


def test_cached_scores_are_computed_once_per_model_file_toml_and_note(tmp_path):
    model, toml = tmp_path / "m.pt", tmp_path / "m.toml"
    model.write_bytes(b"weights")
    toml.write_text("[run]\nseed = 0\n")
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(3.0)}

    first = _cached(tmp_path / "out", [model, toml], "runs", compute)
    again = _cached(tmp_path / "out", [model, toml], "runs", compute)
    np.testing.assert_array_equal(first["x"], again["x"])
    assert len(calls) == 1
    for change in (lambda: model.write_bytes(b"other weights"), lambda: toml.write_text("[run]\nseed = 1\n")):
        change()  # another model file, another split: scored anew
        _cached(tmp_path / "out", [model, toml], "runs", compute)
    assert len(calls) == 3
    _cached(tmp_path / "out", [model, toml], "sets", compute)  # another mode or real-set root
    assert len(calls) == 4


def test_bad_options_are_named(tmp_path, capsys):
    assert main(["--variants", "A", "--out", str(tmp_path)]) == 2
    assert "--variants A: expected two or more" in capsys.readouterr().err
    assert main(["--variants", "A,B", "--reference", "C", "--out", str(tmp_path)]) == 2
    assert "--reference C" in capsys.readouterr().err
    assert main(["--variants", "A,B", "--runs", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--run" in err and "model_centralized.pt" in err
    assert main(["--variants", "a=VARIANT_X,b=VARIANT_Y", "--reference", "b", "--runs", str(tmp_path),
                 "--out", str(tmp_path / "o")]) == 2
    assert "VARIANT_X/model_centralized.pt" in capsys.readouterr().err  # a label names its variant's folder


def test_over_sets_gives_the_mean_and_the_worst_set_of_each_scoring():
    rows = [{"pairs": s, "scoring": how, "EER %": e, "FNMR@FMR1 %": 2 * e}
            for s, how, e in [("x", "A", 10.0), ("y", "A", 20.0), ("x", "A + B", 8.0), ("y", "A + B", 12.0)]]
    by = {r["scoring"]: r for r in over_sets(rows)}
    assert by["A"]["mean EER %"] == 15.0 and by["A"]["worst set"] == "y 20.0" and by["A"]["sets"] == 2
    assert by["A + B"]["mean EER %"] == 10.0 and by["A + B"]["mean FNMR@FMR1 %"] == 20.0


def test_model_files_mode_names_a_missing_file_and_refuses_splits(tmp_path, capsys):
    assert main(["--models", f"a={tmp_path / 'nope.pt'},b={tmp_path / 'nope2.pt'}", "--out", str(tmp_path)]) == 2
    assert "--models: no model file" in capsys.readouterr().err
    assert main(["--models", "a.pt,b.pt", "--splits", "2", "--out", str(tmp_path)]) == 2
    assert "--splits: goes with --variants" in capsys.readouterr().err
