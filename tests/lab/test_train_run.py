"""`fedprint train` end to end on a tiny generic-layout dataset written by the test."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from fedprint.cli.main import main
from fedprint.data.stripes import stripe_records


@pytest.fixture
def dataset_config(tmp_path):
    root = tmp_path / "prints"
    for r in stripe_records(n_fingers=12, n_impressions=3, size=40):
        (root / r.identity).mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(root / r.identity / f"{r.impression}.png"), r.image)
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        f'[run]\nname = "toy"\nout = "{tmp_path / "runs"}"\n'
        f'[[data.sources]]\nkind = "dataset"\nlayout = "generic"\nroot = "{root}"\n'
        '[partition]\nmode = "iid"\nn_clients = 2\n'
        '[model]\nembedding_dim = 8\ninput_size = 32\n[train]\nepochs = 1\n'
    )
    return cfg


@pytest.mark.parametrize("mode", ["centralized", "local"])
def test_train_writes_a_complete_run_dir(dataset_config, tmp_path, mode, capsys):
    assert main(["train", "--mode", mode, "--config", str(dataset_config), "--quiet"]) == 0
    (run_dir,) = (tmp_path / "runs").glob(f"toy-{mode}-*")
    for name in ("config.json", "clients.csv", "history.csv", "metrics.csv", "metrics.json", "roc.png",
                 "report.md"):
        assert (run_dir / name).is_file(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert len(metrics["per_client"]) == 2
    assert 0.0 <= metrics["average"]["eer"] <= 1.0
    files = sorted(run_dir.glob("model_*.pt"))
    assert len(files) == (1 if mode == "centralized" else 2)
    from fedprint.models.model_file import load_model

    for f in files:  # usable model files: weights, pipeline, a validation threshold, provenance
        m = load_model(f)
        assert m.threshold is not None and m.spec.size == 32 and m.meta["provenance"]["command"]
        assert m.meta["metrics"]["test"] and m.meta["data"]["sources"][0]["layout"] == "generic"
    report = (run_dir / "report.md").read_text()
    assert "open-set" in report and "## Provenance" in report and "EER on real fingerprints" in report
    assert json.loads((run_dir / "provenance.json").read_text())["packages"]["torch"]
    assert "report:" in capsys.readouterr().out


def test_bad_config_is_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[train]\nepochz = 3\n")
    assert main(["train", "--mode", "local", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "unknown key" in err and "bad.toml" in err


def test_fold_option_overrides_the_experiments_fold(dataset_config, tmp_path, capsys):
    toml = dataset_config.read_text().replace("n_clients = 2", "n_clients = 1")  # 12 fingers: 6 held out a fold
    dataset_config.write_text(toml.replace("[partition]", "[data]\nfolds = 2\n[partition]"))
    out = tmp_path / "fold1"
    assert main(["train", "--mode", "centralized", "--config", str(dataset_config), "--fold", "1",
                 "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "config.json").read_text())["data"]["fold"] == 1  # the split reads it: test_pairs
    assert main(["train", "--mode", "centralized", "--config", str(dataset_config), "--fold", "2", "--quiet"]) == 2
    assert "--fold 2: data.fold: expected an integer in [0, 1]" in capsys.readouterr().err


def test_classical_comparison_uses_the_same_pairs(toy_records):
    from fedprint.lab.train_run import classical_comparison
    from fedprint.models.preprocess import InputSpec
    from fedprint.models.siamese import new_encoder
    from fedprint.training.local_data import build_client_data

    data = build_client_data(toy_records, name="c", spec=InputSpec(size=32), seed=0, progress=False)
    net, other = new_encoder("compact", 8, 0), new_encoder("compact", 8, 1)
    (row,) = classical_comparison(net, [data], n_per_class=3, seed=0, progress=False,
                                  others={"same": net, "other": other})
    assert row["pairs"] == 6 and row["genuine"] == 3
    for key in ("deep_eer", "classical_eer", "deep_roc_auc", "classical_roc_auc", "other_eer", "fused_eer",
                "other_fused_eer"):
        assert 0.0 <= row[key] <= 1.0
    assert row["same_eer"] == row["deep_eer"]  # the other verifiers are scored on the very same pairs
    np.testing.assert_equal(row["same_fused_z_eer"], row["fused_z_eer"])


def test_fused_eers_z_sum_and_a_constant_matcher():
    from fedprint.lab.train_run import fused_eers

    labels = np.array([1, 1, 1, 0, 0, 0, 0, 0])
    deep_d = np.array([0.1, 0.5, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9])  # genuine 0.5 lies among the impostors
    classical = np.array([40.0, 30.0, 35.0, 5.0, 6.0, 4.0, 7.0, 3.0])  # separates all pairs
    out = fused_eers(deep_d, classical, labels, "x_")
    assert out["x_fused_z_eer"] == 0.0  # the matcher's spread outweighs the network's one mistake
    assert 0.0 <= out["x_fused_eer"] <= 1.0
    flat = fused_eers(deep_d, np.zeros(8), labels)
    assert np.isnan(flat["fused_z_eer"]) and 0.0 <= flat["fused_eer"] <= 1.0


def test_fpdfsn_sweep_writes_table_and_plot(dataset_config, tmp_path):
    assert main(["sweep", "--config", str(dataset_config), "--beta", "0,0.5", "--sigma2", "100",
                 "--quiet"]) == 0
    (run_dir,) = (tmp_path / "runs").glob("toy-fpdfsn-sweep-*")
    lines = (run_dir / "sweep.csv").read_text().splitlines()
    assert len(lines) == 4 and (run_dir / "sweep.png").is_file()
    assert main(["sweep", "--config", str(dataset_config), "--beta", "1.0", "--sigma2", ""]) == 2
