"""Dense matching of the deep feature map beside the embedding, on held-out real prints (issue 22 §2).

For each run (a ``fedprint train`` folder with the TOML it ran, or a seed folder of ``fedprint simulate --seeds``
with every method's model), the run's own partition is rebuilt (same seed, same held-out fingers) and every
held-out pair is scored three ways by the SAME network, nothing retrained:

* ``global``: the embedding distance (what ``fedprint verify`` uses);
* ``dense``: :func:`fedprint.models.dense_match.pair_similarities`, the best shifted mean cosine of the cell
descriptors;
* ``global + dense``: :func:`fedprint.models.metrics.zscore_fusion` of the two, standardised on each institution's
  VALIDATION pairs (no test pair, no label sets a weight).

Where the classical matcher (afis Gabor + Bozorth3) scored a subset of the run's pairs (``classical_comparison.csv``
of ``fedprint train --classical-pairs N``, or ``--classical-csv`` from ``studies/classical_heldout.py`` for simulate
runs), the three scores are also given on that subset beside its EER. Splits of one variant (``<name>``,
``<name>-s1``, ... or the seeds of a simulate run) are paired: dense / fused minus global per split, with a
Student-t 95 % interval. ``--transfer`` scores a model file on all pairs of every real set.

    python -m studies.study_dense_match --run runs/recipe/fcj_rr128_e40 runs/recipe/fcj_rr128_e40-s1 ... \\
        runs/real_sensors_pooled=experiments/real_sensors_pooled.toml \\
        --simulate runs/real_sensors-seeds/seed-0 ... --classical-csv runs/classical_heldout/classical_heldout.csv \\
        --transfer models/pretrained/fedprint-synthetic.pt --out docs/studies/dense_matching

A run folder's TOML is ``<folder>.toml`` beside it unless given as ``folder=toml``. Writes ``<out>.md`` and
``<out>.csv``; the doc ends with the exact command.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from fedprint.config.app import with_base_dir
from fedprint.config.experiment import load_experiment
from fedprint.data.atomic_io import write_csv, write_text
from fedprint.lab.multi_seed import ci95
from fedprint.lab.train_run import classical_subset
from fedprint.models.dense_match import (
    PrintFeatures,
    fused_scores,
    pair_similarities,
    print_features,
    search_of,
)
from fedprint.models.metrics import eer, fnmr_at_fmr, zscore_fusion
from fedprint.models.model_file import load_model
from fedprint.training.experiment_data import experiment_partitions, partition_data

ROOT = Path(__file__).resolve().parents[1]


SCORES = ("global", "dense", "global + dense")
#: Fewest impostor pairs that resolve FMR 1 % (FNMR@FMR1 % is "—" below it, and such a set stays out of means).
MIN_IMPOSTORS_FMR1 = 100
#: Levers of studies/study_recipe.py compared with their baseline split by split, on every score: lever -> baseline.
LEVERS = {"fcj_rr128_dense_e40": "fcj_rr128_e40", "fcj_rr128g3_e40": "fcj_rr128_e40",
          "fcj_rr128_min_e40": "fcj_rr128_e40", "fcj_rr128_min01_e40": "fcj_rr128_e40",
          "fcj_rr128_minmid_e40": "fcj_rr128_e40", "fcj_rr128f500_e40": "fcj_rr128_e40",
          "fcj_rr192_lr1e3_e120": "fcj_rr192_e120", "fcj_rr128_supcon_e40": "fcj_rr128_e40",
          "fcj_rr192_supcon_e120": "fcj_rr192_e120", "fcj_rr192_supcon_t005_e120": "fcj_rr192_e120",
          "fcj_rr192_w32_e120": "fcj_rr192_e120", "fcj_rr192_w64_e120": "fcj_rr192_e120",
          "fcj_rr192_w32_supcon_t005_e120": "fcj_rr192_e120", "fcj_rr128_align_e40": "fcj_rr128_e40"}
#: Genuine and impostor pairs per institution the classical matcher scored (``--classical-pairs`` / ``--pairs``).
CLASSICAL_PAIRS = 200


def _model_file(folder: Path) -> Path:
    for name in ("model_centralized.pt", "model.pt"):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{folder}: no model_centralized.pt or model.pt (expected a `fedprint train` run folder)")


def _scores(features: PrintFeatures, pairs) -> dict[str, np.ndarray]:
    """Similarities (higher = same finger) of the two scores on ``pairs`` (default search of the dense match)."""
    g, dense = pair_similarities(features, pairs.a, pairs.b)
    return {"global": g, "dense": dense}


def _rates(scores: dict[str, np.ndarray], labels: np.ndarray) -> dict:
    """``<score> EER`` and ``<score> FNMR@FMR1%`` of each similarity score (FNMR only where the impostor pairs
    resolve FMR 1 %)."""
    n_imp = int((labels == 0).sum())
    out = {}
    for k, sc in scores.items():
        out[f"{k} EER"] = eer(sc, labels, higher_is_genuine=True)
        out[f"{k} FNMR@FMR1%"] = (fnmr_at_fmr(sc, labels, 0.01, higher_is_genuine=True)
                                  if n_imp >= MIN_IMPOSTORS_FMR1 else None)
    return out


def run_clients(toml: Path):
    """The experiment ``toml`` (paths resolved from the project root) and its clients' data, partition rebuilt as
    the run that used it drew it (same seed): the held-out test pairs are those the run was scored on."""
    cfg = with_base_dir(load_experiment(toml)[0], ROOT)
    records, parts = experiment_partitions(cfg, progress=False)
    return cfg, [partition_data(cfg, records, part) for part in parts]


def score_run(toml: Path, models: dict[str, Path], *, label: str, variant: str, split: int,
              classical: dict[str, dict] | None = None) -> list[dict]:
    """One row per model and institution: EER / FNMR@FMR1% of the three scores on all held-out pairs of the run
    ``toml`` describes (its partition rebuilt), and on the classical matcher's subset where ``classical`` gives it.

    ``models``: name -> model file; ``classical``: institution -> {"pairs", "classical_eer"} of the subset that
    :func:`fedprint.lab.train_run.classical_comparison` drew with the run's seed (redrawn here in the same order).
    """
    cfg, clients = run_clients(toml)
    encs = {name: load_model(path).encoder.eval() for name, path in models.items()}
    rng = np.random.default_rng(cfg.run.seed)  # the draw order of lab.train_run.classical_comparison
    rows = []
    for c in clients:
        lab = c.test_pairs.label
        n_imp = int((lab == 0).sum())
        pick = classical_subset(lab, CLASSICAL_PAIRS, rng) if classical else None
        for name, enc in encs.items():
            features = print_features(enc, c.images)  # once for the validation and the test pairs
            val = _scores(features, c.val_pairs)
            test = _scores(features, c.test_pairs)
            test["global + dense"] = zscore_fusion([val["global"], val["dense"]], [test["global"], test["dense"]])
            row = {"run": label if len(encs) == 1 else f"{label} {name}",
                   "variant": variant if len(encs) == 1 else f"{variant} {name}", "split": split,
                   "institution": c.name, "genuine": int(lab.sum()), "impostor": n_imp}
            row |= _rates(test, lab)
            ref = (classical or {}).get(c.name)
            if pick is not None and ref is not None and int(ref["pairs"]) == len(pick):
                row["classical subset pairs"] = len(pick)
                row["classical EER"] = float(ref["classical_eer"])
                for k, sc in test.items():
                    row[f"{k} EER (classical subset)"] = eer(sc[pick], lab[pick], higher_is_genuine=True)
            rows.append(row)
    return rows


#: Bump when :func:`score_run` changes what it computes: rows cached under another version are recomputed.
SCORING_VERSION = 1


#: Where :func:`score_transfer` keeps its rows (one file per model path).
TRANSFER_CACHE = ROOT / "runs" / ".cache" / "transfer_scores"


def inputs_digest(inputs: list[Path], salt: str) -> str:
    """SHA-256 (hex) of ``salt`` and the bytes of each file in ``inputs``: a cache key that changes with any input."""
    digest = hashlib.sha256(salt.encode())
    for path in inputs:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cached_rows(cache: Path, inputs: list[Path], compute, note: str = "") -> list[dict] | dict:
    """``compute()``'s rows (any JSON value), cached in the JSON file ``cache`` under the SHA-256 of ``inputs``
    (model files, TOML, classical CSV), ``note`` (e.g. the real-set root) and :data:`SCORING_VERSION`: a
    regeneration rescores only what changed."""
    key = inputs_digest(inputs, str(SCORING_VERSION) + (f"\n{note}" if note else ""))
    if cache.is_file():
        stored = json.loads(cache.read_text())
        if stored.get("key") == key:
            return stored["rows"]
    rows = compute()
    write_text(cache, json.dumps({"key": key, "rows": rows}, default=float))
    return rows


def train_run_job(folder: Path, toml: Path) -> list[dict]:
    """A ``fedprint train`` run folder (``<name>`` or ``<name>-s<k>`` for split k of a variant)."""
    inputs = [_model_file(folder), toml] + [p for p in [folder / "classical_comparison.csv"] if p.is_file()]
    return cached_rows(folder / "dense_scores.json", inputs, lambda: _train_run_rows(folder, toml))


def variant_and_split(folder_name: str) -> tuple[str, int]:
    """(variant, split) of a run folder named ``<variant>`` (split 0) or ``<variant>-s<k>`` (split k), as
    ``studies/study_recipe.py`` names them."""
    variant, _, split = folder_name.partition("-s")
    return (variant, int(split)) if split.isdigit() else (folder_name, 0)


def _train_run_rows(folder: Path, toml: Path) -> list[dict]:
    classical = None
    if (folder / "classical_comparison.csv").is_file():
        with open(folder / "classical_comparison.csv") as f:
            classical = {r["client"]: r for r in csv.DictReader(f)}
    variant, split = variant_and_split(folder.name)
    return score_run(toml, {"centralized": _model_file(folder)}, label=folder.name, variant=variant, split=split,
                     classical=classical)


#: Models of a ``fedprint simulate`` seed folder scored here (those with one shared model file).
SIMULATE_METHODS = ("centralized", "fedavg", "fedprox", "affr")


def simulate_job(folder: Path, classical_csv: Path | None) -> list[dict]:
    """A ``fedprint simulate --seeds`` seed folder (``experiment.toml``, ``<method>/model.pt``); the classical
    subset from ``studies/classical_heldout.py``'s CSV when given."""
    inputs = [folder / "experiment.toml"] + [folder / m / "model.pt" for m in SIMULATE_METHODS
                                             if (folder / m / "model.pt").is_file()]
    return cached_rows(folder / "dense_scores.json", inputs + ([classical_csv] if classical_csv is not None else []),
                       lambda: _simulate_rows(folder, classical_csv))


