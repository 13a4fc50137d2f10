"""Table of ``fedprint evaluate --score minutiae`` runs: per model and folder, the fused score beside the embedding
alone and the minutiae matcher alone, each with its EER and FNMR @ FMR 1 % and the pairs behind them.

    python -m studies.minutiae_fusion_table runs/eval/shipped_* runs/eval/t1_* [--out docs/studies/minutiae_fusion.md]

Every row is one evaluate output folder (its ``metrics.json``); the model is named by its file's stem, the folder by
its name. The mean row of each model averages the folders with at least 100 impostor pairs (fewer cannot resolve
FMR 1 %, and their EER moves in large steps).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCORES = (("", "fused"), ("_cosine", "embedding alone"), ("_minutiae", "minutiae matcher alone"))


def _pct(v) -> str:
    return "—" if v is None else f"{100 * v:.1f}"


def rows(folders: list[Path]) -> list[dict]:
    """One dict per evaluate folder: model, data, pair counts and the three scores' EER / FNMR @ FMR 1 %."""
    out = []
    for f in folders:
        path = f / "metrics.json"
        if not path.is_file():
            raise FileNotFoundError(f"{f}: no metrics.json (not a finished fedprint evaluate folder)")
        m = json.loads(path.read_text())
        if m.get("score") != "minutiae":
            raise ValueError(f"{path}: scored with --score {m.get('score')!r}, expected minutiae")
        out.append({"model": Path(m["model"]).stem, "data": Path(m["data"]).name, "n_genuine": m["n_genuine"],
                    "n_impostor": m["n_impostor"], "capped": m.get("max_impostors") is not None,
                    **{f"eer{k}": m[f"eer{k}"] for k, _ in SCORES},
                    **{f"fnmr{k}": m[f"fnmr_at_fmr_1%{k}"] for k, _ in SCORES}})
    return out


def render(table: list[dict]) -> str:
    head = ("| model | folder | genuine / impostor pairs | " + " | ".join(f"EER % {n}" for _, n in SCORES)
            + " | " + " | ".join(f"FNMR@FMR1 % {n}" for _, n in SCORES) + " |")
    lines = [head, "|" + "---|" * (3 + 2 * len(SCORES))]
    for model in dict.fromkeys(r["model"] for r in table):
        mine = [r for r in table if r["model"] == model]
        for r in mine:
            drawn = " (impostors drawn)" if r["capped"] else ""
            lines.append(f"| {model} | {r['data']} | {r['n_genuine']:,} / {r['n_impostor']:,}{drawn} | "
                         + " | ".join(_pct(r[f"eer{k}"]) for k, _ in SCORES) + " | "
                         + " | ".join(_pct(r[f"fnmr{k}"]) for k, _ in SCORES) + " |")
        big = [r for r in mine if r["n_impostor"] >= 100]
        if big:
            lines.append(f"| {model} | mean of {len(big)} folders (>= 100 impostor pairs) | | "
                         + " | ".join(_pct(sum(r[f"eer{k}"] for r in big) / len(big)) for k, _ in SCORES)
                         + " | | | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path, help="fedprint evaluate --score minutiae output folders")
    ap.add_argument("--out", type=Path, default=None, help="also write the table to this markdown file")
    args = ap.parse_args(argv)
    try:
        text = render(rows(args.folders))
    except (FileNotFoundError, ValueError) as exc:
        print(f"minutiae_fusion_table: error: {exc}", file=sys.stderr)
        return 2
    print(text, end="")
    if args.out:
        from fedprint.data.atomic_io import write_text

        write_text(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
