"""Cost of secure aggregation: round time and payload bytes per client, with and without SecAgg+.

FedAvg over the in-process grid (:mod:`fedprint.lab.secagg_grid`: the real client stage handlers and the real
server protocol, no network, no training — each client's "training" is a fixed random step), so the round time
is protocol and aggregation cost only. Model: FedPrint's compact encoder (width 16, embedding 128: 151k float
parameters) unless ``--params`` gives a flat model size. Bytes: payload bytes of the messages (arrays and record
values, :func:`fedprint.server.secagg_protocol.payload_bytes`), not Flower's framing. Clients: 3, 10, 50;
``num_shares`` 0 (complete graph, SecAgg) and, with ``--ring``, k = 7 (SecAgg+).

Accuracy (``--eer CONFIG``): the same experiment's federated methods twice, as ``fedprint simulate`` runs them (the
real ServerApp / ClientApp in Flower's simulation runtime, same clients, splits, seeds and training; without the
report's extra scoring), with ``[federation]
secure_aggregation`` false and true; per method the clients' test EER of both runs, their difference, and the
largest difference of the final global models' parameters beside the quantisation step 2c/(R−1) (training
between rounds carries the rounding of one round into the next, so the model difference can exceed one step).

Usage::

    .venv/bin/python -m benchmarks.bench_secagg [--clients 3,10,50] [--repeats 2] [--ring]
    .venv/bin/python -m benchmarks.bench_secagg --eer CONFIG [--methods fedavg,fedprox,affr] [--rounds T] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord

from fedprint.config.federation import FederationConfig
from fedprint.lab.secagg_grid import SecAggGrid
from fedprint.server.secagg_protocol import payload_bytes
from fedprint.server.server_app import build_strategy, secagg_summary


def _model(params: int) -> dict[str, np.ndarray]:
    if params:
        return {"w": np.zeros(params, np.float32)}
    from fedprint.models.siamese import build_encoder

    net = build_encoder("compact", embedding_dim=128, width=16, channels_last=False)
    return {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}


def _update(node: int, rnd: int, glob: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(node * 7919 + rnd)
    return {k: (v + 1e-3 * rng.standard_normal(v.shape)).astype(v.dtype) for k, v in glob.items()}


def one_round(n: int, secure: bool, glob: dict[str, np.ndarray], num_shares: int) -> dict[str, float]:
    """Seconds of one FedAvg round and payload bytes per client (up, down)."""
    fed = FederationConfig(secure_aggregation=secure, secagg_num_shares=num_shares)
    strat = build_strategy("fedavg", num_rounds=1, step=0.0, proximal_mu=0.0, fed=fed, min_nodes=n, secure=secure,
                           timeout=600.0)
    strat.fraction_evaluate = 0.0
    grid = SecAggGrid(range(1, n + 1), _update)
    sent, got = [], []
    inner = grid.send_and_receive

    def counting(messages, *, timeout=None):  # the train exchange's bytes (stages 1-3 are in the round log)
        messages = list(messages)
        replies = inner(messages, timeout=timeout)
        if messages and messages[0].metadata.message_type == "train":
            sent.extend(payload_bytes(m.content) for m in messages)
            got.extend(payload_bytes(r.content) for r in replies if r.has_content())
        return replies

    grid.send_and_receive = counting
    t0 = time.perf_counter()
    strat.start(grid=grid, initial_arrays=ArrayRecord({k: Array(v) for k, v in glob.items()}), num_rounds=1,
                timeout=600.0)
    seconds = time.perf_counter() - t0
    up, down = sum(got) / n, sum(sent) / n
    if secure:
        row = secagg_summary(strat.secagg_log[1])
        assert row["secagg_status"] == "ok", row
        up = row["secagg_bytes_up_per_client"]
        down += row["secagg_bytes_down_per_client"]
    return {"seconds": seconds, "up": up, "down": down}


def with_secure(toml: str, secure: bool) -> str:
    """The experiment TOML text with ``[federation] secure_aggregation`` set (added, or replacing the old value)."""
    lines = [ln for ln in toml.splitlines() if not re.match(r"\s*secure_aggregation\s*=", ln)]
    key = f"secure_aggregation = {'true' if secure else 'false'}"
    for i, ln in enumerate(lines):
        if ln.strip() == "[federation]":
            return "\n".join(lines[:i + 1] + [key] + lines[i + 1:]) + "\n"
    return "\n".join(lines + ["", "[federation]", key]) + "\n"


def _final_arrays(method_dir: Path) -> dict[str, np.ndarray]:
    state = json.loads((method_dir / "checkpoint" / "state.json").read_text())
    with np.load(method_dir / "checkpoint" / state["arrays"]) as npz:
        return {k: np.array(npz[f"a{i:04d}"]) for i, k in enumerate(state["keys"])}


def eer_comparison(config: str, methods: list[str], rounds: int | None, out: Path) -> list[dict]:
    """Simulate ``config`` without and with secure aggregation; per method: mean test EER of both, |Δ EER| per
    client (max), largest |Δθ| of the final models, the quantisation step (module docstring)."""
    from fedprint.config import SHIPPED_DIR, load_experiment
    from fedprint.lab.simulate import run_federated
    from fedprint.training.experiment_data import experiment_partitions

    path = Path(config) if Path(config).suffix == ".toml" else SHIPPED_DIR / f"{config}.toml"
    cfg, _ = load_experiment(path)
    fed = cfg.federation
    step = 2 * fed.secagg_clipping_range / (fed.secagg_quantization_range - 1)
    _, parts = experiment_partitions(cfg)
    runs = {}
    for secure in (False, True):  # the methods through `fedprint simulate`'s own path, without its report
        name = "secure" if secure else "plain"
        toml = out / f"{path.stem}-{name}.toml"
        out.mkdir(parents=True, exist_ok=True)
        toml.write_text(with_secure(path.read_text(), secure))
        runs[name] = out / name
        for m in methods:
            t0 = time.perf_counter()
            run_federated(toml, m, runs[name] / m, num_clients=len(parts), rounds=rounds, progress=False)
            print(f"{name} {m}: {runs[name] / m} in {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    for m in methods:
        finals = {k: json.loads((d / m / "final.json").read_text()) for k, d in runs.items()}
        eer = {k: {c["client"]: c["eer"] for c in f["clients"]} for k, f in finals.items()}
        a, b = _final_arrays(runs["plain"] / m), _final_arrays(runs["secure"] / m)
        dtheta = max(float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) for k in a
                     if np.issubdtype(a[k].dtype, np.floating))
        rows.append({"method": m, "clients": len(eer["plain"]),
                     "eer_plain": statistics.mean(eer["plain"].values()),
                     "eer_secure": statistics.mean(eer["secure"].values()),
                     "max_client_eer_diff": max(abs(eer["plain"][c] - eer["secure"][c]) for c in eer["plain"]),
                     "max_param_diff": dtheta, "quant_step": step,
                     "secure_in_sum": [r.get("secagg_in_sum") for r in
                                       json.loads((runs["secure"] / m / "rounds.json").read_text())]})
    print(f"{'method':>8} {'clients':>7} {'EER plain':>10} {'EER secure':>11} {'max |dEER|':>11} "
          f"{'max |dθ|':>10} {'step':>9}  in sum per round")
    for r in rows:
        print(f"{r['method']:>8} {r['clients']:7d} {r['eer_plain']:10.4f} {r['eer_secure']:11.4f} "
              f"{r['max_client_eer_diff']:11.4f} {r['max_param_diff']:10.2e} {r['quant_step']:9.2e}  "
              f"{r['secure_in_sum']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", default="3,10,50")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--params", type=int, default=0, help="flat model size (default: the compact encoder)")
    p.add_argument("--ring", action="store_true", help="also SecAgg+ with k = 7 shares")
    p.add_argument("--eer", metavar="CONFIG", default=None,
                   help="instead: simulate this experiment with and without secure aggregation and compare EER")
    p.add_argument("--methods", default="fedavg,fedprox,affr", help="--eer: methods (default fedavg,fedprox,affr)")
    p.add_argument("--rounds", type=int, default=None, help="--eer: server rounds (default: the experiment's)")
    p.add_argument("--out", default="runs/bench_secagg", help="--eer: where the two run directories go")
    args = p.parse_args(argv)
    if args.eer is not None:
        eer_comparison(args.eer, [m.strip() for m in args.methods.split(",") if m.strip()], args.rounds,
                       Path(args.out) / time.strftime("%Y%m%dT%H%M%S", time.gmtime()))
        return
    from flwr.supercore.task_identity import TaskIdentity

    # Outside a Flower process, instruction Messages need a task identity (as Flower's own runtime sets).
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    glob = _model(args.params)
    d = sum(v.size for v in glob.values())
    print(f"model: {d} float parameters ({4 * d / 1e6:.2f} MB float32)")
    print(f"{'clients':>7} {'mode':>10} {'round s':>9} {'x plain':>8} {'up KB/cl':>10} {'x plain':>8} "
          f"{'down KB/cl':>11} {'x plain':>8}")
    modes = [("plain", False, 0), ("secagg", True, 0)] + ([("secagg+k7", True, 7)] if args.ring else [])
    for n in [int(c) for c in args.clients.split(",")]:
        base = None
        for name, secure, k in modes:
            if k and k >= n:
                continue
            runs = [one_round(n, secure, glob, k) for _ in range(args.repeats)]
            r = {key: statistics.median(x[key] for x in runs) for key in runs[0]}
            base = base or r
            print(f"{n:7d} {name:>10} {r['seconds']:9.3f} {r['seconds'] / base['seconds']:8.2f} "
                  f"{r['up'] / 1e3:10.1f} {r['up'] / base['up']:8.3f} {r['down'] / 1e3:11.1f} "
                  f"{r['down'] / base['down']:8.3f}", flush=True)


if __name__ == "__main__":
    main()
