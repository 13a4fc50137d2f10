"""Two ``fedprint simulate --seeds`` runs of the same experiment with one setting changed, paired by seed.

Both runs must hold the same seeds (hence the same splits and held-out fingers). For every method and every
institution, the EER and FNMR@FMR1 % of run B minus run A on the same seed, with a Student-t 95 % interval over
the seeds, and the same for the average over institutions. An interval that contains 0 is "inside the noise".

    python -m studies.compare_seed_runs runs/real_sensors-seeds runs/real_sensors_supcon-seeds [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_text
from fedprint.lab.multi_seed import ci95

ROOT = Path(__file__).resolve().parents[1]


METRICS = {"eer": "EER %", "fmr100": "FNMR@FMR1 %"}


def per_seed(folder: Path) -> dict[int, dict[str, dict[str, dict[str, float]]]]:
    """seed -> method -> institution -> metric, from ``summary.json`` of a ``--seeds`` run folder."""
    path = folder / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (expected the folder of a `fedprint simulate --seeds` run)")
    raw = json.loads(path.read_text())["per_seed"]
    return {int(s): {m: {r["client"]: {k: float(r[k]) for k in METRICS} for r in rows} for m, rows in by.items()}
            for s, by in raw.items()}


def _cell(diffs: list[float]) -> str:
    m, lo, hi = ci95([100 * d for d in diffs])
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]" if len(diffs) >= 2 else f"{m:+.1f} (one seed)"


def _value(per: dict[str, dict[str, float]], client: str, key: str, clients: list[str]) -> float:
    """One institution's metric, or (client "average") its mean over ``clients``."""
    return per[client][key] if client != "average" else float(np.mean([per[c][key] for c in clients]))


def compare(a: dict, b: dict) -> list[dict]:
    """One row per (method, institution or "average"): B − A per metric, in points, paired by seed."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError(f"no common seed (run A: {sorted(a)}, run B: {sorted(b)})")
    rows = []
    methods = [m for m in a[seeds[0]] if all(m in a[s] and m in b[s] for s in seeds)]
    for method in methods:
        clients = sorted(set(a[seeds[0]][method]) & set(b[seeds[0]][method]))
        for client in clients + ["average"]:
            row = {"method": method, "institution": client, "seeds": len(seeds)}
            for key, name in METRICS.items():
                va = [_value(a[s][method], client, key, clients) for s in seeds]
                vb = [_value(b[s][method], client, key, clients) for s in seeds]
                row[f"A {name}"] = f"{100 * np.mean(va):.1f}"
                row[f"B {name}"] = f"{100 * np.mean(vb):.1f}"
                row[f"B − A {name.split()[0]}, points [95 % CI]"] = _cell([y - x for x, y in zip(va, vb, strict=True)])
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="run A: a `fedprint simulate --seeds` folder")
    ap.add_argument("b", help="run B: the same experiment with one setting changed")
    ap.add_argument("--out", default=None, help="also write the table to this Markdown file")
    args = ap.parse_args(argv)
    try:
        rows = compare(per_seed(Path(args.a)), per_seed(Path(args.b)))
    except (FileNotFoundError, ValueError) as e:
        print(f"compare_seed_runs: error: {e}", file=sys.stderr)
        return 2
    text = (f"# {Path(args.b).name} (B) vs {Path(args.a).name} (A), paired by seed\n\n"
            f"Command: `python -m studies.compare_seed_runs {args.a} {args.b}`\n\n" + markdown_table(rows) + "\n")
    print(text)
    if args.out:
        write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
