"""Images/s of the FIP / EMK / BEMK (Zhang et al. 2018) and SWP / sort-SWP (Liu et al. 2021) mechanisms, both variants.

Run: .venv/bin/python -m benchmarks.bench_publish_fourier_swp [--repeats N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fedprint.privacy.publish.fourier import publish_bemk, publish_emk, publish_fip
from fedprint.privacy.publish.swp import publish_sort_swp, publish_swp

SHAPES = [(96, 103), (328, 356), (832, 768)]
MECHANISMS = {"fip": publish_fip, "emk": publish_emk, "bemk": publish_bemk, "swp": publish_swp,
              "sort-swp": publish_sort_swp}


def _image(shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    y, x = np.mgrid[: shape[0], : shape[1]]
    noise = np.random.default_rng(seed).normal(0, 10, shape)
    return np.clip(128 + 100 * np.sin(x / 3.0 + np.sin(y / 20.0) * 4) + noise, 0, 255).astype(np.uint8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"{'mechanism':10s} {'variant':7s} " + " ".join(f"{f'{h}x{w}':>10s}" for h, w in SHAPES) + "   (images/s)")
    for name, fn in MECHANISMS.items():
        for variant in ("paper", "sound"):
            rates = []
            for shape in SHAPES:
                img, rng = _image(shape), np.random.default_rng(0)
                fn(img, None, 1.0, rng, variant)  # warm-up
                t = time.perf_counter()
                for _ in range(args.repeats):
                    fn(img, None, 1.0, rng, variant)
                rates.append(args.repeats / (time.perf_counter() - t))
            print(f"{name:10s} {variant:7s} " + " ".join(f"{r:10.1f}" for r in rates))


if __name__ == "__main__":
    main()
