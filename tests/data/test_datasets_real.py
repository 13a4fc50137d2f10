"""data.datasets on the real samples in ../shared/data/real/ (skipped when that folder is absent)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from fedprint.data.datasets import detect_layout, load_dataset

REAL = Path(__file__).parents[2].parent / "shared" / "data" / "real"
FVC = REAL / "fvc_300x300_b"
SOCOFING = REAL / "socofing_sample"


@pytest.mark.skipif(not FVC.is_dir(), reason=f"real FVC sample not present at {FVC}")
def test_real_fvc_sample():
    assert detect_layout(FVC) == "fvc"
    recs = load_dataset("fvc", FVC)
    assert len(recs) == 72
    assert sorted({r.identity for r in recs}, key=int) == [str(f) for f in range(101, 110)]
    for ident in {r.identity for r in recs}:
        assert sorted(r.impression for r in recs if r.identity == ident) == list(range(8))
    assert all(r.image.shape == (300, 300) and r.image.dtype == np.uint8 for r in recs)
    assert {r.domain for r in recs} == {"fvc"}
    assert [r.key for r in recs] == sorted((r.key for r in recs), key=lambda k: tuple(map(int, k.split("/"))))
    # Lossless: identical to an independent decoder (OpenCV) on the file named in the record.
    for rec in (recs[0], recs[-1]):
        assert Path(rec.source).name == f"{rec.identity}_{rec.impression + 1}.tif"
        np.testing.assert_array_equal(rec.image, cv2.imread(rec.source, cv2.IMREAD_UNCHANGED))
    # Genuine impressions of one finger are different images (the loader did not duplicate a file).
    assert not np.array_equal(recs[0].image, recs[1].image)


@pytest.mark.skipif(not SOCOFING.is_dir(), reason=f"real SOCOFing sample not present at {SOCOFING}")
def test_real_socofing_sample():
    assert detect_layout(SOCOFING) == "socofing"
    recs = load_dataset("socofing", SOCOFING)
    assert len(recs) == 8
    real = {r.identity: r for r in recs if r.alteration is None}
    altered = [r for r in recs if r.alteration is not None]
    assert set(real) == {"1__M_Left_index", "1__M_Left_middle", "1__M_Left_thumb", "100__M_Left_index"}
    assert sorted(r.alteration for r in altered) == ["Easy/CR", "Easy/Obl", "Medium/CR", "Medium/Zcut"]
    assert all(r.image.shape == (103, 96) and r.domain == "socofing" for r in recs)

    # The central-rotation alteration is linked to the real impression it alters ...
    (cr,) = [r for r in altered if r.identity == "1__M_Left_index"]
    base = real["1__M_Left_index"]
    assert (cr.impression, cr.alteration) == (base.impression, "Easy/CR")
    keys = [r.key for r in recs]
    assert keys.index(cr.key) == keys.index(base.key) + 1  # the alteration sorts right after its real image
    # ... and really is that print: most pixels agree outside the rotated centre (measured 93%).
    assert np.mean(cr.image == base.image) > 0.8
    assert np.mean(cr.image == real["1__M_Left_middle"].image) < 0.5

    # The 32-bit RGBA real image was read as its (equal) colour channels, not recomputed.
    raw = cv2.imread(base.source, cv2.IMREAD_UNCHANGED)
    assert raw.ndim == 3 and raw.shape[2] == 4
    np.testing.assert_array_equal(base.image, raw[..., 0])
