"""``fedprint gallery build / add / remove / info``: a gallery index built once, searched by ``fedprint identify
--index`` many times (:mod:`fedprint.recognition.gallery_index` states the file format)::

    fedprint gallery build --data DIR [--model M] [--minutiae auto|nbis|none] -o gallery.fpg
    fedprint gallery add gallery.fpg --data DIR2 [--model M]         enrol more prints (same model only)
    fedprint gallery remove gallery.fpg --identity ID [--identity ID2 ...]
    fedprint gallery info gallery.fpg [--identities] [--json]
    fedprint identify --index gallery.fpg --probe IMG_OR_DIR [--score global|minutiae] [--top-k 5]

``add`` and ``remove`` rewrite the file atomically: an interrupted run leaves the old index. Every command refuses
an index of another format or version, one whose checksum does not match, and (``add``, ``identify``) a model other
than the one the index was built with.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fedprint.cli.verify import _data_args, _load_data, _model_arg, _print_skipped, _quality_arg, _skip_bad_arg
from fedprint.config.arg_types import add_device_arg

MINUTIAE_HELP = ("store minutiae templates for identify --score minutiae (NBIS MINDTCT minutiae as ISO/IEC 19794-2 "
                 "records, ~70 ms a print; needs nbis-py, pip install 'fedprint[classical]'); auto: where nbis-py "
                 "is installed; none: embeddings only")


def _records(args: argparse.Namespace, report: list) -> list:
    return _load_data(args.data, args.layout, args.dpi, "--data", args.skip_bad, report)


def _summary_line(index, path: Path) -> str:
    tpl = f", {index.matcher} minutiae templates" if index.matcher else ", no minutiae templates"
    return (f"{path}: {index.count} impressions of {len(index.identities)} identities, {index.dim}-dim embeddings"
            f"{tpl}; model {index.model.get('path')} ({str(index.model.get('fingerprint'))[7:19]})")


def _build(args: argparse.Namespace) -> int:
    from fedprint.models.model_file import load_model
    from fedprint.recognition.gallery_index import build_index, keep_cylinder_codes, write_index

    target = Path(args.output)
    if target.exists():
        raise FileExistsError(f"-o: {target} exists; give a new file name (fedprint gallery add grows an index)")
    if not target.parent.is_dir():
        raise NotADirectoryError(f"-o: folder {target.parent} does not exist")
    model = load_model(args.model)
    report: list = []
    records = _records(args, report)
    index = build_index(model, records, minutiae=args.minutiae, min_quality=args.min_quality,
                        skip_bad=args.skip_bad, report=report, progress=not args.quiet)
    write_index(index, target)
    keep_cylinder_codes(index, target, progress=not args.quiet)  # for identify --shortlist-by cylinders
    print("written: " + _summary_line(index, target))
    if report:
        print(f"{len(report)} file(s) skipped (--skip-bad):")
        _print_skipped(report)
    return 0


def _add(args: argparse.Namespace) -> int:
    from fedprint.models.model_file import load_model
    from fedprint.recognition.gallery_index import (
        add_records,
        check_model,
        keep_cylinder_codes,
        load_index,
        write_index,
    )

    index = load_index(args.index)
    model = load_model(args.model)
    check_model(index, model)  # before any image is read
    report: list = []
    records = _records(args, report)
    grown, added = add_records(index, model, records, min_quality=args.min_quality, skip_bad=args.skip_bad,
                               report=report, progress=not args.quiet)
    write_index(grown, index.path)
    keep_cylinder_codes(grown, index.path, progress=not args.quiet)
    print(f"added {added} impression(s); " + _summary_line(grown, index.path))
    if report:
        print(f"{len(report)} file(s) skipped (--skip-bad):")
        _print_skipped(report)
    return 0


def _remove(args: argparse.Namespace) -> int:
    from fedprint.recognition.gallery_index import keep_cylinder_codes, load_index, remove_identities, write_index

    index = load_index(args.index)
    shrunk, removed = remove_identities(index, args.identity)
    write_index(shrunk, index.path)
    keep_cylinder_codes(shrunk, index.path, make=False)  # the removed fingers' codes go too
    print(f"removed {removed} impression(s) of {len(set(args.identity))} identit"
          f"{'y' if len(set(args.identity)) == 1 else 'ies'}; " + _summary_line(shrunk, index.path))
    return 0


def _info(args: argparse.Namespace) -> int:
    from fedprint.recognition.gallery_index import info, load_index

    index = load_index(args.index)
    facts = info(index)
    if args.identities:
        facts["identity_names"] = index.identities.tolist()
    if args.json:
        print(json.dumps(facts))
        return 0
    per = facts["impressions_per_identity"]
    print(_summary_line(index, index.path))
    print(f"  format {facts['format']} version {facts['version']}, checksum verified; {per['min']}-{per['max']} "
          f"impressions per identity; created {facts['created']}, updated {facts['updated']}")
    print(f"  model: {facts['model'].get('encoder')} encoder, input {facts['model'].get('input_pipeline')}")
    print(f"  size: {facts['file_bytes']} bytes on disk, ~{facts['bytes_in_memory'] / max(1, index.count):.0f} bytes "
          "in memory per enrolled impression")
    if args.identities:
        print("  identities: " + ", ".join(facts["identity_names"]))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("gallery", help="build / grow / inspect an on-disk gallery index (identify --index)",
                       description="A gallery index built once and searched many times by fedprint identify "
                                   "--index: a ZIP of float32 embeddings, identities, sources and (optionally) "
                                   "ISO/IEC 19794-2 minutiae templates, with a JSON header naming its format, "
                                   "version, the model's fingerprint and a SHA-256 checksum (fedprint.recognition."
                                   "gallery_index). add / remove rewrite it atomically.")
    actions = g.add_subparsers(dest="gallery_command", required=True, metavar="ACTION")

    b = actions.add_parser("build", help="embed a gallery folder into a new index file",
                           description="Embed every print of --data (quality-gated) with --model and write a new "
                                       "index file (-o; never overwritten).")
    _model_arg(b)
    _data_args(b)
    b.add_argument("--minutiae", choices=("auto", "nbis", "none"), default="auto", help=MINUTIAE_HELP)
    b.add_argument("-o", "--output", required=True, help="new index file to write, e.g. gallery.fpg")
    _quality_arg(b)
    _skip_bad_arg(b)
    add_device_arg(b)
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=_build)

    a = actions.add_parser("add", help="enrol the prints of another folder into an index (rewritten atomically)",
                           description="Embed --data with --model (refused unless it is the index's model) and "
                                       "add its prints; a file already enrolled is refused.")
    a.add_argument("index", help="index file (written by fedprint gallery build)")
    _model_arg(a)
    _data_args(a)
    _quality_arg(a)
    _skip_bad_arg(a)
    add_device_arg(a)
    a.add_argument("--quiet", action="store_true", help="no progress bars")
    a.set_defaults(func=_add)

    r = actions.add_parser("remove", help="remove every print of some identities from an index",
                           description="Remove every enrolled print of each --identity (rewritten atomically).")
    r.add_argument("index", help="index file")
    r.add_argument("--identity", action="append", required=True, help="identity to remove (repeat for several)")
    r.set_defaults(func=_remove)

    i = actions.add_parser("info", help="what an index holds (its checksum verified)")
    i.add_argument("index", help="index file")
    i.add_argument("--identities", action="store_true", help="list the identity names too")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(func=_info)
