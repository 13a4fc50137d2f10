"""Throughput of FP-DFSN (Yan et al. 2025) vs a straightforward reference, on synthetic masters.

The reference does the same computation without vectorisation: Eq. 8 with the literal (−1)^{x+y} modulation and
the high-pass H built pixel by pixel in Python, the noise disks of Eq. 10 drawn by a Python loop over minutiae
(one box per minutia, distance test inside it) and a per-pixel loop to add the noise. Both use the same minutiae
extractor, so the "full pipeline" ratio is diluted by it; the "sharpen + noise" ratio isolates the two steps.

    .venv/bin/python -m benchmarks.bench_fpdfsn [--reps 3]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from fedprint.data.minutiae import extract_minutiae
from fedprint.data.synth.master import make_master
from fedprint.privacy.fpdfsn import FPDFSNParams, apply_difference, fpdfsn, neighbourhood_mask, sharpen, to_uint8

SIZES = [(103, 96), (356, 328), (768, 832)]  # (H, W): SOCOFing, ~FVC-sized, NIST-like


def reference_sharpen(image: np.ndarray, d0: float) -> np.ndarray:
    """Eq. 8 literally, H built by a per-pixel loop (keep_mean: DC restored like :func:`sharpen`)."""
    h, w = image.shape
    f = image.astype(np.float64)
    centred = np.empty_like(f)
    for y in range(h):
        for x in range(w):
            centred[y, x] = f[y, x] * (-1.0) ** (x + y)
    hp = np.empty((h, w))
    for y in range(h):
        for x in range(w):
            hp[y, x] = 1.0 - math.exp(-((y - h / 2) ** 2 + (x - w / 2) ** 2) / (2 * d0**2))
    g = np.fft.ifft2(np.fft.fft2(centred) * hp).real
    for y in range(h):
        for x in range(w):
            g[y, x] *= (-1.0) ** (x + y)
    return g + f.mean()


def reference_noise(image, minutiae, radius, beta, sigma2, rng):
    """Eq. 10 with a Python loop over minutiae for the disks and over mask pixels for the noise."""
    h, w = image.shape
    mask = np.zeros((h, w), bool)
    r = int(math.floor(radius))
    for x, y, _, _ in minutiae:
        cx, cy = int(round(x)), int(round(y))
        for yy in range(max(cy - r, 0), min(cy + r + 1, h)):
            for xx in range(max(cx - r, 0), min(cx + r + 1, w)):
                if (yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2:
                    mask[yy, xx] = True
    out = image.astype(np.float64).copy()
    sd = math.sqrt(sigma2)
    for yy in range(h):
        for xx in range(w):
            noisy = out[yy, xx] + (rng.normal(0.0, sd) if mask[yy, xx] else 0.0)
            out[yy, xx] = out[yy, xx] - beta * noisy
    return to_uint8(out), mask


def reference_fpdfsn(image, params, rng):
    sharpened = to_uint8(reference_sharpen(image, params.d0))
    minutiae = extract_minutiae(sharpened, border=params.border)
    return reference_noise(image, minutiae, params.radius, params.beta, params.sigma2, rng)


def _rate(fn, reps: int) -> float:
    fn()  # warm-up
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return reps / (time.perf_counter() - t)


def bench_size(h: int, w: int, p: FPDFSNParams, reps: int) -> str:
    """One table row: rates of the fast and the reference implementation at (H, W) = (h, w)."""
    m = make_master(0, seed=0, size=(h, w), pattern_prior={"whorl": 1.0})
    img = np.where(m.mask, 255 - (m.ridges + 1) * 127.5, 255).round().astype(np.uint8)
    minutiae = extract_minutiae(to_uint8(sharpen(img, p.d0)), border=p.border)

    # same output check: identical mask; sharpening agrees to float rounding (even sizes: exactly Eq. 8)
    ref_img, ref_mask = reference_noise(img, minutiae, p.radius, p.beta, p.sigma2, np.random.default_rng(0))
    assert np.array_equal(ref_mask, neighbourhood_mask(img.shape, minutiae, p.radius))

    fast_full = _rate(lambda: fpdfsn(img, p, 0), reps)
    ref_full = _rate(lambda: reference_fpdfsn(img, p, np.random.default_rng(0)), max(1, reps // 3))

    def fast_steps():
        s = sharpen(img, p.d0)
        mask = neighbourhood_mask(img.shape, minutiae, p.radius)
        return to_uint8(apply_difference(img, mask, p.beta, p.sigma2, np.random.default_rng(0))), s

    def ref_steps():
        s = reference_sharpen(img, p.d0)
        return reference_noise(img, minutiae, p.radius, p.beta, p.sigma2, np.random.default_rng(0)), s

    fast_st = _rate(fast_steps, reps * 5)
    ref_st = _rate(ref_steps, max(1, reps // 3))
    return (f"{w:>5}x{h:<5} {len(minutiae):>4} | {fast_full:>12.2f} {ref_full:>10.2f} {fast_full / ref_full:>6.1f} | "
          f"{fast_st:>19.1f} {ref_st:>8.2f} {fast_st / ref_st:>7.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    p = FPDFSNParams()
    print(f"{'size (WxH)':>11} {'n':>4} | {'fpdfsn img/s':>12} {'ref img/s':>10} {'ratio':>6} | "
          f"{'sharpen+noise img/s':>19} {'ref':>8} {'ratio':>7}")
    for h, w in SIZES:
        print(bench_size(h, w, p, args.reps))


if __name__ == "__main__":
    main()