def _simulate_rows(folder: Path, classical_csv: Path | None) -> list[dict]:
    cfg, _ = load_experiment(folder / "experiment.toml")
    classical = None
    if classical_csv is not None:
        with open(classical_csv) as f:
            classical = {r["institution"]: {"pairs": int(r["genuine"]) + int(r["impostor"]),
                                            "classical_eer": float(r["classical"])}
                         for r in csv.DictReader(f) if int(r["seed"]) == cfg.run.seed}
    models = {m: folder / m / "model.pt" for m in SIMULATE_METHODS if (folder / m / "model.pt").is_file()}
    return score_run(folder / "experiment.toml", models, label=f"{cfg.run.name} seed {cfg.run.seed}",
                     variant=cfg.run.name, split=cfg.run.seed, classical=classical)


def score_transfer(model_path: Path, real: Path) -> list[dict]:
    """Global and dense EER / FNMR@FMR1% of a model file on ALL pairs of every real set under ``real``
    (:func:`fedprint.data.real_sets.real_set_dirs`), and ``global + dense`` where the model file stores a fusion
    calibration (``fedprint calibrate --score fused``): the sets give no validation pairs of their own, so
    nothing is calibrated on them here. The dense match searches as the calibration says (default otherwise).
    Cached under :data:`TRANSFER_CACHE`."""
    name = hashlib.sha256(str(model_path.resolve()).encode()).hexdigest()[:16]
    return cached_rows(TRANSFER_CACHE / f"{name}.json", [model_path], lambda: _transfer_rows(model_path, real),
                       note=str(real.resolve()))


