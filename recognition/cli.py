"""``fedprint verify / evaluate / identify``: use a trained model (default: the shipped synthetic-only model).

    fedprint verify A.png B.png [--model M] [--threshold T] [--dpi 500]     exit 0 match, 1 no match, 2 error
    fedprint evaluate --data DIR [--layout auto] [--protocol fvc|all] [--model M] [--out DIR]
    fedprint identify --gallery DIR --probe IMG_OR_DIR [--top-k 5] [--model M] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from fedprint_config.arg_types import add_device_arg, positive_float
from recognition.template_cli import add_evaluate_options, add_verify_options

#: The shipped model, trained on synthetic fingerprints only (see models/pretrained/MODEL_CARD.md).
DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "models" / "pretrained" / "fedprint-synthetic.pt"


def _model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=str(DEFAULT_MODEL),
                   help="FedPrint model file (written by fedprint train / simulate / demo; default: the shipped "
                        "model trained on synthetic prints only)")


def _out_dir(out: str | None, name: str) -> Path:
    path = Path(out) if out else Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    if path.exists() and any(path.iterdir()):
        raise ValueError(f"--out: {path} exists and is not empty; give a new folder")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _read(path: str, what: str):
    from data.datasets.imread import read_gray

    if not Path(path).is_file():
        raise FileNotFoundError(f"{what}: no such image file: {path}")
    return read_gray(Path(path))


def _verify(args: argparse.Namespace) -> int:
    if args.template:  # protected template (issue 26)
        from recognition.template_cli import verify_with_template

        return verify_with_template(args)
    if args.b is None:
        raise ValueError("B: give a second image, or --template TEMPLATE")
    from models.model_file import load_model
    from recognition.matching import verify

    model = load_model(args.model)
    a, b = _read(args.a, "A"), _read(args.b, "B")
    res = verify(model, a, b, dpi_a=args.dpi_a or args.dpi, dpi_b=args.dpi_b or args.dpi, threshold=args.threshold)
    verdict = "MATCH" if res["match"] else "NO MATCH"
    print(f"{verdict}: distance {res['distance']:.4f} (score {res['score']:.4f}); threshold {res['threshold']:.4f} "
          f"({'--threshold' if args.threshold is not None else 'model'})")
    return 0 if res["match"] else 1


def _load_data(root: str, layout: str, dpi: float | None, what: str):
    from data.datasets import load_dataset

    if not Path(root).is_dir():
        raise FileNotFoundError(f"{what}: no such folder: {root}")
    return load_dataset(layout, root, dpi=dpi)


def _evaluate(args: argparse.Namespace) -> int:
    if args.template_scheme:  # protected templates (issue 26)
        from recognition.template_cli import evaluate_with_templates

        records = _load_data(args.data, args.layout, args.dpi, "--data")
        return evaluate_with_templates(args, records, _out_dir(args.out, "evaluate-templates"))
    from data.atomic_io import write_csv, write_json
    from models.metrics import plot_roc
    from models.model_file import load_model
    from recognition.matching import evaluate

    model = load_model(args.model)
    records = _load_data(args.data, args.layout, args.dpi, "--data")
    metrics, d, pairs = evaluate(model, records, args.protocol, threshold=args.threshold)
    out = _out_dir(args.out, "evaluate")
    metrics = {**metrics, "model": str(args.model), "data": str(args.data), "layout": args.layout}
    write_json(out / "metrics.json", metrics)
    write_csv(out / "scores.csv", [{"a": records[i].key, "b": records[j].key, "genuine": int(y),
                                    "distance": float(x), "score": 1.0 - float(x) / 2.0}
                                   for i, j, y, x in zip(pairs.a, pairs.b, pairs.label, d, strict=True)])
    plot_roc(out / "roc_det.png", {Path(args.model).stem: (d, pairs.label)},
             title=f"{Path(args.data).name} ({args.protocol} protocol)")

    def pct(v):
        return "n/a (too few impostor pairs)" if v is None else f"{100 * v:.2f} %"

    print(f"{Path(args.data).name}: {metrics['images']} images, {metrics['fingers']} fingers, protocol "
          f"{args.protocol}: {metrics['n_genuine']} genuine / {metrics['n_impostor']} impostor pairs\n"
          f"  EER {100 * metrics['eer']:.2f} %   ROC AUC {metrics['roc_auc']:.4f}   "
          f"FNMR@FMR1% {pct(metrics['fnmr_at_fmr_1%'])}   FNMR@FMR0.1% {pct(metrics['fnmr_at_fmr_0.1%'])}")
    if "threshold" in metrics:
        print(f"  at threshold {metrics['threshold']:.4f}: accuracy {metrics['accuracy']:.4f}, "
              f"FMR {pct(metrics['fmr_at_threshold'])}, FNMR {pct(metrics['fnmr_at_threshold'])}")
    print(f"  written: {out / 'metrics.json'}, {out / 'scores.csv'}, {out / 'roc_det.png'}")
    return 0


def _identify(args: argparse.Namespace) -> int:
    from data.atomic_io import write_json
    from data.record import FingerprintRecord
    from models.model_file import load_model
    from recognition.matching import cmc, identify

    model = load_model(args.model)
    gallery = _load_data(args.gallery, args.layout, args.dpi, "--gallery")
    probe = Path(args.probe)
    if probe.is_dir():
        probes, known = _load_data(args.probe, args.layout, args.dpi, "--probe"), True
    else:
        img = _read(args.probe, "--probe")
        probes = [FingerprintRecord(identity=probe.stem, impression=0, image=img, domain="probe",
                                    source=str(probe.resolve()), dpi=args.dpi or 500.0)]
        known = False
    results = identify(model, gallery, probes, top_k=args.top_k, probe_identities_known=known)
    for r in results[: args.show]:
        hits = ", ".join(f"{n} ({d:.3f})" for n, d in r.ranked)
        print(f"{r.probe}: {hits}" + (f"   [true {r.identity}: rank {r.rank}]" if r.identity is not None else ""))
    if len(results) > args.show:
        print(f"... {len(results) - args.show} more probes")
    summary = {"probes": len(results), "gallery_images": len(gallery),
               "gallery_identities": len({g.identity for g in gallery})}
    if known:
        curve = cmc(results, args.top_k)
        summary.update({"rank1": float(curve[0]), "cmc": curve.tolist()})
        print(f"rank-1 {100 * curve[0]:.1f} %; CMC (ranks 1..{args.top_k}): "
              + ", ".join(f"{100 * c:.1f}" for c in curve))
    if args.out or known:
        out = _out_dir(args.out, "identify")
        write_json(out / "identify.json", {**summary, "results": [
            {"probe": r.probe, "identity": r.identity, "rank": r.rank, "top": r.ranked} for r in results]})
        if known:
            _plot_cmc(out / "cmc.png", summary["cmc"])
        print(f"written: {out}")
    else:
        print(json.dumps(summary))
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


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("verify", help="compare two fingerprint images with a trained model (1:1)",
                       description="Distance and match decision of two images. Exit status 0: match, 1: no match, "
                                   "2: error.")
    v.add_argument("a", help="first image (PNG, BMP, TIFF, ...)")
    v.add_argument("b", nargs="?", help="second image (or --template)")
    _model_arg(v)
    add_verify_options(v)
    v.add_argument("--threshold", type=float, default=None,
                   help="distance threshold (default: the model's, chosen on validation pairs)")
    v.add_argument("--dpi", type=positive_float, default=500.0, help="resolution of both images (dots per inch)")
    v.add_argument("--dpi-a", type=positive_float, default=None, help="resolution of A (default: --dpi)")
    v.add_argument("--dpi-b", type=positive_float, default=None, help="resolution of B (default: --dpi)")
    add_device_arg(v)
    v.set_defaults(func=_verify)

    e = sub.add_parser("evaluate", help="EER, FNMR at fixed FMR and ROC of a model on a dataset",
                       description="Evaluate a model on a fingerprint folder: EER, ROC AUC, FNMR at FMR 1 %% / "
                                   "0.1 %% (only where enough impostor pairs exist), ROC/DET plot, scores CSV.")
    _model_arg(e)
    e.add_argument("--data", required=True, help="dataset folder")
    e.add_argument("--layout", default="auto", help="socofing, casia, nist_sd10, fvc, generic or auto")
    e.add_argument("--dpi", type=positive_float, default=None, help="image resolution (default: the layout's)")
    e.add_argument("--protocol", choices=("fvc", "all"), default="fvc",
                   help="fvc: all genuine pairs + first-impression impostor pairs; all: every pair")
    e.add_argument("--threshold", type=float, default=None, help="threshold for accuracy/FMR/FNMR (default: model's)")
    e.add_argument("--out", default=None, help="output folder (default: runs/evaluate-<UTC time>)")
    add_device_arg(e)
    add_evaluate_options(e)
    e.set_defaults(func=_evaluate)

    i = sub.add_parser("identify", help="search a gallery for probe fingerprints (1:N, rank-k, CMC)",
                       description="1:N search: top-k gallery identities per probe; for a probe folder with known "
                                   "identities also rank-1 and the CMC curve.")
    _model_arg(i)
    i.add_argument("--gallery", required=True, help="gallery folder (enrolled fingers)")
    i.add_argument("--probe", required=True, help="probe image, or a folder of probes (same layout)")
    i.add_argument("--layout", default="auto", help="layout of the gallery (and probe folder)")
    i.add_argument("--dpi", type=positive_float, default=None, help="image resolution (default: the layout's; a single "
                                                           "probe image: 500)")
    i.add_argument("--top-k", type=int, default=5, help="gallery identities listed per probe")
    i.add_argument("--show", type=int, default=10, help="probes printed")
    i.add_argument("--out", default=None, help="output folder (default: runs/identify-<UTC time> for folders)")
    add_device_arg(i)
    i.set_defaults(func=_identify)
