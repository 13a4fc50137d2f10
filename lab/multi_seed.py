"""``fedprint simulate --seeds``: the same experiment under several seeds, with uncertainty.

Each seed is one complete ``fedprint simulate`` run (its own folder ``seed-<s>/`` in the summary folder: partitions,
splits, FP-DFSN noise, impostor sampling and training order all follow ``run.seed``; every method of one seed sees
the same clients and splits). The summary gives, per method, the mean over seeds of the average and worst-client
test EER and of the average FNMR at FMR = 1 % (and the held-out-domain EER when ``[partition] unseen`` is set), each
with a 95 % confidence interval (Student t over seeds, cut to [0, 1] since every metric is a rate — the seed-to-seed
spread, which includes the split and the training noise), and the paired difference method − FedAvg per seed with
its own interval (AFFR first): a method beats FedAvg beyond the noise only if that interval excludes 0.
``curves_seeds.png``: EER per round, mean ± band over seeds.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from fedprint.config import load_experiment, resolve_experiment
from fedprint.config.rundir import check_run_parent, make_out_dir, markdown_table, report_provenance
from fedprint.data.atomic_io import write_json, write_text

METRICS = (("avg EER", "eer", np.mean), ("worst-client EER", "eer", np.max), ("avg FNMR@FMR1%", "fmr100", np.mean))


def parse_seeds(text: str) -> list[int]:
    """``"3"`` -> [0, 1, 2]; ``"0,4,7"`` -> [0, 4, 7] (distinct integers >= 0)."""
    try:
        if "," not in text:
            n = int(text)
            if n < 2:
                raise ValueError
            return list(range(n))
        seeds = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"--seeds: expected a count >= 2 or a comma-separated list of seeds, got {text!r}") from None
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds: expected at least two distinct seeds >= 0, got {text!r}")
    return seeds


def with_seed(toml_text: str, seed: int) -> str:
    """The experiment text with ``[run] seed = <seed>`` (replaced, or added to the [run] table / a new one)."""
    m = re.search(r"(?ms)^\[run\]\s*$(.*?)(?=^\[|\Z)", toml_text)
    if m is None:
        return f"[run]\nseed = {seed}\n\n" + toml_text
    body = m.group(1)
    if re.search(r"(?m)^seed\s*=", body):
        body = re.sub(r"(?m)^seed\s*=.*$", f"seed = {seed}", body, count=1)
    else:
        body = f"\nseed = {seed}" + body
    return toml_text[:m.start(1)] + body + toml_text[m.end(1):]


def ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, lower, upper) of a Student-t 95 % interval over the values (seeds)."""
    x = np.asarray(values, float)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def signed_interval(values: Sequence[float], unit: str = "split") -> str:
    """Mean of paired differences (points) with its Student-t 95 % interval, e.g. ``"+0.5 [-0.2, +1.2]"``; below
    two values ``"+0.5 (one <unit>: no interval)"``."""
    m, lo, hi = ci95(values)
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]" if len(values) >= 2 else f"{m:+.1f} (one {unit}: no interval)"


def _method_of(model: str) -> str:
    """Method of a model-file row name: ``"local (casia)"`` -> ``"local"``."""
    return model.split(" (")[0]


def summarise(per_seed: dict[int, dict[str, list[dict]]], *, unseen: dict[int, list[dict]] | None = None,
              timings: dict[int, dict[str, float]] | None = None) -> tuple[list[dict], list[dict]]:
    """Rows per method (mean and CI of each metric) and the paired rows "method − FedAvg" (AFFR first).

    ``unseen`` (seed -> rows of :func:`fedprint.recognition.real_samples.dataset_rows`) adds the held-out-domain EER of
    each
    method (mean over its models and the held-out domains); ``timings`` (seed -> method -> seconds) the wall time.
    """
    methods = list(dict.fromkeys(m for res in per_seed.values() for m in res))
    metrics = [name for name, _, _ in METRICS]
    values: dict[str, dict[str, list[float]]] = {m: {name: [] for name in metrics} for m in methods}
    for s, res in per_seed.items():
        for m in methods:
            rows = res.get(m, [])
            for name, key, fn in METRICS:
                values[m][name].append(float(fn([r[key] for r in rows])) if rows else math.nan)
            if unseen and unseen.get(s):
                eers = [r["EER"] for r in unseen[s] if _method_of(r["model"]) == m]
                values[m].setdefault(UNSEEN, []).append(float(np.mean(eers)) if eers else math.nan)
    if unseen and any(unseen.values()):
        metrics.append(UNSEEN)
    table = []
    for m in methods:
        row: dict = {"method": m, "seeds": len(per_seed)}
        for name in metrics:
            mean, lo, hi = ci95(values[m].get(name, [math.nan]))
            lo, hi = max(lo, 0.0), min(hi, 1.0)  # rates: the t interval is cut to [0, 1]
            row[name] = f"{mean:.4f} [{lo:.4f}, {hi:.4f}]" if math.isfinite(mean) else "—"
        if timings:
            row["wall time (s)"] = f"{np.mean([t.get(m, math.nan) for t in timings.values()]):.0f}"
        table.append(row)
    paired = []
    if "fedavg" in values:
        others = [m for m in methods if m not in ("fedavg", "local", "centralized", "initial model")]
        for m in sorted(others, key=lambda m: m != "affr"):
            for name in metrics:
                d = np.asarray(values[m][name]) - np.asarray(values["fedavg"][name])
                if not np.isfinite(d).all():
                    continue
                mean, lo, hi = ci95(d)
                label = "AFFR" if m == "affr" else m
                verdict = (f"{label} lower (better) beyond the noise" if hi < 0 else
                           f"{label} higher (worse) beyond the noise" if lo > 0 else "no difference beyond the noise")
                paired.append({"comparison": f"{m} − fedavg", "metric": name,
                               "per seed": ", ".join(f"{v:+.4f}" for v in d),
                               "mean [95% CI]": f"{mean:+.4f} [{lo:+.4f}, {hi:+.4f}]", "verdict": verdict})
    return table, paired


