"""Heterogeneity study (issue 14 §4), assembled from ``fedprint simulate --seeds`` folders, run on demand.

For each setting (one multi-seed folder): the exact command, its wall time, the method table (mean over seeds
[95 % Student-t interval] of the average and worst-client test EER, FNMR@FMR1 %, unseen-domain EER), rounds, and
one sentence answering "does AFFR beat FedAvg beyond the noise, where, and by how much" from the paired
per-seed differences (:func:`fedprint.lab.multi_seed.summarise`). Methods whose EER is near chance are flagged, never
compared. Writes ``<out>.md`` and a figure ``<out>.png`` (mean avg EER ± CI per method, one panel per setting).

    .venv/bin/python -m studies.study_heterogeneity --out docs/studies/heterogeneity_study \\
        "three domains (demo size)=/work/studies/three_domains" "unseen domain=/work/studies/unseen" ...
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np

from fedprint.config.rundir import markdown_table
from fedprint.lab.multi_seed import ci95, summarise
from fedprint.lab.report import NEAR_CHANCE_EER


def load_study(folder: Path) -> dict:
    """A multi-seed folder's per-seed results, timings, unseen rows, command, rounds and wall time."""
    summary = json.loads((folder / "summary.json").read_text())
    prov = json.loads((folder / "provenance.json").read_text())
    seeds = [int(s) for s in summary["seeds"]]
    per_seed = {s: summary["per_seed"][str(s)] for s in seeds}
    unseen = {s: summary.get("unseen", {}).get(str(s), []) for s in seeds}
    timings = {s: summary["timings_s"][str(s)] for s in seeds} if "timings_s" in summary else None
    first = folder / summary["runs"][str(seeds[0])]
    config = json.loads((first / "config.json").read_text())
    start = datetime.fromisoformat(prov["utc"].replace("Z", "+00:00")).timestamp()
    wall = (folder / "summary.json").stat().st_mtime - start
    swings: dict[str, list[int]] = {}
    ala: list[float] = []
    for s in seeds:
        for rounds_file in sorted((folder / summary["runs"][str(s)]).glob("*/rounds.json")):
            rounds = json.loads(rounds_file.read_text())
            m = rounds_file.parent.name
            if m.startswith("affr"):
                judged = [r for r in rounds if r.get("within_noise") is not None]
                tally = swings.setdefault(m, [0, 0])
                tally[0] += sum(bool(r["within_noise"]) for r in judged)
                tally[1] += len(judged)
            if m == "fedala":
                ala += [row["ala-mean-weight"] for r in rounds[1:] for row in r["clients"] if "ala-mean-weight" in row]
    real = real_rows(folder, summary, seeds)
    floor = float(config["federation"].get("gap_noise_floor", 0.0))
    return {"floor": floor, "real": real, "swings": swings, "ala_weights": ala, "per_seed": per_seed, "unseen": unseen,
            "timings": timings, "command": prov["command"],
            "rounds": config["rounds"], "clients": len(json.loads((first / "partitions.json").read_text())),
            "seeds": seeds, "wall_s": wall}


def real_rows(folder: Path, summary: dict, seeds: list[int]) -> list[dict]:
    """Every method's global / shared model(s) of every seed scored on the real samples (``fedprint evaluate``'s
    code path, FVC protocol); one row per method: mean EER over seeds [95 % CI]. [] without real samples."""
    from fedprint.lab.simulate import _model_files
    from fedprint.recognition.real_samples import POOLED, real_sample_rows

    per_method: dict[str, list[float]] = {}
    for s in seeds:
        run = folder / summary["runs"][str(s)]
        models = {f"{d.name}|{f.stem}": f for d in sorted(run.iterdir()) if d.is_dir() for f in _model_files(d)}
        by_method: dict[str, list[float]] = {}
        rows = real_sample_rows(models)
        pooled = [r for r in rows if r["real set"].startswith(POOLED)]
        for row in pooled or rows:  # the pooled row of each model when there are several sets
            by_method.setdefault(row["model"].split("|")[0], []).append(row["EER"])
        for m, eers in by_method.items():
            per_method.setdefault(m, []).append(float(np.mean(eers)))
    rows = []
    for m, v in per_method.items():
        mean, lo, hi = ci95(v)
        rows.append({"method": m, "real-sample EER": f"{mean:.4f} [{max(lo, 0):.4f}, {min(hi, 1):.4f}]"})
    return rows


def verdict(paired: list[dict], table: list[dict]) -> str:
    """One sentence: AFFR − FedAvg on every metric, and any other method beyond the noise."""
    weak = [r["method"] for r in table if _mean(r.get("avg EER")) >= NEAR_CHANCE_EER]
    if {"affr", "fedavg"} & set(weak):
        return (f"No comparison: {', '.join(weak)} did not get below {NEAR_CHANCE_EER:.0%} EER, so differences "
                "between them are not results.")
    variants = sorted({p["comparison"].split(" − ")[0] for p in paired if p["comparison"].startswith("affr")})
    sentences = [] if variants else ["AFFR was not run in this setting."]
    for v in variants:
        rows = [p for p in paired if p["comparison"] == f"{v} − fedavg"]
        parts = [f"{p['metric']} {p['mean [95% CI]']}" for p in rows]
        better = [p["metric"] for p in rows if "lower" in p["verdict"]]
        worse = [p["metric"] for p in rows if "higher" in p["verdict"]]
        name = "AFFR" if v == "affr" else f"AFFR ({v})"
        head = (f"{name} beats FedAvg beyond the noise on {', '.join(better)}" if better
                else f"{name} does not beat FedAvg beyond the noise")
        sentences.append(f"{head} ({v} − FedAvg, mean over seeds [95 % CI]: {'; '.join(parts)})"
                         + (f"; it is worse beyond the noise on {', '.join(worse)}" if worse else "") + ".")
    others = sorted({p["comparison"] for p in paired if not p["comparison"].startswith("affr")
                     and not p["verdict"].startswith("no")})
    return " ".join(sentences) + (f" Beyond the noise elsewhere: {', '.join(others)} (table below)."
                                  if others else " No other method differs from FedAvg beyond the noise either.")


