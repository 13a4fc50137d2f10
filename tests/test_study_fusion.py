"""bench/study_fusion.py: the pair subset, the cached classical scores and the fused score."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import bench.study_fusion as study
from data.pairs import PairSet
from models.metrics import rank_fusion


def test_subset_draws_the_asked_pairs_of_each_class_without_repeats():
    labels = np.array([1] * 30 + [0] * 500)
    pick = study.subset(labels, genuine=100, impostors=40, seed=3)
    assert len(pick) == 70 and len(set(pick.tolist())) == 70
    assert (labels[pick[:30]] == 1).all() and (labels[pick[30:]] == 0).all()  # all 30 genuine, then 40 impostors
    np.testing.assert_array_equal(pick, study.subset(labels, genuine=100, impostors=40, seed=3))
    assert not np.array_equal(pick, study.subset(labels, genuine=100, impostors=40, seed=4))


def test_score_run_fuses_on_the_subset_and_caches_the_classical_scores(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    labels = np.array([1] * 20 + [0] * 200)
    pairs = PairSet(np.arange(220), np.arange(220) + 1, labels)
    deep = labels + rng.normal(0, 0.6, 220)
    toml = tmp_path / "run.toml"
    toml.write_text("[run]\nseed = 0\n")
    records = [SimpleNamespace(source=f"f{k}.png", identity=str(k // 2), impression=k % 2) for k in range(221)]
    client = SimpleNamespace(test_pairs=pairs, records=records)
    monkeypatch.setattr(study, "plain_scores", lambda model, t: (deep, client))
    calls = []

    def fake_classical(client, pick, progress=True):
        calls.append(len(pick))
        return 10.0 * labels[pick] + rng.normal(0, 5.0, len(pick))

    monkeypatch.setattr(study, "classical_scores", fake_classical)
    def run(impostors: int = 50):
        return study.score_run(tmp_path / "m.pt", toml, genuine=20, impostors=impostors, seed=1, cache_dir=tmp_path,
                               progress=False)

    out = run()
    pick = study.subset(labels, 20, 50, 1)
    np.testing.assert_array_equal(out["plain"][0], deep[pick])
    np.testing.assert_array_equal(out["fused"][0], rank_fusion(deep[pick], out["classical"][0]))
    assert all(len(y) == 70 and int(y.sum()) == 20 for _, y in out.values())
    again = run()
    np.testing.assert_array_equal(again["classical"][0], out["classical"][0])
    assert calls == [70]  # the second call read the cache
    run(impostors=60)
    assert calls == [70, 80]  # another subset: scored again


def test_a_missing_run_folder_is_named(tmp_path, capsys):
    assert study.main(["--run", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--run" in err and "model_centralized.pt" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("bad", ["0", "-3", "x"])
def test_bad_pair_counts_are_refused(tmp_path, bad):
    with pytest.raises(SystemExit):
        study.main(["--run", "x", "--out", str(tmp_path), "--impostors", bad])
