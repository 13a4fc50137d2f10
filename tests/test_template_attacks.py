"""Attacks on vault templates: linkage and correlation succeed on plain vaults, fall to chance under a PIN."""

import numpy as np

from attacks.template_attacks import correlation_attack, link_score, linkage_success
from privacy.templates.fuzzy_vault import chaff_codes, lock
from privacy.templates.password import derive_key, mask_helper, transform_minutiae
from privacy.templates.quantise import code_points, minutia_codes

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
