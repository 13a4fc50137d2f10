"""fedprint.data.minutiae_backends: one table from every extractor, in FedPrint's conventions."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from fedprint.data.minutiae import extract_minutiae
from fedprint.data.minutiae_backends import BACKENDS, available, default_backend, extract, resolve_backend
from fedprint.data.record import BIFURCATION, ENDING

REAL = Path(os.environ.get("FEDPRINT_REAL_SAMPLES") or Path(__file__).resolve().parents[2].parent / "shared" / "data"
            / "real")
DB1 = REAL / "fvc2002_db1_b"


def _print(name: str) -> np.ndarray:
    if not DB1.is_dir():
        pytest.skip(f"real prints not found at {DB1} (set FEDPRINT_REAL_SAMPLES)")
    return cv2.imread(str(DB1 / f"{name}.tif"), cv2.IMREAD_GRAYSCALE)


def test_resolve_names_the_option_and_the_cure():
    assert resolve_backend("auto") == default_backend() == ("nbis" if available("nbis") else "crossing")
    with pytest.raises(ValueError, match="--minutiae-backend: expected auto or one of nbis, leader, crossing"):
        resolve_backend("mindtct")
    with pytest.raises(ValueError, match=r"\[minutiae\] backend"):
        resolve_backend("nope", option="[minutiae] backend")


def test_bad_images_are_refused():
    with pytest.raises(ValueError, match="image: expected a 2-D uint8 array"):
        extract(np.zeros((8, 8)), "crossing")


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_agrees_with_the_crossing_number_directions_on_a_real_print(backend):
    if not available(backend):
        pytest.skip(f"the {backend} backend is not installed (pip install 'fedprint[classical]')")
    img = _print("101_1")
    m = extract(img, backend)
    assert m.ndim == 2 and m.shape[1] == 5 and len(m) >= 10
    assert set(np.unique(m[:, 3])) <= {ENDING, BIFURCATION}
    assert np.all((m[:, 2] >= 0) & (m[:, 2] < 2 * np.pi)) and np.all((m[:, 4] >= 0) & (m[:, 4] <= 1))
    assert np.all((m[:, 0] >= 0) & (m[:, 0] < img.shape[1]) & (m[:, 1] >= 0) & (m[:, 1] < img.shape[0]))
    ours = extract_minutiae(img)
    gaps = []
    for o in ours:  # the same minutia found by both: its directions agree (a mirrored or turned angle would not)
        d = np.hypot(m[:, 0] - o[0], m[:, 1] - o[1])
        if d.min() <= 4:
            gaps.append(abs(np.angle(np.exp(1j * (m[d.argmin(), 2] - o[2])))))
    assert len(gaps) >= 5 and np.median(gaps) < np.deg2rad(15)
