"""The classical matcher alone on whole real folders: the figure a deep model scored on the same pairs is compared with.

Issue 22's target 2 asks for the deep verifier at or below the classical matcher (afis Gabor minutiae + Bozorth3)
on each sensor, measured with the same pairs. ``fedprint train``'s report scores every model on every real folder
under the FVC protocol, and ``fedprint evaluate --protocol all`` on every pair; this scores the matcher alone on the
same pairs of the same folders (pairs are fixed by the folder and the protocol; nothing here is random).

    nice -n 10 .venv/bin/python -m studies.classical_folders --sets fvc_300x300_b,pyfnprint_16x8 \\
        --protocols fvc,all --cache runs/minutiae_cache --out runs/classical_folders

Needs ``pip install 'fedprint[classical]'``. The pure-Python Bozorth3 takes ~0.1 s a pair and the extractor ~0.7 s
a print (each print once per run); ``--cache`` keeps the pair scores by image content, so a second protocol or a
rerun rescoring nothing. Writes ``classical_folders.csv`` / ``.md`` to ``--out`` and prints the table, with the
genuine / impostor pairs behind every number.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_csv, write_text
from fedprint.data.datasets import load_dataset
from fedprint.data.real_sets import real_set_dirs
from fedprint.recognition.matching import protocol_pairs
from fedprint.recognition.minutiae_fusion import minutiae_scores
from fedprint.recognition.real_samples import rate_row

ROOT = Path(__file__).resolve().parents[1]


COLUMNS = ["set", "protocol", "genuine", "impostor", "EER %", "FNMR@FMR1 %"]


def classical_rows(sets: dict, protocols: list[str], cache: Path | None, progress: bool = True) -> list[dict]:
    """One row per folder and protocol: pair counts, EER and FNMR @ FMR 1 % of the matcher's similarity."""
    rows = []
    for name, records in sets.items():
        for protocol in protocols:
            pairs = protocol_pairs(records, protocol)
            scores = minutiae_scores(records, pairs, cache=cache, progress=progress)
            r = rate_row(-scores, pairs.label)  # rate_row takes distances: lower = more alike
            rows.append({"set": name, "protocol": protocol, "genuine": r["genuine"], "impostor": r["impostor"],
                         "EER %": round(100 * r["EER"], 2),
                         "FNMR@FMR1 %": None if r["FNMR@FMR1%"] is None else round(100 * r["FNMR@FMR1%"], 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-samples", default=os.environ.get("FEDPRINT_REAL_SAMPLES", "../shared/data/real"))
    ap.add_argument("--sets", default="", help="comma-separated folder names (default: every real folder)")
    ap.add_argument("--protocols", default="fvc,all", help="comma-separated: fvc, all (default: both)")
    ap.add_argument("--cache", default=None, help="folder keeping the matcher's pair scores (reused by reruns)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    root = Path(args.real_samples)
    if not root.is_dir():
        print(f"classical_folders: error: real sets folder not found: {root} (set --real-samples or "
              "$FEDPRINT_REAL_SAMPLES)", file=sys.stderr)
        return 2
    protocols = [p for p in args.protocols.split(",") if p]
    bad = set(protocols) - {"fvc", "all"}
    if bad or not protocols:
        print(f"classical_folders: error: --protocols: expected fvc and/or all, got {args.protocols!r}",
              file=sys.stderr)
        return 2
    found = {d.name: (d, layout) for d, layout in real_set_dirs(root)}
    wanted = [s for s in args.sets.split(",") if s] or list(found)
    unknown = set(wanted) - set(found)
    if unknown:
        print(f"classical_folders: error: --sets: no folder {sorted(unknown)} under {root}; found {sorted(found)}",
              file=sys.stderr)
        return 2
    sets = {s: load_dataset(found[s][1], found[s][0]) for s in wanted}  # only the folders asked for are read
    rows = classical_rows(sets, protocols, Path(args.cache) if args.cache else None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "classical_folders.csv", rows)
    table = markdown_table([{**r, **{k: "—" if r[k] is None else f"{r[k]:.1f}" for k in COLUMNS[-2:]}}
                            for r in rows], COLUMNS)
    write_text(out / "classical_folders.md", "# The classical matcher alone (afis Gabor + Bozorth3)\n\n" + table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
