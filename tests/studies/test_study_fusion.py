"""studies/study_fusion.py: the pair subset, the cached classical scores and the fused score."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import studies.study_fusion as study
from fedprint.data.pairs import PairSet
from fedprint.models.metrics import rank_fusion


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
    monkeypatch.setattr(study, "run_embeddings", lambda model, t: (None, client))
    monkeypatch.setattr(study, "pair_cosines", lambda emb, p: deep[p.a])  # pair k compares prints k and k + 1
    calls = []

    def fake_classical(client, p, progress=True):
        calls.append(len(p.a))
        return 10.0 * p.label + rng.normal(0, 5.0, len(p.a))

    monkeypatch.setattr(study, "classical_scores", fake_classical)
    def run(impostors: int = 50):
        return study.score_run(tmp_path / "m.pt", toml, genuine=20, impostors=impostors, seed=1, cache_dir=tmp_path,
                               progress=False)

    out = run()
    pick = study.subset(labels, 20, 50, 1)
    np.testing.assert_array_equal(out["plain"][0], deep[pick])
    np.testing.assert_array_equal(out["fused"][0], rank_fusion(deep[pick], out["classical"][0]))
    z = (deep[pick] - deep[pick].mean()) / deep[pick].std()
    z += (out["classical"][0] - out["classical"][0].mean()) / out["classical"][0].std()
    np.testing.assert_allclose(out["fused z"][0], z)  # each score standardised on the subset, then added
    assert "fused z (training ref.)" not in out
    assert all(len(y) == 70 and int(y.sum()) == 20 for _, y in out.values())
    again = run()
    np.testing.assert_array_equal(again["classical"][0], out["classical"][0])
    assert calls == [70]  # the second call read the cache
    run(impostors=60)
    assert calls == [70, 80]  # another subset: scored again


def _training_client(fingers: int = 6, impressions: int = 3):
    records = [SimpleNamespace(source=f"{f}_{i}.png", identity=f"f{f}", impression=i)
               for f in range(fingers) for i in range(impressions)]
    a, b = np.triu_indices(len(records), 1)
    same = np.array([records[i].identity == records[j].identity for i, j in zip(a, b, strict=True)], int)
    return SimpleNamespace(records=records, train_pairs=PairSet(a, b, same))


def test_reference_pairs_stay_among_the_drawn_training_fingers():
    client = _training_client()
    ref = study.reference_pairs(client, fingers=3, genuine=100, impostors=100, seed=0)
    ident = {client.records[i].identity for i in np.r_[ref.a, ref.b]}
    assert len(ident) == 3
    assert int(ref.label.sum()) == 9 and int((ref.label == 0).sum()) == 27  # all pairs of 3 fingers x 3 prints
    again = study.reference_pairs(client, fingers=3, genuine=100, impostors=100, seed=0)
    np.testing.assert_array_equal(ref.a, again.a)
    with pytest.raises(ValueError, match="--reference-fingers 7: the run has only 6 training fingers"):
        study.reference_pairs(client, fingers=7, genuine=10, impostors=10, seed=0)


def test_the_training_reference_sets_the_z_weights(tmp_path, monkeypatch):
    client = _training_client()
    labels = np.array([1, 1, 0, 0, 0])
    client.test_pairs = PairSet(np.arange(5), np.arange(5) + 1, labels)
    deep = np.linspace(0.0, 1.0, 18)  # one value per print: cosine = product of the two
    monkeypatch.setattr(study, "run_embeddings", lambda model, t: (deep, client))
    monkeypatch.setattr(study, "pair_cosines", lambda emb, p: emb[p.a] * emb[p.b])
    monkeypatch.setattr(study, "classical_scores", lambda c, p, progress=True: 3.0 * p.label + p.a)
    out = study.score_run(tmp_path / "m.pt", tmp_path / "t.toml", genuine=5, impostors=5, seed=0,
                          cache_dir=tmp_path, reference_fingers=4, progress=False)
    ref = study.reference_pairs(client, 4, 2, 3, 0)
    ref_d, ref_c = deep[ref.a] * deep[ref.b], 3.0 * ref.label + ref.a
    test_d, test_c = out["plain"][0], out["classical"][0]
    want = (test_d - ref_d.mean()) / ref_d.std() + (test_c - ref_c.mean()) / ref_c.std()
    np.testing.assert_allclose(out["fused z (training ref.)"][0], want)
    assert not np.allclose(out["fused z (training ref.)"][0], out["fused z"][0])


def test_a_missing_run_folder_is_named(tmp_path, capsys):
    assert study.main(["--run", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--run" in err and "model_centralized.pt" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("bad", ["0", "-3", "x"])
def test_bad_pair_counts_are_refused(tmp_path, bad):
    with pytest.raises(SystemExit):
        study.main(["--run", "x", "--out", str(tmp_path), "--impostors", bad])
