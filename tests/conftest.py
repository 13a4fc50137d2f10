"""Shared fixtures: tiny synthetic fingerprint-like records (no generator, no disk)."""

from __future__ import annotations

import numpy as np
import pytest

from data.record import FingerprintRecord


def stripe_records(n_fingers: int = 6, n_impressions: int = 4, size: int = 48, domain: str = "toy",
                   seed: int = 0) -> list[FingerprintRecord]:
    """Each finger = oriented sinusoidal stripes with its own angle / period / phase; impressions add a small
    shift and noise. Distinguishable, but not trivially identical, so training has something to learn."""
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


@pytest.fixture
def toy_records() -> list[FingerprintRecord]:
    return stripe_records()
