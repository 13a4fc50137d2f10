"""Yan et al. 2025 (seed 003) Fig. 11 in shape: the unified confusion matrix over all institutions, FedAvg vs AFFR.

The paper pools every data set's verification decisions into one 2 x 2 matrix per algorithm (Fig. 11a FedAvg,
11b AFFR with step size 0.8). Ours pools the decisions of a ``fedprint simulate`` run: every institution's held-out
pairs (open set: fingers no method trained on), every seed of a ``--seeds`` run. ``results.csv`` keeps only rates,
so each seed's saved global model (``<method>/model.pt``) is scored again on each institution's test pairs, rebuilt
from the run's ``experiment.toml`` exactly as the run split them (same seed, raw probes), at the threshold chosen
on that institution's validation pairs (:func:`fedprint.training.evaluation.evaluate_on_pairs`, what the clients
report); the re-scored accuracy must equal the run's own ``results.csv`` (checked: a mismatch stops the study).

Usage::

    python -m studies.repro_003_fig11 runs/real_sensors-seeds [--methods fedavg,affr] [--out docs/studies/reproduction]

writes ``003_fig11.png`` and ``003_fig11.json`` (the counts per method and the run folders they came from).
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

KEYS = ("tp", "fn", "fp", "tn")


def counts_of(metrics: dict) -> dict[str, int]:
    """TP / FN / FP / TN of one institution's test pairs from :func:`verification_metrics`'s rates and counts."""
    n_gen, n_imp = int(metrics["n_genuine"]), int(metrics["n_impostor"])
    tp, fp = int(round(metrics["recall"] * n_gen)), int(round(metrics["fmr"] * n_imp))
    return {"tp": tp, "fn": n_gen - tp, "fp": fp, "tn": n_imp - fp}


def pool(rows: Iterable[tuple[str, dict[str, int]]], methods: Sequence[str]) -> dict[str, dict]:
    """Method -> the summed counts (genuine = positive) of its ``(method, counts)`` rows, with accuracy,
    precision, recall and F1 of the pooled matrix."""
    out = {m: {**dict.fromkeys(KEYS, 0), "rows": 0} for m in methods}
    for m, c in rows:
        if m in out:
            for k in KEYS:
                out[m][k] += c[k]
            out[m]["rows"] += 1
    for m, c in out.items():
        if not c["rows"]:
            raise ValueError(f"no scored institution for method {m!r}")
        n = sum(c[k] for k in KEYS)
        c["accuracy"] = (c["tp"] + c["tn"]) / n
        c["precision"] = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 0.0
        c["recall"] = c["tp"] / (c["tp"] + c["fn"])
        c["f1"] = (2 * c["precision"] * c["recall"] / (c["precision"] + c["recall"])
                   if c["precision"] + c["recall"] else 0.0)
    return out


def score_run(seed_dir: Path, methods: Sequence[str]) -> list[tuple[str, dict[str, int]]]:
    """(method, counts) per institution of one seed's run folder, each checked against its ``results.csv``."""
    from fedprint.config import load_experiment
    from fedprint.models.model_file import load_model
    from fedprint.training.evaluation import evaluate_on_pairs
    from fedprint.training.experiment_data import build_clients

    with (seed_dir / "results.csv").open(newline="") as f:
        reported = {(r["method"], r["client"]): float(r["accuracy"]) for r in csv.DictReader(f)}
    cfg, _ = load_experiment(seed_dir / "experiment.toml")
    clients = build_clients(cfg, beta=0.0, cache=False, progress=False)  # the run's splits, raw probes
    out = []
    for m in methods:
        model = seed_dir / m / "model.pt"
        if not model.is_file():
            raise FileNotFoundError(f"{model}: the run has no global model of method {m!r}")
        net = load_model(model).encoder.eval()
        for c in clients:
            metrics, _ = evaluate_on_pairs(net, c)
            want = reported.get((m, c.name))
            if want is None or abs(metrics["accuracy"] - want) > 1e-6:
                raise ValueError(f"{seed_dir}: {m} on {c.name} re-scored at accuracy {metrics['accuracy']:.6f}, "
                                 f"the run reported {want}: not the run's pairs or model")
            out.append((m, counts_of(metrics)))
    return out


def plot(counts: dict[str, dict], path: Path, title: str) -> None:
    """One 2 x 2 matrix per method, row-normalised colours, counts and row shares printed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(counts), figsize=(3.6 * len(counts), 3.4), squeeze=False)
    for ax, (m, c) in zip(axes[0], counts.items(), strict=True):
        mat = np.array([[c["tp"], c["fn"]], [c["fp"], c["tn"]]], float)
        share = mat / mat.sum(axis=1, keepdims=True)
        ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
        for i in range(2):
            for j in range(2):
                ax.text(j, i, f"{int(mat[i, j]):,}\n{100 * share[i, j]:.1f} %", ha="center", va="center",
                        color="white" if share[i, j] > 0.6 else "black", fontsize=9)
        ax.set_xticks([0, 1], ["accept", "reject"])
        ax.set_yticks([0, 1], ["genuine", "impostor"])
        ax.set_title(f"{m}: accuracy {100 * c['accuracy']:.1f} %", fontsize=10)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a fedprint simulate run folder (one seed, or a --seeds folder)")
    ap.add_argument("--methods", default="fedavg,affr")
    ap.add_argument("--out", type=Path, default=Path("docs/studies/reproduction"))
    args = ap.parse_args(argv)
    seeds = sorted(p.parent for p in args.run.rglob("results.csv") if (p.parent / "experiment.toml").is_file())
    if not seeds:
        ap.error(f"{args.run}: no finished fedprint simulate run under it (results.csv + experiment.toml)")
    methods = args.methods.split(",")
    counts = pool([row for d in seeds for row in score_run(d, methods)], methods)
    args.out.mkdir(parents=True, exist_ok=True)
    plot(counts, args.out / "003_fig11.png", f"pooled over {len(seeds)} seed(s) x institutions, held-out pairs")
    (args.out / "003_fig11.json").write_text(json.dumps({"runs": [str(d) for d in seeds], "counts": counts},
                                                        indent=1) + "\n")
    for m, c in counts.items():
        print(f"{m}: TP {c['tp']} FN {c['fn']} FP {c['fp']} TN {c['tn']} ({c['rows']} institution-runs) accuracy "
              f"{c['accuracy']:.4f} precision {c['precision']:.4f} recall {c['recall']:.4f} F1 {c['f1']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
