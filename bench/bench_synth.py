"""Generation throughput of the synthetic fingerprint generator (masters/s, impressions/s per profile).

Usage: .venv/bin/python bench/bench_synth.py [--fingers 16] [--impressions 8]

Measures, in the same run, (1) masters/s and impressions/s of each profile on one core, and (2) the parallel
generation of a dataset on all cores vs one worker (speed-up ratio), and projects the time of the issue's
target: 500 fingers x 8 impressions of the CASIA-like profile (target: < 5 min on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from data.synth.generate import generate_dataset
from data.synth.impression import render_impression
from data.synth.master import make_master
from data.synth.profiles import get_profile, profile_names


def per_profile(fingers: int, impressions: int) -> None:
    print(f"{'profile':10s} {'masters/s':>10s} {'impressions/s':>14s}  (one core, {fingers} fingers)")
    for name in profile_names():
        p = get_profile(name)
        t0 = time.perf_counter()
        masters = [make_master(f, seed=0, size=p.master_size, pattern_prior=p.pattern_prior,
                               period_px=p.period_px) for f in range(fingers)]
        t1 = time.perf_counter()
        for m in masters:
            for i in range(impressions):
                render_impression(m, p, i, seed=0)
        t2 = time.perf_counter()
        print(f"{name:10s} {fingers / (t1 - t0):10.2f} {fingers * impressions / (t2 - t1):14.1f}")


def parallel(fingers: int, impressions: int) -> None:
    cores = os.cpu_count() or 1
    times = {}
    for workers in (1, cores):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            generate_dataset("casia", fingers=fingers, impressions=impressions, seed=0, out=tmp,
                             workers=workers, progress=False)
            times[workers] = time.perf_counter() - t0
    per_finger = times[cores] / fingers
    print(f"casia dataset {fingers}x{impressions}: 1 worker {times[1]:.1f} s, {cores} workers {times[cores]:.1f} s "
          f"(speed-up {times[1] / times[cores]:.2f}x)")
    print(f"projected 500 fingers x 8 impressions on {cores} cores: {per_finger * 500 * 8 / impressions / 60:.1f} min "
          "(target < 5 min on 2 cores)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fingers", type=int, default=16)
    ap.add_argument("--impressions", type=int, default=8)
    a = ap.parse_args()
    per_profile(max(2, a.fingers // 4), a.impressions)
    parallel(a.fingers, a.impressions)
