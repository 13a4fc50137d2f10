"""Real-sensor study (issue 22 §4): ``docs/studies/real_sensors_study.md`` + figure, assembled from run folders.

Inputs, all produced by the ordinary commands (nothing here trains):

* ``--seeds FOLDER``: ``fedprint simulate --config real_sensors --seeds 3`` (five institutions, one real sensor
  each, split by finger);
* ``--sweep FOLDER`` (optional): ``fedprint sweep --config real_sensors --beta 0,0.3,0.5,0.7 --sigma2 0`` — the
  cost of FP-DFSN on real prints (centralized model per β, mean test EER over the institutions);
* ``--audit FOLDER`` (optional): ``fedprint audit --run <one seed's run> --attacks mia`` — membership-inference
  AUC of the real-data run's models;
* ``--classical FOLDER`` (optional): ``studies/classical_heldout.py`` on the seed folders — the classical matcher
  and every model on the same held-out pairs, and their label-free score fusion;
* ``--pooled FOLDER`` (optional): ``fedprint train --mode centralized --config real_sensors_pooled
  --classical-pairs 200`` — one model on all five sensors with the best single-sensor recipe, the same split,
  beside the classical matcher on the same held-out pairs.

Written: per-institution and pooled test EER / FNMR at FMR 1 % of local, centralized, FedAvg, FedProx and AFFR as
mean over seeds [95 % Student-t interval] (:func:`fedprint.lab.multi_seed.ci95`), each column headed by the genuine /
impostor test pairs behind it; AFFR − FedAvg paired by seed, per institution and pooled, with the verdict "too few
fingers to tell" whenever the interval includes 0 — and no verdict at all where either method is near chance
(:data:`fedprint.lab.report.NEAR_CHANCE_EER`); the method table and its paired rows from
:func:`fedprint.lab.multi_seed.summarise`
(the heterogeneity study's machinery, :mod:`studies.study_heterogeneity`). Pooled rows come from each run's
``common_test`` (:mod:`fedprint.lab.common_test`); local's pooled row pools each institution's own model.

    .venv/bin/python -m studies.study_real_sensors --seeds runs/real_sensors-seeds-... [--sweep ...] [--audit ...] \\
        [--classical ...] [--pooled ...] [--out docs/studies/real_sensors_study]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from fedprint.config.provenance import recorded_command
from fedprint.config.rundir import markdown_table
from fedprint.lab.multi_seed import ci95, summarise
from fedprint.lab.report import COMMON_COLUMN, NEAR_CHANCE_EER
from fedprint.recognition.real_samples import POOLED
from studies.study_heterogeneity import load_study, verdict

#: Methods of the study, in table order; the common-test name of local's rows.
METHODS = ("initial model", "local", "centralized", "fedavg", "fedprox", "affr")
LOCAL_COMMON = "local (own models)"
POOLED_COL = "pooled"


def _method(model: str) -> str:
    return "local" if model == LOCAL_COMMON else model


def per_seed_common(folder: Path, summary: dict) -> dict[int, list[dict]]:
    """Each seed's common-test rows (``results.json`` → ``common_test``), keyed by seed."""
    out = {}
    for s, run in summary["runs"].items():
        res = json.loads((folder / run / "results.json").read_text())
        out[int(s)] = res.get("common_test", [])
    return out


def cell_values(common: dict[int, list[dict]], metric: str) -> tuple[dict, dict]:
    """values[method][column] = per-seed list of ``metric``; pairs[column] = (genuine, impostor) of seed 0's
    shared-model rows (the test pairs are the same for every method of a seed)."""
    values: dict[str, dict[str, list[float]]] = {}
    pairs: dict[str, set[tuple[int, int]]] = {}
    for rows in common.values():
        for r in rows:
            col = POOLED_COL if str(r[COMMON_COLUMN]).startswith(POOLED) else r[COMMON_COLUMN]
            v = r[metric]
            values.setdefault(_method(r["model"]), {}).setdefault(col, []).append(math.nan if v is None else float(v))
            pairs.setdefault(col, set()).add((int(r["genuine"]), int(r["impostor"])))
    return values, pairs


