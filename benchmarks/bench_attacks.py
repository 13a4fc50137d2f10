"""Gradient-inversion attacks on realistic synthetic prints: quality (Table 5 rows) and seconds per image.

Synthetic prints: SFinGe-style masters (:func:`fedprint.data.synth.master.make_master`), image = 255 − (ridges +
1)·127.5
inside the silhouette and 255 outside; impressions = small rotation / shift, contrast change and Gaussian noise
of the master (the project's impression generator is not used here). Inputs 64 × 64, standardised. One client
without FP-DFSN and one with FP-DFSN (β = 0.5, other parameters at their defaults) train a compact encoder
briefly; then :func:`fedprint.attacks.inversion_audit.run_inversion_audit` attacks their training batches.

Usage::

    .venv/bin/python -m benchmarks.bench_attacks --threads 2 --out /tmp/bench_attacks.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

import cv2
import numpy as np
import torch

from fedprint.attacks.inversion_audit import run_inversion_audit
from fedprint.config import TrainConfig
from fedprint.data.record import FingerprintRecord
from fedprint.data.synth.master import make_master
from fedprint.models.preprocess import InputSpec, to_tensor_batch
from fedprint.models.siamese import build_encoder
from fedprint.privacy.fpdfsn import FPDFSNParams
from fedprint.training.local_data import build_client_data
from fedprint.training.trainer import train_siamese

PRIOR = {"arch": 0.04, "tented_arch": 0.03, "left_loop": 0.34, "right_loop": 0.32, "whorl": 0.27}


def master_image(identity: int, seed: int, size: int = 128) -> np.ndarray:
    m = make_master(identity, seed=seed, size=(size, size), pattern_prior=PRIOR)
    return np.clip(np.rint(np.where(m.mask, 255.0 - (m.ridges + 1.0) * 127.5, 255.0)), 0, 255).astype(np.uint8)


def impression(master: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    h, w = master.shape
    rot = cv2.getRotationMatrix2D((w / 2, h / 2), rng.uniform(-8, 8), 1.0)
    rot[:, 2] += rng.uniform(-6, 6, size=2)
    img = cv2.warpAffine(master.astype(np.float32), rot, (w, h), borderValue=255.0)
    img = 255.0 - rng.uniform(0.7, 1.0) * (255.0 - img) + rng.normal(0, 8, size=img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def synthetic_records(fingers: Sequence[int], impressions: int, seed: int) -> list[FingerprintRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for f in fingers:
        m = master_image(int(f), seed)
        out += [FingerprintRecord(identity=f"synth-{f:04d}", impression=i, image=impression(m, rng),
                                  domain="synth") for i in range(impressions)]
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fingers", type=int, default=12)
    ap.add_argument("--impressions", type=int, default=4)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-sizes", default="1,4,16")
    ap.add_argument("--bins", default="16,64,256")
    ap.add_argument("--ig-iterations", type=int, default=200)
    ap.add_argument("--dlg-iterations", type=int, default=20)
    ap.add_argument("--attacks", default="imprint,imprint_fedavg,dlg,ig")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    records = synthetic_records(range(args.fingers), args.impressions, args.seed)
    public = synthetic_records(range(1000, 1006), 2, args.seed + 1)  # server's own synthetic prints
    spec = InputSpec(size=args.size)
    public_x = to_tensor_batch([r.image for r in public], spec)
    print(f"data: {len(records)} images, {len(public)} public, {time.perf_counter() - t0:.1f} s", flush=True)
    results = {}
    for beta in (0.0, 0.5):
        params = FPDFSNParams(beta=beta) if beta > 0 else None
        cd = build_client_data(records, name=f"beta{beta}", spec=spec, fpdfsn=params, seed=args.seed,
                               progress=False)
        torch.manual_seed(args.seed)
        enc = build_encoder("compact", embedding_dim=64, width=16)
        t1 = time.perf_counter()
        train_siamese(enc, cd.images, cd.train_pairs, TrainConfig(epochs=args.epochs, batch_size=16,
                                                                  seed=args.seed), progress=False)
        print(f"beta={beta}: trained {args.epochs} epochs in {time.perf_counter() - t1:.1f} s", flush=True)
        t1 = time.perf_counter()
        out = run_inversion_audit(
            enc, cd, None, attacks=args.attacks.split(","),
            batch_sizes=[int(b) for b in args.batch_sizes.split(",")],
            bins=[int(k) for k in args.bins.split(",")], seed=args.seed, spec=spec, fpdfsn_params=params,
            fpdfsn_seed=args.seed, public_inputs=public_x, max_optimisation_pairs=1,
            dlg_iterations=args.dlg_iterations, ig_iterations=args.ig_iterations, ig_restarts=1)
        print(f"beta={beta}: audit {time.perf_counter() - t1:.1f} s, threshold {out['threshold']:.3f}, "
              f"classical matcher: {out['classical_matcher']}", flush=True)
        for r in out["table"]:
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
        results[str(beta)] = {"table": out["table"], "threshold": out["threshold"], "notes": out["notes"]}
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1, default=float)
    return results


if __name__ == "__main__":
    main()
