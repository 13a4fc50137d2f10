"""Wall time per round of AFFR vs FedAvg (aggregation overhead ratio; target <= 1.05x).

Two measurements in one invocation:

1. **Simulation**: the same tiny experiment (stripe-pattern prints written to a temporary folder, 3 clients,
   identical seeds) run through the real ServerApp/ClientApp with FedAvg and with AFFR; per-round wall time
   (configure_train -> end of client evaluation) and time inside ``aggregate_train`` from each method's
   ``rounds.csv``. Client training dominates a round, so the round-time ratio measures end-to-end overhead
   and is noisy on a shared machine; compare medians.
2. **Aggregation only**: ``aggregate_train`` of AFFR vs Flower's FedAvg on the same C replies of the compact
   encoder (embedding 128), repeated; this isolates the server-side cost of the weight update.

Usage::

    .venv/bin/python -m benchmarks.bench_rounds [--rounds 4] [--clients 3] [--repeats 20]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, Metadata, MetricRecord, RecordDict
from flwr.serverapp.strategy import FedAvg

from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.siamese import new_encoder
from fedprint.server.affr import AFFR


def stripe_experiment(tmp: Path, clients: int, rounds: int, fingers_per_client: int = 12) -> Path:
    data = write_generic(stripe_records(clients * fingers_per_client), tmp / "prints")
    path = tmp / "bench.toml"
    path.write_text(f"""
[run]
name = "bench"
out = "{tmp / 'runs'}"

[[data.sources]]
kind = "dataset"
layout = "generic"
root = "{data}"

[partition]
mode = "iid"
n_clients = {clients}

[model]
input_size = 48
embedding_dim = 64

[train]
epochs = 1

[federation]
rounds = {rounds}
timeout = 300.0
""")
    return path


def bench_simulation(rounds: int, clients: int) -> dict[str, dict[str, float]]:
    from fedprint.lab.simulate import run_federated

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        exp = stripe_experiment(Path(tmp), clients, rounds)
        for method in ("fedavg", "affr"):
            run_dir = run_federated(exp, method, Path(tmp) / method, num_clients=clients, progress=False)
            with open(run_dir / "rounds.csv") as fh:
                rows = list(csv.DictReader(fh))
            # Round 1 includes building each client's data (cached afterwards): report rounds >= 2.
            later = rows[1:] or rows
            out[method] = {
                "round_s_median": statistics.median(float(r["round_seconds"]) for r in later),
                "aggregate_s_median": statistics.median(float(r["aggregate_seconds"]) for r in later),
                "final_accuracy": float(rows[-1]["accuracy"]),
            }
    return out


def _reply(node: int, arrays: ArrayRecord, gap: float, n: int) -> Message:
    meta = Metadata(run_id=1, message_id="", src_node_id=node, dst_node_id=0, reply_to_message_id="",
                    group_id="", created_at=0.0, ttl=60.0, message_type=MessageType.TRAIN)
    content = RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": n, "gap": gap})})
    return Message(content=content, metadata=meta)


def bench_aggregation(clients: int, repeats: int) -> dict[str, float]:
    """Median seconds of one aggregate_train (after a configure_train) for FedAvg and AFFR."""
    rng = np.random.default_rng(0)
    base = new_encoder("compact", 128, 0).state_dict()
    replies = []
    for c in range(clients):
        sd = {k: v + 0.01 * float(rng.normal()) if v.is_floating_point() else v for k, v in base.items()}
        replies.append(_reply(c + 1, ArrayRecord(sd), float(rng.uniform(-0.1, 0.1)), 100 + c))
    global_arrays = ArrayRecord(base)

    class NoGrid:  # configure_train only needs node ids
        def get_node_ids(self):
            return list(range(1, clients + 1))

    from flwr.supercore.task_identity import TaskIdentity

    # Outside a runtime, configure_train's messages need a task identity (as run_simulation sets it).
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 0
    times: dict[str, list[float]] = {"fedavg": [], "affr": []}
    for _ in range(repeats):
        for name in ("fedavg", "affr"):
            strat = FedAvg(min_available_nodes=1) if name == "fedavg" else AFFR(num_rounds=10, min_available_nodes=1)
            list(strat.configure_train(1, global_arrays, ConfigRecord(), NoGrid()))
            if name == "affr":  # round 2 so that the weight update actually runs
                strat.aggregate_train(1, replies)
                list(strat.configure_train(2, global_arrays, ConfigRecord(), NoGrid()))
            t0 = time.perf_counter()
            strat.aggregate_train(2 if name == "affr" else 1, replies)
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--skip-simulation", action="store_true")
    args = parser.parse_args()

    agg = bench_aggregation(args.clients, args.repeats)
    print(f"aggregate_train only ({args.clients} clients, compact encoder d=128, median of {args.repeats}): "
          f"FedAvg {agg['fedavg'] * 1e3:.2f} ms, AFFR {agg['affr'] * 1e3:.2f} ms, "
          f"ratio {agg['affr'] / agg['fedavg']:.3f}x")
    if args.skip_simulation:
        return
    sim = bench_simulation(args.rounds, args.clients)
    fa, af = sim["fedavg"], sim["affr"]
    print(f"simulation ({args.clients} clients, {args.rounds} rounds, median over rounds >= 2): "
          f"round FedAvg {fa['round_s_median']:.2f} s, AFFR {af['round_s_median']:.2f} s, "
          f"ratio {af['round_s_median'] / fa['round_s_median']:.3f}x; aggregate_train FedAvg "
          f"{fa['aggregate_s_median'] * 1e3:.2f} ms, AFFR {af['aggregate_s_median'] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
