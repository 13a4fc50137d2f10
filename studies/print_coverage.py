"""How much of the network's input is print, per synthetic profile and per real set, at several input sizes.

The ``crop = "print"`` pipeline (:mod:`fedprint.models.preprocess`) resamples every image to the working resolution and
cuts
an S x S window centred on the segmented print. For each source and size this prints the mean ``coverage`` (the
fraction of the window on the print; the rest is background or padding) and ``captured`` (the fraction of the print
inside the window), from :func:`fedprint.models.preprocess.print_coverage`. It answers whether a larger training input
holds
more padding on synthetic prints than on real ones (a guess of issue 22's synthetic-transfer study).

    python -m studies.print_coverage [--sizes 128,160,192] [--images 40] [--dpi 250] [--real-samples DIR] [--out F]

Synthetic prints are generated in memory (generator seed 1000, the shipped model's, ``--images`` / 4 fingers x 4
impressions per profile); real sets are read from ``--real-samples`` (default ``$FEDPRINT_REAL_SAMPLES`` or
``../shared/data/real``), the first ``--images`` images of each, and left out with a note when absent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from fedprint.config.arg_types import add_real_samples_arg, positive_int
from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_text
from fedprint.data.datasets import load_dataset
from fedprint.data.real_sets import real_root, real_set_dirs
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.models.preprocess import InputSpec, print_coverage

ROOT = Path(__file__).resolve().parents[1]


PROFILES = ("socofing", "casia", "nist_sd10")


def synthetic_images(profile: str, images: int, seed: int = 1000) -> list[tuple[np.ndarray, float]]:
    """``images`` synthetic prints of ``profile`` (4 impressions a finger) as ``(image, dpi)``."""
    prof, out, finger = get_profile(profile), [], 0
    while len(out) < images:
        out += [(r.image, r.dpi) for r in finger_records(prof, finger, 4, seed)]
        finger += 1
    return out[:images]


def coverage_table(sources: dict[str, list[tuple[np.ndarray, float]]], sizes: list[int], dpi: float) -> list[dict]:
    """One row per source: the mean coverage (``"<S> px on print"``) and captured fraction (``"<S> px captured"``)
    at every size S."""
    rows = []
    for name, imgs in sources.items():
        row = {"source": name, "images": len(imgs)}
        for s in sizes:
            spec = InputSpec(size=s, crop="print", dpi=dpi)
            on, captured = np.mean([print_coverage(img, spec, d) for img, d in imgs], axis=0)
            row |= {f"{s} px on print": float(on), f"{s} px captured": float(captured)}
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,160,192", help="input sides S in pixels, comma-separated")
    ap.add_argument("--images", type=positive_int, default=40, help="images per source (default 40)")
    ap.add_argument("--dpi", type=float, default=250.0, help="working resolution (default 250 dpi)")
    add_real_samples_arg(ap)
    ap.add_argument("--out", default=None, help="also write the table as a markdown document (e.g. "
                                                "docs/studies/print_coverage.md)")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 16:
        print(f"print_coverage: error: --sizes: expected comma-separated sides >= 16 px, got {args.sizes!r}",
              file=sys.stderr)
        return 2
    sources = {f"synthetic {p}": synthetic_images(p, args.images) for p in PROFILES}
    root = Path(args.real_samples) if args.real_samples else real_root()
    real = real_set_dirs(root)
    for folder, layout in real:
        recs = load_dataset(layout, folder)[:args.images]
        sources[f"real {folder.name}"] = [(r.image, r.dpi) for r in recs]
    text = markdown_table(coverage_table(sources, sizes, args.dpi), digits=2) + "\n"
    if not real:
        text += f"(no real set under {root}: synthetic profiles only)\n\n"
    text += (f"Working resolution {args.dpi:g} dpi; 'on print': fraction of the S x S window on the segmented print; "
             "'captured': fraction of the print inside it (means over the images of each source).\n")
    print(text, end="")
    if args.out:
        cmd = "python -m studies.print_coverage " + " ".join(argv if argv is not None else sys.argv[1:])
        write_text(Path(args.out), "# How much of the network input is print\n\n" + __doc__.split("\n\n")[1]
                   .replace("\n", " ") + "\n\n" + text + f"\nCommand:\n\n```bash\n{cmd}\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