def _transfer_rows(model_path: Path, real: Path) -> list[dict]:
    from fedprint.data.datasets import load_dataset
    from fedprint.data.real_sets import real_set_dirs
    from fedprint.recognition.matching import pair_similarities, protocol_pairs

    model = load_model(model_path)
    cal = model.meta.get("score_fusion")
    search = search_of(cal)
    rows = []
    for folder, layout in real_set_dirs(real):
        recs = load_dataset(layout, folder)
        pairs = protocol_pairs(recs, "all")
        g, dense = pair_similarities(model, recs, pairs, **search)
        sc = {"global": g, "dense": dense}
        if cal:
            sc["global + dense (stored calibration)"] = fused_scores(cal, g, dense)
        lab = pairs.label
        row = {"run": model_path.stem, "variant": model_path.stem, "split": 0, "institution": folder.name,
               "genuine": int(lab.sum()), "impostor": int((lab == 0).sum())}
        rows.append(row | _rates(sc, lab))
    return rows


def _pct(x) -> str:
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.1f}"


def _lever_lines(rows: list[dict]) -> list[str]:
    """Each lever of :data:`LEVERS` minus its baseline on the same split, for every score (EER and FNMR@FMR1 %)."""
    held = {(r["variant"], r["split"], r["institution"]): r for r in rows if "global + dense EER" in r}
    lines = []
    for lever, base in LEVERS.items():
        keys = [(k[1], k[2]) for k in held if k[0] == lever and (base, k[1], k[2]) in held]
        if not keys:
            continue
        if not lines:
            lines = ["## Levers against their baseline, every score, paired by split", "",
                     "A lever of `studies.study_recipe` minus its baseline run on the same finger split (600 genuine "
                     "/ 20,000 impostor held-out pairs each); an interval that contains 0 is inside the noise.", "",
                     "| lever | baseline | splits | score | EER − baseline, points [95 % CI] | per split | "
                     "FNMR@FMR1 % − baseline, points [95 % CI] |", "|---|---|---|---|---|---|---|"]
        for k in SCORES:
            cells = []
            for metric in ("EER", "FNMR@FMR1%"):
                d = [100 * (held[(lever, *x)][f"{k} {metric}"] - held[(base, *x)][f"{k} {metric}"]) for x in keys]
                m, lo, hi = ci95(d)
                cells.append((f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]" if len(d) >= 2 else f"{m:+.1f} (one split)", d))
            lines.append(f"| {lever} | {base} | {len(keys)} | {k} | {cells[0][0]} | "
                         + ", ".join(f"{v:+.1f}" for v in cells[0][1]) + f" | {cells[1][0]} |")
    return lines + [""] if lines else []


def render(rows: list[dict], seconds: float, command: str = "") -> str:
    lines = ["# Dense matching beside the embedding, on held-out real prints", "",
             "Generated by `python -m studies.study_dense_match` (see its docstring for the command). Every score "
             "comes from the same trained network, nothing retrained: **global** = embedding distance (today's "
             "verifier), **dense** = best shifted mean cosine of the last feature map's cell descriptors (up to "
             "5 cells = 8 mm, `models/dense_match.py`), **global + dense** = the two standardised on the run's "
             "validation pairs and summed (no test pair or label sets a weight). These are deep scores only: the "
             "classical minutiae matcher is never fused in here. Runs named `fcj_*` come from "
             "`studies/study_recipe.py` (see [real_prints_recipe.md](real_prints_recipe.md)); their one institution "
             "is FCJ2020, named `generic` after its folder layout. `real_sensors <method>` rows are the models of "
             "the 3-seed federated study (`fedprint simulate --config real_sensors --seeds 3`), each seed a split.",
             "",
             "## Every held-out pair", "",
             "| run | institution | genuine / impostor pairs | EER % global | dense | global + dense | "
             "FNMR@FMR1 % global | dense | global + dense |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "global + dense EER" not in r:
            continue
        lines.append(f"| {r['run']} | {r['institution']} | {r['genuine']:,} / {r['impostor']:,} | "
                     + " | ".join(_pct(r[f"{k} EER"]) for k in SCORES) + " | "
                     + " | ".join(_pct(r[f"{k} FNMR@FMR1%"]) for k in SCORES) + " |")
    lines += ["", "FNMR@FMR1 % is left out (—) where fewer than 100 impostor pairs stand behind it.", ""]
    # paired by split: runs named <variant> and <variant>-s<k>
    by_variant: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if "global + dense EER" not in r:
            continue
        by_variant.setdefault((r["variant"], r["institution"]), []).append(r)
    multi = {k: v for k, v in by_variant.items() if len(v) >= 2}
    if multi:
        lines += ["## Paired by split", "",
                  "Each split holds out other fingers (`[run] seed`); the difference is taken split by split. "
                  "An interval that contains 0 is inside the noise.", "",
                  "| variant | institution | splits | mean EER % global / dense / global + dense | "
                  "dense − global, EER points [95 % CI] | (global + dense) − global, EER points [95 % CI] | "
                  "(global + dense) − global, FNMR@FMR1 % points [95 % CI] |", "|---|---|---|---|---|---|---|"]
        for (variant, inst), rs in multi.items():
            def diff(a: str, b: str, metric: str, rs=rs) -> str:
                m, lo, hi = ci95([100 * (r[f"{a} {metric}"] - r[f"{b} {metric}"]) for r in rs])
                return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]"
            means = " / ".join(f"{100 * np.mean([r[f'{k} EER'] for r in rs]):.1f}" for k in SCORES)
            fnmr = (diff("global + dense", "global", "FNMR@FMR1%")
                    if all(r["global FNMR@FMR1%"] is not None for r in rs) else "—")
            lines.append(f"| {variant} | {inst} | {len(rs)} | {means} | {diff('dense', 'global', 'EER')} | "
                         f"{diff('global + dense', 'global', 'EER')} | {fnmr} |")
        lines.append("")
    lines += _lever_lines(rows)
    sub = [r for r in rows if "classical EER" in r]
    if sub:
        lines += ["## Against the classical matcher on the same pairs", "",
                  "The subset of held-out pairs the run's `--classical-pairs` (or `studies/classical_heldout.py`) "
                  "scored with afis Gabor + Bozorth3: 200 genuine + 200 impostor per institution and split, all of "
                  "them where fewer exist; mean EER over the splits, pairs summed. A score is marked ✓ where its "
                  "mean EER is at or below the classical matcher's. Each score is one fixed rule for every sensor: "
                  "picking the better score per sensor after seeing the results would be tuning to the test "
                  "pairs, so no such column is given.", "",
                  "| variant | institution | splits | pairs | classical EER % | global | dense | global + dense |",
                  "|---|---|---|---|---|---|---|---|"]
        groups: dict[tuple[str, str], list[dict]] = {}
        for r in sub:
            groups.setdefault((r["variant"], r["institution"]), []).append(r)
        wins: dict[str, dict[str, int]] = {}
        for (variant, inst), rs in groups.items():
            cl = float(np.mean([r["classical EER"] for r in rs]))
            means = {k: float(np.mean([r[f"{k} EER (classical subset)"] for r in rs])) for k in SCORES}
            counts = wins.setdefault(variant, {k: 0 for k in SCORES} | {"n": 0})
            counts["n"] += 1
            for k in SCORES:
                counts[k] += means[k] <= cl
            lines.append(f"| {variant} | {inst} | {len(rs)} | {sum(r['classical subset pairs'] for r in rs):,} | "
                         f"{_pct(cl)} | " + " | ".join(_pct(means[k]) + (" ✓" if means[k] <= cl else "")
                                                    for k in SCORES) + " |")
        lines.append("")
        for variant, counts in wins.items():
            lines.append(f"- {variant}: at or below the classical matcher on "
                         + ", ".join(f"{counts[k]} of {counts['n']} sensors ({k})" for k in SCORES) + ".")
        lines.append("")
    transfer = [r for r in rows if "global + dense EER" not in r]
    if transfer:
        stored = "global + dense (stored calibration)"
        lines += ["## Model files on every real folder (all pairs)", "",
                  "Every folder under the real-sets root, all pairs (`fedprint evaluate --protocol all`). A folder a "
                  "model trained on is NOT held out for it (the model file's data record says which: the shipped "
                  "model saw no real print; `fcj_*` models trained on 108-120 FCJ2020 fingers; the pooled model "
                  "on every sensor's training fingers). The fused column uses the weights and threshold stored in "
                  "the model file (`fedprint calibrate --score fused`), and is blank for a file without them.", "",
                  "| model | set | genuine / impostor pairs | EER % global | dense | global + dense | "
                  "FNMR@FMR1 % global | dense | global + dense |", "|---|---|---|---|---|---|---|---|---|"]
        for r in transfer:
            lines.append(f"| {r['run']} | {r['institution']} | {r['genuine']:,} / {r['impostor']:,} | "
                         f"{_pct(r['global EER'])} | {_pct(r['dense EER'])} | {_pct(r.get(stored + ' EER'))} | "
                         f"{_pct(r['global FNMR@FMR1%'])} | {_pct(r['dense FNMR@FMR1%'])} | "
                         f"{_pct(r.get(stored + ' FNMR@FMR1%'))} |")
        for model in dict.fromkeys(r["run"] for r in transfer):
            rs = [r for r in transfer if r["run"] == model and r["impostor"] >= MIN_IMPOSTORS_FMR1]
            fused = [r.get(stored + " EER") for r in rs]
            lines.append(f"| {model}: mean of the {len(rs)} sets with >= {MIN_IMPOSTORS_FMR1} impostor pairs | | | "
                         f"{_pct(np.mean([r['global EER'] for r in rs]))} | "
                         f"{_pct(np.mean([r['dense EER'] for r in rs]))} | "
                         f"{_pct(np.mean(fused)) if None not in fused else '—'} | | | |")
        lines.append("")
    lines.append(f"Scoring took {seconds / 60:.1f} min on 2 CPU cores (shared with training runs while measured)."
                 + (f" Command:\n\n    {command}" if command else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs="*", default=[], help="`fedprint train` run folders, each FOLDER or FOLDER=TOML")
    ap.add_argument("--simulate", nargs="*", default=[],
                    help="`fedprint simulate --seeds` seed folders (experiment.toml, <method>/model.pt)")
    ap.add_argument("--classical-csv", default=None,
                    help="studies/classical_heldout.py's CSV: the classical matcher on the simulate runs' pairs")
    ap.add_argument("--transfer", nargs="*", default=[],
                    help="model files scored on all pairs of every real set, each PATH or NAME=PATH")
    ap.add_argument("--real-samples", default=os.environ.get("FEDPRINT_REAL_SAMPLES", "../shared/data/real"))
    ap.add_argument("--out", default="docs/studies/dense_matching", help="output path without suffix (.md and .csv)")
    args = ap.parse_args(argv)
    jobs = []
    for spec in args.run:
        folder, _, toml = spec.partition("=")
        folder = Path(folder)
        toml = Path(toml) if toml else folder.with_name(folder.name + ".toml")
        for p, what in ((folder, "run folder"), (toml, "experiment TOML")):
            if not p.exists():
                print(f"study_dense_match: error: --run {spec}: {what} not found: {p}", file=sys.stderr)
                return 2
        jobs.append((folder, toml))
    real = Path(args.real_samples).resolve()
    if args.transfer and not real.is_dir():
        print(f"study_dense_match: error: --real-samples: folder not found: {real}", file=sys.stderr)
        return 2
    sims = [Path(f) for f in args.simulate]
    for f in sims:
        if not (f / "experiment.toml").is_file():
            print(f"study_dense_match: error: --simulate {f}: no experiment.toml (expected a seed folder of "
                  "`fedprint simulate --seeds`)", file=sys.stderr)
            return 2
    classical_csv = Path(args.classical_csv) if args.classical_csv else None
    if classical_csv is not None and not classical_csv.is_file():
        print(f"study_dense_match: error: --classical-csv: file not found: {classical_csv}", file=sys.stderr)
        return 2
    if not jobs and not sims and not args.transfer:
        print("study_dense_match: error: nothing to score (give --run, --simulate and/or --transfer)",
              file=sys.stderr)
        return 2
    t = time.perf_counter()
    rows = []
    for folder, toml in jobs:
        print(f"scoring {folder} ...", flush=True)
        rows += train_run_job(folder, toml)
    for folder in sims:
        print(f"scoring {folder} ...", flush=True)
        rows += simulate_job(folder, classical_csv)
    for spec in args.transfer:
        name, _, path = spec.rpartition("=")
        print(f"scoring {path} on every real set ...", flush=True)
        rows += [r | {"run": name, "variant": name} if name else r for r in score_transfer(Path(path), real)]
    out = Path(args.out)
    write_csv(out.with_suffix(".csv"), rows)
    command = " ".join(["python -m studies.study_dense_match", *(argv if argv is not None else sys.argv[1:])])
    write_text(out.with_suffix(".md"), render(rows, time.perf_counter() - t, command))
    print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
