"""Scoring levers on a trained verifier's own held-out real pairs (issue 22 §2): does any pay, with nothing retrained?

For each ``fedprint train`` run folder (its partition rebuilt from its experiment TOML, same seed, same held-out
fingers), every held-out test pair is scored by the SAME network in
these ways:

* ``plain``: cosine of the two embeddings (what ``fedprint verify`` / ``evaluate`` do; the report's EER);
* ``snorm``: symmetric score normalisation against a cohort, S-norm / adaptive S-norm [1]_ [2]_ (:func:`snorm`);
  the cohort is the run's own TRAINING images (the only prints a deployed model could carry; its validation
  fingers are too few), ``top-k`` keeps each print's k most similar cohort images (AS-norm);
* ``representation``: cosine of the pooled features before the final projection (the "base" output,
  :meth:`fedprint.models.siamese.CompactEncoder.representation`: SimCLR-style heads sometimes transfer worse than what
  they read);
* ``size N``: the plain score with N x N inputs instead of the trained size (the same model file, as
  :func:`fedprint.models.model_file.with_input_size_bytes` writes it; for a 192 px FCJ model, 176 px trims background,
  208 / 224 px add it).
* ``ensemble with V``: the mean of the plain score and the plain scores of the same split's runs of the variants
  ``--with V`` names (run folders beside it: ``V`` for split 0, ``V-s<k>`` for split k): several networks trained
  on the same fingers, averaged (refused if their rebuilt partitions drew other test pairs).

Each row gives EER and FNMR @ FMR 1 % with its genuine / impostor pair counts; with several runs of one variant
(``<name>``, ``<name>-s1``, ...: finger splits) each lever is paired with ``plain`` split by split (Student-t 95 %).

    python -m studies.study_scoring --run runs/recipe/fcj_r192_supcon_t005_gem_e120 \\
        runs/recipe/fcj_r192_supcon_t005_gem_e120-s1 runs/recipe/fcj_r192_supcon_t005_gem_e120-s2 \\
        --out runs/scoring

Writes ``scoring.csv`` and ``scoring.md`` to ``--out``.

References
----------
.. [1] P. Kenny, "Bayesian speaker verification with heavy-tailed priors", Odyssey 2010 (symmetric S-norm).
.. [2] P. Matějka et al., "Analysis of score normalization in multilingual speaker recognition",
   Interspeech 2017 (adaptive S-norm: the top-k cohort).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np
import torch

from fedprint.config.arg_types import positive_int
from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_csv, write_text
from fedprint.lab.multi_seed import signed_interval
from fedprint.models.metrics import eer, fnmr_at_fmr, pair_cosines
from fedprint.models.model_file import load_model
from studies.study_dense_match import variant_and_split
from studies.study_tta import run_files

ROOT = Path(__file__).resolve().parents[1]



def snorm(scores: np.ndarray, a: np.ndarray, b: np.ndarray, cohort: np.ndarray, top_k: int | None = None
          ) -> np.ndarray:
    """Symmetric score normalisation of pair scores against a cohort.

    ``s' = ((s - μ_a) / σ_a + (s - μ_b) / σ_b) / 2`` where μ_i, σ_i are the mean and standard deviation of print
    i's scores against the cohort (all of them, or its ``top_k`` highest: adaptive S-norm).

    Parameters
    ----------
    scores : ndarray, shape (P,)
        Similarity of each pair (higher = same finger).
    a, b : ndarray of int, shape (P,)
        Row of each pair's two prints in ``cohort``.
    cohort : ndarray, shape (N, M)
        Similarity of every print (rows) to every cohort print (columns).
    top_k : int, optional
        Keep each print's ``top_k`` most similar cohort prints (default None: all M).

    Returns
    -------
    ndarray, shape (P,)
        Normalised similarities (higher = same finger).
    """
    if top_k is not None and not 2 <= top_k <= cohort.shape[1]:
        raise ValueError(f"top_k: expected 2..{cohort.shape[1]} (the cohort's size), got {top_k}")
    sims = cohort if top_k is None else -np.sort(-cohort, axis=1)[:, :top_k]
    mu, sd = sims.mean(axis=1), np.maximum(sims.std(axis=1), 1e-12)
    return 0.5 * ((scores - mu[a]) / sd[a] + (scores - mu[b]) / sd[b])


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def unit_features(encoder, images: torch.Tensor, batch: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(unit embeddings, unit pooled representations) of ``images``, float64."""
    encoder.eval()
    with torch.no_grad():
        rep = torch.cat([encoder.representation(images[i:i + batch]) for i in range(0, len(images), batch)])
        emb = encoder.project(rep)
    return _unit(emb.double().numpy()), _unit(rep.double().numpy())