def _pairs_head(col: str, pairs: set[tuple[int, int]]) -> str:
    g = sorted({p[0] for p in pairs})
    i = sorted({p[1] for p in pairs})

    def span(v: list[int]) -> str:
        return f"{v[0]}" if len(v) == 1 else f"{v[0]}–{v[-1]}"

    return f"{col} ({span(g)} g / {span(i)} i)"


def _fmt(values: list[float]) -> str:
    x = [v for v in values if math.isfinite(v)]
    if not x:
        return "—"
    mean, lo, hi = ci95(x)
    if not math.isfinite(lo):
        return f"{mean:.4f}"
    return f"{mean:.4f} [{max(lo, 0.0):.4f}, {min(hi, 1.0):.4f}]"


def institution_table(values: dict, pairs: dict) -> list[dict]:
    """One row per method: mean [95 % CI] over seeds per institution column and pooled."""
    cols = sorted(c for c in pairs if c != POOLED_COL) + ([POOLED_COL] if POOLED_COL in pairs else [])
    rows = []
    for m in [m for m in METHODS if m in values] + sorted(set(values) - set(METHODS)):
        rows.append({"method": m, **{_pairs_head(c, pairs[c]): _fmt(values[m].get(c, [])) for c in cols}})
    return rows


def paired_affr(values: dict, pairs: dict, *, a: str = "affr", b: str = "fedavg") -> list[dict]:
    """``a`` − ``b`` per seed for every column: mean [95 % CI] and a verdict that refuses to over-read."""
    if a not in values or b not in values:
        return []
    rows = []
    for col in sorted(c for c in pairs if c != POOLED_COL) + [POOLED_COL]:
        va, vb = np.asarray(values[a].get(col, []), float), np.asarray(values[b].get(col, []), float)
        if len(va) != len(vb) or not len(va):
            continue
        d = va - vb
        mean, lo, hi = ci95(d)
        if max(np.nanmean(va), np.nanmean(vb)) >= NEAR_CHANCE_EER:
            say = f"no verdict: EER near chance (≥ {NEAR_CHANCE_EER:.0%})"
        elif not (math.isfinite(lo) and math.isfinite(hi)):
            say = "one seed: no interval"
        elif lo <= 0 <= hi:
            say = "too few fingers to tell (interval includes 0)"
        else:
            say = f"{'AFFR better' if hi < 0 else 'AFFR worse'} beyond the seed-to-seed noise"
        rows.append({"test set": _pairs_head(col, pairs[col]), "per seed": ", ".join(f"{v:+.4f}" for v in d),
                     "AFFR − FedAvg [95% CI]": f"{mean:+.4f} [{lo:+.4f}, {hi:+.4f}]", "verdict": say})
    return rows


def _per_set_answer(rows: list[dict]) -> str:
    """One sentence on the per-test-set AFFR − FedAvg verdicts: where the interval excludes 0, and where not."""
    if not rows:
        return ""
    beyond = [f"{r['test set']}: {r['verdict']}" for r in rows if "beyond" in r["verdict"]]
    unclear = [r["test set"].split(" (")[0] for r in rows if "beyond" not in r["verdict"]]
    said = " Per test set (paired table above): " + ("; ".join(beyond) if beyond else "no difference beyond the noise")
    return said + (f"; too few fingers (or seeds) to tell on {', '.join(unclear)}." if unclear else ".")


