"""Training and embedding throughput on every available device (CPU, and CUDA when present) in one run.

    .venv/bin/python -m benchmarks.bench_device [--size 128] [--threads 2] [--fingers 32] [--epochs 2] [--out FILE.json]

Training: ``fedprint.training.trainer.train_siamese`` with the default recipe (P x K batches, Eq. 1 over every pair of a
batch,
augmentation) on synthetic CASIA-like prints; throughput = **pairs scored per second** (the ``pairs`` field of its
history, i.e. every pair of every P x K batch) and images (forward passes) per second, after one warm-up epoch.
On CUDA, with and without mixed precision (:func:`fedprint.models.device.autocast`). Embedding:
``fedprint.training.trainer.embed`` of preprocessed images, **images per second**, eval mode, batch 256. The CPU uses
``--threads`` threads. A device that is not present is reported as absent, never simulated.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from fedprint.config import TrainConfig
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import new_encoder
from fedprint.training.local_data import build_client_data
from fedprint.training.trainer import embed, train_siamese


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def measure(data, dev: torch.device, *, amp: bool, epochs: int, width: int) -> dict:
    """Training pairs/s and images/s, embedding images/s of one (device, precision)."""
    net = new_encoder("compact", 128, 0, width=width)
    cfg = TrainConfig(epochs=1, seed=0)
    train_siamese(net, data.images, data.train_pairs, cfg, progress=False, device=dev, amp=amp)  # warm-up
    _sync(dev)
    t0 = time.perf_counter()
    hist = train_siamese(net, data.images, data.train_pairs, TrainConfig(epochs=epochs, seed=1), progress=False,
                         device=dev, amp=amp)
    _sync(dev)
    dt = time.perf_counter() - t0
    pairs, images = sum(h["pairs"] for h in hist), sum(h["images"] for h in hist)
    embed(net, data.images[:64], device=dev)  # warm-up
    reps = 3
    t1 = time.perf_counter()
    for _ in range(reps):
        embed(net, data.images, device=dev)
    _sync(dev)
    de = time.perf_counter() - t1
    return {"device": dev.type, "mixed precision": bool(amp and dev.type == "cuda"),
            "train pairs scored/s": pairs / dt, "train images/s": images / dt, "train seconds": dt,
            "embed images/s": reps * len(data.images) / de}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=128, help="input side in pixels")
    ap.add_argument("--width", type=int, default=16, help="compact encoder width")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads")
    ap.add_argument("--fingers", type=int, default=32, help="synthetic fingers (6 impressions each)")
    ap.add_argument("--epochs", type=int, default=2, help="timed training epochs")
    ap.add_argument("--out", default=None, help="also write the rows as JSON here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    prof = get_profile("casia")
    records = [r for f in range(a.fingers) for r in finger_records(prof, f, 6, seed=0)]
    data = build_client_data(records, name="bench", spec=InputSpec(size=a.size), test_fraction=0.1,
                             val_fraction=0.1, seed=0, progress=False)
    runs = [(torch.device("cpu"), False)]
    if torch.cuda.is_available():
        runs += [(torch.device("cuda"), False), (torch.device("cuda"), True)]
    else:
        print("CUDA: not available on this machine (CPU only)")
    rows = [measure(data, dev, amp=amp, epochs=a.epochs, width=a.width) for dev, amp in runs]
    print(f"{len(data.images)} images of {a.size} px, compact encoder width {a.width}, CPU threads {a.threads}, "
          f"torch {torch.__version__}" + (f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available()
                                          else ""))
    for r in rows:
        print(f"{r['device']:>4} {'amp ' if r['mixed precision'] else 'fp32'}: train {r['train pairs scored/s']:10.0f} "
              f"pairs scored/s ({r['train images/s']:7.1f} images/s), embed {r['embed images/s']:8.1f} images/s")
    if len(rows) > 1:
        best = max(rows[1:], key=lambda r: r["train pairs scored/s"])
        print(f"GPU / CPU: training x{best['train pairs scored/s'] / rows[0]['train pairs scored/s']:.1f}, "
              f"embedding x{best['embed images/s'] / rows[0]['embed images/s']:.1f}")
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
