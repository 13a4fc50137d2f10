"""The classical matcher on the SAME held-out pairs as the real-sensor federation's models (issue 22 §2, target 2).

For each seed folder of ``fedprint simulate --config real_sensors --seeds N``, the run's own partition is rebuilt
from its ``experiment.toml`` (same seed, same held-out fingers), a random subset of every institution's test pairs
(``--pairs`` genuine + ``--pairs`` impostor, all of them where fewer exist) is scored by the independent classical
matcher (afis Gabor minutiae + Bozorth3) and by every model of the run, on the same pairs. Nothing trains.

    nice -n 10 .venv/bin/python -m studies.classical_heldout runs/real_sensors-seeds/seed-* --out runs/classical_heldout

Writes ``classical_heldout.csv`` / ``.md`` to ``--out`` and prints the table: EER per institution and seed, then
the mean over seeds, with the pair counts behind each number. Columns ``<model> + classical``: the label-free
rank fusion of the two scores (:func:`fedprint.models.metrics.rank_fusion`), beside the pure deep score, never instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from fedprint.config.app import with_base_dir
from fedprint.config.experiment import load_experiment
from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_csv, write_text
from fedprint.lab.train_run import classical_comparison
from fedprint.models.model_file import load_model
from fedprint.training.experiment_data import experiment_partitions, partition_data

ROOT = Path(__file__).resolve().parents[1]


#: Model folders of a simulate run scored beside the classical matcher (those with one shared model.pt).
METHODS = ("centralized", "fedavg", "fedprox", "affr")


def run_seed(run: Path, n_pairs: int, progress: bool) -> list[dict]:
    """Classical and deep EER on the same subset of every institution's held-out pairs of one seed's run."""
    cfg, _ = load_experiment(run / "experiment.toml")
    cfg = with_base_dir(cfg, Path.cwd())
    records, parts = experiment_partitions(cfg, progress=progress)
    clients = [partition_data(cfg, records, p, progress=progress) for p in parts]
    nets = {m: load_model(run / m / "model.pt").encoder for m in METHODS if (run / m / "model.pt").is_file()}
    nets = {"initial": cfg.model.new_encoder(cfg.run.seed), **nets}
    first, *rest = nets
    rows = classical_comparison(nets[first], clients, n_per_class=n_pairs, seed=cfg.run.seed, progress=progress,
                                others={m: nets[m] for m in rest})
    return [{"seed": cfg.run.seed, "institution": r["client"], "genuine": r["genuine"],
             "impostor": r["pairs"] - r["genuine"], "classical": r["classical_eer"], first: r["deep_eer"],
             **{m: r[f"{m}_eer"] for m in rest}, f"{first} + classical": r["fused_eer"],
             **{f"{m} + classical": r[f"{m}_fused_eer"] for m in rest}} for r in rows]


def summary(rows: list[dict]) -> list[dict]:
    """Mean EER over seeds per institution, pairs summed; 'best deep − classical' says who wins."""
    models = [k for k in rows[0] if k not in ("seed", "institution", "genuine", "impostor")]
    out = []
    for inst in dict.fromkeys(r["institution"] for r in rows):
        sub = [r for r in rows if r["institution"] == inst]
        mean = {m: float(np.mean([r[m] for r in sub])) for m in models}
        deep = {m: v for m, v in mean.items() if m != "classical" and "+" not in m}
        best = min(deep, key=deep.get)
        out.append({"institution": inst, "seeds": len(sub), "genuine / impostor pairs":
                    f"{int(sum(r['genuine'] for r in sub))} / {int(sum(r['impostor'] for r in sub))}",
                    **{m: f"{v:.3f}" for m, v in mean.items()},
                    "best deep − classical": f"{deep[best] - mean['classical']:+.3f} ({best})"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="seed folders of a real_sensors simulate run")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=200, help="genuine and impostor test pairs per institution")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    for run in args.runs:
        if not (run / "experiment.toml").is_file():
            ap.error(f"{run}: expected a simulate run folder with experiment.toml (a seed-<s> folder)")
    rows = [r for run in args.runs for r in run_seed(run, args.pairs, not args.quiet)]
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "classical_heldout.csv", rows)
    text = ("# Classical matcher vs the real-sensor models on the same held-out pairs\n\nEER per institution, mean "
            f"over {len(args.runs)} seed(s) (runs: {', '.join(map(str, args.runs))}); classical = afis Gabor minutiae "
            "+ Bozorth3; every model scored on the same pairs; `<model> + classical` = label-free rank fusion of the "
            "two scores, reported beside the pure deep score.\n\n" + markdown_table(summary(rows))
            + "\n## Per seed\n\n" + markdown_table(rows))
    write_text(args.out / "classical_heldout.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
