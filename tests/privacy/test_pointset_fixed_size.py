"""Issue 24 item 7: a finger-level point-set release must not carry the finger's minutiae count.

Neighbouring pair: two fingers with n = 23 and n = 41 minutiae (finger-level neighbours: the whole set
replaced). Everything about the released distribution — output size, k, group sizes, per-group noise scale,
the guarantee's wording, the ledger charge — must be the same for both; only the noisy values may differ. A
deliberately broken variant (no resampling: the old behaviour, which ran at ε / n) must be flagged.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.privacy.publish import pointset
from fedprint.privacy.publish.finger_level import finger_charge
from fedprint.privacy.publish.pointset import DEFAULT_SIZE, publish_pointset

IMAGE = np.zeros((200, 200), np.uint8)


def _minutiae(n, seed):
    rng = np.random.default_rng(seed)
    return np.c_[rng.uniform(0, 200, (n, 2)), rng.uniform(0, 2 * np.pi, n), np.ones(n)]


def released_parameters(pub) -> dict:
    """Everything public about a release's distribution (its DP outputs — points, noisy sums — excluded)."""
    d = pub.details
    return {"shape": pub.points.shape, "k": d["k"], "group_sizes": d["group_sizes"],
            "noise_scale_cells": d["noise_scale_cells"], "epsilon_per_minutia": d["epsilon_per_minutia"],
            "output_size": d.get("output_size"), "statement": pub.guarantee.statement(),
            "spent": (pub.spent_epsilon, pub.spent_delta)}


def _pair(epsilon=1.0, **kw):
    rng = np.random.default_rng(0)  # tests inject a generator; the CLI uses OS entropy
    return [publish_pointset(IMAGE, _minutiae(n, n), epsilon, rng, protect="finger", **kw) for n in (23, 41)]


def test_finger_release_has_the_same_public_parameters_for_any_minutiae_count():
    a, b = _pair()
    pa, pb = released_parameters(a), released_parameters(b)
    assert pa == pb
    assert pa["shape"] == (DEFAULT_SIZE, 3) and pa["output_size"] == DEFAULT_SIZE
    assert pa["epsilon_per_minutia"] == pytest.approx(1.0 / DEFAULT_SIZE)
    for n in ("23", "41"):
        assert f"n = {n}" not in pa["statement"] and f"n = {n}" not in pb["statement"]
    assert "fixed public size" in a.details["output_size_rule"]
    # the ledger charges the same finger-level epsilon, and that is now what the release guarantees
    charge = finger_charge("pointset", "sound", 1.0, IMAGE.shape, {"protect": "finger"})
    assert charge.epsilon == 1.0 and charge.group == 1 and a.guarantee.epsilon == 1.0


def test_output_size_is_a_public_option():
    a, b = _pair(size=10)
    assert released_parameters(a) == released_parameters(b) and a.points.shape == (10, 3)
    assert a.details["epsilon_per_minutia"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="size"):
        publish_pointset(IMAGE, _minutiae(5, 0), 1.0, np.random.default_rng(0), size=10)  # per minutia: no
    with pytest.raises(ValueError, match="size"):
        publish_pointset(IMAGE, _minutiae(5, 0), 1.0, np.random.default_rng(0), protect="finger", size=0)


def test_resampling_keeps_real_minutiae():
    m = _minutiae(5, 1)
    rng = np.random.default_rng(2)
    up = pointset.fixed_size(m, 12, rng)
    assert up.shape == (12, 4) and all(any(np.array_equal(r, x) for x in m) for r in up)
    assert len({tuple(r) for r in up}) == 5  # every minutia kept, the rest repeats
    down = pointset.fixed_size(_minutiae(40, 3), 12, rng)
    assert down.shape == (12, 4) and len({tuple(r) for r in down}) == 12  # a subset, no repeats


def test_broken_variant_without_resampling_is_flagged(monkeypatch):
    """The old behaviour (all n minutiae at ε / n): output size and noise scale reveal n — the check catches it."""
    monkeypatch.setattr(pointset, "fixed_size", lambda m, size, rng: m)
    a, b = _pair()
    pa, pb = released_parameters(a), released_parameters(b)
    assert pa != pb and pa["shape"][0] == 23 and pb["shape"][0] == 41
