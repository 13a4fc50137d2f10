"""What the minutiae backend changes for FP-DFSN (issue 57 section 1): docs/studies/minutiae_consumers.md.

    python -m studies.minutiae_consumers [--real ROOT] [--set fvc2002_db1_b] [--n 40]
                                         [--backends crossing,nbis,leader] [--out runs/minutiae_consumers.json]

For the first ``--n`` prints (file order) of a shared real set, for each backend: FP-DFSN's minutiae (Eq. 9 on the
sharpened image, T_d = 10 px), the share of the image and of its foreground (:func:`fedprint.data.minutiae.segment`)
that the noise mask covers (disks of 8 px), how many of NBIS's minutiae of the raw print the mask covers (where the
noise lands relative to the strongest shipped extractor), and the seconds a print. Default FP-DFSN parameters
(:class:`fedprint.privacy.fpdfsn.FPDFSNParams`), β = 0.5; the noise itself does not enter these figures.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from fedprint.data.datasets.imread import read_gray
from fedprint.data.minutiae import segment
from fedprint.data.minutiae_backends import available, extract
from fedprint.privacy.fpdfsn import FPDFSNParams, fpdfsn


def measure(images: list[np.ndarray], backend: str) -> dict:
    """Per-backend means over ``images`` (see the module docstring)."""
    params = FPDFSNParams(backend=backend)
    rows = []
    for img in images:
        t = time.perf_counter()
        res = fpdfsn(img, params, rng=0)
        seconds = time.perf_counter() - t
        fg = segment(img)
        ref = extract(img, "nbis") if available("nbis") else np.zeros((0, 5))
        cols = np.clip(np.rint(ref[:, 0]).astype(int), 0, img.shape[1] - 1)
        rows_ = np.clip(np.rint(ref[:, 1]).astype(int), 0, img.shape[0] - 1)
        rows.append({"minutiae": res.n_minutiae, "mask_image": float(res.noise_mask.mean()),
                     "mask_foreground": float(res.noise_mask[fg].mean()) if fg.any() else float("nan"),
                     "nbis_covered": float(res.noise_mask[rows_, cols].mean()) if len(ref) else float("nan"),
                     "seconds": seconds})
    keys = rows[0].keys()
    return {"backend": backend, "prints": len(rows),
            **{k: float(np.nanmean([r[k] for r in rows])) for k in keys},
            "minutiae_min": int(min(r["minutiae"] for r in rows)),
            "minutiae_max": int(max(r["minutiae"] for r in rows)),
            "no_minutiae": int(sum(r["minutiae"] == 0 for r in rows))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", type=Path, default=Path(os.environ.get("FEDPRINT_REAL_SAMPLES", "../shared/data/real")))
    ap.add_argument("--set", default="fvc2002_db1_b")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--backends", default="crossing,nbis,leader")
    ap.add_argument("--out", type=Path, default=Path("runs/minutiae_consumers.json"))
    args = ap.parse_args(argv)
    files = sorted(p for p in (args.real / args.set).iterdir() if p.suffix.lower() in (".tif", ".png", ".bmp"))
    images = [read_gray(p) for p in files[: args.n]]
    out = []
    for b in args.backends.split(","):
        out.append(measure(images, b))
        print(json.dumps(out[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"set": args.set, "n": len(images), "rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
