"""Fuzzy vault: field arithmetic, lock / unlock, weighted slots, chaff, the template file and PIN hardening."""

import json
import math

import numpy as np
import pytest

from fedprint.privacy.templates import entropy
from fedprint.privacy.templates.field import evaluate, gf, interpolate
from fedprint.privacy.templates.fuzzy_vault import chaff_codes, lock, unlock
from fedprint.privacy.templates.password import derive_key, mask_helper, transform_minutiae
from fedprint.privacy.templates.quantise import code_points, minutia_codes
from fedprint.privacy.templates.template_file import read_template, write_template


def _genuine(rng, n=24):
    return chaff_codes(np.zeros(0, np.int64), n, rng=rng)  # well-separated codes


def test_field_round_trip_and_interpolation():
    f = gf(16)
    rng = np.random.default_rng(0)
    a = f(rng.integers(1, 2**16, 1000))
    b = f(rng.integers(1, 2**16, 1000))
    assert np.array_equal((a * b) / b, a) and np.array_equal((a + b) - b, a)
    coef = rng.integers(0, 2**16, size=(5, 9))
    xs = np.stack([rng.choice(np.arange(1, 2**16), 9, replace=False) for _ in range(5)])
    ys = np.stack([evaluate(c, x) for c, x in zip(coef, xs, strict=True)])
    assert np.array_equal(interpolate(xs, ys), coef)
    with pytest.raises(ValueError, match="distinct"):
        interpolate(np.array([[1, 1, 2]]), np.array([[0, 0, 0]]))


def test_minutia_codes_round_trip():
    m = np.array([[100.0, 200.0, 1.0, 1], [5.0, 7.0, 6.0, 3], [600.0, 10.0, 0.0, 1]])
    c = minutia_codes(m)
    assert c[2] == -1 and np.all(c[:2] > 0)
    back = code_points(c[:2])
    assert np.all(np.abs(back[:, :2] - m[:2, :2]) <= 4.0)
    assert np.all(np.abs(np.angle(np.exp(1j * (back[:, 2] - m[:2, 2])))) <= np.pi / 16)


def test_lock_unlock_exact_noisy_and_impostor():
    rng = np.random.default_rng(1)
    g = _genuine(rng)
    vault, coef = lock(g, degree=8, n_chaff=200, rng=rng)
    assert vault.n_points == 224 and len(vault.codes) == 224
    chaff = np.setdiff1d(vault.codes, g)
    got, _ = unlock(vault, g)  # exact genuine set
    assert np.array_equal(got, coef)
    noisy = np.concatenate([g[:11], chaff[:8]])  # 11 genuine of 24, 8 chaff matches
    got, trials = unlock(vault, noisy, max_trials=6000)
    assert got is not None and np.array_equal(got, coef) and trials > 1
    impostor = np.concatenate([g[:8], chaff[:20]])  # one genuine point short of degree + 1
    got, trials = unlock(vault, impostor, max_trials=3000)
    assert got is None and trials == 3000


def test_chaff_never_collides_and_keeps_distance():
    rng = np.random.default_rng(2)
    g = _genuine(rng, 20)
    c = chaff_codes(g, 200, rng=rng)
    allc = np.concatenate([g, c])
    assert len(np.unique(allc)) == len(allc) and np.all(allc > 0)
    p = code_points(allc)
    d = np.hypot(p[:, None, 0] - p[None, :, 0], p[:, None, 1] - p[None, :, 1])
    da = np.abs(np.angle(np.exp(1j * (p[:, None, 2] - p[None, :, 2]))))
    close = (d < 20) & (da < 2 * np.pi / 16 * 1.5)
    np.fill_diagonal(close, False)
    assert not close.any()


def test_weighted_vault_puts_weight_points_on_the_polynomial():
    rng = np.random.default_rng(3)
    g = _genuine(rng, 12)
    w = np.array([3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1])
    vault, coef = lock(g, degree=8, n_chaff=50, weights=w, slots=3, rng=rng)
    assert vault.bits == 18 and vault.n_points == 3 * 62
    on = evaluate(coef, vault.xs, vault.bits) == vault.ys
    assert on.sum() == w.sum()
    # the three weight-3 elements alone give 9 points: enough for degree 8
    got, _ = unlock(vault, g[:3])
    assert np.array_equal(got, coef)
    with pytest.raises(ValueError, match="weights"):
        lock(g, degree=8, n_chaff=10, weights=w + 1, slots=3, rng=rng)


