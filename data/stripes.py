"""Toy fingerprint stand-ins for fast tests and benchmarks: oriented sinusoidal stripes, one pattern per finger.

Each finger gets its own orientation, period and phase; its impressions add a small shift and Gaussian noise.
They are distinguishable but not identical, so a verifier has something to learn in seconds. They are not
fingerprints (no minutiae, no singular points): use :mod:`fedprint.data.synth` for anything that is measured.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from fedprint.data.record import FingerprintRecord


def stripe_records(n_fingers: int = 6, n_impressions: int = 4, size: int = 48, domain: str = "toy",
                   seed: int = 0) -> list[FingerprintRecord]:
    """``n_fingers`` x ``n_impressions`` stripe images of ``size`` x ``size`` px (uint8), identities
    ``<domain>-000`` ... ; period 5-10 px, shift ±2 px, noise σ = 15 grey levels."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    records = []
    for f in range(n_fingers):
        theta, period = rng.uniform(0, np.pi), rng.uniform(5, 10)
        for i in range(n_impressions):
            dx, dy = rng.uniform(-2, 2, size=2)
            phase = (np.cos(theta) * (xx + dx) + np.sin(theta) * (yy + dy)) * 2 * np.pi / period
            img = 128 + 90 * np.sin(phase) + rng.normal(0, 15, size=(size, size))
            records.append(FingerprintRecord(identity=f"{domain}-{f:03d}", impression=i,
                                             image=np.clip(img, 0, 255).astype(np.uint8), domain=domain))
    return records


def write_generic(records: list[FingerprintRecord], root: str | Path) -> Path:
    """Write records in the ``generic`` layout, ``<root>/<identity>/<impression>.png``; returns ``root``."""
    root = Path(root)
    for r in records:
        d = root / r.identity
        d.mkdir(parents=True, exist_ok=True)
        if not cv2.imwrite(str(d / f"{r.impression}.png"), r.image):
            raise OSError(f"could not write {d / f'{r.impression}.png'}")
    return root
