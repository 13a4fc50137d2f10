"""Networks trained from different starts, averaged (issue 22 §2, targets 1 and 3): does the ensemble pay?

Each ``--variants`` item is a ``studies/study_recipe.py`` variant whose run folders lie in ``--runs``
(``<variant>`` for finger split 0, ``<variant>-s<k>`` for split k), all of them trained on the same fingers of
each split, optionally ``LABEL=VARIANT`` (the name the tables, ``--ensemble`` and ``--reference`` use). Scored
with nothing retrained:

* every member alone: the plain embedding cosine on its run's held-out test pairs (first institution);
* every ``--ensemble`` (``A+B+C``; default: all variants): the mean of its members' cosines on the same pairs.

Each ensemble is paired split by split with the mean EER of its own members (what one member drawn at random
gives) and with ``--reference`` (a member, default the first variant). On the four sensors no variant trained
on (``bench.study_recipe.OTHER_SETS`` under ``--real``), every pair of each folder is scored the same way by each
split's models. Two networks from the same start on the same fingers were measured to make nearly the same
mistakes (docs/studies/real_prints_recipe.md, "Placement shifts, a second network, twice the epochs"); different
pre-trained starts are the diversity this script measures.

``--models`` instead: model files that never saw a real print (synthetic-only, target 3), each ``PATH`` or
``LABEL=PATH``, scored alone and averaged on every pair of every real set under ``--real``, with the mean EER over
the sets and the worst set of each.

    python -m studies.study_ensemble --variants a=VARIANT_A,b=VARIANT_B,c=VARIANT_C,d=VARIANT_D --splits 6 \\
        --ensemble a+b+c --ensemble a+b+c+d --reference d --out runs/ensemble
    python -m studies.study_ensemble --models a=A.pt,b=B.pt,c=C.pt --out runs/ensemble_synthetic

Writes ``ensemble.csv`` (one row per split, scoring and pair set) and ``ensemble.md`` to ``--out``; every model's
cosines are kept in ``--out/scores/`` (keyed by the model file, its run's TOML and the real-set root), so adding a
member rescores only it.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from pathlib import Path

import numpy as np

from fedprint.config.arg_types import positive_int
from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_csv, write_text
from fedprint.data.pairs import PairSet
from fedprint.data.real_sets import real_set_dirs
from fedprint.lab.multi_seed import ci95, signed_interval
from studies.study_dense_match import MIN_IMPOSTORS_FMR1, inputs_digest
from studies.study_recipe import OTHER_SETS, folder_name
from studies.study_scoring import plain_scores, rate
from studies.study_tta import run_files

ROOT = Path(__file__).resolve().parents[1]


HELD_OUT = "fcj2020_dev held-out"  #: the pair set of each run's own held-out test fingers


def scored_rows(split: int, pair_set: str, members: dict[str, np.ndarray], labels: np.ndarray,
                ensembles: list[list[str]]) -> list[dict]:
    """Rows of one split and pair set: each member's cosines rated alone, then each ensemble's mean cosine; an
    ensemble row carries ``members' mean EER %`` and ``members' mean FNMR@FMR1 %`` (the mean of its members' own
    figures on these pairs)."""
    rows = [{"split": split, "pairs": pair_set, "scoring": name, **rate(s, labels)} for name, s in members.items()]
    alone = {r["scoring"]: r for r in rows}
    for names in ensembles:
        row = {"split": split, "pairs": pair_set, "scoring": " + ".join(names),
               **rate(np.mean([members[n] for n in names], axis=0), labels)}
        for m in ("EER %", "FNMR@FMR1 %"):
            row[f"members' mean {m}"] = float(np.mean([alone[n][m] for n in names]))
        rows.append(row)
    return rows


def summary_rows(rows: list[dict], reference: str) -> list[dict]:
    """Per pair set and scoring, over the splits: mean EER / FNMR [Student-t 95 %]; for an ensemble, its EER
    minus its members' mean and minus ``reference``'s, and its FNMR minus its members' mean, paired by split
    (points)."""
    out = []
    for pair_set in dict.fromkeys(r["pairs"] for r in rows):
        mine = [r for r in rows if r["pairs"] == pair_set]
        ref = {r["split"]: r["EER %"] for r in mine if r["scoring"] == reference}
        for how in dict.fromkeys(r["scoring"] for r in mine):
            these = [r for r in mine if r["scoring"] == how]
            m, lo, hi = ci95([r["EER %"] for r in these])
            row = {"pairs": pair_set, "scoring": how, "splits": len(these),
                   "EER % [95 % CI]": f"{m:.2f} [{lo:.2f}, {hi:.2f}]" if len(these) > 1 else f"{m:.2f}",
                   "FNMR@FMR1 % (mean)": f"{np.mean([r['FNMR@FMR1 %'] for r in these]):.1f}",
                   "EER − members' mean, points": "", f"EER − {reference}, points": "",
                   "FNMR − members' mean, points": ""}
            if "members' mean EER %" in these[0]:
                for key, short in (("EER %", "EER"), ("FNMR@FMR1 %", "FNMR")):
                    row[f"{short} − members' mean, points"] = signed_interval(
                        [r[key] - r[f"members' mean {key}"] for r in these])
                row[f"EER − {reference}, points"] = signed_interval([r["EER %"] - ref[r["split"]] for r in these])
            out.append(row)
    return out


def _cached(out: Path, inputs: list[Path], note: str, compute) -> dict[str, np.ndarray]:
    """``compute()``'s arrays kept in ``out/scores/<sha256 of note and the inputs' bytes>.npz`` (inputs: the model
    file and its run's TOML; note: the mode and the real-set root), so a changed input is scored anew."""
    path = out / "scores" / f"{inputs_digest(inputs, note)}.npz"
    if path.is_file():
        with np.load(path) as z:
            return dict(z)
    arrays = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)  # a crash leaves no half-written cache
    return arrays


