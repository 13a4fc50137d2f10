"""The simulation engine entry, the Ray-cluster path (issue 61 §2-3) and the per-process node data caches."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

from fedprint.lab.simulate import backend_config, run_simulation_engine


def test_engine_entry_is_the_one_flwr_run_uses():
    """``run_simulation_engine`` calls Flower's ``_run_simulation`` (what ``flwr run``'s simulation process calls)
    with keywords that Flower's signature has; a Flower upgrade that changes it fails here, not in a user's run."""
    from flwr.simulation import app as sim_app
    from flwr.simulation.run_simulation import _run_simulation

    params = inspect.signature(_run_simulation).parameters
    for key in ("server_app", "client_app", "num_supernodes", "backend_name", "backend_config", "exit_event"):
        assert key in params
    assert "_run_simulation(" in inspect.getsource(sim_app.run_simulation_process)
    assert "run_simulation(" not in inspect.getsource(run_simulation_engine).replace("_run_simulation(", "")\
        .split("if _run_simulation is None:")[0]


def test_backend_config_local_and_cluster():
    local = backend_config(2)
    assert local == {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}}
    cluster = backend_config(2, ray_address="auto", client_cpus=2)
    # attaching: nothing about this machine goes to ray.init (Ray refuses num_cpus with an address)
    assert cluster == {"client_resources": {"num_cpus": 2, "num_gpus": 0.0}, "init_args": {"address": "auto"}}
    assert backend_config(ray_address="h:6379", device="cuda")["client_resources"]["num_gpus"] == 1.0
    assert backend_config(ray_address="h:6379", device="cuda", client_gpus=0.5)["client_resources"]["num_gpus"] == 0.5


def test_ray_address_from_option_or_environment(monkeypatch):
    from fedprint.cli.simulate import ray_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_address(None) is None
    assert ray_address(" auto ") == "auto"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert ray_address(None) == "10.0.0.5:6379"
    assert ray_address("auto") == "auto"  # the option wins
    with pytest.raises(ValueError, match="--ray-address"):
        ray_address("")


def test_records_loaded_once_per_process(tmp_path, monkeypatch):
    """A worker serving several partitions loads the experiment's records once; with the cache off
    (``FEDPRINT_NO_NODE_CACHE=1``) every call rebuilds, and the data are the same either way."""
    import torch

    from fedprint.config.app import ClientSettings, experiment
    from fedprint.training import node_data
    from tests.client.test_client_app import write_experiment

    exp = write_experiment(tmp_path, clients=3, fingers=18)
    cfg, _, key, base = experiment(ClientSettings(experiment=str(exp)))
    calls = []
    real = node_data.experiment_partitions

    def counting(c):
        calls.append(1)
        return real(c)

    monkeypatch.setattr(node_data, "experiment_partitions", counting)
    monkeypatch.setattr(node_data, "_CACHE", {})
    monkeypatch.setattr(node_data, "_PARTITIONS", {})
    cached = [node_data.node_client_data(cfg, {"partition-id": i, "num-partitions": 3}, experiment_key=key,
                                         base_dir=base)[0] for i in (0, 1, 2, 0)]
    assert len(calls) == 1 and cached[0] is cached[3]
    monkeypatch.setenv(node_data.NO_CACHE_ENV, "1")
    fresh = [node_data.node_client_data(cfg, {"partition-id": i, "num-partitions": 3}, experiment_key=key,
                                        base_dir=base)[0] for i in (0, 1, 2)]
    assert len(calls) == 4
    for a, b in zip(cached, fresh, strict=False):
        assert torch.equal(a.images, b.images) and (a.train_pairs.a == b.train_pairs.a).all()


#: A Ray head in its own process, as ``ray start --head`` makes one: prints its address, serves until stdin closes.
#: (``ray stop`` would end every Ray process on the machine, other users' too; closing this one ends only ours.)
HEAD = """
import sys, ray
ctx = ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
print(ctx.address_info["gcs_address"], flush=True)
sys.stdin.read()
ray.shutdown()
"""


@pytest.mark.slow
def test_simulation_attached_to_a_ray_head(tmp_path, monkeypatch):
    """A Ray head started on this machine, then one round of a tiny FedAvg with ``ray_address`` set: the run
    attaches to that cluster (no private Ray) and writes its final metrics."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'fedprint[simulation]'")
    from fedprint.lab.simulate import run_federated
    from tests.client.test_client_app import write_experiment

    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": os.pathsep.join([*sys.path, os.environ.get("PYTHONPATH", "")])}
    head = subprocess.Popen([sys.executable, "-c", HEAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            text=True)
    try:
        address = head.stdout.readline().strip()
        assert address, "the Ray head did not start"
        monkeypatch.setenv("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
        exp = write_experiment(tmp_path, clients=2, rounds=1, fingers=12)
        run_dir = run_federated(exp, "fedavg", tmp_path / "fedavg", num_clients=2, progress=False,
                                ray_address=address)
        final = json.loads((run_dir / "final.json").read_text())
        assert final["rounds"] == 1 and len(final["clients"]) == 2 and not final["problems"]
    finally:
        head.stdin.close()
        try:
            head.wait(timeout=120)
        except subprocess.TimeoutExpired:
            head.kill()


def test_cli_option_and_seeds_refusal(monkeypatch):
    import fedprint.cli.main as fedprint_cli

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert fedprint_cli.parse(["simulate", "--config", "demo", "--ray-address", "auto"]).ray_address == "auto"
    assert fedprint_cli.parse(["simulate", "--config", "demo"]).ray_address is None
    assert fedprint_cli.main(["simulate", "--config", "demo", "--seeds", "2", "--ray-address", "auto"]) == 2


def test_records_cache_alone_can_be_turned_off(tmp_path, monkeypatch):
    """``FEDPRINT_NO_NODE_CACHE=records`` (the benchmark's "before"): records reloaded per partition, data kept."""
    from fedprint.config.app import ClientSettings, experiment
    from fedprint.training import node_data
    from tests.client.test_client_app import write_experiment

    exp = write_experiment(tmp_path, clients=3, fingers=18)
    cfg, _, key, base = experiment(ClientSettings(experiment=str(exp)))
    calls = []
    real = node_data.experiment_partitions
    monkeypatch.setattr(node_data, "experiment_partitions", lambda c: calls.append(1) or real(c))
    monkeypatch.setattr(node_data, "_CACHE", {})
    monkeypatch.setattr(node_data, "_PARTITIONS", {})
    monkeypatch.setenv(node_data.NO_CACHE_ENV, "records")
    got = [node_data.node_client_data(cfg, {"partition-id": i, "num-partitions": 3}, experiment_key=key,
                                      base_dir=base)[0] for i in (0, 1, 0)]
    assert len(calls) == 2 and got[0] is got[2]
