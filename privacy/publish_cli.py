"""``fedprint publish``: one DP release of a fingerprint image (or its minutiae) offline, through a ledger.

    fedprint publish --mechanism dp-rklap --variant sound --epsilon 1 IMAGE -o OUT.png \\
        [--ledger LEDGER.json --budget 10 --unit FINGER_ID] [--seed 0]

Outputs: the released image (PNG) for image mechanisms, or the released point set (``.json`` or ``.csv``) for
point-set mechanisms, plus ``OUT.guarantee.json`` with the guarantee and the release's parameters. The
guarantee is printed. Any error (bad ε, unknown mechanism, unreadable image, no minutiae, budget exceeded)
leaves no output file and charges nothing: outputs are written to temporary files, the ledger is committed,
and only then are the files moved into place.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import cv2
import numpy as np

from data.datasets.imread import read_gray
from privacy.ledger import Ledger
from privacy.publish import registry
from privacy.publish.release import release

POINT_SUFFIXES = (".json", ".csv")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="DP-publish one fingerprint image or its minutiae (through a ledger)")
    p.add_argument("image", type=Path, help="grayscale fingerprint image")
    p.add_argument("--mechanism", required=True, help=f"one of: {', '.join(registry.known())}")
    p.add_argument("--variant", default="sound", choices=("sound", "paper"))
    p.add_argument("--epsilon", type=float, required=True, help="privacy budget of this release (> 0)")
    p.add_argument("-o", "--out", type=Path, required=True,
                   help="output: .png for image mechanisms, .json or .csv for point sets")
    p.add_argument("--ledger", type=Path, help="privacy ledger JSON (created with --budget if absent)")
    p.add_argument("--budget", type=float, help="total ε per finger for a new ledger")
    p.add_argument("--window", type=int, help="window length (releases) of a new ledger's sustainable budget")
    p.add_argument("--window-epsilon", type=float, help="ε per window of a new ledger")
    p.add_argument("--unit", help="finger identity charged in the ledger (required with --ledger)")
    p.add_argument("--seed", type=int, help="seed of the mechanism's noise (default: fresh entropy)")
    p.set_defaults(func=run)


def _open_ledger(args: argparse.Namespace) -> Ledger | None:
    if args.ledger is None:
        if args.budget is not None or args.unit is not None:
            raise ValueError("--budget / --unit need --ledger")
        return None
    if not args.unit:
        raise ValueError("--unit: a ledger charges a finger identity; give the image's finger id")
    if args.budget is None and args.window is None:
        return Ledger.open(args.ledger)
    return Ledger(args.ledger, args.budget, window=args.window, window_epsilon=args.window_epsilon)


def _write_points(path: Path, points: np.ndarray) -> None:
    cols = ["x", "y", "direction"][: points.shape[1]]
    if path.suffix.lower() == ".csv":
        np.savetxt(path, points, delimiter=",", header=",".join(cols), comments="", fmt="%.6f")
    else:
        path.write_text(json.dumps({"columns": cols, "points": points.tolist()}))


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    # Everything that can be checked without running anything, first.
    is_points = registry.releases_points(args.mechanism)  # unknown mechanism -> ValueError
    suffix = out.suffix.lower()
    if is_points and suffix not in POINT_SUFFIXES:
        raise ValueError(f"-o {out}: a point-set release is written as {' or '.join(POINT_SUFFIXES)}")
    if not is_points and suffix != ".png":
        raise ValueError(f"-o {out}: an image release is written as .png")
    if not out.parent.is_dir():
        raise ValueError(f"-o {out}: directory {out.parent} does not exist")
    ledger = _open_ledger(args)
    image = read_gray(args.image)
    rng = np.random.default_rng(args.seed)
    pub, res = release(args.mechanism, image, args.epsilon, rng, args.variant, ledger=ledger, unit=args.unit,
                       image_id=str(args.image))

    sidecar = out.with_name(out.name + ".guarantee.json")
    meta = {"mechanism": pub.mechanism, "variant": pub.variant, "image": str(args.image), "seed": args.seed,
            "spent_epsilon": pub.spent_epsilon, "spent_delta": pub.spent_delta, "unit": args.unit,
            "guarantee": pub.guarantee.to_dict(), "statement": pub.guarantee.statement(),
            "details": {k: v for k, v in pub.details.items() if _jsonable(v)}}
    tmp_out, tmp_side = _tmp(out), _tmp(sidecar)
    try:
        if is_points:
            _write_points(tmp_out, pub.points)
        elif not cv2.imwrite(str(tmp_out), pub.image):
            raise ValueError(f"-o {out}: could not write the PNG")
        tmp_side.write_text(json.dumps(meta, indent=1))
        if ledger is not None:
            meta["ledger_entry"] = ledger.commit(res)["id"]
            tmp_side.write_text(json.dumps(meta, indent=1))
        os.replace(tmp_out, out)
        os.replace(tmp_side, sidecar)
    finally:
        for t in (tmp_out, tmp_side):
            if t.exists():
                t.unlink()
    print(pub.guarantee.statement())
    if ledger is not None:
        print(f"Ledger {args.ledger}: unit {args.unit!r} has epsilon {ledger.remaining(args.unit):g} left.")
    return 0


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True