def _mean(cell) -> float:
    try:
        return float(str(cell).split()[0])
    except (ValueError, IndexError):
        return math.nan


def plot(studies: dict[str, dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(studies))
    rows = math.ceil(len(studies) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(studies):]:
        ax.axis("off")
    for ax, (name, st) in zip(axes.flat[:len(studies)], studies.items(), strict=True):
        methods = list(dict.fromkeys(m for res in st["per_seed"].values() for m in res))
        stats = [ci95([np.mean([r["eer"] for r in res[m]]) for res in st["per_seed"].values() if res.get(m)])
                 for m in methods]
        means = [s[0] for s in stats]
        err = [[s[0] - max(s[1], 0.0) if math.isfinite(s[1]) else 0 for s in stats],  # EER >= 0
               [s[2] - s[0] if math.isfinite(s[2]) else 0 for s in stats]]
        colours = ["tab:red" if m.startswith("affr") else "tab:blue" if m == "fedavg" else "tab:gray"
                   for m in methods]
        ax.bar(range(len(methods)), means, yerr=err, capsize=3, color=colours)
        ax.set_xticks(range(len(methods)), methods, rotation=60, ha="right", fontsize=8)
        ax.set_title(f"{name}\n({len(st['seeds'])} seeds, T = {st['rounds']})", fontsize=9)
        ax.set_ylabel("avg test EER (mean ± 95 % CI)")
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", nargs="+", help="NAME=FOLDER of a `fedprint simulate --seeds` run (split at the last =)")
    ap.add_argument("--out", type=Path, required=True, help="output path without suffix (.md and .png written)")
    args = ap.parse_args()
    studies = {}
    for item in args.studies:
        name, _, folder = item.rpartition("=")
        if not folder or not (Path(folder) / "summary.json").is_file():
            ap.error(f"{item!r}: expected NAME=FOLDER of a finished `fedprint simulate --seeds` run")
        studies[name] = load_study(Path(folder))
    lines = ["# Does AFFR help? Heterogeneity study\n",
             "Every cell: mean over seeds [95 % Student-t interval over seeds]; EER / FNMR on each client's "
             "held-out test fingers (raw probes, threshold-free), personalised methods (fedala, feddbe, fedas) "
             "scored with each client's own model, the others with the shared model; unseen-domain EER with "
             "every method's global model on all pairs of the held-out domain. Generated by "
             "`studies/study_heterogeneity.py` from the run folders. Each interval is a 95 % interval on its own: "
             "among the dozens of paired comparisons below, about one in twenty is expected to exclude 0 by "
             "chance, so a lone 'beyond the noise' on one metric in one setting is weak evidence.\n"]
    for name, st in studies.items():
        table, paired = summarise(st["per_seed"], unseen=st["unseen"], timings=st["timings"])
        lines += [f"## {name}\n",
                  f"- command: `{st['command']}`",
                  f"- {st['clients']} clients, {len(st['seeds'])} seeds, T = {st['rounds']} rounds; wall time "
                  f"{st['wall_s'] / 60:.1f} min on 2 CPU cores (whole study, from the folder's timestamps)\n",
                  markdown_table(table),
                  f"\n**Answer.** {verdict(paired, table)}\n"]
        beyond = [p for p in paired if not p["verdict"].startswith("no")]
        if beyond:
            lines += ["Paired differences beyond the noise (method − FedAvg per seed):\n", markdown_table(beyond), ""]
        if st["real"]:
            lines += ["Real samples (`../shared/data/real`, FVC protocol; global / shared models; local: mean over "
                      "the clients' models):\n", markdown_table(st["real"]), ""]
        for m, (k, n) in st["swings"].items():
            lines.append(f"- {m}: in {k} of {n} AFFR rounds (all seeds) the gap spread max|G − μ| was inside 2 "
                         "standard errors of the validation accuracy; "
                         + (f"with `gap_noise_floor = {st['floor']:g}` AFFR left its weights unchanged in such rounds."
                            if st["floor"] > 0 else "the paper's rule still made a full step in each of them."))
        if st["ala_weights"]:
            w = np.asarray(st["ala_weights"])
            lines.append(f"- fedala: learned ALA weights, mean over clients and rounds ≥ 2: {w.mean():.4f} "
                         f"(min {w.min():.4f}; 1 = the global model taken unchanged).")
        lines.append("")
    png = plot(studies, args.out.with_suffix(".png"))
    lines.append(f"![avg test EER per method and setting]({png.name})\n")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"written {args.out.with_suffix('.md')} and {png}")


if __name__ == "__main__":
    main()
