"""``fedprint audit`` (attacks.audit): a run directory is audited without being changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fedprint.attacks import audit
from fedprint.cli.main import main
from fedprint.config import parse_config
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.lab.train_run import run_training


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    torch.set_num_threads(1)  # 2 shared cores: more threads only oversubscribe them
    tmp = tmp_path_factory.mktemp("audit")
    data = write_generic(stripe_records(n_fingers=20, n_impressions=4, size=32, seed=3), tmp / "data")
    cfg = parse_config({
        "run": {"name": "tiny", "out": str(tmp / "runs"), "seed": 0},
        "data": {"sources": [{"kind": "dataset", "layout": "generic", "root": str(data)}]},
        "model": {"encoder": "compact", "embedding_dim": 16, "input_size": 32},
        "train": {"epochs": 2, "max_pairs_per_epoch": 200},
    })
    return run_training(cfg, "centralized", progress=False)


def _audit(run: Path, out: Path, dp_epsilons: tuple[float, ...]) -> Path:
    settings = audit.AuditSettings(shadow_models=2, epochs=1, input_size=32, dp_epsilons=dp_epsilons,
                                   max_pairs_per_epoch=120, shadow_fingers=3)
    return audit.run_audit(run, attacks=["mia"], out=out, settings=settings)


def test_audit_of_run_model_leaves_run_unchanged(tiny_run, tmp_path):
    before = audit.hash_tree(tiny_run)
    assert main(["audit", "--run", str(tiny_run), "--attacks", "mia", "--no-comparison", "--quiet",
                 "--out", str(tmp_path / "aud")]) == 0
    assert audit.hash_tree(tiny_run) == before
    assert sorted(p.name for p in tiny_run.parent.iterdir() if p.name.startswith(tiny_run.name)) == [tiny_run.name]
    text = (tmp_path / "aud" / "audit.md").read_text()
    assert "checkpoint(s)" in text and "## Table 6" not in text and "identical" in text
    got = json.loads((tmp_path / "aud" / "mia.json").read_text())
    assert got["study"] is None and got["run_models"][0]["model"] == "centralized"
    assert set(got["run_models"][0]["attacks"]) == {"yeom_distance", "yeom_loss", "compactness"}


def test_audit_default_out_is_a_new_sibling_folder(tiny_run, tmp_path):
    """No --out: the audit makes <run>-audit-<timestamp> beside the run (and starts it with provenance.json)."""
    import shutil

    run = shutil.copytree(tiny_run, tmp_path / "runs" / tiny_run.name)
    assert main(["audit", "--run", str(run), "--attacks", "mia", "--no-comparison", "--quiet"]) == 0
    (out,) = [p for p in run.parent.iterdir() if p.name.startswith(f"{run.name}-audit-")]
    assert (out / "audit.md").is_file() and (out / "provenance.json").is_file()


@pytest.mark.slow
def test_audit_mia_comparison_leaves_run_unchanged(tiny_run, tmp_path):
    before = audit.hash_tree(tiny_run)
    out = _audit(tiny_run, tmp_path / "aud", ())
    assert audit.hash_tree(tiny_run) == before
    assert sorted(p.name for p in tiny_run.parent.iterdir() if p.name.startswith(tiny_run.name)) == [tiny_run.name]
    text = (out / "audit.md").read_text()
    assert "Table 6" in text and "no defence" in text and "FP-DFSN β = 0.5" in text
    assert "not resolvable" in text  # 8 non-member fingers cannot resolve TPR at 1% FPR
    assert (out / "mia_roc_0.png").is_file() and (out / "mia_roc_run.png").is_file()
    study = json.loads((out / "mia.json").read_text())["study"]
    rows, setup = study["conditions"], study["setup"]
    assert [r["condition"] for r in rows] == ["no defence", "FP-DFSN β = 0.5"]
    for r in rows:
        assert set(r["attacks"]) == set(audit.mia.ATTACKS)
        for m in r["attacks"].values():  # every attack scored every candidate finger, with a real interval
            assert m["n_members"] == setup["members"] and m["n_nonmembers"] == setup["nonmembers"]
            lo, hi = m["auc_ci95"]
            assert lo <= m["auc"] <= hi and lo < hi


@pytest.mark.slow
def test_audit_dp_condition_reaches_target_epsilon(tiny_run, tmp_path):
    before = audit.hash_tree(tiny_run)
    out = _audit(tiny_run, tmp_path / "aud", (8.0,))
    assert audit.hash_tree(tiny_run) == before
    rows = json.loads((out / "mia.json").read_text())["study"]["conditions"]
    assert rows[-1]["condition"] == "DP-SGD ε ≈ 8"
    assert rows[-1]["epsilon"] == pytest.approx(8.0, rel=0.05)


def test_audit_rejects_bad_inputs(tiny_run, tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown attack"):
        audit.run_audit(tiny_run, attacks=["mia", "telepathy"])
    with pytest.raises(ValueError, match="inside the run directory"):
        audit.run_audit(tiny_run, attacks=["mia"], out=tiny_run / "audit")
    with pytest.raises(FileNotFoundError):
        audit.load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        audit.load_run(tmp_path / "empty")
    assert main(["audit", "--run", str(tmp_path / "nope")]) == 2
    assert "run directory not found" in capsys.readouterr().err
    assert main(["audit", "--run", str(tiny_run), "--attacks", "mia,telepathy"]) == 2
    assert "unknown attack" in capsys.readouterr().err


def test_load_run_reads_config_and_checkpoint(tiny_run):
    info = audit.load_run(tiny_run)
    assert info.kind == "train" and list(info.models) == ["centralized"]
    assert info.cfg.model.input_size == 32 and info.cfg.train.max_pairs_per_epoch == 200


def test_synthetic_population_is_deterministic_and_disjoint():
    a = audit.synthetic_population(2, 2, seed=5, size=64)
    b = audit.synthetic_population(2, 2, seed=5, size=64)
    c = audit.synthetic_population(2, 2, seed=6, size=64)
    assert all((x.image == y.image).all() for x, y in zip(a, b, strict=True))
    assert {r.identity for r in a}.isdisjoint({r.identity for r in c})
    assert not (a[0].image == a[1].image).all()  # impressions differ


@pytest.mark.slow
def test_audit_imprint_table5_leaves_run_unchanged(tiny_run, tmp_path):
    pytest.importorskip("fedprint.attacks.inversion_audit")
    before = audit.hash_tree(tiny_run)
    out = audit.run_audit(tiny_run, attacks=["imprint"], out=tmp_path / "aud", quick=True)
    assert audit.hash_tree(tiny_run) == before
    text = (out / "audit.md").read_text()
    assert "Table 5" in text and "without FP-DFSN" in text and "with FP-DFSN β = 0.5" in text
    assert "## Table 6" not in text
    res = json.loads((out / "inversion.json").read_text())
    assert set(res) == {"without FP-DFSN", "with FP-DFSN β = 0.5"}


def test_load_run_reads_a_simulate_run(tiny_run, tmp_path):
    """A `fedprint simulate` layout: config.json {"experiment", "rounds"} + <method>/checkpoint/ arrays."""
    import numpy as np

    from fedprint.models.siamese import new_encoder

    info = audit.load_run(tiny_run)
    sim = tmp_path / "sim"
    (sim / "fedavg" / "checkpoint").mkdir(parents=True)
    (sim / "config.json").write_text(json.dumps({"experiment": info.cfg.to_dict(), "rounds": 3}, default=str))
    sd = new_encoder("compact", 16, 5, width=16).state_dict()
    np.savez(sim / "fedavg" / "checkpoint" / "arrays-r0003.npz",
             **{f"a{i:04d}": v.numpy() for i, v in enumerate(sd.values())})
    (sim / "fedavg" / "checkpoint" / "state.json").write_text(json.dumps(
        {"format": "fedprint-checkpoint/1", "round": 3, "arrays": "arrays-r0003.npz", "keys": list(sd)}))
    got = audit.load_run(sim)
    assert got.kind == "simulate" and got.epochs_per_client == 3 * info.cfg.train.epochs
    (name, (net, used)), = got.models.items()
    assert name == "fedavg (round 3)" and used is None
    for k, v in net.state_dict().items():
        assert (v == sd[k]).all()


def test_interrupted_audit_keeps_finished_parts_and_resumes(tiny_run, tmp_path, monkeypatch):
    """Each part is saved when it finishes; a stop loses only the part in progress; the same --out resumes."""
    from fedprint.attacks import membership_study as ms

    settings = audit.AuditSettings(shadow_models=2, epochs=1, input_size=32, dp_epsilons=(),
                                   max_pairs_per_epoch=60, shadow_fingers=2)
    real, calls = ms.run_condition, []

    def stop_on_second(study, label, *a, **k):
        calls.append(label)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user presses Ctrl-C during the FP-DFSN condition
        return real(study, label, *a, **k)

    monkeypatch.setattr(ms, "run_condition", stop_on_second)
    out = tmp_path / "aud"
    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        audit.run_audit(tiny_run, attacks=["mia"], out=out, settings=settings, echo=lines.append)
    assert "expected duration" in lines[0]
    assert [ln.split(":")[1].strip() for ln in lines[1:]] == ["run models", "no defence"]
    text = (out / "audit.md").read_text()
    assert "parts finished: 2 of 3" in text and "still to run:** mia: FP-DFSN β = 0.5" in text
    assert (out / "mia_roc_0.png").is_file() and (out / "mia_roc_run.png").is_file()
    kept = json.loads((out / "mia.json").read_text())["study"]["conditions"]
    assert [r["condition"] for r in kept] == ["no defence"]

    monkeypatch.setattr(ms, "run_condition", lambda study, label, *a, **k: (calls.append(label),
                                                                             real(study, label, *a, **k))[1])
    audit.run_audit(tiny_run, attacks=["mia"], out=out, settings=settings, echo=lines.append)
    assert calls == ["no defence", "FP-DFSN β = 0.5", "FP-DFSN β = 0.5"]  # the finished ones were not redone
    text = (out / "audit.md").read_text()
    assert "parts finished: 3 of 3" in text and "identical" in text and "still to run" not in text
    rows = json.loads((out / "mia.json").read_text())["study"]["conditions"]
    assert [r["condition"] for r in rows] == ["no defence", "FP-DFSN β = 0.5"]
    with pytest.raises(ValueError, match="different"):  # other settings: refused, not mixed into this audit
        audit.run_audit(tiny_run, attacks=["mia"], out=out, settings=audit.QUICK, echo=lines.append)


def test_client_dp_canary_audit_of_a_dp_run(tiny_run, tmp_path):
    """`--attacks client-dp` audits every client-level DP method of a simulate run with its own z, C and α."""
    import numpy as np

    from fedprint.models.siamese import new_encoder
    from fedprint.privacy.client_dp import calibrate, client_epsilon

    info = audit.load_run(tiny_run)
    sim = tmp_path / "sim"
    ck = sim / "affr" / "checkpoint"
    ck.mkdir(parents=True)
    (sim / "config.json").write_text(json.dumps({"experiment": info.cfg.to_dict(), "rounds": 2}, default=str))
    sd = new_encoder("compact", 16, 5, width=16).state_dict()
    np.savez(ck / "arrays-r0002.npz", **{f"a{i:04d}": v.numpy() for i, v in enumerate(sd.values())})
    (ck / "state.json").write_text(json.dumps({"format": "fedprint-checkpoint/1", "round": 2,
                                               "arrays": "arrays-r0002.npz", "keys": list(sd)}))
    z, zg = calibrate(4.0, 1e-5, 2, 1.0)
    (sim / "affr" / "final.json").write_text(json.dumps({"privacy": {
        "level": "client", "epsilon": client_epsilon(z, zg, 2, 1e-5), "delta": 1e-5, "noise_multiplier": z,
        "clip": 1.0}}))
    (sim / "affr" / "rounds.json").write_text(json.dumps([{"clients": [{"alpha": 0.5}, {"alpha": 0.3},
                                                                       {"alpha": 0.2}]}]))
    out = audit.run_audit(sim, attacks=["client-dp"], out=tmp_path / "aud", echo=lambda _: None)
    text = (out / "audit.md").read_text()
    assert "one-run canary audit" in text and "| affr |" in text and "VIOLATION" not in text
    row = json.loads((out / "parts" / "client-dp_canaries.json").read_text())["rows"][0]
    assert row["verdict"] == "ok" and row["ε_lb (audited releases)"] <= row["claimed ε (audited releases)"]
    assert row["rounds / canary"] == 1  # the final.json gives no rounds: one release per canary
    assert row["power: shortfall caught (p ≥ 0.9)"].startswith("≥ ") and "power: shortfall caught" in text


def test_inversion_on_a_ridge_normalised_run_is_refused_before_any_work(tiny_run, tmp_path):
    """The inversion attacks model 'standardize' and 'unit_range' inputs only: a run trained on ridge-normalised
    inputs is refused up front with the reason, and no audit folder is made."""
    import json
    import shutil

    from fedprint.attacks.recon_metrics import check_invertible

    check_invertible("standardize")
    check_invertible("unit_range")
    run = tmp_path / "ridge_run"
    shutil.copytree(tiny_run, run)
    cfg = json.loads((run / "config.json").read_text())
    model = cfg.get("experiment", cfg)["model"]
    model["normalization"] = "ridge"
    (run / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="normalization = 'ridge'.*only for 'standardize' and 'unit_range'"):
        audit.run_audit(run, attacks=["inversion"], out=tmp_path / "aud", quick=True)
    assert not (tmp_path / "aud").exists()