def test_secret_comes_from_os_entropy_by_default():
    g = _genuine(np.random.default_rng(4), 12)
    v1, c1 = lock(g, degree=8, n_chaff=20)
    v2, c2 = lock(g, degree=8, n_chaff=20)
    assert not np.array_equal(c1, c2) and v1.salt != v2.salt


def test_bruteforce_bits_hand_computed():
    # C(224, 9) / C(24, 9) trials
    expect = math.log2(math.comb(224, 9) / math.comb(24, 9))
    assert entropy.vault_bruteforce_bits(224, 24, 8) == pytest.approx(expect)
    with pytest.raises(ValueError):
        entropy.vault_bruteforce_bits(224, 8, 8)


def test_template_file_holds_no_clear_minutiae_and_detects_damage(tmp_path):
    rng = np.random.default_rng(5)
    g = _genuine(rng)
    vault, coef = lock(g, degree=8, n_chaff=200, rng=rng)
    helper = np.full((10, 10), 3, np.uint8)
    params = {"degree": 8, "slots": 1, "n_chaff": 200, "max_genuine": 24, "tol_px": 12.0, "tol_angle": 0.5,
              "max_trials": 4000}
    path = write_template(tmp_path / "t.json", "vault", params,
                          {"xs": vault.xs.astype(np.uint32), "ys": vault.ys.astype(np.uint32), "salt": vault.salt,
                           "digest": vault.digest, "helper": helper}, hardened=False)
    scheme, params, data, hardened = read_template(path)
    assert scheme == "vault" and not hardened and np.array_equal(data["xs"], vault.xs)
    doc = json.loads(path.read_text())
    assert set(doc["data"]) == {"xs", "ys", "salt", "digest", "helper"}  # no minutiae, weights or coefficients
    # genuine codes appear only among the vault points, in the proportion 24 of 224
    assert np.isin(g, data["xs"]).all() and len(data["xs"]) == 224
    assert coef.astype(">u4").tobytes() not in path.read_bytes()
    with pytest.raises(FileExistsError):
        write_template(path, "vault", params, {}, hardened=False)
    text = path.read_text()
    (tmp_path / "bad.json").write_text(text.replace('"degree": 8', '"degree": 9'))
    with pytest.raises(ValueError, match="checksum"):
        read_template(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_bytes(b"\x00\x01 not json")
    with pytest.raises(ValueError, match="not a FedPrint protected template"):
        read_template(tmp_path / "junk.json")


def test_password_transform_and_helper_mask():
    salt = b"s" * 16
    k1, k2 = derive_key("1234", salt), derive_key("1235", salt)
    assert k1 != k2 and derive_key("1234", salt) == k1
    m = np.array([[10.0, 20.0, 0.5, 1], [12.0, 22.0, 0.6, 1], [300.0, 400.0, 2.0, 3]])
    t1, t2 = transform_minutiae(m, k1), transform_minutiae(m, k2)
    # same cell -> same rigid offset (locality kept); different keys -> different places
    assert np.allclose(t1[1, :2] - t1[0, :2], m[1, :2] - m[0, :2])
    assert not np.allclose(t1[:, :2], t2[:, :2])
    helper = np.array([[0, 5, 255], [15, 7, 255]], np.uint8)
    masked = mask_helper(helper, k1)
    assert np.array_equal(mask_helper(masked, k1, inverse=True), helper)
    assert not np.array_equal(mask_helper(masked, k2, inverse=True), helper)


def test_version_1_vault_files_are_refused_as_the_weak_construction(tmp_path):
    rng = np.random.default_rng(6)
    vault, _ = lock(_genuine(rng), degree=8, n_chaff=200, rng=rng)
    params = {"degree": 8, "slots": 1, "n_chaff": 200, "max_genuine": 24, "tol_px": 12.0, "tol_angle": 0.5,
              "max_trials": 4000}
    path = write_template(tmp_path / "t.json", "vault", params,
                          {"xs": vault.xs.astype(np.uint32), "ys": vault.ys.astype(np.uint32), "salt": vault.salt,
                           "digest": vault.digest, "helper": np.full((4, 4), 3, np.uint8)}, hardened=False)
    doc = json.loads(path.read_text())
    assert doc["version"] == 2
    doc["version"] = 1  # what FedPrint wrote before issue 59 (checksum recomputed: a genuine old file)
    from fedprint.privacy.templates.template_file import _digest

    doc["sha256"] = _digest(doc)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="version-1 vault template: the first, weak construction.*re-enrol"):
        read_template(old)
