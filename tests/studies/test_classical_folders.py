"""studies/classical_folders.py on generic folders written here, with the stand-in minutiae matcher of conftest."""

from __future__ import annotations

import csv

from fedprint.data.stripes import stripe_records, write_generic
from fedprint.recognition.matching import protocol_pairs
from studies.classical_folders import main


def test_scores_each_folder_and_protocol_on_its_own_pairs_and_reuses_the_cache(fake_matcher, tmp_path, capsys):
    root = tmp_path / "real"
    a = stripe_records(n_fingers=5, n_impressions=3, size=40, seed=1)
    write_generic(a, root / "set_a")
    write_generic(stripe_records(n_fingers=4, n_impressions=2, size=40, seed=2), root / "set_b")
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = ["--real-samples", str(root), "--sets", "set_a", "--protocols", "fvc,all", "--cache", str(cache),
            "--out", str(out)]
    assert main(args) == 0
    rows = list(csv.DictReader((out / "classical_folders.csv").open()))
    assert [(r["set"], r["protocol"]) for r in rows] == [("set_a", "fvc"), ("set_a", "all")]  # set_b not asked
    for r in rows:
        pairs = protocol_pairs(a, r["protocol"])
        assert (int(r["genuine"]), int(r["impostor"])) == (int(pairs.label.sum()), int((pairs.label == 0).sum()))
        assert float(r["EER %"]) == 0.0  # the stand-in separates fingers perfectly
    assert fake_matcher["pairs"] == len(protocol_pairs(a, "all"))  # the FVC pairs are among all pairs: cached
    assert main(args) == 0 and fake_matcher["pairs"] == len(protocol_pairs(a, "all"))  # a rerun scores nothing
    assert "| set_a | all |" in capsys.readouterr().out


def test_refuses_unknown_sets_protocols_and_a_missing_root(tmp_path, capsys):
    root = tmp_path / "real"
    write_generic(stripe_records(n_fingers=3, n_impressions=2, size=40, seed=1), root / "set_a")
    out = str(tmp_path / "out")
    assert main(["--real-samples", str(root), "--sets", "nope", "--out", out]) == 2
    assert "no folder ['nope']" in capsys.readouterr().err
    assert main(["--real-samples", str(root), "--protocols", "fvc,some", "--out", out]) == 2
    assert "--protocols" in capsys.readouterr().err
    assert main(["--real-samples", str(tmp_path / "none"), "--out", out]) == 2
    assert "not found" in capsys.readouterr().err