def set_scores(model: Path, sets: dict[str, tuple[list, PairSet]]) -> dict[str, np.ndarray]:
    """Cosines of ``model`` on the pairs of each set (``sets``: name -> (records, every pair of them)): keys
    ``<set>`` and ``<set>:label``."""
    from fedprint.models.model_file import load_model
    from fedprint.recognition.matching import embed_images

    net, arrays = load_model(model), {}
    for name, (records, pairs) in sets.items():
        e = embed_images(net, [r.image for r in records], [r.dpi for r in records])
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        arrays[name] = np.einsum("ij,ij->i", e[pairs.a], e[pairs.b])
        arrays[f"{name}:label"] = pairs.label
    return arrays


def run_scores(model: Path, toml: Path, sets: dict[str, tuple[list, PairSet]]) -> dict[str, np.ndarray]:
    """:func:`set_scores` plus the cosines of the run's model on its held-out test pairs (:data:`HELD_OUT`, with
    ``:label``, ``:a`` and ``:b`` to check that members agree)."""
    s, client = plain_scores(model, toml)
    p = client.test_pairs
    return {HELD_OUT: s, f"{HELD_OUT}:label": p.label, f"{HELD_OUT}:a": p.a, f"{HELD_OUT}:b": p.b,
            **set_scores(model, sets)}


def read_sets(folders: dict[str, tuple[Path, str]]) -> dict[str, tuple[list, PairSet]]:
    """Records of each set (name -> (folder, layout)), through the quality gate ``evaluate`` applies, and every
    pair of them (``--protocol all``): built once, shared by every member."""
    from fedprint.data.datasets import load_dataset
    from fedprint.recognition.matching import protocol_pairs, quality_gate

    sets = {name: quality_gate(load_dataset(layout, folder))[0] for name, (folder, layout) in folders.items()}
    return {name: (records, protocol_pairs(records, "all")) for name, records in sets.items()}


def over_sets(rows: list[dict]) -> list[dict]:
    """Per scoring: mean EER over the pair sets, the worst set and the mean FNMR @ FMR 1 % (target 3's terms)."""
    out = []
    for how in dict.fromkeys(r["scoring"] for r in rows):
        these = [r for r in rows if r["scoring"] == how]
        worst = max(these, key=lambda r: r["EER %"])
        out.append({"scoring": how, "sets": len(these), "mean EER %": np.mean([r["EER %"] for r in these]),
                    "worst set": f"{worst['pairs']} {worst['EER %']:.1f}",
                    "mean FNMR@FMR1 %": np.mean([r["FNMR@FMR1 %"] for r in these])})
    return out


