"""``fedprint simulate --seeds``: the same experiment under several seeds, with uncertainty.

Each seed is one complete ``fedprint simulate`` run (its own folder ``seed-<s>/``: partitions, splits, FP-DFSN
noise, impostor sampling and training order all follow ``run.seed``; every method of one seed sees the same
clients and splits). The summary gives, per method, the mean over seeds of the average and worst-client test EER
and of the average FNMR at FMR = 1 %, each with a 95 % confidence interval (Student t over seeds — the
seed-to-seed spread, which includes the split and the training noise), and the paired difference AFFR − FedAvg
per seed with its own interval: AFFR beats FedAvg beyond the noise only if that interval excludes 0.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from data.atomic_io import write_json, write_text
from fedprint_config import load_experiment, resolve_experiment
from server.rundir import check_run_parent, markdown_table, new_run_dir, report_provenance

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


def summarise(per_seed: dict[int, dict[str, list[dict]]]) -> tuple[list[dict], list[dict]]:
    """Rows per method (mean and CI of each metric) and the paired AFFR − FedAvg rows."""
    methods = list(dict.fromkeys(m for res in per_seed.values() for m in res))
    values: dict[str, dict[str, list[float]]] = {m: {name: [] for name, _, _ in METRICS} for m in methods}
    for res in per_seed.values():
        for m in methods:
            rows = res.get(m, [])
            for name, key, fn in METRICS:
                values[m][name].append(float(fn([r[key] for r in rows])) if rows else math.nan)
    table = []
    for m in methods:
        row: dict = {"method": m, "seeds": len(per_seed)}
        for name, _, _ in METRICS:
            mean, lo, hi = ci95(values[m][name])
            row[name] = f"{mean:.4f} [{lo:.4f}, {hi:.4f}]"
        table.append(row)
    paired = []
    if "affr" in values and "fedavg" in values:
        for name, _, _ in METRICS:
            d = np.asarray(values["affr"][name]) - np.asarray(values["fedavg"][name])
            mean, lo, hi = ci95(d)
            verdict = ("AFFR lower (better) beyond the noise" if hi < 0 else
                       "AFFR higher (worse) beyond the noise" if lo > 0 else "no difference beyond the noise")
            paired.append({"metric": name, "AFFR − FedAvg per seed": ", ".join(f"{v:+.4f}" for v in d),
                           "mean [95% CI]": f"{mean:+.4f} [{lo:+.4f}, {hi:+.4f}]", "verdict": verdict})
    return table, paired


def simulate_seeds(config: str | Path, seeds: Sequence[int], *, methods: Sequence[str] | None = None,
                   rounds: int | None = None, out: str | Path | None = None, progress: bool = True) -> Path:
    """Run :func:`server.simulate.simulate` once per seed and write the summary (module docstring)."""
    from server.simulate import simulate

    path = resolve_experiment(config)
    cfg, _ = load_experiment(path)
    parent = check_run_parent(out or cfg.run.out, "--out" if out else f"{path.name}: [run] out")
    root = new_run_dir(parent, f"{cfg.run.name}-seeds").resolve()
    text = path.read_text()
    per_seed: dict[int, dict[str, list[dict]]] = {}
    runs = {}
    for s in seeds:
        exp = root / f"{path.stem}_seed{s}.toml"
        write_text(exp, with_seed(text, s))
        run = simulate(exp, methods=methods, rounds=rounds, out=root, progress=progress)
        runs[s] = run.name
        per_seed[s] = json.loads((run / "results.json").read_text())["results"]
        print(f"fedprint simulate --seeds: seed {s} done ({run.name})", flush=True)
    table, paired = summarise(per_seed)
    write_json(root / "summary.json", {"seeds": list(seeds), "runs": runs, "methods": table, "paired": paired,
                                       "per_seed": per_seed})
    lines = [f"# {cfg.run.name}: {len(seeds)} seeds\n",
             f"Seeds {', '.join(map(str, seeds))}; one full run per seed (folders {', '.join(runs.values())}). "
             "Cells: mean over seeds [95 % Student-t interval over seeds]. EER and FNMR@FMR1% on each client's "
             "held-out test fingers (raw probes).\n",
             markdown_table(table)]
    if paired:
        lines += ["## AFFR − FedAvg, paired by seed\n",
                  "Negative = AFFR better. A difference counts only when its interval excludes 0.\n",
                  markdown_table(paired)]
    lines.append(report_provenance(root))
    write_text(root / "summary.md", "\n".join(lines) + "\n")
    print(f"fedprint simulate --seeds: summary at {root / 'summary.md'}", flush=True)
    return root
