"""Tests of the SFinGe-style master fingerprint generator (data.synth.master and its field modules)."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.data.synth.master import PATTERNS, Master, make_master
from fedprint.data.synth.orientation import zero_pole_orientation

SIZE = (240, 220)  # small canvas: fast, still several ridges between singular points


@pytest.fixture(scope="module")
def masters() -> dict[str, Master]:
    return {p: make_master(5, seed=11, size=SIZE, pattern_prior={p: 1.0}) for p in PATTERNS}


def _poincare(theta: np.ndarray, x: float, y: float, radius: float = 6.0) -> float:
    """Poincare index of the orientation field around (x, y), in turns (+0.5 core, -0.5 delta)."""
    phi = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    xs = np.clip(np.rint(x + radius * np.cos(phi)).astype(int), 0, theta.shape[1] - 1)
    ys = np.clip(np.rint(y + radius * np.sin(phi)).astype(int), 0, theta.shape[0] - 1)
    t = theta[ys, xs].astype(float)
    d = np.diff(np.r_[t, t[0]])
    d = (d + np.pi / 2) % np.pi - np.pi / 2  # orientation differences wrapped to [-pi/2, pi/2)
    return float(d.sum() / (2 * np.pi))


def test_deterministic_and_identity_dependent():
    prior = {"left_loop": 1.0, "whorl": 1.0}
    a = make_master(3, seed=1, size=SIZE, pattern_prior=prior)
    b = make_master(3, seed=1, size=SIZE, pattern_prior=prior)
    c = make_master(4, seed=1, size=SIZE, pattern_prior=prior)
    for name in ("ridges", "mask", "orientation", "period", "cores", "deltas", "minutiae"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.pattern == b.pattern
    assert not np.array_equal(a.ridges, c.ridges)
    assert np.mean(np.sign(a.ridges[a.mask & c.mask]) != np.sign(c.ridges[a.mask & c.mask])) > 0.3


def test_shapes_dtypes_ranges(masters):
    for p, m in masters.items():
        assert m.pattern == p and m.identity == 5
        assert m.ridges.shape == m.mask.shape == m.orientation.shape == m.period.shape == SIZE
        assert m.ridges.dtype == np.float32 and m.orientation.dtype == np.float32
        assert m.period.dtype == np.float32 and m.mask.dtype == bool
        assert m.cores.dtype == m.deltas.dtype == m.minutiae.dtype == np.float64
        assert m.ridges.min() >= -1 and m.ridges.max() <= 1
        assert np.all(m.ridges[~m.mask] == 0)
        # both ridges and valleys reach their centres
        assert np.mean(m.ridges[m.mask] > 0.9) > 0.1 and np.mean(m.ridges[m.mask] < -0.9) > 0.1
        assert 0.4 < m.mask.mean() < 0.95
        assert m.orientation.min() >= 0 and m.orientation.max() < np.pi
        assert m.period.min() >= 8.0 and m.period.max() <= 11.0
        mi = m.minutiae
        assert mi.ndim == 2 and mi.shape[1] == 4
        assert set(np.unique(mi[:, 3])) <= {1.0, 3.0}
        assert np.all((mi[:, 2] >= 0) & (mi[:, 2] < 2 * np.pi))
        assert np.all(m.mask[mi[:, 1].astype(int), mi[:, 0].astype(int)])


@pytest.mark.parametrize(
    "pattern, n_cores, n_deltas",
    [("arch", 0, 0), ("tented_arch", 1, 1), ("left_loop", 1, 1), ("right_loop", 1, 1), ("whorl", 2, 2)],
)
def test_singular_points_per_class(masters, pattern, n_cores, n_deltas):
    m = masters[pattern]
    assert m.cores.shape == (n_cores, 2) and m.deltas.shape == (n_deltas, 2)
    for x, y in m.cores:
        assert m.mask[int(y), int(x)]
        assert _poincare(m.orientation, x, y) == pytest.approx(0.5, abs=0.05)
    for x, y in m.deltas:
        assert _poincare(m.orientation, x, y) == pytest.approx(-0.5, abs=0.05)
    if pattern == "left_loop":
        assert m.deltas[0, 0] > m.cores[0, 0]
    if pattern == "right_loop":
        assert m.deltas[0, 0] < m.cores[0, 0]
    if pattern == "tented_arch":
        dx, dy = m.deltas[0] - m.cores[0]
        assert dy > 0 and abs(dx) < 0.5 * dy


def test_zero_pole_core_and_delta_index():
    theta = zero_pole_orientation((100, 100), np.array([[40.0, 40.0]]), np.array([[60.0, 75.0]]))
    assert _poincare(theta, 40, 40) == pytest.approx(0.5, abs=0.02)
    assert _poincare(theta, 60, 75) == pytest.approx(-0.5, abs=0.02)
    assert _poincare(theta, 15, 85) == pytest.approx(0.0, abs=0.02)


@pytest.mark.parametrize("period_px", [(8.0, 9.0), (10.0, 11.5)])
def test_measured_ridge_period_in_range(period_px):
    m = make_master(2, seed=3, size=(256, 256), pattern_prior={"arch": 1.0}, period_px=period_px)
    patch = m.ridges[64:192, 64:192].astype(float)
    assert m.mask[64:192, 64:192].all()
    spec = np.abs(np.fft.fft2(patch * np.outer(np.hanning(128), np.hanning(128))))
    fy = np.fft.fftfreq(128)[:, None]
    fx = np.fft.fftfreq(128)[None, :]
    radius = np.hypot(fx, fy)
    spec[radius < 1 / 20] = 0
    measured = 1.0 / radius.flat[np.argmax(spec)]
    lo, hi = period_px
    assert lo - 0.6 <= measured <= hi + 0.6, (measured, period_px)


def test_minutiae_count_plausible():
    counts = [
        len(make_master(i, seed=0, size=(400, 360), pattern_prior={p: 1.0}).minutiae)
        for i, p in enumerate(("arch", "left_loop", "whorl"))
    ]
    # Real 500-dpi plain prints hold about 30-60 minutiae; arches (smoothest field) come out lowest here.
    assert all(15 <= c <= 120 for c in counts) and 35 <= np.mean(counts) <= 100, counts


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"pattern_prior": {"loop": 1.0}}, "unknown pattern"),
        ({"pattern_prior": {"arch": 0.0, "whorl": 0.0}}, "sum to > 0"),
        ({"pattern_prior": {"arch": -1.0}}, ">= 0"),
        ({"pattern_prior": {}}, "non-empty"),
        ({"size": (0, 100)}, "size"),
        ({"size": (-5, 100)}, "size"),
        ({"size": (100,)}, "size"),
        ({"period_px": (9.0, 8.0)}, "period_px"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"seed": 0, "size": (128, 128), "pattern_prior": {"arch": 1.0}} | kwargs
    with pytest.raises(ValueError, match=match):
        make_master(0, **args)


def test_siblings_share_the_ridge_flow_and_differ_in_minutiae():
    prior = {"left_loop": 1.0, "whorl": 1.0, "arch": 1.0}
    a, b = (make_master(i, seed=1, size=SIZE, pattern_prior=prior, family=0) for i in (0, 1))
    other = make_master(2, seed=1, size=SIZE, pattern_prior=prior, family=1)
    assert a.pattern == b.pattern
    for name in ("mask", "orientation", "period", "cores", "deltas"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.orientation, other.orientation)
    # other seed spots: ridges out of phase over a good part of the print, so other minutiae
    both = a.mask & b.mask
    assert np.mean(np.sign(a.ridges[both]) != np.sign(b.ridges[both])) > 0.15
    assert not np.array_equal(a.minutiae, b.minutiae)
    # a master is the same whichever sibling is drawn first, and identity 0 of family 0 is not the plain master 0
    np.testing.assert_array_equal(make_master(1, seed=1, size=SIZE, pattern_prior=prior, family=0).ridges, b.ridges)
    assert not np.array_equal(make_master(0, seed=1, size=SIZE, pattern_prior=prior).ridges, a.ridges)
    with pytest.raises(ValueError, match="family"):
        make_master(0, seed=1, size=SIZE, pattern_prior=prior, family=-1)
