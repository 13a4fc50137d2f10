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
    ``<domain>-000`` ... ; period 5-10 px, shift ±2 px, noise σ = 15 grey levels.

    Parameters
    ----------
    n_fingers : int
        Number of identities, each with its own orientation, period and phase.
    n_impressions : int
        Images per identity (impressions 0 .. n_impressions - 1).
    size : int
        Side of each square image, px.
    domain : str
        Domain name of the records, also the prefix of their identities.
    seed : int
        Seed of every random choice: the same arguments give the same images.

    Returns
    -------
    list of FingerprintRecord
        Finger by finger, impression by impression; ``dpi`` None, no ground truth.

    See Also
    --------
    write_generic : the records as a folder that ``fedprint evaluate --data`` and experiments read.
    fedprint.data.synth.generate.generate_dataset : realistic synthetic prints.

    Examples
    --------
    >>> records = stripe_records(n_fingers=3, n_impressions=2, size=48)
    >>> len(records), records[0].identity, records[-1].identity, records[-1].impression
    (6, 'toy-000', 'toy-002', 1)
    >>> records[0].image.shape, records[0].image.dtype
    ((48, 48), dtype('uint8'))
    """
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
    """Write records in the ``generic`` layout, ``<root>/<identity>/<impression>.png``; returns ``root``.

    Parameters
    ----------
    records : list of FingerprintRecord
        Records with uint8 images (e.g. :func:`stripe_records`).
    root : str or Path
        Folder to write into (created).

    Returns
    -------
    Path
        ``root``.

    Raises
    ------
    OSError
        If an image cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> from fedprint.data.datasets import load_dataset
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     root = write_generic(stripe_records(n_fingers=2, n_impressions=3), tmp)
    ...     back = load_dataset("generic", root)
    >>> len(back), back[0].identity, back[0].impression
    (6, 'toy-000', 0)
    """
    root = Path(root)
    for r in records:
        d = root / r.identity
        d.mkdir(parents=True, exist_ok=True)
        if not cv2.imwrite(str(d / f"{r.impression}.png"), r.image):
            raise OSError(f"could not write {d / f'{r.impression}.png'}")
    return root