def sweep_rows(folder: Path) -> list[dict]:
    """β points of a ``fedprint sweep`` run: mean test EER over institutions and its cost against β = 0."""
    import csv

    with (folder / "sweep.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["sweep"] == "beta"]
    base = next((float(r["eer"]) for r in rows if float(r["beta"]) == 0.0), math.nan)
    return [{"β": float(r["beta"]), "mean test EER": float(r["eer"]), "accuracy": float(r["accuracy"]),
             "EER cost vs β = 0": float(r["eer"]) - base if math.isfinite(base) else None} for r in rows]


def mia_comparison_rows(folder: Path) -> list[dict]:
    """The audit's controlled comparison (no defence / FP-DFSN / DP-SGD models trained alike), from ``mia.csv``."""
    import csv

    path = folder / "mia.csv"
    if not path.exists():
        return []
    with path.open() as f:
        return [{k: (f"{float(r[k]):.3f}" if k == "AUC" else r[k])
                 for k in ("condition", "attack", "AUC", "AUC 95% CI", "members", "non-members")}
                for r in csv.DictReader(f)]


def mia_rows(folder: Path) -> list[dict]:
    """AUC of every shadow-free membership attack on every model of the audited run (``mia.json``)."""
    data = json.loads((folder / "mia.json").read_text())
    return [{"model": r["model"], **{f"{a} AUC": v["auc"] for a, v in r["attacks"].items()}}
            for r in data.get("run_models") or []]


def _command(folder: Path) -> str:
    """The command that made a run folder (its ``provenance.json``), as a sentence, or ""."""
    cmd = recorded_command(folder)
    return f" Command: `{cmd}`." if cmd else ""


def _sweep_epochs(folder: Path) -> str:
    """``[train] epochs`` of a sweep run (its ``config.json``), or "?"."""
    try:
        return str(json.loads((folder / "config.json").read_text())["train"]["epochs"])
    except (OSError, KeyError, ValueError):
        return "?"


def plot(values: dict, pairs: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = sorted(c for c in pairs if c != POOLED_COL) + [POOLED_COL]
    methods = [m for m in METHODS if m in values]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.4 * len(cols)), 4))
    width = 0.8 / max(1, len(methods))
    for k, m in enumerate(methods):
        stats = [ci95([v for v in values[m].get(c, []) if math.isfinite(v)] or [math.nan]) for c in cols]
        mean = np.array([s[0] for s in stats])
        lo = np.array([mean[i] - max(s[1], 0.0) if math.isfinite(s[1]) else 0.0 for i, s in enumerate(stats)])
        hi = np.array([s[2] - mean[i] if math.isfinite(s[2]) else 0.0 for i, s in enumerate(stats)])
        ax.bar(np.arange(len(cols)) + k * width, mean, width, yerr=[lo, hi], capsize=2, label=m)
    ax.set_xticks(np.arange(len(cols)) + 0.4 - width / 2, [_pairs_head(c, pairs[c]) for c in cols], rotation=20,
                  ha="right", fontsize=7)
    ax.set_ylabel("test EER (mean ± 95 % CI over seeds)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def classical_rows(folder: Path) -> list[dict]:
    """Mean-over-seeds table of ``studies/classical_heldout.py`` (``classical_heldout.csv``)."""
    import csv

    from studies.classical_heldout import summary

    with (folder / "classical_heldout.csv").open() as f:
        rows = [{k: (v if k == "institution" else float(v)) for k, v in r.items()} for r in csv.DictReader(f)]
    return summary(rows)


def _classical_reading(rows: list[dict]) -> str:
    """Where the best pure deep model, and the best fusion, are at or below the classical matcher (mean EERs)."""
    def best(r: dict, fused: bool) -> float:
        return min(float(v) for k, v in r.items() if k not in ("institution", "seeds", "classical",
                   "genuine / impostor pairs", "best deep − classical") and ("+" in k) == fused)

    deep = [r["institution"] for r in rows if best(r, False) <= float(r["classical"])]
    fused = [r["institution"] for r in rows if best(r, True) <= float(r["classical"])]
    return (f"\n**Reading.** The best pure deep model is at or below the classical matcher on {len(deep)} of "
            f"{len(rows)} sensors ({', '.join(deep) or 'none'}); the best fusion on {len(fused)} of {len(rows)} "
            f"({', '.join(fused) or 'none'}). Means over seeds on the pairs counted in the table; no interval.\n")


def pooled_rows(folder: Path) -> list[dict]:
    """Per sensor: the pooled-recipe model's held-out EER / FNMR@FMR1 % (all test pairs) and, on the classical
    subset of those pairs, deep vs classical vs their fusion (``classical_comparison.csv`` of a train run)."""
    import csv

    held = {r["client"]: r for r in json.loads((folder / "metrics.json").read_text())["per_client"]}
    with (folder / "classical_comparison.csv").open() as f:
        comp = list(csv.DictReader(f))
    rows = []
    for r in comp:
        h = held[r["client"]]
        deep, classical = float(r["deep_eer"]), float(r["classical_eer"])
        fnmr = h.get("fmr100")
        resolvable = fnmr is not None and int(h["n_impostor"]) >= 100  # FMR 1 % needs >= 100 impostor pairs
        rows.append({"sensor": r["client"],
                     "held-out EER (g / i)": f"{h['eer']:.3f} ({h['n_genuine']} / {h['n_impostor']})",
                     "FNMR@FMR1%": f"{fnmr:.3f}" if resolvable else "—",
                     "same-pairs subset (g / i)": f"{r['genuine']} / {int(r['pairs']) - int(r['genuine'])}",
                     "deep": f"{deep:.3f}", "classical": f"{classical:.3f}", "fused": f"{float(r['fused_eer']):.3f}",
                     "deep at or below classical": "yes" if deep <= classical else f"no (+{deep - classical:.3f})"})
    return rows


def build(seeds: Path, sweep: Path | None, audit: Path | None, out: Path, classical: Path | None = None,
          pooled: Path | None = None) -> Path:
    """Write ``<out>.md`` and ``<out>.png``; returns the markdown path."""
    summary = json.loads((seeds / "summary.json").read_text())
    st = load_study(seeds)
    common = per_seed_common(seeds, summary)
    if not any(common.values()):
        raise ValueError(f"{seeds}: the runs hold no common_test rows (made before issue 22?); rerun them")
    eer, pairs = cell_values(common, "EER")
    fnmr, _ = cell_values(common, "FNMR@FMR1%")
    table, paired = summarise(st["per_seed"], unseen=st["unseen"], timings=st["timings"])
    lines = ["# Real sensors: does federated training (and AFFR) help on real prints?\n",
             f"Five institutions, one real sensor each (`experiments/real_sensors.toml`), split by finger (open "
             f"set); {len(st['seeds'])} seeds, T = {st['rounds']} rounds; command `{st['command']}`; wall time "
             f"{st['wall_s'] / 60:.1f} min. Every cell: mean over seeds [95 % Student-t interval]; every column "
             "says how many genuine (g) / impostor (i) test pairs stand behind it (a range when the seeds' splits "
             "differ). Pooled = all institutions' held-out fingers at once (no cross-institution pair); local's "
             "pooled cell pools each institution's own model. Generated by `studies/study_real_sensors.py`.\n",
             "## Test EER per institution and pooled\n", markdown_table(institution_table(eer, pairs)),
             "\n## FNMR at FMR 1 % per institution and pooled\n",
             "(— : fewer than 100 impostor pairs, FMR 1 % cannot be resolved)\n",
             markdown_table(institution_table(fnmr, pairs)),
             "\n## AFFR − FedAvg, paired by seed\n",
             "Negative = AFFR better. \"Too few fingers to tell\" whenever the interval includes 0.\n",
             markdown_table(paired_affr(eer, pairs)) if paired_affr(eer, pairs) else "_(AFFR or FedAvg not run)_\n",
             "\n## Methods (average over institutions) and every method − FedAvg\n", markdown_table(table),
             f"\n**Answer.** {verdict(paired, table)}{_per_set_answer(paired_affr(eer, pairs))}\n",
             markdown_table(paired)]
    if st["real"]:
        lines += ["\nEvery global / shared model on all pairs of all real sets (pooled row of each model, FVC "
                  "protocol). **These sets are the institutions' own: the pairs include their training fingers, so "
                  "this is not a held-out figure** (the tables above are):\n",
                  markdown_table(st["real"])]
    if sweep is not None:
        lines += ["\n## Cost of FP-DFSN on real prints (β sweep)\n",
                  f"From `{sweep}`: one centralized model per β, mean test EER over the institutions (one seed, "
                  f"{_sweep_epochs(sweep)} epochs per model — the experiment's `[train] epochs`, far fewer than "
                  "the centralized model above, hence its higher EER). One seed and no interval: a difference "
                  "smaller than the seed-to-seed spread of the tables above is not a result. FP-DFSN is a "
                  "perturbation, not differential privacy." + _command(sweep) + "\n", markdown_table(sweep_rows(sweep))]
    if audit is not None:
        lines += ["\n## Membership inference on the real-data run\n",
                  f"From `{audit}` (`fedprint audit --attacks mia`): AUC of the shadow-free attacks against each "
                  "model of the run (0.5 = no leakage)." + _command(audit) + "\n", markdown_table(mia_rows(audit))]
        comparison = mia_comparison_rows(audit)
        if comparison:
            lines += ["\nControlled comparison (Yan et al. Table 6 in shape): models trained alike by the audit on "
                      "the run's data without defence, with FP-DFSN and with DP-SGD; every attack incl. LiRA "
                      "(online and offline coincide when the shadows' in/out statistics do; audit.md says why):\n",
                      markdown_table(comparison)]
    if classical is not None:
        lines += ["\n## Against the classical matcher, on the same held-out pairs\n",
                  f"From `{classical}` (`studies/classical_heldout.py` on the seed folders): EER of the classical "
                  "minutiae matcher (afis Gabor minutiae + Bozorth3) and of every model on the SAME held-out pairs "
                  "(FCJ2020: a random 200 genuine + 200 impostor per seed; the FVC sets and pyfnprint: all), mean "
                  "over seeds. `+ classical` columns: label-free rank fusion of the deep and the classical score "
                  "(`models.metrics.rank_fusion`), reported beside the pure deep score, never instead of it.\n",
                  markdown_table(crows := classical_rows(classical)), _classical_reading(crows)]
    if pooled is not None:
        prow = pooled_rows(pooled)
        met = sum(r["deep at or below classical"] == "yes" for r in prow)
        lines += ["\n## One model on all five sensors, best recipe (one seed)\n",
                  f"From `{pooled}`: one centralized model on the training fingers of all five sensors, the same "
                  "split as seed 0 above, with the best single-sensor recipe (`experiments/real_sensors_pooled.toml`"
                  ": whole print at 192 px, ridge normalisation, 120 epochs from the shipped model) — far more "
                  "training than the study's 16 epochs. Held-out EER on all test pairs, then deep vs the classical "
                  "matcher vs their fusion on the same subset of those pairs." + _command(pooled) + "\n",
                  markdown_table(prow),
                  f"\n**Reading.** The pure deep score is at or below the classical matcher on {met} of {len(prow)} "
                  "sensors. One seed, and two to four held-out fingers on each FVC set and pyfnprint: single "
                  "errors move those EERs by several points.\n"]
    png = plot(eer, pairs, out.with_suffix(".png"))
    lines.append(f"\n![test EER per institution and pooled, per method]({png.name})\n")
    md = out.with_suffix(".md")
    md.write_text("\n".join(lines) + "\n")
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=Path, required=True, help="folder of `fedprint simulate --config real_sensors "
                                                               "--seeds N`")
    ap.add_argument("--sweep", type=Path, default=None, help="folder of `fedprint sweep --config real_sensors`")
    ap.add_argument("--audit", type=Path, default=None, help="folder of `fedprint audit --attacks mia` on one run")
    ap.add_argument("--classical", type=Path, default=None, help="folder of studies/classical_heldout.py")
    ap.add_argument("--pooled", type=Path, default=None, help="folder of the real_sensors_pooled train run")
    ap.add_argument("--out", type=Path, default=Path("docs/studies/real_sensors_study"),
                    help="output path without suffix")
    a = ap.parse_args()
    if not (a.seeds / "summary.json").is_file():
        ap.error(f"--seeds {a.seeds}: expected a finished `fedprint simulate --seeds` folder (no summary.json)")
    for name, folder, f in (("--sweep", a.sweep, "sweep.csv"), ("--audit", a.audit, "mia.json"),
                            ("--classical", a.classical, "classical_heldout.csv"),
                            ("--pooled", a.pooled, "classical_comparison.csv")):
        if folder is not None and not (folder / f).is_file():
            ap.error(f"{name} {folder}: no {f} there")
    md = build(a.seeds, a.sweep, a.audit, a.out, a.classical, a.pooled)
    print(f"written {md} and {md.with_suffix('.png')}")


if __name__ == "__main__":
    main()
