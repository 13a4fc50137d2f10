"""One ``fedprint train --classical-pairs`` experiment over seeds against the classical matcher, per sensor.

Issue 22 §2, target 2: on each sensor's held-out fingers, is the deep verifier at or below the classical matcher
(afis Gabor minutiae + Bozorth3), measured on the same pairs? Each run folder is one seed of the same experiment
(``[run] seed`` 0, 1, 2, ...: other held-out fingers each) trained with ``--classical-pairs N``; its
``classical_comparison.csv`` holds both EERs on the classical matcher's subset of every sensor's test pairs, its
``metrics.json`` the deep EER / FNMR@FMR1 % on all of them. Per sensor: the deep and classical EER per seed, whether
the deep one is at or below it on each seed, and deep − classical paired by seed (Student-t 95 %); beside them the
label-free rank fusion of the two scores (``models.metrics.rank_fusion``), never instead of the deep score.

    python -m studies.classical_over_seeds runs/pooled-s0 runs/pooled-s1 runs/pooled-s2 [--out FILE.md]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import NamedTuple

from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_text
from fedprint.lab.multi_seed import ci95

ROOT = Path(__file__).resolve().parents[1]



class Run(NamedTuple):
    """One seed's train run: its seed, experiment name, sensor -> classical_comparison row, sensor -> metrics row."""

    seed: int
    name: str
    comparison: dict[str, dict]
    metrics: dict[str, dict]


def read_run(folder: Path) -> Run:
    """The figures of one ``fedprint train --classical-pairs`` run folder."""
    need = [folder / n for n in ("classical_comparison.csv", "metrics.json", "config.json")]
    missing = [p.name for p in need if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: no {', '.join(missing)} (expected the folder of a `fedprint train "
                                "--classical-pairs N` run)")
    with open(need[0], newline="") as f:
        cmp = {r["client"]: r for r in csv.DictReader(f)}
    met = {r["client"]: r for r in json.loads(need[1].read_text())["per_client"]}
    run = json.loads(need[2].read_text())["run"]
    return Run(int(run["seed"]), str(run["name"]), cmp, met)


def load_runs(folders: list[Path]) -> list[Run]:
    """The runs sorted by seed; refuses two runs of one seed and runs holding different sensors."""
    runs = sorted((read_run(Path(f)) for f in folders), key=lambda r: r.seed)
    seeds = [r.seed for r in runs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"two runs of the same seed ({seeds}): each seed's held-out fingers count once")
    for r in runs:
        if list(r.comparison) != list(runs[0].comparison):
            raise ValueError(f"seed {r.seed} holds sensors {list(r.comparison)}, seed {seeds[0]} holds "
                             f"{list(runs[0].comparison)}")
    return runs


def _eers(runs: list[Run], sensor: str, key: str) -> list[float]:
    """``key`` ("deep_eer", "classical_eer", "fused_eer") of one sensor on the classical subset, per seed, in %."""
    return [100 * float(r.comparison[sensor][key]) for r in runs]


def _at_or_below(runs: list[Run], sensor: str) -> list[bool]:
    """Per seed, whether the deep EER of ``sensor`` is at or below the classical matcher's on the same pairs."""
    return [d <= k for d, k in zip(_eers(runs, sensor, "deep_eer"), _eers(runs, sensor, "classical_eer"),
                                   strict=True)]


def _counts(per_seed) -> str:
    """Pair counts of every seed: one figure where all seeds have the same, else each seed's, "; "-separated."""
    per_seed = list(per_seed)
    return per_seed[0] if len(set(per_seed)) == 1 else "; ".join(per_seed)


def table(runs: list[Run]) -> list[dict]:
    """One row per sensor over the runs of :func:`load_runs`."""
    per = "/".join(str(r.seed) for r in runs)
    rows = []
    for c in runs[0].comparison:
        deep, classical = _eers(runs, c, "deep_eer"), _eers(runs, c, "classical_eer")
        mean, lo, hi = ci95([d - k for d, k in zip(deep, classical, strict=True)])
        held = [r.metrics[c] for r in runs]
        rows.append({
            "sensor": c,
            "classical subset, pairs per seed (genuine)": _counts(f"{r.comparison[c]['pairs']} "
                                                                  f"({r.comparison[c]['genuine']})" for r in runs),
            f"deep EER %, seeds {per}": " / ".join(f"{d:.1f}" for d in deep),
            "classical EER %": " / ".join(f"{k:.1f}" for k in classical),
            "at or below": " / ".join("yes" if b else "no" for b in _at_or_below(runs, c)),
            "deep − classical, points [95 % CI]": (f"{mean:+.1f} [{lo:+.1f}, {hi:+.1f}]" if len(runs) > 1
                                                   else f"{mean:+.1f} (one seed)"),
            "fused EER % (beside, never instead)": " / ".join(f"{f:.1f}" for f in _eers(runs, c, "fused_eer")),
            "all held-out pairs (genuine / impostor)": _counts(f"{int(m['n_genuine'])} / {int(m['n_impostor']):,}"
                                                               for m in held),
            "deep EER % (FNMR@FMR1 %), all pairs": " / ".join(f"{100 * float(m['eer']):.1f} "
                                                               f"({100 * float(m['fmr100']):.1f})" for m in held),
        })
    return rows


def summary(runs: list[Run]) -> str:
    """Per seed, on how many sensors the deep verifier is at or below the classical matcher, and on how many it is
    on every seed, e.g. "at or below the classical matcher on 5 / 3 / 4 of 5 sensors (seeds 0 / 1 / 2); on every
    seed: 3 of 5"."""
    sensors = list(runs[0].comparison)
    below = [_at_or_below(runs, c) for c in sensors]
    per_seed = [sum(b[i] for b in below) for i in range(len(runs))]
    return (f"at or below the classical matcher on {' / '.join(map(str, per_seed))} of {len(sensors)} sensors "
            f"(seeds {' / '.join(str(r.seed) for r in runs)}); on every seed: {sum(map(all, below))} of "
            f"{len(sensors)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="train run folders, one per seed, each with --classical-pairs")
    ap.add_argument("--out", default=None, help="also write the table to this Markdown file")
    args = ap.parse_args(argv)
    try:
        runs = load_runs([Path(f) for f in args.runs])
        rows = table(runs)
    except (FileNotFoundError, ValueError, KeyError) as e:
        print(f"classical_over_seeds: error: {e}", file=sys.stderr)
        return 2
    text = (f"# {runs[0].name}: the deep verifier vs the classical matcher, per sensor and seed\n\n"
            "Each seed holds out other fingers of every sensor. EERs in %. The classical matcher (afis Gabor minutiae "
            "+ Bozorth3) and the deep verifier are scored on the same random subset of each sensor's held-out pairs "
            "(`--classical-pairs`); the last two columns are the deep verifier on all held-out pairs. Fused: the "
            "label-free rank fusion of both scores, beside the deep score, never instead of it. Generated by "
            f"`studies/classical_over_seeds.py`.\n\nDeep verifier {summary(runs)}.\n\n"
            f"Command: `python -m studies.classical_over_seeds {' '.join(args.runs)}`\n\n"
            + markdown_table(rows) + "\n")
    print(text)
    if args.out:
        write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
