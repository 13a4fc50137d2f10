"""D<->sys (Gomez-Barrero et al. 2017) on constructed score distributions with a known value."""

import numpy as np
import pytest

from fedprint.attacks.unlinkability import d_sys


def test_identical_distributions_give_zero_and_disjoint_ones_one():
    rng = np.random.default_rng(0)
    s = rng.normal(0, 1, 500)
    assert d_sys(s, s)["d_sys"] == 0.0
    assert d_sys(rng.normal(10, 1, 300), rng.normal(0, 1, 400))["d_sys"] == 1.0
    assert d_sys([3, 4, 5], [0, 1, 2]) == {"d_sys": 1.0, "mated": 3, "non_mated": 3, "bins": 6}


def test_known_intermediate_value():
    # mated mass 1/2 on score 0 (shared with all non-mated mass) and 1/2 on score 1 (mated only):
    # D(0) = 0 (f_m = 1/2 < f_nm = 1), D(1) = 1 -> D_sys = 1/2
    assert d_sys([0, 1], [0, 0])["d_sys"] == pytest.approx(0.5)
    # f_m = (0.75, 0.25), f_nm = (0.25, 0.75): D(0) = 0.5 -> D_sys = 0.75 * 0.5
    assert d_sys([0, 0, 0, 1], [0, 1, 1, 1])["d_sys"] == pytest.approx(0.375)


def test_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        d_sys([], [1.0])
    with pytest.raises(ValueError, match="finite"):
        d_sys([np.nan], [1.0])
