"""Training throughput of the P x K recipe vs Yan et al. 2025's one-pair-per-two-images trainer, in the same run.

    .venv/bin/python -m benchmarks.bench_trainer_pk [--size 128] [--width 16] [--threads 2] [--seconds 40]

Both trainers (``fedprint.training.trainer.train_siamese`` with ``sampler = "pk"`` and ``"pairs"``) run on the same
synthetic CASIA-like fingers, input size, encoder and thread count, for about the same wall time each;
printed: images embedded per second and contrastive pairs scored per second, and the ratio P x K / pairs.
Augmentation is on for both (as in training). The figure that matters is pairs scored per second: one P x K
batch of 64 images scores 2,016 pairs; a pair batch of 32 pairs embeds 64 images to score 32.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from fedprint.config import TrainConfig
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import new_encoder
from fedprint.training.local_data import build_client_data
from fedprint.training.trainer import train_siamese


def run(data, cfg: TrainConfig, width: int, seconds: float) -> tuple[float, float]:
    """(images/s, pairs scored/s) of ``cfg``'s sampler, epochs added until ``seconds`` have passed."""
    net = new_encoder("compact", 128, 0, width=width)
    train_siamese(net, data.images, data.train_pairs, replace(cfg, epochs=1), progress=False)  # warm-up
    images = pairs = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        hist = train_siamese(net, data.images, data.train_pairs, replace(cfg, epochs=1), progress=False)
        pairs += hist[0]["pairs"]
        images += hist[0]["images"]
    dt = time.perf_counter() - t0
    return images / dt, pairs / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=40.0, help="timed seconds per trainer")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    prof = get_profile("casia")
    records = [r for f in range(40) for r in finger_records(prof, f, 6, seed=5)]
    spec = InputSpec(size=a.size, crop="print", dpi=250.0)
    data = build_client_data(records, name="bench", spec=spec, seed=0, progress=False)
    pk = TrainConfig(sampler="pk", p=16, k=4, seed=0)
    pairs = TrainConfig(sampler="pairs", batch_size=32, seed=0)
    ip, sp = run(data, pairs, a.width, a.seconds)
    ik, sk = run(data, pk, a.width, a.seconds)
    print(f"input {a.size} px, compact width {a.width}, {a.threads} threads, {len(data.split.train)} training images")
    print(f"pairs trainer (Yan et al. 2025): {ip:8.1f} images/s {sp:10.1f} pairs scored/s")
    print(f"P x K trainer (16 x 4)  : {ik:8.1f} images/s {sk:10.1f} pairs scored/s")
    print(f"ratio P x K / pairs     : {ik / ip:8.2f} images/s {sk / sp:10.1f} x pairs scored/s")


if __name__ == "__main__":
    main()
