"""Throughput (images/s) of Liu, Zhi et al.'s publication mechanisms — LAP, KLAP, RKLAP, DP-RKLAP, paper and sound —
on synthetic prints at 96x103, 328x356 and 832x768 (W x H) pixels.

Each image is a synthetic master (:func:`fedprint.data.synth.master.make_master`, right loop) with its ground-truth
minutiae; the first identity with at least ``min_minutiae`` minutiae is used. The paper variants run at
``epsilon = m n / 256`` (the paper's smallest budget, k = 1), the sound ones at ``epsilon = 1``. Usage::

    .venv/bin/python -m benchmarks.bench_publish_000               # all sizes, 20 repeats
    .venv/bin/python -m benchmarks.bench_publish_000 --repeats 50 --sizes 328x356

Prints one JSON object per (size, mechanism, variant): size, minutiae, protected_fraction, ms_per_image (median
of the repeats) and images_per_s. The machine may be shared: rerun and compare medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from fedprint.data.synth.master import make_master
from fedprint.privacy.publish.dp_rklap import publish_dp_rklap
from fedprint.privacy.publish.klap import publish_klap
from fedprint.privacy.publish.lap import publish_lap
from fedprint.privacy.publish.rklap import publish_rklap

MECHANISMS = {"lap": publish_lap, "klap": publish_klap, "rklap": publish_rklap, "dp_rklap": publish_dp_rklap}
SIZES = ("96x103", "328x356", "832x768")


def synthetic_print(width: int, height: int, *, min_minutiae: int = 12, seed: int = 0,
                    max_tries: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (H, W) synthetic print (ridges dark) and its minutiae; first identity with >= min_minutiae."""
    for identity in range(max_tries):
        m = make_master(identity, seed=seed, size=(height, width), pattern_prior={"right_loop": 1.0})
        if len(m.minutiae) >= min_minutiae:
            return (255 - (m.ridges + 1) * 127.5).astype(np.uint8), m.minutiae
    raise ValueError(f"no synthetic {width}x{height} print with >= {min_minutiae} minutiae in {max_tries} tries")


def bench(size: str, repeats: int = 20, seed: int = 0) -> list[dict]:
    width, height = (int(v) for v in size.lower().split("x"))
    image, minutiae = synthetic_print(width, height, min_minutiae=12 if width * height > 20000 else 6, seed=seed)
    rng = np.random.default_rng(seed)
    rows = []
    for name, publish in MECHANISMS.items():
        for variant in ("paper", "sound"):
            eps = image.size / 256 if variant == "paper" else 1.0
            pub = publish(image, minutiae, eps, rng, variant=variant)  # warm-up
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                publish(image, minutiae, eps, rng, variant=variant)
                times.append(time.perf_counter() - t0)
            ms = 1e3 * statistics.median(times)
            rows.append({"size": size, "mechanism": name, "variant": variant, "minutiae": int(len(minutiae)),
                         "protected_fraction": round(float(pub.details["protected_fraction"]), 4),
                         "ms_per_image": round(ms, 3), "images_per_s": round(1e3 / ms, 1)})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=lambda t: [v for v in t.split(",") if v.strip()], default=list(SIZES),
                    help="comma-separated W x H sizes, e.g. 328x356,300x300")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")
    for size in args.sizes:
        for row in bench(size, args.repeats, args.seed):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
