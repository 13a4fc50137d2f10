"""Synthetic shadow populations for membership inference: fingers that never occur in a run's data."""

from __future__ import annotations

import cv2
import numpy as np

from fedprint.data.record import FingerprintRecord

#: Natural fingerprint class frequencies (arch, tented arch, left loop, right loop, whorl).
NATURAL_PATTERNS = {"arch": 3.7, "tented_arch": 2.9, "left_loop": 33.8, "right_loop": 31.7, "whorl": 27.9}


def synthetic_population(n_fingers: int, n_impressions: int, *, seed: int, size: int = 160,
                         domain: str = "shadow", jitter_deg: float = 12.0, jitter_px: float = 8.0,
                         noise_sd: float = 12.0) -> list[FingerprintRecord]:
    """A population of synthetic fingers: Yan et al. 2025-style master prints with jittered impressions.

    Parameters
    ----------
    n_fingers, n_impressions : int
        Fingers (>= 2) and impressions per finger (>= 2).
    seed : int
        Population seed (>= 0); different seeds give disjoint fingers.
    size : int
        Side of the square 500-dpi master canvas in pixels (default 160, >= 64).
    domain : str
        Domain tag and identity prefix (identities are ``"<domain>-s<seed>-<i>"``).
    jitter_deg, jitter_px, noise_sd : float
        Per-impression rotation range ±deg, shift range ±px, Gaussian noise sd in gray levels.

    Returns
    -------
    list of FingerprintRecord
        Gray uint8 images (dark ridges on light background), ordered by finger then impression.
    """
    from fedprint.data.synth.master import make_master

    if n_fingers < 2 or n_impressions < 2:
        raise ValueError(f"n_fingers and n_impressions: expected >= 2, got {n_fingers} and {n_impressions}")
    out = []
    centre = ((size - 1) / 2.0, (size - 1) / 2.0)
    for f in range(n_fingers):
        m = make_master(f, seed=seed, size=(size, size), pattern_prior=NATURAL_PATTERNS)
        base = np.where(m.mask, 128.0 - 100.0 * m.ridges, 230.0).astype(np.float32)
        for i in range(n_impressions):
            rng = np.random.default_rng([seed, f, i, 7])
            rot = cv2.getRotationMatrix2D(centre, float(rng.uniform(-jitter_deg, jitter_deg)), 1.0)
            rot[:, 2] += rng.uniform(-jitter_px, jitter_px, size=2)
            img = cv2.warpAffine(base, rot, (size, size), flags=cv2.INTER_LINEAR, borderValue=230.0)
            img = 128.0 + rng.uniform(0.8, 1.1) * (img - 128.0) + rng.normal(0.0, noise_sd, img.shape)
            out.append(FingerprintRecord(identity=f"{domain}-s{seed}-{f:04d}", impression=i,
                                         image=np.clip(img, 0, 255).astype(np.uint8), domain=domain))
    return out
