"""Verification accuracy vs FP-DFSN's β and noise variance σ² (the shape of Yan et al. 2025 Figs. 9 and 10).

Each point is a full centralized training run on the experiment's data with FP-DFSN at that setting (same splits,
seeds and model), evaluated on the open-set test pairs; β = 0 is the no-perturbation reference.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedprint.config import ExperimentConfig  # noqa: E402
from fedprint.config.rundir import make_out_dir, markdown_table, report_provenance  # noqa: E402
from fedprint.data.atomic_io import write_csv, write_json, write_text  # noqa: E402
from fedprint.lab.baselines import evaluate_clients, train_centralized  # noqa: E402
from fedprint.training.experiment_data import build_clients  # noqa: E402


def _point(cfg: ExperimentConfig, beta: float, sigma2: float | None, progress: bool) -> dict:
    fp = replace(cfg.fpdfsn, enabled=beta > 0, beta=beta, sigma2=sigma2)
    c = replace(cfg, fpdfsn=fp, partition=replace(cfg.partition, betas=()))
    clients = build_clients(c, progress=progress)
    net, hist = train_centralized(clients, encoder=c.model.encoder, embedding_dim=c.model.embedding_dim,
                                  encoder_kwargs=c.model.encoder_kwargs(), init_state=c.model.init_state(),
                                  cfg=replace(c.train, seed=c.run.seed),
                                  progress=progress)
    rows = evaluate_clients(net, clients)
    return {"beta": beta, "sigma2": sigma2 if sigma2 is not None else "default",
            "accuracy": float(np.mean([r["accuracy"] for r in rows])),
            "eer": float(np.mean([r["eer"] for r in rows])),
            "roc_auc": float(np.mean([r["roc_auc"] for r in rows])), "final_loss": hist[-1]["loss"]}


def run_sweep(cfg: ExperimentConfig, *, betas: list[float], sigma2s: list[float], sigma2_beta: float = 0.5,
              progress: bool = True, out: str | Path | None = None) -> Path:
    """β sweep (σ² at its default) and σ² sweep (at β = ``sigma2_beta``); writes sweep.csv, sweep.png, report.md."""
    if not betas and not sigma2s:
        raise ValueError("sweep: give at least one β or σ² value")
    for b in [*betas, sigma2_beta]:
        if not 0.0 <= b < 1.0:
            raise ValueError(f"sweep: β must lie in [0, 1), got {b}")
    if any(v < 0 for v in sigma2s):
        raise ValueError(f"sweep: σ² must be >= 0, got {sigma2s}")
    run_dir = make_out_dir(out, cfg.run.out, f"{cfg.run.name}-fpdfsn-sweep")
    write_json(run_dir / "config.json", {**cfg.to_dict(), "betas": betas, "sigma2s": sigma2s,
                                         "sigma2_beta": sigma2_beta})
    beta_rows = [{"sweep": "beta", **_point(cfg, b, None, progress)} for b in betas]
    sigma_rows = [{"sweep": "sigma2", **_point(cfg, sigma2_beta, v, progress)} for v in sigma2s]
    rows = beta_rows + sigma_rows
    write_csv(run_dir / "sweep.csv", rows)

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, sub, key, label in ((axes[0], beta_rows, "beta", "β (σ² default)"),
                                (axes[1], sigma_rows, "sigma2", f"σ² in gray levels² (β = {sigma2_beta})")):
        if sub:
            x = [r[key] for r in sub]
            ax.plot(x, [r["accuracy"] for r in sub], "o-", label="accuracy")
            ax.plot(x, [1 - r["eer"] for r in sub], "s--", label="1 − EER")
        ax.set_xlabel(label)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{cfg.run.name}: verification vs FP-DFSN parameters (open-set test pairs)", fontsize=9)
    fig.tight_layout()
    fig.savefig(run_dir / "sweep.png", dpi=100)
    plt.close(fig)
    write_text(run_dir / "report.md", (
        f"# {cfg.run.name}: FP-DFSN sweep\n\nCentralized training per point, same data, splits and seeds; "
        "FP-DFSN is a perturbation, not differential privacy.\n\n"
        + markdown_table(rows, ["sweep", "beta", "sigma2", "accuracy", "eer", "roc_auc", "final_loss"])
        + "\n![sweep](sweep.png)\n\n" + report_provenance(run_dir)))
    return run_dir
