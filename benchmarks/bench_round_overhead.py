"""What a federated round costs beyond the training inside it, and how a round grows with the clients (issue 61 §2).

Two measurements in one invocation, ratios printed:

1. **FedAvg vs local training** on the same clients (default the demo experiment, ``--config demo``): wall time of
   FedAvg over R rounds x E local epochs through the real ServerApp / ClientApp in Flower's simulation runtime,
   against local training of the same R x E epochs on each client in this process (the sum over clients: the
   same training compute; the simulation runs two clients at once on 2 cores). Two ratios: including start-up
   (Ray, the workers, each worker's data) and after the first round (rounds >= 2 of ``rounds.csv`` against
   (R - 1) / R of the local time). Targets: <= 1.6 and <= 1.3. With ``--ab`` FedAvg runs twice, interleaved:
   with the per-worker data caches of :mod:`fedprint.training.node_data` off (``FEDPRINT_NO_NODE_CACHE=1``,
   "before") and on ("after").
2. **Round time and peak memory for N small clients** (``--clients 3,10,30,100``: toy stripe prints,
   ``--fingers`` per client, 1 local epoch, ``--scale-rounds`` rounds): the median round after the first, and
   the peak resident memory of this process and every process it started (Ray's GCS, raylet and workers) —
   read from /proc, so Linux only. Targets: round time no worse than linear in N; 100 clients in 24 GiB.

Usage (about 10 minutes on 2 idle CPU cores; a loaded machine stretches every figure, the ratios less)::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_round_overhead [--config demo] [--rounds 3] [--ab]
        [--clients 3,10,30,100] [--skip-ratio] [--skip-scale]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

GIB = 1024 ** 3


class PeakMemory:
    """Peak summed RSS of this process and all its descendants, sampled every ``interval`` seconds (/proc)."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def tree_rss(root: int) -> int:
        children: dict[int, list[int]] = {}
        rss: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/statm") as fh:
                    rss[int(entry)] = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        total, todo = 0, [root]
        while todo:
            pid = todo.pop()
            total += rss.get(pid, 0)
            todo += children.get(pid, [])
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.tree_rss(os.getpid()))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _rounds(run_dir: Path) -> list[dict]:
    with open(run_dir / "rounds.csv") as fh:
        return list(csv.DictReader(fh))


def _federated(exp: Path, run_dir: Path, clients: int, rounds: int, *, cache: str = "0") -> dict:
    """FedAvg through the real apps; ``cache`` is the value of ``FEDPRINT_NO_NODE_CACHE`` (``0``: caches on)."""
    from fedprint.lab.simulate import run_federated
    from fedprint.training.node_data import NO_CACHE_ENV

    old = os.environ.get(NO_CACHE_ENV)
    os.environ[NO_CACHE_ENV] = cache  # Ray's workers inherit this process's environment
    try:
        with PeakMemory() as mem:
            t0 = time.perf_counter()
            run_federated(exp, "fedavg", run_dir, num_clients=clients, rounds=rounds, progress=False)
            wall = time.perf_counter() - t0
    finally:
        if old is None:
            os.environ.pop(NO_CACHE_ENV, None)
        else:
            os.environ[NO_CACHE_ENV] = old
    rows = _rounds(run_dir)
    secs = [float(r["round_seconds"]) for r in rows]
    return {"wall": wall, "rounds": secs, "later": sum(secs[1:]), "peak": mem.peak,
            "accuracy": float(rows[-1]["accuracy"]), "eer": float(rows[-1]["eer"]),
            "replies": min(int(r["train_ok"]) for r in rows)}


