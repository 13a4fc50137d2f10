"""Raw forward+backward throughput of a Siamese encoder on random tensors (no data pipeline, no optimiser).

The reference the trainer benchmark (``benchmarks/bench_trainer.py``) compares against: a training step can never
be faster than this. Usage::

    .venv/bin/python -m benchmarks.bench_encoder                      # compact, 128 px, batch 32, 2 threads
    .venv/bin/python -m benchmarks.bench_encoder --encoder resnet18 --steps 5

Prints one JSON object: encoder, parameters, batch, size, threads, steps, seconds, samples_per_s (images
through forward + backward per second; a Siamese pair is two samples) and ms_per_batch. The machine may be
shared: repeat a run and quote the median if the numbers scatter.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from fedprint.models.siamese import ENCODERS, build_encoder


def bench(encoder: str = "compact", batch: int = 32, size: int = 128, threads: int = 2, steps: int = 10,
          warmup: int = 2, embedding_dim: int = 128, seed: int = 0) -> dict:
    """Time ``steps`` forward+backward passes of ``encoder`` on a random (batch, 1, size, size) tensor."""
    if min(batch, size, threads, steps) < 1 or warmup < 0:
        raise ValueError("bench: batch, size, threads and steps must be >= 1 and warmup >= 0")
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    model = build_encoder(encoder, embedding_dim)
    model.train()
    x = torch.randn(batch, 1, size, size)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        model(x).pow(2).sum().backward()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return {
        "encoder": encoder,
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": batch,
        "size": size,
        "threads": threads,
        "steps": steps,
        "seconds": round(sum(times), 3),
        "samples_per_s": round(batch * steps / sum(times), 1),
        "samples_per_s_median_step": round(batch / med, 1),
        "ms_per_batch": round(1000 * med, 1),
        "torch": torch.__version__,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encoder", choices=ENCODERS, default="compact")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--embedding-dim", type=int, default=128)
    a = p.parse_args(argv)
    print(json.dumps(bench(a.encoder, a.batch, a.size, a.threads, a.steps, a.warmup, a.embedding_dim)))


if __name__ == "__main__":
    main()
