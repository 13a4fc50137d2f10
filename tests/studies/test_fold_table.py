"""studies/fold_table.py on K fold run folders written here (two small sensors, an untrained toy model and the stand-in
matcher: the plumbing and the pooling are under test)."""

from __future__ import annotations

import json
import os

import numpy as np
import torch

from fedprint.config.experiment import parse_config
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.model_file import model_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder
from studies.fold_table import main

FINGERS = {"sensor_a": 7, "sensor_b": 9}


def _runs(tmp_path, folds=3, seed=4):
    torch.manual_seed(0)
    real = tmp_path / "real"
    for k, (name, n) in enumerate(FINGERS.items()):
        write_generic(stripe_records(n_fingers=n, n_impressions=3, size=40, seed=k), real / name)
    runs = []
    for k in range(folds):
        cfg = parse_config({"run": {"seed": seed}, "data": {
            "sources": [{"kind": "real", "name": n} for n in FINGERS], "folds": folds, "fold": k,
            "val_fraction": 0.1}})
        run = tmp_path / f"f{k}"
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"mode": "centralized", **cfg.to_dict()}))
        (run / "model_centralized.pt").write_bytes(model_bytes(
            build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
            encoder_kwargs={"width": 4}, spec=InputSpec(size=32), threshold=0.6, method="toy"))
        runs.append(str(run))
    return real, runs


def test_pools_every_finger_once_beside_the_matcher_on_the_same_pairs(tmp_path, fake_matcher, capsys):
    real, runs = _runs(tmp_path)
    out = tmp_path / "t.md"
    assert main([*runs, "--real-samples", str(real), "--max-impostors", "50", "--out", str(out), "--quiet"]) == 0
    lines = {ln.split(" | ")[0].lstrip("| "): ln.split(" | ") for ln in out.read_text().splitlines()[2:]}
    for name, n in FINGERS.items():
        row = lines[name]
        assert row[1] == "0, 1, 2 of 3" and int(row[2]) == n  # every finger held out once
        genuine, impostor = 3 * n, sum(9 * a * (a - 1) // 2 for a in np.bincount(np.arange(n) % 3))
        assert row[3] == f"{genuine} / {impostor}"  # every pair inside each fold's held-out fingers
        assert len(row[10].split("; ")) == 3  # both EERs of each fold
        assert all(f.endswith(" / 0.0") for f in row[10].split("; "))
        assert row[8] == "0.0" and row[-1].rstrip(" |") == "no; no"  # the stand-in separates perfectly, the toy not
    assert fake_matcher["pairs"] > 0
    assert os.environ.get("FEDPRINT_REAL_SAMPLES") != str(real)  # --real-samples does not leak into later tests


def test_refuses_a_fold_given_twice_and_a_run_without_folds(tmp_path, fake_matcher, capsys):
    real, runs = _runs(tmp_path, folds=2)
    assert main([runs[0], runs[0], "--real-samples", str(real), "--quiet"]) == 2
    assert "distinct folds of one seed" in capsys.readouterr().err
    cfg = json.loads((tmp_path / "f1" / "config.json").read_text())
    cfg["data"]["folds"], cfg["data"]["fold"] = 0, 0
    (tmp_path / "f1" / "config.json").write_text(json.dumps(cfg))
    assert main([runs[1], "--real-samples", str(real), "--quiet"]) == 2
    assert "not a K-fold run" in capsys.readouterr().err
