"""Impressions, profiles and on-disk generation of the synthetic fingerprint generator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from data.datasets import load_dataset
from data.synth.generate import finger_records, generate_dataset
from data.synth.impression import forward_map, inverse_map, render_impression, sample_placement
from data.synth.master import make_master
from data.synth.profiles import get_profile, load_profiles, pattern_prior, profile_names
from privacy.minutiae import extract_minutiae


@pytest.fixture(scope="module")
def socofing():
    return get_profile("socofing")


@pytest.fixture(scope="module")
def casia_master():
    p = get_profile("casia")
    return p, make_master(1, seed=0, size=p.master_size, pattern_prior=p.pattern_prior, period_px=p.period_px)


def test_shipped_profiles_and_priors():
    assert {"socofing", "casia", "nist_sd10"} <= set(profile_names())
    for name in profile_names():
        prior = get_profile(name).pattern_prior
        assert abs(sum(prior.values()) - 1) < 1e-9 and min(prior.values()) > 0
    # Seed 003 Table 1: whorls are most frequent among Asian fingers, least among White fingers.
    assert get_profile("casia").pattern_prior["whorl"] > get_profile("nist_sd10").pattern_prior["whorl"]
    assert get_profile("socofing").pattern_prior["arch"] > get_profile("casia").pattern_prior["arch"]


def test_pattern_prior_equal_shares_is_base():
    base = {"arch": 1, "tented_arch": 1, "left_loop": 1, "right_loop": 1, "whorl": 1}
    eq = {"loops": 25, "whorls": 25, "arches": 25, "tented_arches": 25}
    assert pattern_prior(base, eq) == pytest.approx({k: 0.2 for k in base})


def test_bad_profile_file_names_key(tmp_path):
    src = (get_profile("casia").__class__.__module__, None)
    assert src
    bad = tmp_path / "p.toml"
    text = (load_profiles.__globals__["PROFILES_FILE"]).read_text().replace("scale = 1.0", "scael = 1.0", 1)
    bad.write_text(text)
    with pytest.raises(ValueError, match=r"casia.*scael"):
        load_profiles(bad)
    with pytest.raises(ValueError, match="unknown synthetic profile"):
        get_profile("nope")


def test_impression_shape_determinism_and_variety(casia_master):
    p, m = casia_master
    a, ga = render_impression(m, p, 0, seed=0)
    b, gb = render_impression(m, p, 0, seed=0)
    c, _ = render_impression(m, p, 1, seed=0)
    assert a.shape == p.output_size and a.dtype == np.uint8
    assert np.array_equal(a, b) and np.array_equal(ga.minutiae, gb.minutiae)
    assert not np.array_equal(a, c)
    assert 0 < len(ga.minutiae) <= len(m.minutiae)
    h, w = a.shape
    assert np.all((ga.minutiae[:, 0] >= 0) & (ga.minutiae[:, 0] < w) & (ga.minutiae[:, 1] >= 0)
                  & (ga.minutiae[:, 1] < h))


def test_inverse_map_inverts_forward_map(casia_master):
    p, m = casia_master
    pl = sample_placement(m, p, np.random.default_rng(3))
    pts = np.random.default_rng(0).uniform(50, 300, (200, 2))
    centre = np.array([163.5, 177.5])
    back = inverse_map(forward_map(pts, pl, centre, p.scale), pl, centre, p.scale)
    assert np.abs(back - pts).max() < 0.05


def test_ground_truth_minutiae_are_where_the_extractor_finds_them(casia_master):
    """Transformed master minutiae land on the impression's minutiae: on a clean impression (no noise, no
    breaks, no blotches) most ground-truth minutiae have a detected minutia within 8 px."""
    p, m = casia_master
    clean = p.replace(noise_sigma=(0.0, 0.0), breaks=(0.0, 0.0), blotches=(0, 0), dryness=(0.0, 0.0),
                      blur_sigma=(0.5, 0.5))
    recalls = []
    for i in range(3):
        img, gt = render_impression(m, clean, i, seed=0)
        det = extract_minutiae(img)
        d = np.linalg.norm(gt.minutiae[:, None, :2] - det[None, :, :2], axis=-1)
        recalls.append(np.mean(d.min(axis=1) <= 8.0))
    assert np.mean(recalls) > 0.6


def test_generate_resume_and_worker_independence(tmp_path, socofing):
    a = generate_dataset(socofing, fingers=3, impressions=2, seed=1, out=tmp_path / "a", workers=1, progress=False)
    recs = load_dataset("generic", a)
    assert len(recs) == 6 and recs[0].domain == "synth:socofing" and recs[0].ground_truth is not None
    manifest = json.loads((a / "manifest.json").read_text())
    assert manifest["format"] == "fedprint-synth/1" and len(manifest["ground_truth"]) == 6

    # Interrupted run: finger 2 incomplete, no manifest -> a rerun finishes it with identical bytes.
    b = tmp_path / "b"
    generate_dataset(socofing, fingers=3, impressions=2, seed=1, out=b, workers=1, progress=False)
    (b / "manifest.json").unlink()
    (b / "f00002" / "ground_truth.json").unlink()
    (b / "f00002" / "1.png").unlink()
    generate_dataset(socofing, fingers=3, impressions=2, seed=1, out=b, workers=2, progress=False)
    for f in ("f00000/0.png", "f00002/1.png"):
        assert (a / f).read_bytes() == (b / f).read_bytes()
    assert (b / "manifest.json").read_text() == (a / "manifest.json").read_text()


def test_generate_refuses_to_mix(tmp_path, socofing):
    out = tmp_path / "x"
    generate_dataset(socofing, fingers=2, impressions=2, seed=1, out=out, workers=1, progress=False)
    with pytest.raises(ValueError, match="different synthetic generation"):
        generate_dataset(socofing, fingers=2, impressions=2, seed=2, out=out, workers=1, progress=False)
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "other.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        generate_dataset(socofing, fingers=2, impressions=2, seed=1, out=tmp_path / "y", progress=False)
    with pytest.raises(ValueError, match="fingers"):
        generate_dataset(socofing, fingers=0, impressions=2, out=tmp_path / "z", progress=False)


def test_finger_records_in_memory(socofing):
    recs = finger_records(socofing, 4, 3, seed=0)
    assert [r.impression for r in recs] == [0, 1, 2] and {r.identity for r in recs} == {"f00004"}
    assert recs[0].image.shape == socofing.output_size
