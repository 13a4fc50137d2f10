"""Tests for data.minutiae: crossing number on synthetic skeletons, filters, directions, the full pipeline."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from fedprint.data.minutiae import (
    binarize,
    crossing_number,
    extract_minutiae,
    minutiae_from_skeleton,
    remove_spurious,
    segment,
    thin,
)
from fedprint.data.record import BIFURCATION, ENDING

FVC = Path(__file__).resolve().parents[3] / "shared" / "data" / "real" / "fvc_300x300_b"


def _line(shape=(60, 60), row=30, c0=10, c1=50) -> np.ndarray:
    sk = np.zeros(shape, bool)
    sk[row, c0:c1] = True
    return sk


def _y_shape() -> np.ndarray:
    """Stem from (row 40, col 10) to (40, 40), then two diagonal branches up-right and down-right."""
    sk = np.zeros((80, 80), bool)
    sk[40, 10:40] = True
    for i in range(25):
        sk[40 - i, 40 + i] = True
        sk[40 + i, 40 + i] = True
    return sk


def _angdiff(a: float, b: float) -> float:
    return abs((a - b + np.pi) % (2 * np.pi) - np.pi)


def test_crossing_number_values():
    sk = _y_shape()
    cn = crossing_number(sk)
    assert cn[40, 10] == 1  # stem tip
    assert cn[40, 40] == 3  # junction
    assert cn[40, 20] == 2  # ridge interior


def test_line_has_two_endings():
    m = minutiae_from_skeleton(_line(), border=0)
    assert m.shape == (2, 4) and m.dtype == np.float64
    assert set(m[:, 3]) == {ENDING}
    assert sorted(m[:, 0].tolist()) == [10, 49] and set(m[:, 1]) == {30}


def test_y_shape_has_three_endings_one_bifurcation():
    m = minutiae_from_skeleton(_y_shape(), border=0)
    assert (m[:, 3] == ENDING).sum() == 3
    assert (m[:, 3] == BIFURCATION).sum() == 1
    bif = m[m[:, 3] == BIFURCATION][0]
    assert tuple(bif[:2]) == (40, 40)
    # between the two branches (which go right), away from the stem (which comes from the left)
    assert _angdiff(bif[2], 0.0) < 0.2


def test_ring_has_no_minutiae():
    img = np.zeros((80, 80), np.uint8)
    cv2.circle(img, (40, 40), 20, 1, 1)
    m = minutiae_from_skeleton(thin(img > 0), border=0)
    assert m.shape == (0, 4)


def test_ending_direction_on_horizontal_line():
    m = minutiae_from_skeleton(_line(), border=0)
    left = m[np.argmin(m[:, 0])]
    right = m[np.argmax(m[:, 0])]
    # along the ridge, away from the ending
    assert _angdiff(left[2], 0.0) < 1e-9
    assert _angdiff(right[2], np.pi) < 1e-9
    assert np.all((m[:, 2] >= 0) & (m[:, 2] < 2 * np.pi))


def test_ending_direction_down_uses_image_axes():
    sk = np.zeros((60, 60), bool)
    sk[10:50, 30] = True  # vertical line; the top ending's ridge goes down the image (+y)
    m = minutiae_from_skeleton(sk, border=0)
    top = m[np.argmin(m[:, 1])]
    assert _angdiff(top[2], np.pi / 2) < 1e-9


def test_orientation_snaps_direction_keeping_sense():
    sk = _line()
    theta = np.full(sk.shape, 0.1)  # slightly tilted orientation field
    m = minutiae_from_skeleton(sk, border=0, orientation=theta)
    left = m[np.argmin(m[:, 0])]
    right = m[np.argmax(m[:, 0])]
    assert _angdiff(left[2], 0.1) < 1e-9
    assert _angdiff(right[2], 0.1 + np.pi) < 1e-9


def test_border_filter_image_edge_and_mask():
    sk = _line(c0=3, c1=50)  # endings at columns 3 and 49 of a 60-wide image
    assert len(minutiae_from_skeleton(sk, border=0)) == 2
    m = minutiae_from_skeleton(sk, border=5)  # column 3 is 4 px from outside the image -> dropped
    assert m.shape == (1, 4) and m[0, 0] == 49
    mask = np.zeros_like(sk)
    mask[:, :45] = True  # foreground ends at column 44: both endings near / outside its border
    assert len(minutiae_from_skeleton(sk, mask=mask, border=5)) == 0
    mask[:, :] = True
    mask[:, :20] = False  # column 3 is outside the foreground
    m = minutiae_from_skeleton(sk, mask=mask, border=5)
    assert m[:, 0].tolist() == [49]


def test_spurious_pair_removed():
    sk = _line(c0=10, c1=25) | _line(c0=28, c1=50)  # a ridge broken by a 3-px gap
    m_all = minutiae_from_skeleton(sk, border=0, min_separation=0)
    assert len(m_all) == 4
    m = minutiae_from_skeleton(sk, border=0, min_separation=6)
    assert sorted(m[:, 0].tolist()) == [10, 49]
    assert len(remove_spurious(m_all, 0)) == 4


def test_junction_pixels_merged_into_one_bifurcation():
    # A thick-ish junction where several pixels may get CN = 3 still yields a single bifurcation.
    img = np.zeros((80, 80), np.uint8)
    cv2.line(img, (10, 40), (40, 40), 1, 3)
    cv2.line(img, (40, 40), (70, 10), 1, 3)
    cv2.line(img, (40, 40), (70, 70), 1, 3)
    m = minutiae_from_skeleton(thin(img > 0), border=0)
    assert (m[:, 3] == BIFURCATION).sum() == 1
    assert (m[:, 3] == ENDING).sum() == 3


def test_empty_results_shape():
    assert minutiae_from_skeleton(np.zeros((30, 30), bool)).shape == (0, 4)
    assert minutiae_from_skeleton(_line(), border=40).shape == (0, 4)
    assert extract_minutiae(np.full((64, 64), 128, np.uint8)).shape == (0, 4)


@pytest.mark.parametrize(
    "bad",
    [np.zeros((0, 5), np.uint8), np.zeros((4, 4, 3), np.uint8), np.zeros((20, 20), np.float32), [[0, 1]]],
)
def test_extract_bad_input(bad):
    with pytest.raises(ValueError, match="image"):
        extract_minutiae(bad)


def test_skeleton_bad_input():
    with pytest.raises(ValueError, match="skeleton"):
        minutiae_from_skeleton(np.zeros(10, bool))
    with pytest.raises(ValueError, match="skeleton"):
        minutiae_from_skeleton(np.full((5, 5), 2))
    with pytest.raises(ValueError, match="mask"):
        minutiae_from_skeleton(_line(), mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="border"):
        minutiae_from_skeleton(_line(), border=-1)


def _synthetic_print(size=200, period=9.0) -> np.ndarray:
    """Concentric ridges (dark) with a broken ridge: a tiny fingerprint-like test image."""
    yy, xx = np.mgrid[:size, :size].astype(float)
    r = np.hypot(xx - size / 2, yy - size / 2 - 40)
    img = 128 + 100 * np.cos(2 * np.pi * r / period)
    return np.clip(img, 0, 255).astype(np.uint8)


def test_pipeline_on_clean_pattern_has_few_minutiae():
    img = _synthetic_print()
    mask = segment(img)
    assert mask.mean() > 0.8
    ridges = binarize(img, mask)
    assert 0.3 < ridges[mask].mean() < 0.7
    # dark pixels are ridges
    assert ridges[img < 60].mean() > 0.9
    m = extract_minutiae(img, border=15)
    assert len(m) <= 4  # clean concentric ridges: (almost) no minutiae away from the centre


@pytest.mark.skipif(not FVC.is_dir(), reason="real FVC samples absent")
def test_real_fvc_counts_plausible():
    files = sorted(FVC.glob("*_1.tif"))[:3]
    assert files
    for f in files:
        img = cv2.imread(str(f), cv2.IMREAD_GRAYSCALE)
        m = extract_minutiae(img)
        assert 15 <= len(m) <= 90, (f.name, len(m))
        assert set(np.unique(m[:, 3])) <= {ENDING, BIFURCATION}
