"""Asymmetric interval sketch (Fang Sec. 6.2), the embedding sketch and the entropy-loss formulas."""

import math

import numpy as np
import pytest

from fedprint.privacy.templates import embedding_sketch, entropy, interval_sketch


def test_interval_sketch_recovers_b_v_exactly_inside():
    rng = np.random.default_rng(0)
    for b, v in [(0, 1), (100, 5), (255, 8), (37, 3)]:
        s = interval_sketch.encode(b, v, 256, 8, rng)
        g = np.cumsum(s)
        assert g[0] <= 0 and g[-1] >= 256
        gaps = np.diff(g)
        assert np.all(gaps % 2 == 0) and gaps.min() >= 2 and gaps.max() <= 16
        for d in range(max(0, b - v + 1), min(256, b + v)):
            assert interval_sketch.decode(d, s) == (b, v)
        for d in (b - v - 1, b + v):  # just outside the open interval (b - v, b + v)
            if 0 <= d < 256:
                assert interval_sketch.decode(d, s) != (b, v)
    with pytest.raises(ValueError):
        interval_sketch.encode(10, 9, 256, 8, rng)


def test_interval_sketch_loss_hand_computed():
    assert entropy.interval_sketch_loss(1) == 1.0
    assert entropy.interval_sketch_loss(4) == 5.0  # 1 + 2 * 2
    assert entropy.interval_sketch_loss(8) == 7.0


def test_weighted_vault_loss_sign_error_fixed():
    # p = 3, q = 2, g = 4, t' = 1: derivation 6 log 3 - (4 - 2 - 1) log 3 - (6 - 4) log 2 = 5 log 3 - 2
    exact = 5 * math.log2(3) - 2
    assert entropy.weighted_vault_loss_derivation(3, 2, 4, 1) == pytest.approx(exact)
    assert entropy.weighted_vault_loss(3, 2, 4, 1) == pytest.approx(exact)
    # the printed form adds g log(p/(p-1)) instead of subtracting it: differs by 2 g log(3/2)
    printed = entropy.weighted_vault_loss_printed(3, 2, 4, 1)
    assert printed - exact == pytest.approx(2 * 4 * math.log2(1.5))
    assert entropy.weighted_vault_loss_upper(3, 2, 4, 1) >= exact


def test_code_offset_and_mixing_bounds():
    assert entropy.code_offset_loss(128, 64) == 512.0
    assert entropy.mixing_gain(10**4) == pytest.approx(13.2877, abs=1e-3)


def test_embedding_sketch_genuine_opens_impostor_does_not():
    rng = np.random.default_rng(1)
    base = rng.normal(0, 0.08, 128)
    enrol = base + rng.normal(0, 0.004, (3, 128))
    data, info = embedding_sketch.enrol(enrol, k_message=64, rng=rng)
    params = {"k_message": 64}
    probe = base + rng.normal(0, 0.004, 128)
    assert embedding_sketch.verify(data, params, probe)["match"]
    other = rng.normal(0, 0.08, 128)
    assert not embedding_sketch.verify(data, params, other)["match"]
    assert embedding_sketch.symbol_errors(info, data, other) > 32
    # no clear centre in the template: the offset is the codeword XOR b, not b
    assert not np.array_equal(data["offset"].astype(np.int64), info["b"])


def test_embedding_sketch_decision_is_bounded_distance_decoding():
    rng = np.random.default_rng(2)
    base = rng.normal(0, 0.08, 128)
    data, info = embedding_sketch.enrol(base[None], k_message=100, rng=rng, margin=1)  # corrects 14
    params = {"k_message": 100}
    for n_bad in (10, 14, 15, 30):
        probe = base.copy()
        probe[:n_bad] += 0.2  # far outside every enrolled interval
        errs = embedding_sketch.symbol_errors(info, data, probe)
        assert errs == n_bad
        assert embedding_sketch.verify(data, params, probe)["match"] == (errs <= 14)
