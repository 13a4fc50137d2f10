"""Attacks on vault templates: linkage and correlation succeed on plain vaults, fall to chance under a PIN; the
masked helper field lets an offline attacker find the PIN."""

import numpy as np
import pytest

from fedprint.attacks.template_attacks import (
    correlation_attack,
    helper_link_score,
    helper_smoothness,
    link_score,
    link_scores,
    linkage_success,
    pin_search,
)
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.privacy.templates.alignment import BACKGROUND, helper_field
from fedprint.privacy.templates.fuzzy_vault import chaff_codes, lock
from fedprint.privacy.templates.password import derive_key, mask_helper, transform_minutiae
from fedprint.privacy.templates.quantise import code_points, minutia_codes

PARAMS = {"degree": 8, "slots": 1, "tol_px": 12.0, "tol_angle": float(np.deg2rad(30)), "max_trials": 4000}
TOL = {"tol_px": 6.0, "tol_angle": float(np.deg2rad(20))}


def _helper(rng):
    yy, xx = np.mgrid[:48, :48]
    return (np.round((np.arctan2(yy - 20, xx - 24) % np.pi) / np.pi * 16) % 16).astype(np.uint8)


def _vault(genuine, rng, helper, pin=None):
    if pin is not None:
        salt = rng.bytes(16)
        key = derive_key(pin, salt)
        genuine = minutia_codes(transform_minutiae(code_points(genuine), key))
        genuine = np.unique(genuine[genuine > 0])
        helper = mask_helper(helper, key)
    v, _ = lock(genuine, degree=8, n_chaff=200, rng=rng)
    return {"xs": v.xs, "ys": v.ys, "salt": v.salt, "digest": v.digest, "helper": helper}


def test_linkage_succeeds_on_plain_vaults_and_falls_to_chance_with_pins():
    rng = np.random.default_rng(0)
    helper = _helper(rng)
    fingers = [chaff_codes(np.zeros(0, np.int64), 24, rng=rng) for _ in range(4)]
    plain = [(_vault(g, rng, helper), _vault(g, rng, helper)) for g in fingers]
    mated = [link_score(a, PARAMS, b, PARAMS, **TOL) for a, b in plain]
    non = [link_score(plain[i][0], PARAMS, plain[j][1], PARAMS, **TOL) for i in range(4) for j in range(4) if i != j]
    plain_res = linkage_success(mated, non)
    assert plain_res["balanced_accuracy"] == 1.0 and min(mated) > max(non)
    a, b = plain[0]
    assert link_scores(a, PARAMS, b, PARAMS, [(TOL["tol_px"], TOL["tol_angle"]), (12.0, PARAMS["tol_angle"])]) == [
        mated[0], link_score(a, PARAMS, b, PARAMS)]
    hard = [(_vault(g, rng, helper, "1234"), _vault(g, rng, helper, "1234")) for g in fingers]
    mated = [link_score(a, PARAMS, b, PARAMS, **TOL) for a, b in hard]
    non = [link_score(hard[i][0], PARAMS, hard[j][1], PARAMS, **TOL) for i in range(4) for j in range(4) if i != j]
    # genuine points no longer coincide: mated scores are chaff-level (same finger, same PIN, new salts)
    assert max(mated) < min(m for m in [link_score(a, PARAMS, b, PARAMS, **TOL) for a, b in plain])
    assert abs(np.mean(mated) - np.mean(non)) < 4


def test_correlation_attack_recovers_the_secret_of_a_plain_vault():
    rng = np.random.default_rng(1)
    helper = _helper(rng)
    g = chaff_codes(np.zeros(0, np.int64), 24, rng=rng)
    a, b = _vault(g, rng, helper), _vault(g, rng, helper)
    res = correlation_attack(a, PARAMS, b, PARAMS, genuine1=g, **TOL)
    assert res["recovered"] and res["genuine_in_intersection"] >= 20
    c, d = _vault(g, rng, helper, "1234"), _vault(g, rng, helper, "1234")
    assert not correlation_attack(c, PARAMS, d, PARAMS, max_trials=2000, **TOL)["recovered"]


@pytest.fixture(scope="module")
def synth_fields():
    """Helper fields of two impressions (own placement, pressure, noise) of each of 3 synthetic fingers."""
    prof = get_profile("casia")
    return [[helper_field(r.image) for r in finger_records(prof, f, 2, seed=0)] for f in range(3)]


def test_helper_linkage_links_plain_helpers_and_is_at_chance_for_masked_ones(synth_fields):
    n = len(synth_fields)
    plain = [[{"helper": h} for h in hs] for hs in synth_fields]
    mated = [helper_link_score(plain[f][0], plain[f][1]) for f in range(n)]
    non = [helper_link_score(plain[f][0], plain[g][1]) for f in range(n) for g in range(n) if g != f]
    assert min(mated) > max(non) and min(mated) > 0.9
    rng = np.random.default_rng(0)
    masked = [[{"helper": mask_helper(h, rng.bytes(32))} for h in hs] for hs in synth_fields]  # own key each
    m_mated = [helper_link_score(masked[f][0], masked[f][1]) for f in range(n)]
    m_non = [helper_link_score(masked[f][0], masked[g][1]) for f in range(n) for g in range(n) if g != f]
    assert max(m_mated + m_non) < 0.3 < min(non)  # noise-level agreement, far below any plain pair
    assert abs(np.mean(m_mated) - np.mean(m_non)) < 0.05


def test_helper_smoothness_separates_ridge_flow_from_noise(synth_fields):
    for hs in synth_fields:
        assert helper_smoothness(hs[0]) > 0.85
        noise = mask_helper(hs[0], b"k" * 32)
        assert abs(helper_smoothness(noise) - 3 / 16) < 0.04
    assert helper_smoothness(np.full((5, 5), 7, np.uint8)) == 1.0
    assert helper_smoothness(np.full((5, 5), BACKGROUND, np.uint8)) == 0.0
    wrap = np.array([[0, 15, 0, 15]], np.uint8)  # levels are cyclic: 15 and 0 are neighbours
    assert helper_smoothness(wrap) == 1.0


def test_pin_search_ranks_the_true_pin_first_and_unmasks_the_helper(synth_fields):
    field = synth_fields[0][0]
    salt = b"s" * 16
    data = {"helper": mask_helper(field, derive_key("2468", salt)), "kdf_salt": salt}
    res = pin_search(data, ["1111", "0000", "2468", "9753"])
    assert res["best"] == "2468" and [p for p, _ in res["ranking"]][0] == "2468"
    assert np.array_equal(res["helper"], field)
    assert res["ranking"][0][1] > 0.85 and all(s < 0.3 for _, s in res["ranking"][1:])
    assert res["seconds_per_guess"] > 0
    with pytest.raises(ValueError, match="candidate"):
        pin_search(data, [])
