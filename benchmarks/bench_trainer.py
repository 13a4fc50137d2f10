"""Training throughput of the local trainer vs the raw compute limit of the same network, in the same run.

    .venv/bin/python -m benchmarks.bench_trainer [--size 128] [--threads 2] [--pairs 640]

Measures (1) raw forward+backward samples/s of the compact encoder on random tensors (``bench_encoder.bench``;
batch = 2 x 32 images, as one Siamese step) and (2) samples/s of ``fedprint.training.trainer.train_siamese`` on real
synthetic fingerprints (pair sampling, indexing, loss, Adam step included), and prints the ratio: how close the
input pipeline lets training run to the compute limit.
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.bench_encoder import bench
from fedprint.config import TrainConfig
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import new_encoder
from fedprint.training.local_data import build_client_data
from fedprint.training.trainer import train_siamese


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=640, help="training pairs per timed epoch")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    raw = bench("compact", batch=64, size=a.size, threads=a.threads, steps=8)
    prof = get_profile("casia")
    records = [r for f in range(16) for r in finger_records(prof, f, 6, seed=0)]
    data = build_client_data(records, name="bench", spec=InputSpec(size=a.size), seed=0, progress=False)
    net = new_encoder("compact", 128, 0)
    cfg = TrainConfig(epochs=1, max_pairs_per_epoch=a.pairs, seed=0)
    train_siamese(net, data.images, data.train_pairs, TrainConfig(epochs=1, max_pairs_per_epoch=64), progress=False)
    t0 = time.perf_counter()
    hist = train_siamese(net, data.images, data.train_pairs, cfg, progress=False)
    dt = time.perf_counter() - t0
    trained = 2 * hist[0]["pairs"] / dt
    print(f"raw forward+backward (random tensors): {raw['samples_per_s']:.1f} samples/s")
    print(f"train_siamese on fingerprints:         {trained:.1f} samples/s ({hist[0]['pairs']} pairs in {dt:.1f} s)")
    print(f"ratio trainer / raw: {trained / raw['samples_per_s']:.2f}")


if __name__ == "__main__":
    main()
