"""Reproduce the seed papers' tables on real prints and regenerate ``docs/studies/reproduction.md`` and its figures.

Two steps, each repeatable by a reader::

    python -m studies.reproduce_seeds --run all          # run every mechanism evaluation into runs/reproduction/
    python -m studies.reproduce_seeds                    # regenerate docs/studies/reproduction.md + its figures
    python -m studies.reproduce_seeds --affr runs/real_sensors-...   # also render the AFFR section from those runs
    python -m studies.reproduce_seeds --run 000-paper-eps --runs-dir runs/reproduction-rebuilds/2   # a rebuild
    python -m studies.reproduce_seeds --run 002-table41 --seed 3 --runs-dir runs/reproduction-rebuilds/s3

``--run NAME[,NAME]`` runs only those evaluations (names: :data:`RUNS` and ``002-table41``); each writes its folder
under ``--runs-dir`` (default ``runs/reproduction``) with ``wall.json`` (command, seconds). The renderer only reads
run folders: a missing one prints "not yet run" with the exact command in the document. Real prints are read from
``$FEDPRINT_REAL_SAMPLES`` (default ``../shared/data/real``); the three FVC B sets are pooled (29 fingers).

The AFFR section (seed 003) reads folders of ``fedprint simulate`` / ``fedprint audit`` / ``fedprint sweep`` runs of
the real-sensor experiment family (``real_sensors*``): every ``results.csv``, ``mia.csv``, ``inversion.csv`` and
``sweep.csv`` found under the folders given with ``--affr`` (default: ``runs/real_sensors*``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from studies.reproduction_common import FVC_SETS, LOCAL_RUNS, ROOT, RUNS, SWEEP, TABLE41, real_root

DOC = ROOT / "docs" / "studies" / "reproduction.md"
FIG_DIR = ROOT / "docs" / "studies" / "reproduction"
DEFAULT_RUNS = Path("runs") / "reproduction"
#: Rebuilds of the same runs (``--runs-dir runs/reproduction-rebuilds/<tag>``): the spread over rebuilds.
REBUILDS = Path("runs") / "reproduction-rebuilds"
SWEEP_SETS = ("fvc_300x300_b", "fvc2002_db1_b", "pyfnprint_16x8")  # one domain each (DB1 and DB3 share "fvc2002")
SWEEP_ARGS = ["--beta", "0,0.5,0.9", "--sigma2", "650.25,2601", "--sigma2-beta", "0.5"]  # σ² > 0: the config refuses 0
SWEEP_TOML = """# Written by python -m studies.reproduce_seeds --run 003-sweep: Yan et al. 2025 Figs. 9-10 in shape,
# real prints.
[run]
name = "fpdfsn_sweep_real"
seed = 0
{sources}
[data]
protocol = "open"
test_fraction = 0.25
val_fraction = 0.1
max_impostors = 4000

[partition]
mode = "domain"

[model]
encoder = "compact"
width = 16
input_size = 128
input_dpi = 250.0
embedding_dim = 128
init = "pretrained"

[train]
epochs = 8
p = 16
k = 4
lr = 3e-4

