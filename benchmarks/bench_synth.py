"""Throughput of the synthetic fingerprint generator: masters/s and impressions/s per profile, 1 worker vs all
cores in the same run (parallel speed-up), and the projected time of the target dataset.

Usage: .venv/bin/python -m benchmarks.bench_synth [--fingers 6] [--impressions 8] [--profiles casia ...]
       [--e2e-fingers 12]

Per profile, two phases are timed with 1 worker (in this process) and with all cores (a warmed-up process pool,
one task per finger): (1) masters (``make_master``), (2) impressions of those masters (``render_impression``).
Then the real thing, ``generate_dataset`` of the CASIA-like profile (masters + impressions + PNG + ground truth,
spawned workers included), with 1 worker and with all cores; its per-finger time projects the target
500 fingers x 8 impressions of ``casia`` (goal: < 5 min on 2 cores). The machine may be shared: numbers are
wall-clock and only as good as the idle cores behind them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import cv2

from fedprint.data.synth.generate import generate_dataset
from fedprint.data.synth.impression import render_impression
from fedprint.data.synth.master import Master, make_master
from fedprint.data.synth.profiles import Profile, get_profile, profile_names


def _init() -> None:
    cv2.setNumThreads(1)


def _master(args: tuple[Profile, int]) -> Master:
    p, f = args
    return make_master(f, seed=0, size=p.master_size, pattern_prior=p.pattern_prior, period_px=p.period_px)


def _impressions(args: tuple[Profile, Master, int]) -> int:
    p, m, k = args
    for i in range(k):
        render_impression(m, p, i, seed=0)
    return k


def _timed(pool: ProcessPoolExecutor | None, fn, tasks: list) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = list(pool.map(fn, tasks, chunksize=1)) if pool else [fn(t) for t in tasks]
    return time.perf_counter() - t0, out


def per_profile(names: list[str], fingers: int, impressions: int, cores: int) -> None:
    print(f"{fingers} fingers x {impressions} impressions per profile; 1 worker vs {cores} workers")
    print(f"{'profile':10s} {'masters/s 1w':>13s} {f'{cores}w':>7s} {'speed-up':>8s}   "
          f"{'impr/s 1w':>10s} {f'{cores}w':>7s} {'speed-up':>8s}   {'ms/impr (1w)':>12s}")
    _init()
    with ProcessPoolExecutor(cores, mp_context=get_context("spawn"), initializer=_init) as pool:
        list(pool.map(abs, range(4 * cores)))  # start the workers outside the timed phases
        for name in names:
            p = get_profile(name)
            m_tasks = [(p, f) for f in range(fingers)]
            tm1, masters = _timed(None, _master, m_tasks)
            tmn, _ = _timed(pool, _master, m_tasks)
            i_tasks = [(p, m, impressions) for m in masters]
            ti1, _ = _timed(None, _impressions, i_tasks)
            tin, _ = _timed(pool, _impressions, i_tasks)
            n_imp = fingers * impressions
            print(f"{name:10s} {fingers / tm1:13.2f} {fingers / tmn:7.2f} {tm1 / tmn:7.2f}x   "
                  f"{n_imp / ti1:10.1f} {n_imp / tin:7.1f} {ti1 / tin:7.2f}x   {1000 * ti1 / n_imp:12.1f}")


def end_to_end(fingers: int, impressions: int, cores: int) -> None:
    times = {}
    for workers in (1, cores):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            generate_dataset("casia", fingers=fingers, impressions=impressions, seed=0, out=tmp,
                             workers=workers, progress=False)
            times[workers] = time.perf_counter() - t0
    print(f"generate_dataset casia {fingers} fingers x {impressions} impressions: 1 worker {times[1]:.1f} s, "
          f"{cores} workers {times[cores]:.1f} s, speed-up {times[1] / times[cores]:.2f}x")
    per_finger = times[cores] / fingers * 8 / impressions
    print(f"projected casia 500 fingers x 8 impressions on {cores} cores: {per_finger * 500 / 60:.1f} min "
          f"(target < 5 min on 2 cores)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fingers", type=int, default=6, help="fingers per profile for the per-profile phases")
    ap.add_argument("--impressions", type=int, default=8)
    ap.add_argument("--profiles", type=lambda t: [v for v in t.split(",") if v.strip()], default=None,
                    help=f"comma-separated subset of {','.join(profile_names())} (default: all)")
    ap.add_argument("--e2e-fingers", type=int, default=12, help="fingers of the end-to-end casia run (0: skip)")
    a = ap.parse_args()
    n_cores = os.cpu_count() or 1
    unknown = sorted(set(a.profiles or []) - set(profile_names()))
    if unknown:
        ap.error(f"--profiles: unknown profile(s) {unknown}; expected some of {profile_names()}")
    per_profile(a.profiles or profile_names(), a.fingers, a.impressions, n_cores)
    if a.e2e_fingers:
        end_to_end(a.e2e_fingers, a.impressions, n_cores)