def parse_ensembles(specs: list[str], members: list[str]) -> list[list[str]]:
    """``A+B`` strings -> lists of member labels; ValueError naming ``--ensemble`` and an unknown or lone name."""
    out = []
    for spec in specs or ["+".join(members)]:
        names = [n for n in spec.split("+") if n]
        unknown = [n for n in names if n not in members]
        if unknown or len(names) < 2:
            raise ValueError(f"--ensemble {spec}: expected two or more of the members ({', '.join(members)}) "
                             "joined by '+'" + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
        out.append(names)
    return out


def labelled(spec: str, option: str) -> dict[str, str]:
    """``A,LABEL=B`` -> {label: item} (an item without a label is its own); ValueError naming ``option`` unless
    there are two or more."""
    named = dict(v.partition("=")[::2] if "=" in v else (v, v) for v in spec.split(",") if v)
    if len(named) < 2:
        raise ValueError(f"{option} {spec}: expected two or more, comma-separated")
    return named


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--variants", help="study_recipe variants, each VARIANT or LABEL=VARIANT, comma-separated")
    which.add_argument("--models", help="model files never trained on real prints, each PATH or LABEL=PATH, "
                                        "comma-separated: scored on every pair of every real set")
    ap.add_argument("--splits", type=positive_int, default=1, help="with --variants: finger splits 0..N-1 (default 1)")
    ap.add_argument("--ensemble", action="append", default=[],
                    help="members joined by '+', repeatable (default: all members)")
    ap.add_argument("--reference", default=None, help="member each ensemble is also paired with (default: the first)")
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "recipe", help="run folders (default runs/recipe)")
    ap.add_argument("--real", type=Path, default=ROOT.parent / "shared" / "data" / "real",
                    help="real-set root (default ../shared/data/real)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        named = labelled(args.variants or args.models, "--variants" if args.variants else "--models")
        members = list(named)
        reference = args.reference or members[0]
        if reference not in members:
            raise ValueError(f"--reference {reference}: not one of the members ({', '.join(members)})")
        ensembles = parse_ensembles(args.ensemble, members)
        if args.variants:
            splits = range(args.splits)
            jobs = {(v, k): run_files(str(args.runs / folder_name(named[v], k))) for k in splits for v in members}
            folders = {n: (args.real / n, layout) for n, layout in OTHER_SETS.items()}
        else:
            if args.splits != 1:
                raise ValueError("--splits: goes with --variants (model files have no finger split)")
            splits = range(1)
            jobs = {(m, 0): (Path(named[m]), None) for m in members}
            for path, _ in jobs.values():
                if not path.is_file():
                    raise FileNotFoundError(f"--models: no model file {path}")
            folders = {d.name: (d, layout) for d, layout in real_set_dirs(args.real)}
        missing = [str(f) for f, _ in folders.values() if not f.is_dir()] or ([] if folders else [str(args.real)])
        if missing:
            raise FileNotFoundError(f"--real {args.real}: no real set at {', '.join(missing)}")
    except (ValueError, FileNotFoundError) as exc:
        print(f"study_ensemble: error: {exc}", file=sys.stderr)
        return 2
    load_sets = functools.cache(lambda: read_sets(folders))  # read only if some model is not cached yet
    pair_sets = ([HELD_OUT] if args.variants else []) + list(folders)
    rows, left_out = [], {}
    for k in splits:
        scores = {}
        for m in members:
            model, toml = jobs[m, k]
            print(f"study_ensemble: split {k}: {m}" if args.variants else f"study_ensemble: {m}", flush=True)
            compute = (lambda a=model, b=toml: run_scores(a, b, load_sets())) if args.variants else (
                lambda a=model: set_scores(a, load_sets()))
            note = f"{'runs' if args.variants else 'sets'}\n{args.real.resolve()}"
            scores[m] = _cached(args.out, [model] + ([toml] if toml else []), note, compute)
        first = scores[members[0]]
        for m in members[1:] if args.variants else []:
            keys = [f"{HELD_OUT}:{c}" for c in ("a", "b", "label")]
            if not all(np.array_equal(scores[m][key], first[key]) for key in keys):
                print(f"study_ensemble: error: {folder_name(named[m], k)} drew other held-out pairs than "
                      f"{folder_name(named[members[0]], k)} (another finger split?)", file=sys.stderr)
                return 2
        for pair_set in pair_sets:
            labels = first[f"{pair_set}:label"]
            if (labels == 0).sum() < MIN_IMPOSTORS_FMR1:  # resolves no FNMR @ FMR 1 %: out of every mean
                left_out[pair_set] = f"{pair_set} ({int(labels.sum())} genuine / {int((labels == 0).sum())} impostor)"
                continue
            rows += scored_rows(k, pair_set, {m: scores[m][pair_set] for m in members}, labels, ensembles)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "ensemble.csv", rows)
    command = "python -m studies.study_ensemble " + shlex.join(argv if argv is not None else sys.argv[1:])
    listed = ", ".join(f"{m} = `{named[m]}`" for m in members)
    if args.variants:
        intro = (f"Members: {listed}; {args.splits} finger split(s). `{HELD_OUT}`: each split's 40 held-out "
                 "FCJ2020 fingers; the other rows: every pair of a sensor no member trained on.\n\n")
        extra = ""
    else:
        intro = f"Members (never trained on a real print): {listed}; every pair of every real set.\n\n"
        extra = "## Over the sets\n\n" + markdown_table(over_sets(rows), digits=1) + "\n"
    if left_out:
        intro += (f"Left out (fewer than {MIN_IMPOSTORS_FMR1} impostor pairs): {', '.join(left_out.values())}."
                  "\n\n")
    text = ("# Networks from different starts, averaged\n\n" + intro + extra
            + ("## Over the splits\n\n" if args.variants else "## Each set, paired with the members' mean\n\n")
            + markdown_table(summary_rows(rows, reference)) + "\n## Every split\n\n" + markdown_table(rows, digits=2)
            + f"\n`{command}`\n")
    write_text(args.out / "ensemble.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