def run_embeddings(model: Path, toml: Path):
    """(unit embedding of each print, the client) of one run: its first institution, rebuilt from the TOML by
    :func:`studies.study_dense_match.run_clients` (images, records, split)."""
    from studies.study_dense_match import run_clients

    c = run_clients(toml)[1][0]
    return unit_features(load_model(model).encoder, c.images)[0], c


def plain_scores(model: Path, toml: Path):
    """(plain cosine of each held-out test pair, the client whose ``test_pairs`` they are) of one run
    (:func:`run_embeddings`)."""
    emb, c = run_embeddings(model, toml)
    return pair_cosines(emb, c.test_pairs), c


def ensemble(scores: np.ndarray, pairs, others: list[tuple[Path, Path]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean of one run's plain ``scores`` on its held-out ``pairs`` and the plain scores of other runs' networks
    on the same pairs, and the labels.

    ``others``: (model file, experiment TOML) of each other run; ValueError naming the run whose rebuilt test pairs
    differ (another split: averaging would pair scores of different prints).
    """
    every = [scores]
    for model, toml in others:
        s, client = plain_scores(model, toml)
        if not all(np.array_equal(getattr(client.test_pairs, k), getattr(pairs, k)) for k in ("a", "b", "label")):
            raise ValueError(f"ensemble: {model.parent} drew other held-out pairs (another finger split?)")
        every.append(s)
    return np.mean(every, axis=0), pairs.label


def score_run(model: Path, toml: Path, *, top_ks: list[int], sizes: list[int],
              partners: list[tuple[Path, Path]] | None = None) -> dict[str, tuple]:
    """Scoring name -> (similarities, labels) on the run's held-out test pairs (first institution); ``partners``:
    (model file, TOML) of the same split's runs to average with (:func:`ensemble`, one extra row)."""
    from fedprint.config.app import with_base_dir
    from fedprint.config.experiment import load_experiment
    from fedprint.training.experiment_data import build_clients, experiment_partitions

    cfg = with_base_dir(load_experiment(toml)[0], ROOT)
    records = experiment_partitions(cfg)[0]  # read once; every input size preprocesses these same records

    def first_client(size: int | None = None):
        return build_clients(cfg, records=records, input_size=size, cache=False, progress=False)[0]

    encoder = load_model(model).encoder
    c = first_client()
    pairs, y = c.test_pairs, c.test_pairs.label
    emb, rep = unit_features(encoder, c.images)
    plain = pair_cosines(emb, pairs)
    out = {"plain": (plain, y), "representation": (pair_cosines(rep, pairs), y)}
    cohort = emb @ emb[c.split.train].T
    for k in [None, *top_ks]:
        out["snorm" if k is None else f"snorm top-{k}"] = (snorm(plain, pairs.a, pairs.b, cohort, k), y)
    for size in sizes:  # the split is seeded by run.seed, not the input size: the same pairs at every size
        out[f"size {size}"] = (pair_cosines(unit_features(encoder, first_client(size).images)[0], pairs), y)
    if partners:
        names = ", ".join(variant_and_split(m.parent.name)[0] for m, _ in partners)  # one row name for every split
        out[f"ensemble with {names}"] = ensemble(plain, pairs, partners)
    return out


def rate(scores: np.ndarray, labels: np.ndarray) -> dict:
    """EER and FNMR @ FMR 1 % (in %) of similarity ``scores`` (higher = same finger), with the pair counts."""
    return {"EER %": 100 * eer(scores, labels, higher_is_genuine=True),
            "FNMR@FMR1 %": 100 * fnmr_at_fmr(scores, labels, 0.01, higher_is_genuine=True),
            "genuine": int(labels.sum()), "impostor": int((labels == 0).sum())}


def rated_rows(run: str, scored: dict[str, tuple]) -> list[dict]:
    """One row per scoring of the run folder named ``run`` (``scored``: name -> (similarities, labels)): EER and
    FNMR @ FMR 1 % with the pair counts, each printed as it comes."""
    variant, split = variant_and_split(run)
    rows = []
    for how, (s, y) in scored.items():
        rows.append({"variant": variant, "split": split, "scoring": how, **rate(s, y)})
        print(f"{run} {how}: EER {rows[-1]['EER %']:.2f} % FNMR@FMR1 {rows[-1]['FNMR@FMR1 %']:.2f} %", flush=True)
    return rows


def write_report(out: Path, stem: str, heading: str, rows: list[dict], command: str) -> None:
    """``<stem>.csv`` (the rows) and ``<stem>.md`` (``heading``, the rows, each scoring paired with ``plain``,
    the command) in ``out``; the markdown is printed too."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / f"{stem}.csv", rows)
    text = (heading + markdown_table(rows, digits=2)
            + "\n## Paired with `plain` by split\n\n" + markdown_table(paired_rows(rows)) + f"\n`{command}`\n")
    write_text(out / f"{stem}.md", text)
    print(text)


def paired_rows(rows: list[dict]) -> list[dict]:
    """Each scoring minus ``plain`` per variant, paired by split (EER and FNMR points, Student-t 95 %)."""
    out = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        base = {r["split"]: r for r in mine if r["scoring"] == "plain"}
        for how in dict.fromkeys(r["scoring"] for r in mine if r["scoring"] != "plain"):
            d = [(r["EER %"] - base[r["split"]]["EER %"], r["FNMR@FMR1 %"] - base[r["split"]]["FNMR@FMR1 %"])
                 for r in mine if r["scoring"] == how]
            out.append({"variant": variant, "scoring": how, "splits": len(d),
                        "EER − plain, points": signed_interval([x for x, _ in d]),
                        "FNMR − plain, points": signed_interval([y for _, y in d]),
                        "per split EER − plain": ", ".join(f"{x:+.2f}" for x, _ in d)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs="+", required=True,
                    help="fedprint train run folders, each FOLDER or FOLDER=TOML (default TOML: FOLDER.toml beside it)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--top-k", default="50,100", help="AS-norm cohort sizes, comma-separated (default 50,100)")
    ap.add_argument("--sizes", default="176,208,224", help="input sizes to score at, comma-separated ('' for none)")
    ap.add_argument("--with", dest="partners", default="",
                    help="variants to average each run with, comma-separated: their run of the same split lies "
                         "beside it (VARIANT for split 0, VARIANT-s<k> for split k)")
    args = ap.parse_args(argv)
    try:
        top_ks = [positive_int(s) for s in args.top_k.split(",") if s]
        sizes = [positive_int(s) for s in args.sizes.split(",") if s]
    except argparse.ArgumentTypeError as exc:
        print(f"study_scoring: error: --top-k / --sizes: {exc}", file=sys.stderr)
        return 2
    partners = [p for p in args.partners.split(",") if p]
    rows = []
    for spec in args.run:
        try:
            model, toml = run_files(spec)
        except FileNotFoundError as exc:
            print(f"study_scoring: error: {exc}", file=sys.stderr)
            return 2
        variant, split = variant_and_split(model.parent.name)
        try:
            members = [run_files(str(model.parent.with_name(p + (f"-s{split}" if split else "")))) for p in partners]
        except FileNotFoundError as exc:
            print(f"study_scoring: error: --with: {exc}", file=sys.stderr)
            return 2
        try:
            scored = score_run(model, toml, top_ks=top_ks, sizes=sizes, partners=members)
        except ValueError as exc:  # e.g. a --with run of another finger split
            print(f"study_scoring: error: {exc}", file=sys.stderr)
            return 2
        rows += rated_rows(model.parent.name, scored)
    write_report(args.out, "scoring", "# Scoring levers on held-out real pairs (nothing retrained)\n\n"
                 "Each run's own held-out test pairs; cohort of `snorm` = the run's training images.\n\n", rows,
                 "python -m studies.study_scoring " + shlex.join(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
