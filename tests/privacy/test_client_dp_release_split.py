"""Issue 24 §3: a client-level DP run's model file holds only DP-released content (no threshold averaged from the
clients' raw validation thresholds, no per-client metric); the report and released.json separate the release from
the server-internal record."""

from __future__ import annotations

from flwr.app import ArrayRecord

from fedprint.config import load_experiment
from fedprint.lab.report import internal_heading, privacy_section
from fedprint.models.model_file import load_model
from fedprint.server.server_app import export_global_model, release_manifest
from tests.client.test_client_app import write_experiment

PRIVACY = {"level": "client", "unit": "institution", "epsilon": 4.0, "delta": 1e-5, "rounds": 1, "releases": 1,
           "delta_rule": "δ = 1e-05 for n = 2 clients", "noise_multiplier": 1.2, "gap_noise_multiplier": None,
           "clip": 1.0, "alpha_cap": "2/m", "accountant": "RDP", "sampling": "none", "not_protected": "logs"}
ROWS = [{"round": 1, "clients": [
    {"client": "a", "eval_status": "ok", "threshold": 0.8, "val-pairs": 10, "accuracy": 0.9, "eer": 0.1},
    {"client": "b", "eval_status": "ok", "threshold": 1.2, "val-pairs": 30, "accuracy": 0.7, "eer": 0.3}]}]
FINAL = {"clients": [{"client": "a", "accuracy": 0.9}, {"client": "b", "accuracy": 0.7}], "privacy": PRIVACY}


def _export(tmp_path, extra: str):
    cfg, _ = load_experiment(write_experiment(tmp_path, extra='[dp]\nenabled = true\nlevel = "client"\n' + extra))
    arrays = ArrayRecord(cfg.model.new_encoder(cfg.run.seed).state_dict())
    export_global_model(tmp_path / "model.pt", arrays, cfg, ROWS, method="affr", final=FINAL)
    return load_model(tmp_path / "model.pt")


def test_dp_model_file_carries_no_raw_threshold_nor_client_metrics(tmp_path):
    model = _export(tmp_path, "")
    assert model.threshold is None and "[dp] threshold" in model.meta["threshold_source"]
    assert "test" not in model.meta["metrics"] and model.meta["metrics"]["privacy"]["epsilon"] == 4.0
    assert "0.9" not in str(model.meta["metrics"])


def test_dp_model_file_carries_the_users_public_threshold(tmp_path):
    model = _export(tmp_path, "threshold = 0.95\n")
    assert model.threshold == 0.95 and "set by the user" in model.meta["threshold_source"]


def test_release_and_internal_record_are_separated():
    manifest = release_manifest(PRIVACY, exported=True, threshold=None)
    assert "model.pt" in manifest["released_under_dp"]
    assert "final.json" in manifest["server_internal_unprotected"]
    text = privacy_section({"affr": PRIVACY}) + internal_heading({"affr": PRIVACY})
    assert text.index("Released under client-level DP") < text.index("NOT protected by DP")
    assert internal_heading({"fedavg": {"level": "none"}}) == ""
