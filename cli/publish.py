"""``fedprint publish``: one DP release of a fingerprint image (or its minutiae) offline, through a ledger.

    fedprint publish --mechanism pointset --protect finger --epsilon 1 IMAGE -o OUT.json \\
        [--ledger LEDGER.json --budget 10 --unit FINGER_ID]

A ledger's budget is finger-level (see :mod:`fedprint.privacy.ledger`): each release is charged its finger-level ε
(:mod:`fedprint.privacy.publish.finger_level`), and the output prints both the mechanism's stated ε (per pixel, per
minutia or per finger) and the finger-level ε. Image mechanisms protect one pixel: by group privacy their
finger-level ε is H·W·ε, which a sensible per-finger budget refuses (with that explanation).

The mechanism's noise comes from OS entropy only (``numpy.random.default_rng()`` without a seed): no option
chooses it and nothing written (release, sidecar, ledger) can regenerate it — a known seed would let anyone
regenerate the noise and subtract it. The sidecar names neither the seed nor the input file (file names such as
SOCOFing's encode subject, sex, hand and finger).

Outputs: the released image (PNG) for image mechanisms, or the released point set (``.json`` or ``.csv``) for
point-set mechanisms, plus ``OUT.guarantee.json`` with the guarantee and the release's parameters. The
guarantee is printed. Any error (bad ε, unknown mechanism, unreadable image, no minutiae, budget exceeded)
leaves no output file and charges nothing: the output paths are checked before the ledger is reserved (a
directory, the input itself, or an existing file without ``--force`` is refused; the input is never
overwritten, even with ``--force``), outputs are written to temporary files, the ledger is committed, and only
then are the files moved into place.

``--protect finger`` point sets release a fixed public number of points (``--points``, default
:data:`fedprint.privacy.publish.pointset.DEFAULT_SIZE`), never the finger's minutiae count; the sidecar says so.

``fedprint publish-eval``: the usability benchmark of :mod:`fedprint.privacy.publish_eval`, on synthetic impressions or
on
a user's own prints (one or more dataset folders, pooled; identities prefixed by the folder name when several)::

    fedprint publish-eval --profile casia --fingers 6 --impressions 2 --epsilons 0.5,2,8 \\
        [--mechanisms all] [--model RUN/model_centralized.pt] [--classical] --out DIR
    fedprint publish-eval --data DIR [DIR ...] [--layout auto] [--n-images N --seed S] \\
        [--epsilons 1,2,3,4,5 --epsilon-unit mn/256] [--model M] [--classical] --out DIR

The mechanisms' noise comes from OS entropy here too; ``--seed`` only samples the synthetic data or the
``--n-images`` probes.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import cv2
import numpy as np

from fedprint.config.arg_types import positive_float, positive_int
from fedprint.data.datasets.imread import read_gray
from fedprint.privacy.ledger import ConfigMismatch, Ledger
from fedprint.privacy.publish import registry
from fedprint.privacy.publish.release import release

POINT_SUFFIXES = (".json", ".csv")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="DP-publish one fingerprint image or its minutiae (through a ledger)")
    p.add_argument("image", type=Path, help="grayscale fingerprint image")
    p.add_argument("--mechanism", required=True, help=f"one of: {', '.join(registry.known())}")
    p.add_argument("--variant", default="sound", choices=("sound", "paper"))
    p.add_argument("--epsilon", type=positive_float, required=True,
                   help="privacy budget of this release (> 0; above the mechanism's largest meaningful ε, where its "
                        "noise falls below one grey level, refused without --allow-large-epsilon)")
    p.add_argument("--allow-large-epsilon", action="store_true",
                   help="release even above the mechanism's largest meaningful ε (the output is then about the input "
                        "itself; see fedprint.privacy.publish.ceiling)")
    p.add_argument("-o", "--output", dest="out", type=Path, required=True,
                   help="output: .png for image mechanisms, .json or .csv for point sets")
    p.add_argument("--ledger", type=Path, help="privacy ledger JSON (created with --budget if absent)")
    p.add_argument("--protect", choices=("minutia", "finger"),
                   help="point sets: record unit of the guarantee (a per-finger ledger needs 'finger'); "
                        "default: the mechanism's own (minutia)")
    p.add_argument("--budget", type=positive_float, help="total finger-level ε per finger for a new ledger (required)")
    p.add_argument("--window", type=positive_int, help="rate limit of a new ledger: window length in releases")
    p.add_argument("--window-epsilon", type=positive_float, help="rate limit of a new ledger: ε per window")
    p.add_argument("--points", type=positive_int,
                   help="point sets with --protect finger: the fixed, public number of released points (default "
                        "32); the minutiae are subsampled or resampled to it, so their count is not released")
    p.add_argument("--force", action="store_true",
                   help="overwrite existing output files (never the input image)")
    p.add_argument("--unit", help="finger identity charged in the ledger (required with --ledger)")
    p.add_argument("--lock-timeout", type=positive_float, default=60.0,
                   help="seconds to wait for a ledger another process holds locked, saying whom it waits for, "
                        "before giving up (nothing charged)")
    _add_backend_arg(p)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)  # refused with an explanation, see run()
    p.set_defaults(func=run)

    e = sub.add_parser("publish-eval", help="usability benchmark of the publication mechanisms (paper vs sound)")
    e.add_argument("--data", type=Path, nargs="+",
                   help="dataset folder(s) of real prints (pooled); default: synthetic impressions")
    e.add_argument("--layout", default="auto", help="layout of the --data folders (default auto-detect)")
    e.add_argument("--n-images", type=positive_int, help="number of probes (default: every finger)")
    e.add_argument("--profile", help="synthetic profile of the test impressions (default casia)")
    e.add_argument("--fingers", type=int, help="number of synthetic fingers (default 6)")
    e.add_argument("--impressions", type=int, help="impressions per finger, >= 2 (default 2)")
    e.add_argument("--mechanisms", default="all", help="comma-separated mechanism names, or 'all' (default)")
    e.add_argument("--variants", default="paper,sound", help="comma-separated variants (default paper,sound)")
    e.add_argument("--epsilons", default="0.5,2,8", help="comma-separated ε grid (default 0.5,2,8)")
    e.add_argument("--epsilon-unit", default="absolute", choices=("absolute", "mn/256"),
                   help="absolute: ε as given; mn/256: value k means ε = k·m·n/256 per m×n image (Liu, Zhi et al.)")
    e.add_argument("--model", "--checkpoint", dest="checkpoint", type=Path,
                   help="a FedPrint model file, e.g. models/pretrained/fedprint-synthetic.pt or model_centralized.pt "
                        "of a `fedprint train` run (Siamese EER and rank-1)")
    e.add_argument("--classical", action="store_true", help="also run the classical afis matcher (slow)")
    _add_backend_arg(e)
    e.add_argument("--seed", type=int, default=0,
                   help="seed of the benchmark's data sampling (synthetic prints, --n-images probes); never of the "
                        "mechanisms' noise, which comes from OS entropy")
    e.add_argument("--out", type=Path, required=True,
                   help="a new or empty folder the results are written into (only when the benchmark finishes)")
    e.set_defaults(func=run_eval)


def _add_backend_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--minutiae-backend", default="auto", metavar="NAME",
                   help="minutiae extractor of the point-set and region mechanisms: auto (default: nbis where "
                        "nbis-py is installed, else crossing), nbis, leader or crossing "
                        "(fedprint.data.minutiae_backends); recorded with the release")


def _csv_list(text: str, name: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"{name}: expected a comma-separated list, got {text!r}")
    return items


def _eval_records(args: argparse.Namespace) -> tuple[list, str]:
    """The benchmark's records and a label saying what they are: real folders (pooled) or synthetic prints."""
    if args.data is not None:
        from dataclasses import replace

        from fedprint.data.datasets import load_dataset

        given = [f"--{k}" for k in ("profile", "fingers", "impressions") if getattr(args, k) is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: synthetic-data options cannot be combined with --data")
        records = []
        for root in args.data:
            if not root.is_dir():
                raise ValueError(f"--data: no such folder: {root}")
            recs = load_dataset(args.layout, root)
            if len(args.data) > 1:  # pooled: identities of different folders must not collide ("101" in every FVC)
                recs = [replace(r, identity=f"{root.name}/{r.identity}") for r in recs]
            records += recs
        return records, " + ".join(str(d) for d in args.data) + f" (layout {args.layout})"
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.limits import check_size
    from fedprint.data.synth.profiles import get_profile

    fingers = 6 if args.fingers is None else args.fingers
    impressions = 2 if args.impressions is None else args.impressions
    if fingers < 2:
        raise ValueError(f"--fingers: need at least 2 (a gallery with impostors), got {fingers}")
    if impressions < 2:
        raise ValueError(f"--impressions: need at least 2 (gallery + probe), got {impressions}")
    check_size(fingers, impressions, "--")
    profile = get_profile(args.profile or "casia")
    records = [r for f in range(fingers) for r in finger_records(profile, f, impressions, args.seed)]
    return records, f"synthetic profile {profile.name}, {fingers} fingers x {impressions} impressions, seed {args.seed}"


def run_eval(args: argparse.Namespace) -> int:
    from fedprint.data.atomic_io import check_new_folder, staged_folder
    from fedprint.privacy.publish_eval import publish_eval

    check_new_folder(args.out)
    try:
        epsilons = [float(x) for x in _csv_list(args.epsilons, "--epsilons")]
    except ValueError as exc:
        raise ValueError(f"--epsilons: expected comma-separated numbers, got {args.epsilons!r}") from exc
    mechanisms = None if args.mechanisms == "all" else _csv_list(args.mechanisms, "--mechanisms")
    if args.checkpoint is not None and not args.checkpoint.is_file():
        raise ValueError(f"--model: no such model file: {args.checkpoint}")
    records, label = _eval_records(args)
    with staged_folder(args.out) as tmp:  # a failed or interrupted benchmark leaves no half-written --out
        path = publish_eval(records, mechanisms=mechanisms, variants=_csv_list(args.variants, "--variants"),
                            epsilons=epsilons, checkpoint=args.checkpoint, classical=args.classical,
                            n_images=args.n_images, seed=args.seed, out_dir=tmp, epsilon_unit=args.epsilon_unit,
                            data_label=label, minutiae_backend=args.minutiae_backend)
    path = args.out / path.relative_to(tmp)
    print(f"Results: {path}; report: {path.parent / 'report.md'}")
    return 0


def _open_ledger(args: argparse.Namespace) -> Ledger | None:
    if args.ledger is None:
        if args.budget is not None or args.unit is not None:
            raise ValueError("--budget / --unit need --ledger")
        return None
    if not args.unit:
        raise ValueError("--unit: a ledger charges a finger identity; give the image's finger id")
    if args.budget is None and args.window is None:
        return Ledger.open(args.ledger)
    if args.budget is None:
        raise ValueError("--budget: a new ledger needs a total finger-level ε (a fingerprint never changes, so a "
                         "window alone would let repeated releases add up without limit)")
    try:
        return Ledger(args.ledger, args.budget, window=args.window, window_epsilon=args.window_epsilon)
    except ConfigMismatch as exc:
        given = {"total_epsilon": f"--budget {args.budget:g}", "window": f"--window {args.window}",
                 "window_epsilon": f"--window-epsilon {args.window_epsilon}"}
        options = [v for k, v in given.items() if exc.stored[k] != exc.requested[k]] or ["--ledger"]
        raise ValueError(f"{', '.join(options)}: {exc}") from exc


def _check_outputs(image: Path, out: Path, paths: list[Path], force: bool) -> None:
    """Refuse, before anything is reserved, outputs that cannot be written or would overwrite a file."""
    if not out.parent.is_dir():
        raise ValueError(f"-o {out}: directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise ValueError(f"-o {out}: directory {out.parent} is not writable")
    for path in paths:
        if not (path.exists() or path.is_symlink()):
            continue
        if path.is_dir():
            raise ValueError(f"-o {out}: {path} is a directory; give a file name")
        if path.exists() and image.exists() and os.path.samefile(path, image):
            raise ValueError(f"-o {out}: {path} is the input image; a release never overwrites its input")
        if not force:
            raise ValueError(f"-o {out}: {path} already exists (pass --force to overwrite it)")


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
    if args.seed is not None:
        raise ValueError("--seed: not accepted: DP noise comes from OS entropy only (a chosen seed would let "
                         "anyone regenerate the noise and subtract it)")
    # Everything that can be checked without running anything, first.
    is_points = registry.releases_points(args.mechanism)  # unknown mechanism -> ValueError
    suffix = out.suffix.lower()
    if is_points and suffix not in POINT_SUFFIXES:
        raise ValueError(f"-o {out}: a point-set release is written as {' or '.join(POINT_SUFFIXES)}")
    if not is_points and suffix != ".png":
        raise ValueError(f"-o {out}: an image release is written as .png")
    sidecar = out.with_name(out.name + ".guarantee.json")
    _check_outputs(args.image, out, [out, sidecar], args.force)
    ledger = _open_ledger(args)
    if ledger is not None:
        ledger.lock_timeout = args.lock_timeout
    image = read_gray(args.image)
    rng = np.random.default_rng()  # OS entropy; never stored
    options = {} if args.protect is None else {"protect": args.protect}
    if args.points is not None:
        options["size"] = args.points
    pub, res, charge = release(args.mechanism, image, args.epsilon, rng, args.variant, ledger=ledger,
                               unit=args.unit, image_id=str(args.image),
                               allow_large_epsilon=args.allow_large_epsilon,
                               minutiae_backend=args.minutiae_backend, **options)

    meta = {"mechanism": pub.mechanism, "variant": pub.variant,
            "minutiae_backend": pub.details.get("minutiae_backend"),  # None: an image mechanism uses none
            "spent_epsilon": pub.spent_epsilon, "spent_delta": pub.spent_delta, "unit": args.unit,
            "finger_level": None if charge is None else {"epsilon": charge.epsilon, "delta": charge.delta,
                                                         "relation": charge.relation, "group": charge.group},
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
    print(f"Finger level: {charge.describe()}." if charge is not None else
          "Finger level: no finger-level guarantee (see privacy.publish.finger_level).")
    if ledger is not None:
        print(f"Ledger {args.ledger}: unit {args.unit!r} charged finger-level epsilon {charge.epsilon:g}, "
              f"{ledger.remaining(args.unit):g} left.")
    return 0


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True