#: Summary column of the held-out-domain EER (``[partition] unseen``).
UNSEEN = "unseen-domain EER"


def plot_seed_curves(root: Path, run_dirs: Sequence[Path]) -> Path | None:
    """``curves_seeds.png``: mean test EER over clients per round, per federated method, mean ± 95 % band over
    the seeds' runs."""
    series: dict[str, list[list[float]]] = {}
    for run in run_dirs:
        for rounds_file in sorted(run.glob("*/rounds.json")):
            rows = json.loads(rounds_file.read_text())
            series.setdefault(rounds_file.parent.name, []).append([r["eer"] for r in rows])
    series = {m: v for m, v in series.items() if len({len(x) for x in v}) == 1 and len(v) >= 2}
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for m, curves in series.items():
        x = np.arange(1, len(curves[0]) + 1)
        band = np.array([ci95(col) for col in np.asarray(curves, float).T])
        ax.plot(x, band[:, 0], marker="o", label=m)
        ax.fill_between(x, band[:, 1], band[:, 2], alpha=0.2)
    ax.set_xlabel("round")
    ax.set_ylabel("test EER (mean over clients)")
    ax.set_title(f"{len(run_dirs)} seeds: mean and 95 % band")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = root / "curves_seeds.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def simulate_seeds(config: str | Path, seeds: Sequence[int], *, methods: Sequence[str] | None = None,
                   rounds: int | None = None, out: str | Path | None = None, progress: bool = True) -> Path:
    """Run :func:`fedprint.lab.simulate.simulate` once per seed and write the summary (module docstring)."""
    from fedprint.lab.simulate import simulate

    path = resolve_experiment(config)
    cfg, _ = load_experiment(path)
    if out is None:
        check_run_parent(cfg.run.out, f"{path.name}: [run] out")
    root = make_out_dir(out, cfg.run.out, f"{cfg.run.name}-seeds").resolve()
    text = path.read_text()
    per_seed: dict[int, dict[str, list[dict]]] = {}
    unseen: dict[int, list[dict]] = {}
    timings: dict[int, dict[str, float]] = {}
    runs = {}
    for s in seeds:
        exp = root / f"{path.stem}_seed{s}.toml"
        write_text(exp, with_seed(text, s))
        run = simulate(exp, methods=methods, rounds=rounds, out=root / f"seed-{s}", progress=progress)
        runs[s] = run.name
        res = json.loads((run / "results.json").read_text())
        per_seed[s], unseen[s], timings[s] = res["results"], res.get("unseen", []), res["timings_s"]
        print(f"fedprint simulate --seeds: seed {s} done ({run.name})", flush=True)
    table, paired = summarise(per_seed, unseen=unseen, timings=timings)
    write_json(root / "summary.json", {"seeds": list(seeds), "runs": runs, "methods": table, "paired": paired,
                                       "per_seed": per_seed, "unseen": unseen, "timings_s": timings})
    plot_seed_curves(root, [root / r for r in runs.values()])
    lines = [f"# {cfg.run.name}: {len(seeds)} seeds\n",
             f"Seeds {', '.join(map(str, seeds))}; one full run per seed (folders {', '.join(runs.values())}). "
             "Cells: mean over seeds [95 % Student-t interval over seeds]. EER and FNMR@FMR1% on each client's "
             "held-out test fingers (raw probes).\n",
             markdown_table(table)]
    if paired:
        lines += ["## Each federated method − FedAvg, paired by seed\n",
                  "Negative = the method is better. A difference counts only when its interval excludes 0. "
                  "Personalised methods (fedala, feddbe, fedas) are scored with each client's own model, the "
                  "others with the shared model; on unseen domains every method uses its global model.\n",
                  markdown_table(paired)]
    if (root / "curves_seeds.png").is_file():
        lines.append("![mean test EER per round, mean ± 95 % band over seeds](curves_seeds.png)\n")
    lines.append(report_provenance(root))
    write_text(root / "summary.md", "\n".join(lines) + "\n")
    print(f"fedprint simulate --seeds: summary at {root / 'summary.md'}", flush=True)
    return root