def ratio(config: str, rounds: int, ab: bool) -> None:
    """Part 1: FedAvg (R rounds x E epochs) against local training of R x E epochs on the same clients."""
    import torch

    from fedprint.config import load_experiment, resolve_experiment
    from fedprint.config.app import with_base_dir
    from fedprint.lab.baselines import train_local
    from fedprint.training.experiment_data import experiment_partitions, partition_data

    path = resolve_experiment(config)
    cfg, _ = load_experiment(path)
    cfg = with_base_dir(cfg, Path.cwd())
    records, parts = experiment_partitions(cfg)
    clients = [partition_data(cfg, records, p) for p in parts]  # also warms the FP-DFSN disk cache
    init = cfg.model.init_state()
    local_cfg = replace(cfg.train, epochs=rounds * cfg.train.epochs, seed=cfg.run.seed)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    for c in clients:
        train_local(c, encoder=cfg.model.encoder, embedding_dim=cfg.model.embedding_dim,
                    encoder_kwargs=cfg.model.encoder_kwargs(), init_state=init, cfg=local_cfg, progress=False)
    local = time.perf_counter() - t0
    print(f"[ratio] {path.name}: {len(clients)} clients, R = {rounds} rounds x E = {cfg.train.epochs} epochs; "
          f"local training of {rounds * cfg.train.epochs} epochs per client: {local:.1f} s (sum over clients, "
          "1 thread)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("after (caches on)", "0")] if not ab else [("no caches", "1"),
                                                            ("before (no records cache)", "records"),
                                                            ("after (caches on)", "0")]
        results = {}
        for label, cache in runs:
            r = _federated(path, Path(tmp) / cache, len(clients), rounds, cache=cache)
            results[label] = r
            print(f"[ratio] FedAvg {label}: wall {r['wall']:.1f} s (ratio {r['wall'] / local:.2f}, target <= 1.6); "
                  f"rounds {', '.join(f'{s:.1f}' for s in r['rounds'])} s; rounds >= 2 {r['later']:.1f} s against "
                  f"local {local * (rounds - 1) / rounds:.1f} s (ratio "
                  f"{r['later'] / (local * (rounds - 1) / rounds):.2f}, target <= 1.3); peak memory "
                  f"{r['peak'] / GIB:.2f} GiB; final accuracy {r['accuracy']:.6f}, EER {r['eer']:.6f}", flush=True)
        if ab:
            b, a = results["before (no records cache)"], results["after (caches on)"]
            same = (b["accuracy"], b["eer"]) == (a["accuracy"], a["eer"])
            print(f"[ratio] before / after: wall {b['wall']:.1f} -> {a['wall']:.1f} s, first round "
                  f"{b['rounds'][0]:.1f} -> {a['rounds'][0]:.1f} s, later rounds {b['later']:.1f} -> "
                  f"{a['later']:.1f} s; final metrics identical: {same}", flush=True)


def scale(sizes: list[int], rounds: int, fingers: int) -> None:
    """Part 2: round time and peak memory for N small simulated clients."""
    from benchmarks.bench_rounds import stripe_experiment

    base = None
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            exp = stripe_experiment(Path(tmp), n, rounds, fingers_per_client=fingers)
            r = _federated(exp, Path(tmp) / "fedavg", n, rounds)
        later = statistics.median(r["rounds"][1:] or r["rounds"])
        per = later / n
        base = base or per
        print(f"[scale] {n:4d} clients ({r['replies']} trained every round): round {later:.2f} s "
              f"({per:.3f} s per client, x{per / base:.2f} of the "
              f"smallest; linear growth = x1.00), first round {r['rounds'][0]:.1f} s, wall {r['wall']:.1f} s, "
              f"peak memory {r['peak'] / GIB:.2f} GiB (target for 100: <= 24 GiB)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="demo")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ab", action="store_true", help="FedAvg with the node data caches off, then on")
    parser.add_argument("--clients", default="3,10,30,100")
    parser.add_argument("--scale-rounds", type=int, default=2)
    parser.add_argument("--fingers", type=int, default=6, help="fingers per small client (4 impressions each)")
    parser.add_argument("--skip-ratio", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("FEDPRINT_PEERS", "none")
    print(f"bench_round_overhead: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    if not args.skip_ratio:
        ratio(args.config, args.rounds, args.ab)
    if not args.skip_scale:
        scale([int(n) for n in args.clients.split(",")], args.scale_rounds, args.fingers)


if __name__ == "__main__":
    main()