[fpdfsn]
enabled = true
"""

# ------------------------------------------------------------------------------------------------------------ runs
def sweep_toml() -> str:
    """The experiment of run ``003-sweep``: one source per real set of :data:`SWEEP_SETS` (a domain each)."""
    blocks = []
    for name in SWEEP_SETS:
        layout = "fvc" if name.startswith("fvc") else "generic"
        blocks.append(f'\n[[data.sources]]\nkind = "dataset"\nlayout = "{layout}"\nroot = "{real_root() / name}"\n')
    return SWEEP_TOML.format(sources="".join(blocks))


def _fedprint(args: list[str]) -> None:
    """Run ``fedprint ARGS`` with this checkout's code, at niceness 10 (not compounded with the caller's)."""
    subprocess.run([sys.executable, "-m", "fedprint", *args], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=lambda: os.nice(max(0, 10 - os.nice(0))))


def run_one(name: str, runs_dir: Path, seed: int = 0) -> Path:
    """Run evaluation ``name`` into ``runs_dir/name`` (niced), record its wall time; returns the folder.

    ``seed`` seeds the 002-table41 simulation only (simulated data and the simulation's Laplace draws: no release,
    no privacy noise of a user); the ``fedprint publish-eval`` runs draw their privacy noise from OS entropy, so a
    rebuild of those is a new sample, never a copy."""
    out = runs_dir / name
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"--run {name}: {out} exists and is not empty; remove it to run again")
    out.mkdir(parents=True, exist_ok=True)
    t0, load0 = time.time(), os.getloadavg()[0]
    where = [] if runs_dir == DEFAULT_RUNS else ["--runs-dir", str(runs_dir)]
    if name == SWEEP:
        (out / "sweep.toml").write_text(sweep_toml())
        args = ["sweep", "--config", str(out / "sweep.toml"), *SWEEP_ARGS, "--quiet", "--out", str(out / "sweep")]
        cmd = ["python", "-m", "studies.reproduce_seeds", "--run", SWEEP, *where]
        _fedprint(args)
    elif name in LOCAL_RUNS:
        cmd = ["python", "-m", "studies.reproduce_seeds", "--run", name, *where]
        if name == TABLE41:
            cmd += ["--seed", str(seed)]
            table41(out, seed=seed)
        else:
            tables13(out)
    else:
        args = [*RUNS[name], "--out", str(out)]
        cmd = ["python", "-m", "fedprint", *args]
        _fedprint(args)
    seconds = time.time() - t0
    (out / "wall.json").write_text(json.dumps({"command": shlex.join(cmd), "seconds": seconds, "seed": seed,
                                               "cpus": os.cpu_count(), "load_start": load0,
                                               "load_end": os.getloadavg()[0]}, indent=1))
    print(f"{name}: {seconds:.0f} s -> {out}")
    return out


def table41(out: Path, *, trials: int = 6, seed: int = 0) -> None:
    """Fang's thesis Table 4.1 setting: normalised EMD (thesis Eq. 4.5) of the sound point-set mechanism on 1-D
    synthetic data (uniform and clustered) for each (n, ε) of the table, at the thesis's k and at every k of a
    log grid; writes ``table41.csv`` (one row per n, ε, k) and ``table41_curve.csv`` (n = 10,000, ε = 1)."""
    from fedprint.privacy.publish.pointset import PAPER_TABLE_EPS, PAPER_TABLE_K, PAPER_TABLE_N, k_errors

    rng = np.random.default_rng(seed)  # simulated data only: no release, no privacy noise of a user
    rows = []
    for i, n in enumerate(PAPER_TABLE_N):
        grid = np.unique(np.round(np.geomspace(4, n / 4, 24)).astype(int))
        for j, eps in enumerate(PAPER_TABLE_EPS):
            kp = PAPER_TABLE_K[i][j]
            err = k_errors(n, eps, rng, candidates=[*grid, kp], trials=trials if n <= 20_000 else 2)
            best = min(err, key=err.get)
            rows.append({"n": n, "epsilon": eps, "k_paper": kp, "err_paper": err[kp], "k_best": best,
                         "err_best": err[best]})
            if n == 10_000 and eps == 1.0:
                with open(out / "table41_curve.csv", "w", newline="") as fh:
                    w = csv.writer(fh)
                    w.writerow(["k", "error"])
                    w.writerows(sorted(err.items()))
    with open(out / "table41.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def tables13(out: Path) -> None:
    """Liu, Zhi et al. Table 3 (allocation of ε2 over Table 2's region sizes, exact) and Table 1 (protected pixel
    fractions of LAP / KLAP / RKLAP at ε = mn/256) on every probe print of the pooled FVC sets; writes
    ``tables13.json``."""
    from fedprint.data.datasets import load_dataset
    from fedprint.data.minutiae import extract_minutiae
    from fedprint.privacy.publish import registry
    from fedprint.privacy.publish.regions import allocate_budget

    sizes = [1076, 1110, 3679, 8146]  # Table 2's Q_3, Q_1, Q_2, Q_0 in Table 3's allocation order
    eps = allocate_budget(sizes, 1.0)
    pct = [round(100 * e, 2) for e in eps[:3]]
    table3 = [*pct, round(100 - sum(pct), 2)]  # the paper keeps the column summing to 100 %
    prints = []
    for s in FVC_SETS:
        for r in load_dataset("fvc", real_root() / s):
            if r.impression == 1:
                m = extract_minutiae(r.image)
                row = {"set": s, "finger": r.identity, "shape": list(r.image.shape), "n_minutiae": len(m)}
                for mech in ("lap", "klap", "rklap"):
                    try:  # the fraction depends on the minutiae only; the release's noise is discarded
                        pub = registry.publish(mech, r.image, m, r.image.size / 256, np.random.default_rng(),
                                               "paper")
                        row[mech] = 100 * pub.details["protected_fraction"]
                    except ValueError as exc:
                        row[mech] = f"refused: {exc}"
                prints.append(row)
    (out / "tables13.json").write_text(json.dumps({"table3": table3, "table3_unrounded": list(100 * eps),
                                                   "table1_prints": prints}, indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", help=f"comma-separated run names, or 'all' ({', '.join([*LOCAL_RUNS, *RUNS, SWEEP])})")
    p.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS, help=f"run folders (default {DEFAULT_RUNS})")
    p.add_argument("--seed", type=int, default=0, help="--run 002-table41: seed of the simulation (default 0)")
    p.add_argument("--rebuilds", type=Path, nargs="*",
                   help=f"further runs dirs holding rebuilds of the same runs, for the spread over rebuilds "
                        f"(default {REBUILDS}/*)")
    p.add_argument("--affr", type=Path, nargs="*",
                   help="AFFR run folders (default runs/real_sensors*, runs/ten_clients_beta*, runs/demo-table4)")
    p.add_argument("--doc", type=Path, default=DOC, help=f"document to write (default {DOC.relative_to(ROOT)})")
    args = p.parse_args(argv)
    if args.run:
        known = [*LOCAL_RUNS, *RUNS, SWEEP]
        names = known if args.run == "all" else [n.strip() for n in args.run.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown:
            p.error(f"--run: unknown {unknown}; known: {', '.join(known)}")
        for n in names:
            run_one(n, args.runs_dir, args.seed)
        return 0
    from studies.reproduction_doc import render

    affr = (args.affr if args.affr is not None
            else sorted([*Path("runs").glob("real_sensors*"), *Path("runs").glob("ten_clients_beta*"),
                         *Path("runs").glob("demo-table4")]))
    rebuilds = args.rebuilds if args.rebuilds is not None else sorted(p for p in REBUILDS.glob("*") if p.is_dir())
    if (args.runs_dir / SWEEP / "sweep").is_dir():
        affr = [*affr, args.runs_dir / SWEEP / "sweep"]
    path = render(args.runs_dir, affr, args.doc, rebuilds=rebuilds)
    print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
