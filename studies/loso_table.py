"""Leave-one-sensor-out runs against the classical matcher on the same pairs (issue 22, target 2).

Each run folder is a ``fedprint train`` of an experiment with ``[partition] unseen = [SENSOR]`` (e.g.
``experiments/real_sensors_loso_twins.toml``): the model never saw any print of that sensor, so every pair of its
folder is a test pair. The model is scored on the unseen folder under each protocol (FVC: all genuine pairs and
first-impression impostor pairs; all: every pair) and set beside the classical matcher alone on the same pairs, read
from ``studies/classical_folders.py``'s CSV (pairs are fixed by the folder and the protocol).

    nice -n 10 .venv/bin/python -m studies.loso_table runs/loso/fvc_300x300_b runs/loso/pyfnprint_16x8 ... \\
        --classical runs/classical_all/classical_folders.csv --out runs/loso/table.md

Prints the table (and writes ``--out``): per run, the unseen sensor, the seed, the pairs behind each number, deep and
classical EER and FNMR @ FMR 1 % (— below 100 impostor pairs), and whether the deep EER is at or below the
classical one. Where runs of two or more seeds leave the same sensor out, a second table sums them up per sensor and
protocol: the deep EER of each seed, their mean and spread, and on how many seeds the deep EER is at or below the
classical one (the pairs, hence the classical EER, are the same on every seed).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
from pathlib import Path

from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_text
from fedprint.data.datasets import detect_layout, load_dataset
from fedprint.data.real_sets import real_set_dir
from fedprint.models.metrics import pair_cosines
from fedprint.models.model_file import load_model
from fedprint.recognition.matching import embed_images, protocol_pairs
from fedprint.recognition.real_samples import rate_row

ROOT = Path(__file__).resolve().parents[1]


COLUMNS = ["unseen sensor", "seed", "protocol", "genuine / impostor", "deep EER %", "classical EER %",
           "deep FNMR@FMR1 %", "classical FNMR@FMR1 %", "deep at or below"]


def run_rows(run: Path, real: Path, classical: dict, protocols: list[str]) -> list[dict]:
    """The rows of one run folder: its unseen sensor scored under each protocol, beside the classical matcher."""
    cfg = json.loads((run / "config.json").read_text())
    unseen = cfg["partition"]["unseen"]
    if len(unseen) != 1:
        raise ValueError(f"{run}: expected one [partition] unseen sensor, got {unseen}")
    sensor = unseen[0]
    folder = real_set_dir(sensor, real)
    records = load_dataset(detect_layout(folder), folder)
    # one embedding per print, shared by every protocol (their pairs differ, the prints do not)
    emb = embed_images(load_model(run / "model_centralized.pt"), [r.image for r in records],
                       [r.dpi for r in records])
    rows = []
    for protocol in protocols:
        pairs = protocol_pairs(records, protocol)
        m = rate_row(-pair_cosines(emb, pairs), pairs.label)  # the metrics classical_folders.py gives the matcher
        c = classical.get((sensor, protocol))
        if c is None:
            raise KeyError(f"no classical row for {sensor} / {protocol}: run studies/classical_folders.py --sets "
                           f"{sensor} --protocols {protocol}")
        if (int(c["genuine"]), int(c["impostor"])) != (m["genuine"], m["impostor"]):
            raise ValueError(f"{sensor} / {protocol}: the classical rows scored {c['genuine']} / {c['impostor']} "
                             f"pairs, the model {m['genuine']} / {m['impostor']}: not the same pairs")
        deep_eer, classical_eer = 100 * m["EER"], float(c["EER %"])
        rows.append({"unseen sensor": sensor, "seed": cfg["run"]["seed"], "protocol": protocol,
                     "genuine / impostor": f"{m['genuine']:,} / {m['impostor']:,}",
                     "deep EER %": f"{deep_eer:.1f}", "classical EER %": f"{classical_eer:.1f}",
                     "deep FNMR@FMR1 %": "—" if m["FNMR@FMR1%"] is None else f"{100 * m['FNMR@FMR1%']:.1f}",
                     "classical FNMR@FMR1 %": f"{float(c['FNMR@FMR1 %']):.1f}" if c["FNMR@FMR1 %"] else "—",
                     "deep at or below": at_or_below(deep_eer, classical_eer), "deep EER": deep_eer})
    return rows


SUMMARY_COLUMNS = ["unseen sensor", "protocol", "genuine / impostor", "seeds", "deep EER % per seed",
                   "deep EER % mean (sd)", "classical EER %", "seeds at or below", "mean at or below"]


def seed_summary(rows: list[dict]) -> list[dict]:
    """One row per (unseen sensor, protocol) that :func:`run_rows` gave for two or more distinct seeds.

    Raises
    ------
    ValueError
        If a seed is there twice for one sensor (the same run given twice, or two runs of one seed).
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["unseen sensor"], r["protocol"]), []).append(r)
    out = []
    for (sensor, protocol), rs in groups.items():
        seeds = [r["seed"] for r in rs]
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"{sensor} / {protocol}: seed(s) {sorted({x for x in seeds if seeds.count(x) > 1})} "
                             "given more than once")
        if len(rs) < 2:
            continue
        rs = sorted(rs, key=lambda r: r["seed"])
        eers = [r["deep EER"] for r in rs]  # unrounded: the mean of the printed figures would round twice
        mean = statistics.fmean(eers)
        out.append({"unseen sensor": sensor, "protocol": protocol, "genuine / impostor": rs[0]["genuine / impostor"],
                    "seeds": ", ".join(str(r["seed"]) for r in rs),
                    "deep EER % per seed": ", ".join(r["deep EER %"] for r in rs),
                    "deep EER % mean (sd)": f"{mean:.1f} ({statistics.stdev(eers):.1f})",
                    "classical EER %": rs[0]["classical EER %"],
                    "seeds at or below": f"{sum(r['deep at or below'] == 'yes' for r in rs)} of {len(rs)}",
                    "mean at or below": at_or_below(mean, float(rs[0]["classical EER %"]))})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="fedprint train run folders with one [partition] unseen sensor")
    ap.add_argument("--classical", required=True, help="classical_folders.csv of studies/classical_folders.py")
    ap.add_argument("--real-samples", default=os.environ.get("FEDPRINT_REAL_SAMPLES", "../shared/data/real"))
    ap.add_argument("--protocols", default="fvc,all")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    real = Path(args.real_samples)
    if not real.is_dir():
        print(f"loso_table: error: real sets folder not found: {real}", file=sys.stderr)
        return 2
    classical = {(r["set"], r["protocol"]): r for r in csv.DictReader(Path(args.classical).open())}
    protocols = [p for p in args.protocols.split(",") if p]
    return emit_table("loso_table", lambda: [r for run in args.runs
                                             for r in run_rows(Path(run), real, classical, protocols)],
                      COLUMNS, args.out, summary=(seed_summary, SUMMARY_COLUMNS))


def at_or_below(deep: float, classical: float) -> str:
    """"yes" when the deep EER (%) is at or below the classical one as the tables print them (one decimal)."""
    return "yes" if round(deep, 1) <= round(classical, 1) else "no"


def emit_table(prog: str, make_rows, columns: list[str], out: str | None, summary=None) -> int:
    """Print the markdown table of ``make_rows()`` (and write it to ``out``): exit status 0, or 2 with the error
    named on stderr when the rows cannot be made (a missing file, a refused run). ``summary``: ``(function,
    columns)``; the function's rows of those rows, when there are any, follow as a second table."""
    try:
        rows = make_rows()
        extra = summary[0](rows) if summary else []
    except (OSError, KeyError, ValueError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    table = markdown_table(rows, columns)
    if extra:
        table += "\n\n" + markdown_table(extra, summary[1])
    print(table)
    if out:
        write_text(Path(out), table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
