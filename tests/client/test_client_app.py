"""FedPrint Flower app: client train/evaluate handlers (fast, called directly) and an end-to-end simulation (slow).

Data: a tiny fingerprint-like dataset written in the generic layout to tmp_path (each finger a random oriented
stripe pattern, impressions = small shifts + noise), split IID over the clients by the experiment.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, Metadata, RecordDict

from fedprint.client.client_app import STATE_KEY, evaluate_handler, train_handler
from fedprint.config import load_experiment, resolve_experiment
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.siamese import new_encoder
from fedprint.server.checkpoint import load_checkpoint, load_releases


def write_experiment(tmp: Path, *, clients: int = 2, rounds: int = 2, fingers: int = 12, extra: str = "") -> Path:
    data = write_generic(stripe_records(n_fingers=fingers, n_impressions=4, size=40), tmp / "prints")
    path = tmp / "exp.toml"
    path.write_text(f"""
[run]
name = "tiny"
out = "{tmp / 'runs'}"
seed = 3

[[data.sources]]
kind = "dataset"
layout = "generic"
root = "{data}"
dpi = 250.0

[partition]
mode = "iid"
n_clients = {clients}

[model]
embedding_dim = 16
input_size = 32

[train]
epochs = 1
batch_size = 16

[federation]
rounds = {rounds}
timeout = 900.0
{extra}""")
    return path


def train_message(arrays: ArrayRecord, server_round: int, **config) -> Message:
    """An incoming train/evaluate message as the runtime delivers it to a node."""
    content = RecordDict({"arrays": arrays, "config": ConfigRecord({"server-round": server_round, **config})})
    meta = Metadata(run_id=1, message_id=f"m{server_round}", src_node_id=0, dst_node_id=7,
                    reply_to_message_id="", group_id=str(server_round), created_at=0.0, ttl=60.0,
                    message_type=MessageType.TRAIN)
    return Message(content=content, metadata=meta)


def test_shipped_experiments_parse():
    for name in ("demo", "three_domains", "ten_clients_beta_iid", "ten_clients_beta_niid", "step_ablation"):
        cfg, fed = load_experiment(resolve_experiment(name))
        assert fed.rounds >= 1 and cfg.model.input_size >= 8
    _, fed = load_experiment(resolve_experiment("step_ablation"))
    assert fed.steps == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def test_train_handler_gap_and_state(tmp_path):
    exp = write_experiment(tmp_path)
    defaults = {"experiment": str(exp)}
    ctx = Context(run_id=1, node_id=7, node_config={"partition-id": 1, "num-partitions": 2},
                  state=RecordDict(), run_config={})
    arrays = ArrayRecord(new_encoder("compact", 16, 3, width=16).state_dict())

    reply = train_handler(train_message(arrays, 1), ctx, defaults=defaults)
    m = reply.content["metrics"]
    assert set(m) == {"num-examples", "gap", "gap-se", "val-acc-before", "val-acc-after", "train-loss",
                      "fpdfsn-without-minutiae", "fpdfsn-mean-minutiae"}
    assert m["gap"] == 0.0  # first round: no previous local model
    assert m["num-examples"] > 0 and math.isfinite(m["train-loss"])
    assert set(reply.content["arrays"].keys()) == set(arrays.keys())
    assert reply.content["client"]["client-id"] == 1
    assert ctx.state.metric_records[STATE_KEY]["round"] == 1

    # Round 2 with the *initial* model as "global": the gap is Acc(previous local) - Acc(global).
    reply2 = train_handler(train_message(arrays, 2), ctx, defaults=defaults)
    m2 = reply2.content["metrics"]
    assert m2["gap"] == pytest.approx(m["val-acc-after"] - m2["val-acc-before"])
    a, b = m["val-acc-after"], m2["val-acc-before"]  # SE of two accuracies on the same n validation pairs
    n = (a * (1 - a) + b * (1 - b)) / m2["gap-se"] ** 2 if m2["gap-se"] else 0
    assert m["gap-se"] == 0.0 and (m2["gap-se"] == 0.0 or abs(n - round(n)) < 1e-6)  # n is a whole pair count
    assert m2["val-acc-before"] == pytest.approx(m["val-acc-before"])  # same global model, same val pairs

    ev = evaluate_handler(train_message(reply2.content["arrays"], 2), ctx, defaults=defaults)
    em = ev.content["metrics"]
    assert 0 <= em["accuracy"] <= 1 and 0 <= em["eer"] <= 1 and em["num-examples"] > 0


def test_train_handler_rejects_unknown_node_config(tmp_path):
    exp = write_experiment(tmp_path)
    ctx = Context(run_id=1, node_id=7, node_config={"foo": 1}, state=RecordDict(), run_config={})
    arrays = ArrayRecord(new_encoder("compact", 16, 3, width=16).state_dict())
    with pytest.raises(ValueError, match="partition-id"):
        train_handler(train_message(arrays, 1), ctx, defaults={"experiment": str(exp)})


@pytest.mark.parametrize("strategy,dp", [("fedavg", False), ("affr", False), ("affr", True)])
def test_one_round_through_the_real_flower_apps(tmp_path, monkeypatch, strategy, dp):
    """Default-run end-to-end check: two tiny clients, one round through the real ServerApp / ClientApp in
    Flower's simulation runtime; replies arrive, metrics are finite, the global model file is written; with
    ``[dp] level = "client"`` the run states its client-level guarantee."""
    from fedprint.lab.simulate import run_federated
    from fedprint.models.model_file import load_model

    monkeypatch.setenv("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
    extra = '[dp]\nenabled = true\nlevel = "client"\ntarget_epsilon = 4.0\nclient_clip = 5.0\n' if dp else ""
    exp = write_experiment(tmp_path, clients=2, rounds=1, fingers=12, extra=extra)
    run_dir = tmp_path / strategy
    run_federated(exp, strategy, run_dir, num_clients=2, progress=False)
    final = json.loads((run_dir / "final.json").read_text())
    assert final["rounds"] == 1 and len(final["clients"]) == 2 and not final["problems"]
    if dp:
        p = final["privacy"]
        assert p["level"] == "client" and p["epsilon"] == pytest.approx(4.0, rel=0.01) and p["rounds"] == 1
        assert "no privacy amplification" in p["sampling"]
    else:
        assert final["privacy"]["level"] == "none"
    assert all(math.isfinite(c["eer"]) for c in final["clients"])
    model = load_model(run_dir / "model.pt")
    assert model.meta["method"] == strategy and (model.threshold is None) is dp  # DP: no raw-data threshold
    if dp:
        assert (run_dir / "released.json").is_file() and len(load_releases(run_dir)) == 1
    assert model.meta["provenance"]["packages"]["flwr"]


@pytest.mark.slow
def test_simulation_end_to_end_and_resume(tmp_path, monkeypatch):
    from fedprint.lab.simulate import run_federated

    monkeypatch.setenv("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
    exp = write_experiment(tmp_path, clients=3, rounds=4, fingers=30)
    run_dir = tmp_path / "affr"
    # Client 2 claims a larger gap (+0.5) from its second round on: AFFR must move weight towards it.
    # The run stops after round 2 of T = 4 as if killed; the second call resumes it.
    run_federated(exp, "affr", run_dir, num_clients=3, gap_offset={2: 0.5}, progress=False, stop_after=2)
    rounds = json.loads((run_dir / "rounds.json").read_text())
    assert [r["round"] for r in rounds] == [1, 2]
    assert (run_dir / "clients.csv").is_file() and (run_dir / "rounds.csv").is_file()
    state, arrays = load_checkpoint(run_dir)
    assert state["round"] == 2 and len(arrays) > 0
    rows = {row["client"]: row for row in rounds[1]["clients"]}
    assert all(row["train_status"] == "ok" and row["eval_status"] == "ok" for row in rows.values())
    assert all(math.isfinite(row["gap"]) for row in rows.values())
    assert all(row["gap"] == 0.0 for row in rounds[0]["clients"])  # round 1: no previous local model
    boosted = next(name for name in rows if name.endswith("-c02"))
    assert max(rows, key=lambda n: rows[n]["gap"]) == boosted
    assert rows[boosted]["alpha"] > 1 / 3 + 0.05
    assert min(row["alpha"] for row in rows.values()) < 1 / 3
    alpha_before = state["strategy_state"]["alpha"]
    assert set(alpha_before) == set(rows)  # keyed by client name, not by this run's Flower node ids

    # Resume (new Flower node ids): rounds 3 and 4 only, numbered on, AFFR weights carried over by name.
    run_federated(exp, "affr", run_dir, num_clients=3, progress=False, stop_after=3)
    state, _ = load_checkpoint(run_dir)
    third = state["strategy_state"]["history"][-1]
    assert third["round"] == 3 and set(state["strategy_state"]["alpha"]) == set(rows)
    # round 3 started from the stored α: with its gaps and step, update_weights reproduces its weights
    from fedprint.server.affr import update_weights
    expect = update_weights(alpha_before, third["gaps"], third["step"])
    assert third["round_weights"] == pytest.approx(expect)
    run_federated(exp, "affr", run_dir, num_clients=3, progress=False)
    rounds = json.loads((run_dir / "rounds.json").read_text())
    assert [r["round"] for r in rounds] == [1, 2, 3, 4]
    state, _ = load_checkpoint(run_dir)
    assert state["round"] == 4 and state["strategy_state"]["rounds_done"] == 4
    assert set(state["strategy_state"]["alpha"]) == set(rows)
    final = json.loads((run_dir / "final.json").read_text())
    assert len(final["clients"]) == 3 and not final["problems"]
    assert all(0.0 <= c["eer"] <= 1.0 for c in final["clients"])


def test_checkpoint_roundtrip(tmp_path):
    from fedprint.server.checkpoint import save_checkpoint

    arrays = ArrayRecord(new_encoder("compact", 16, 0, width=16).state_dict())
    save_checkpoint(tmp_path, 1, arrays, strategy="affr", strategy_state={"x": 1}, rounds=[{"round": 1}])
    save_checkpoint(tmp_path, 2, arrays, strategy="affr", strategy_state={"x": 2}, rounds=[{"round": 2}])
    state, back = load_checkpoint(tmp_path)
    assert state["round"] == 2 and state["strategy_state"] == {"x": 2}
    assert list(back.keys()) == list(arrays.keys())
    assert all(np.array_equal(back[k].numpy(), arrays[k].numpy()) for k in arrays.keys())
    assert [p.name for p in (tmp_path / "checkpoint").glob("*.npz")] == ["arrays-r0002.npz"]


def test_proximal_adam_pulls_towards_global():
    import torch

    from fedprint.client.proximal import ProximalAdam

    w = torch.nn.Parameter(torch.tensor([1.0, -1.0]))
    opt = ProximalAdam([w], [torch.zeros(2)], mu=10.0, lr=0.1)
    for _ in range(20):
        opt.zero_grad()
        (0.0 * w.sum()).backward()  # no data gradient: only the proximal term acts
        opt.step()
    assert float(w.abs().max()) < 0.5


def test_simulate_cli_baselines_report(tmp_path):
    from fedprint.cli.main import main

    exp = write_experiment(tmp_path, clients=2, rounds=1, fingers=14)
    assert main(["simulate", "--config", str(exp), "--methods", "local,centralized", "--quiet",
                 "--out", str(tmp_path / "out")]) == 0
    run_dir = tmp_path / "out"  # --out is the run directory itself
    report = (run_dir / "report.md").read_text()
    assert "| client | local | centralized |" in report and "**Average**" in report
    results = json.loads((run_dir / "results.json").read_text())["results"]
    assert len(results["local"]) == 2 and len(results["centralized"]) == 2
    assert (run_dir / "per_client_accuracy.png").is_file() and (run_dir / "config.json").is_file()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_flwr_run_as_the_readme_writes_it(tmp_path):
    """`flwr run . --federation-config "num-supernodes=N"` (the README's local-simulation command) runs the
    experiment's clients through Flower's own local SuperLink and writes the run directory."""
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    exp = write_experiment(tmp_path, clients=3, rounds=1, fingers=18)
    control = _free_port()
    env = {**os.environ, "FLWR_HOME": str(tmp_path / "flwr-home"), "FLWR_LOCAL_CONTROL_API_PORT": str(control),
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()),
           "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        out = subprocess.run(
            ["flwr", "run", ".", "--federation-config", "num-supernodes=3", "--stream",
             "--run-config", f"experiment='{exp}'"],
            cwd=root, env=env, capture_output=True, text=True, timeout=600)
    finally:  # the local SuperLink is detached: stop the one this test started
        for cmd in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if f"127.0.0.1:{control}" in cmd.read_bytes().decode(errors="replace"):
                    os.kill(int(cmd.parent.name), signal.SIGTERM)
            except (OSError, ValueError):
                pass
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    final = json.loads((run_dir / "final.json").read_text())
    assert final["rounds"] == 1 and len(final["clients"]) == 3 and not final["problems"]
