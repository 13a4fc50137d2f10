"""Cross-validated by finger: K fold runs of one seed against the classical matcher per sensor (issue 22, target 2).

Each run folder is a ``fedprint train`` of an experiment with ``[data] folds = K`` and its own ``fold`` (e.g.
``experiments/real_sensors_folds_twins.toml``): fold k's model never saw its test fingers, but saw every sensor.
The K runs of one seed hold out each finger once, so pooling their held-out pairs scores every print of every
sensor. Per sensor, this rebuilds each run's split from its ``config.json``, scores all pairs among its held-out
fingers with the run's model (cosine of the embeddings) and with the classical matcher alone (afis Gabor minutiae
+ Bozorth3; ``--cache`` reuses ``studies/classical_folders.py``'s scores), and pools the folds.

    nice -n 10 .venv/bin/python -m studies.fold_table runs/folds/f0 runs/folds/f1 runs/folds/f2 \\
        --cache runs/minutiae_cache --max-impostors 2000 --out runs/folds/table.md

Sets with more held-out impostor pairs than ``--max-impostors`` per fold (FCJ2020: ~45,000) have the matcher (~0.1 s
a pair) and the deep score compared on every genuine pair and that many impostor pairs drawn per fold; the deep
score alone is also given on all pairs. Prints the table (and writes ``--out``): pairs behind every number, deep and
classical EER and FNMR @ FMR 1 % pooled over the folds, both EERs of each fold, and whether the deep EER is at or
below the classical one pooled and on the mean of the folds (pooling also charges the deep score for its K models'
different score scales; the matcher has one). Needs ``pip install 'fedprint[classical]'``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from fedprint.config.experiment import ExperimentConfig, parse_config
from fedprint.data.pairs import make_pairs, split_records
from fedprint.data.real_sets import REAL_ENV
from fedprint.models.metrics import pair_cosines
from fedprint.models.model_file import load_model
from fedprint.recognition.matching import capped_impostors, embed_images
from fedprint.recognition.minutiae_fusion import minutiae_scores
from fedprint.recognition.real_samples import rate_row
from studies.loso_table import at_or_below, emit_table

ROOT = Path(__file__).resolve().parents[1]


COLUMNS = ["sensor", "folds", "held-out fingers", "genuine / impostor", "deep EER %", "deep FNMR@FMR1 %",
           "compared on (genuine / impostor)", "deep EER % (compared)", "classical EER %", "classical FNMR@FMR1 %",
           "deep / classical EER % per fold (compared)", "deep at or below (pooled; fold mean)"]


def _drop_none(d):
    """``config.json`` keeps unset options as null; the TOML parser wants them absent."""
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    return [_drop_none(v) for v in d] if isinstance(d, list) else d


def run_config(run: Path) -> ExperimentConfig:
    """The experiment a run folder was trained with (its ``config.json``), refused unless it is one fold of K."""
    raw = json.loads((run / "config.json").read_text())
    cfg = parse_config(_drop_none({k: v for k, v in raw.items() if k not in ("mode", "input_pipeline")}),
                       source=str(run / "config.json"))
    if cfg.data.fold_spec is None:
        raise ValueError(f"{run}: not a K-fold run ([data] folds is 0)")
    return cfg


def fold_pairs(cfg: ExperimentConfig, max_impostors: int):
    """Per institution of one fold's experiment: (name, its records, its held-out finger names, every pair among
    them, the compared subset: every genuine pair and at most ``max_impostors`` impostors drawn with the fold)."""
    from fedprint.training.experiment_data import experiment_partitions

    records, parts = experiment_partitions(cfg)
    for p in parts:
        recs = [records[i] for i in p.indices]
        split = split_records(recs, protocol=cfg.data.protocol, test_fraction=cfg.data.test_fraction,
                              val_fraction=cfg.data.val_fraction, seed=cfg.run.seed + p.client_id,
                              fold=cfg.data.fold_spec)
        pairs = make_pairs(recs, split.test, max_impostors=10**9, seed=0)  # every pair of the held-out fingers
        yield (p.name, recs, {recs[i].identity for i in split.test.tolist()}, pairs,
               capped_impostors(pairs, max_impostors, seed=cfg.data.fold))


def fold_scores(run: Path, cfg: ExperimentConfig, max_impostors: int, cache: Path | None,
                progress: bool) -> dict[str, dict]:
    """Per sensor of one fold run: held-out finger names, deep cosines of all held-out pairs with labels, and the
    deep and classical scores of the compared subset (:func:`fold_pairs`)."""
    model = load_model(run / "model_centralized.pt")
    out = {}
    for name, recs, fingers, pairs, sub in fold_pairs(cfg, max_impostors):
        held = np.unique(np.concatenate([pairs.a, pairs.b]))  # only the held-out prints are scored
        some = embed_images(model, [recs[i].image for i in held], [recs[i].dpi for i in held])
        emb = np.zeros((len(recs), some.shape[1]), some.dtype)
        emb[held] = some
        out[name] = {"fingers": fingers, "deep": pair_cosines(emb, pairs), "label": pairs.label,
                     "deep_sub": pair_cosines(emb, sub), "label_sub": sub.label,
                     "classical_sub": minutiae_scores(recs, sub, cache=cache, progress=progress)}
    return out


def _pct(m: dict, key: str) -> str:
    return "—" if m[key] is None else f"{100 * m[key]:.1f}"


def table_rows(runs: list[Path], max_impostors: int, cache: Path | None, progress: bool = True) -> list[dict]:
    """One row per sensor, the folds' held-out pairs pooled."""
    cfgs = [run_config(r) for r in runs]
    seeds, ks = {c.run.seed for c in cfgs}, [c.data.fold for c in cfgs]
    n_folds = {c.data.folds for c in cfgs}
    if len(seeds) > 1 or len(n_folds) > 1 or len(set(ks)) < len(ks):
        raise ValueError(f"runs: expected distinct folds of one seed and one K, got seeds {sorted(seeds)}, "
                         f"K {sorted(n_folds)}, folds {ks}")
    folds_text = f"{', '.join(map(str, ks))} of {n_folds.pop()}"
    per_run = [fold_scores(r, c, max_impostors, cache, progress) for r, c in zip(runs, cfgs, strict=True)]
    rows = []
    for sensor in per_run[0]:
        folds = [f[sensor] for f in per_run]
        held = [f["fingers"] for f in folds]
        if sum(map(len, held)) != len(set().union(*held)):
            raise ValueError(f"{sensor}: a finger is held out by two folds (not one seed's K-fold split)")
        cat = {key: np.concatenate([f[key] for f in folds]) for key in folds[0] if key != "fingers"}
        m = rate_row(-cat["deep"], cat["label"])  # rate_row takes distances: lower = more alike
        ms = rate_row(-cat["deep_sub"], cat["label_sub"])
        mc = rate_row(-cat["classical_sub"], cat["label_sub"])
        # each fold's model on its own pairs: the pooled figure also pays for the models' different score scales
        deep_f = [100 * rate_row(-f["deep_sub"], f["label_sub"])["EER"] for f in folds]
        cls_f = [100 * rate_row(-f["classical_sub"], f["label_sub"])["EER"] for f in folds]
        rows.append({
            "sensor": sensor, "folds": folds_text, "held-out fingers": len(set().union(*held)),
            "genuine / impostor": f"{m['genuine']:,} / {m['impostor']:,}",
            "deep EER %": f"{100 * m['EER']:.1f}", "deep FNMR@FMR1 %": _pct(m, "FNMR@FMR1%"),
            "compared on (genuine / impostor)": f"{ms['genuine']:,} / {ms['impostor']:,}",
            "deep EER % (compared)": f"{100 * ms['EER']:.1f}",
            "classical EER %": f"{100 * mc['EER']:.1f}", "classical FNMR@FMR1 %": _pct(mc, "FNMR@FMR1%"),
            "deep / classical EER % per fold (compared)": "; ".join(
                f"{d:.1f} / {c:.1f}" for d, c in zip(deep_f, cls_f, strict=True)),
            "deep at or below (pooled; fold mean)": f"{at_or_below(100 * ms['EER'], 100 * mc['EER'])}; "
                                                    f"{at_or_below(np.mean(deep_f), np.mean(cls_f))}"})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="fedprint train run folders, one per fold of one seed")
    ap.add_argument("--max-impostors", type=int, default=2000,
                    help="impostor pairs per fold and sensor the matcher scores (default 2000)")
    ap.add_argument("--cache", default=None, help="folder keeping the matcher's pair scores (reused by reruns)")
    ap.add_argument("--real-samples", default=None, help="real sets folder (default: $FEDPRINT_REAL_SAMPLES)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    before = os.environ.get(REAL_ENV)
    if args.real_samples:  # the experiment's real sources resolve against it; restored on the way out
        os.environ[REAL_ENV] = args.real_samples
    try:
        return emit_table("fold_table", lambda: table_rows([Path(r) for r in args.runs], args.max_impostors,
                                                           Path(args.cache) if args.cache else None,
                                                           progress=not args.quiet), COLUMNS, args.out)
    finally:
        if before is None:
            os.environ.pop(REAL_ENV, None)
        else:
            os.environ[REAL_ENV] = before

if __name__ == "__main__":
    raise SystemExit(main())
