"""Impression model of the synthetic generator, on small hand-made masters (no ridge growth needed)."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.morphology import skeletonize

from fedprint.data.record import BIFURCATION, ENDING
from fedprint.data.synth.impression import forward_map, inverse_map, render_impression, sample_placement
from fedprint.data.synth.master import Master
from fedprint.data.synth.profiles import get_profile, load_profiles, pattern_prior, profile_names

PERIOD = 9.0


def _ellipse_mask(h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return ((xx - (w - 1) / 2) / (0.46 * w)) ** 2 + ((yy - (h - 1) / 2) / (0.46 * h)) ** 2 <= 1


def ring_master(h: int, w: int, identity: int = 5, n_minutiae: int = 60, seed: int = 0) -> Master:
    """Concentric ridges around an off-centre point; 'minutiae' are points on ridge centres (direction along
    the ridge), so their images must land on the impression's ridge skeleton."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    cx, cy = 0.43 * w, 0.55 * h
    r = np.hypot(xx - cx, yy - cy)
    mask = _ellipse_mask(h, w)
    ridges = np.where(mask, np.cos(2 * np.pi * r / PERIOD), 0).astype(np.float32)
    rng = np.random.default_rng(seed)
    ring = rng.integers(2, int(0.45 * min(h, w) / PERIOD), n_minutiae)
    phi = rng.uniform(0, 2 * np.pi, n_minutiae)
    x, y = cx + ring * PERIOD * np.cos(phi), cy + ring * PERIOD * np.sin(phi)
    ok = mask[np.rint(y).astype(int), np.rint(x).astype(int)]
    minutiae = np.column_stack([x, y, (phi + np.pi / 2) % (2 * np.pi),
                                np.where(np.arange(n_minutiae) % 2, ENDING, BIFURCATION)])[ok]
    orientation = ((np.arctan2(yy - cy, xx - cx) + np.pi / 2) % np.pi).astype(np.float32)
    return Master(identity=identity, pattern="whorl", ridges=ridges, mask=mask, orientation=orientation,
                  period=np.full((h, w), PERIOD, np.float32), cores=np.array([[cx, cy]]),
                  deltas=np.zeros((0, 2)), minutiae=minutiae)


def blob_master(h: int, w: int, step: int = 40, arm: float = 12.0) -> Master:
    """Valley everywhere, with a ridge blob at each 'minutia' and a second blob ``arm`` px along its direction."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    mask = _ellipse_mask(h, w)
    gx, gy = np.meshgrid(np.arange(step, w - step, step, dtype=float), np.arange(step, h - step, step, dtype=float))
    pts = np.column_stack([gx.ravel(), gy.ravel()])
    pts = pts[mask[pts[:, 1].astype(int), pts[:, 0].astype(int)]]
    theta = np.random.default_rng(1).uniform(0, 2 * np.pi, len(pts))
    tips = pts + arm * np.column_stack([np.cos(theta), np.sin(theta)])
    field = np.zeros((h, w))
    for x, y in np.vstack([pts, tips]):
        field = np.maximum(field, np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * 1.8**2)))
    ridges = np.where(mask, 2 * field - 1, 0).astype(np.float32)
    minutiae = np.column_stack([pts, theta, np.full(len(pts), ENDING)])
    return Master(identity=3, pattern="arch", ridges=ridges, mask=mask, orientation=np.zeros((h, w), np.float32),
                  period=np.full((h, w), PERIOD, np.float32), cores=np.zeros((0, 2)), deltas=np.zeros((0, 2)),
                  minutiae=minutiae)


def clean(profile_name: str, **extra):
    """A profile with the sensor switched off (geometry, contact and distortion kept)."""
    return get_profile(profile_name).replace(
        noise_sigma=(0.0, 0.0), blur_sigma=(0.0, 0.0), blotches=(0, 0), breaks=(0.0, 0.0), dryness=(0.0, 0.0),
        background_texture=0.0, frame_px=(0, 0), saturation=1.0, contrast=(1.0, 1.0), **extra)


@pytest.fixture(scope="module")
def casia_rings():
    p = get_profile("casia")
    return p, ring_master(*p.master_size)


def _nearest(points: np.ndarray, cloud: np.ndarray) -> np.ndarray:
    return np.sqrt(((points[:, None, :] - cloud[None, :, :]) ** 2).sum(-1)).min(axis=1)


@pytest.mark.parametrize("name", ["casia", "nist_sd10"])
def test_ground_truth_lands_on_the_ridge_skeleton(name):
    p = clean(name)
    m = ring_master(*p.master_size)
    for i in range(3):
        img, gt = render_impression(m, p, i, seed=4)
        assert len(gt.minutiae) >= 10
        skel = skeletonize(img < 128)
        ys, xs = np.nonzero(skel)
        d = _nearest(gt.minutiae[:, :2], np.column_stack([xs, ys]).astype(float))
        assert np.median(d) < 1.0 and np.percentile(d, 90) < 2.0, (i, np.percentile(d, [50, 90, 100]))


@pytest.mark.parametrize("name", ["casia", "socofing"])
def test_ground_truth_position_and_direction_follow_the_same_map(name):
    """Blob at each minutia and at its tip ``arm`` px along the direction: both must appear in the image
    where the ground truth (position, direction) says."""
    p = clean(name, edge_fade_px=0.0, contact_fraction=(3.0, 3.0))
    m = blob_master(*p.master_size, step=int(40 / max(p.scale, 0.5) ** 0.5), arm=12.0 / min(p.scale, 1) ** 0.5)
    arm_out = 12.0 / min(p.scale, 1) ** 0.5 * p.scale
    win = max(2, int(round(3 * p.scale)))
    for i in range(2):
        img, gt = render_impression(m, p, i, seed=1)
        img = img.astype(float)
        h, w = img.shape
        checked = 0
        for x, y, th, _ in gt.minutiae:
            tx, ty = x + arm_out * np.cos(th), y + arm_out * np.sin(th)
            if not (win + 1 <= tx < w - win - 1 and win + 1 <= ty < h - win - 1):
                continue
            for px, py in ((x, y), (tx, ty)):
                x0, y0 = int(round(px)) - win, int(round(py)) - win
                patch = img[y0:y0 + 2 * win + 1, x0:x0 + 2 * win + 1]
                if patch.min() > 128 and (px, py) == (tx, ty):
                    break  # the tip fell outside the finger (the minutia itself is inside by construction)
                wgt = patch.max() - patch  # darkness; its centroid is the blob centre (robust to saturation)
                yy, xx = np.mgrid[0:patch.shape[0], 0:patch.shape[1]]
                cx, cy = (wgt * xx).sum() / wgt.sum(), (wgt * yy).sum() / wgt.sum()
                assert np.hypot(x0 + cx - px, y0 + cy - py) <= 1.25, (name, i, px, py)
            checked += 1
        assert checked >= 5


def test_forward_and_inverse_maps_agree(casia_rings):
    p, m = casia_rings
    centre = np.array([(p.output_size[1] - 1) / 2, (p.output_size[0] - 1) / 2])
    pts = np.random.default_rng(0).uniform(40, 320, (300, 2))
    for k in range(4):
        pl = sample_placement(m, p, np.random.default_rng(k))
        back = inverse_map(forward_map(pts, pl, centre, p.scale), pl, centre, p.scale)
        assert np.abs(back - pts).max() < 0.05


@pytest.mark.parametrize("name", ["socofing", "casia", "nist_sd10"])
def test_distortion_is_plausible(name):
    """Plastic distortion stretches skin by at most ~15 % locally (no melting) and rotates it by at most the
    profile's global + distortion rotation (+ the shear of a 10 % strain, ~6°)."""
    p = get_profile(name)
    m = ring_master(*p.master_size)
    centre = np.zeros(2)
    ys, xs = np.nonzero(m.mask[::8, ::8])
    pts = np.column_stack([xs, ys]).astype(float) * 8
    e = 0.5
    for k in range(6):
        pl = sample_placement(m, p, np.random.default_rng([9, k]))
        f0 = forward_map(pts, pl, centre, 1.0)
        jx = (forward_map(pts + [e, 0], pl, centre, 1.0) - f0) / e
        jy = (forward_map(pts + [0, e], pl, centre, 1.0) - f0) / e
        sv = np.linalg.svd(np.stack([jx, jy], axis=-1), compute_uv=False)
        assert sv.max() < 1.12 and sv.min() > 0.89, (k, sv.min(), sv.max())
        rot = np.degrees(np.abs(np.arctan2(jx[:, 1], jx[:, 0])))
        assert rot.max() <= p.rotation_deg + p.distortion_deg + 6


def test_impressions_of_one_finger_overlap(casia_rings):
    """Partial contact, but centred on the finger: every impression shows a good share of the master minutiae."""
    p, m = casia_rings
    kept = [len(render_impression(m, p, i, seed=0)[1].minutiae) / len(m.minutiae) for i in range(8)]
    assert min(kept) > 0.3 and np.mean(kept) > 0.5, kept


def test_sensor_noise_keeps_the_ridges(casia_rings):
    """Full CASIA sensor model: the ridge period is still the dominant frequency of the contact region."""
    p, m = casia_rings
    for i in range(3):
        img, _ = render_impression(m, p, i, seed=2)
        h, w = img.shape
        c = img[h // 2 - 64:h // 2 + 64, w // 2 - 64:w // 2 + 64].astype(float)
        c = (c - c.mean()) * np.outer(np.hanning(128), np.hanning(128))
        f = np.abs(np.fft.fftshift(np.fft.fft2(c)))
        yy, xx = np.mgrid[-64:64, -64:64]
        r = np.hypot(yy, xx)
        f[r < 4] = 0
        period = 128 / r[np.unravel_index(f.argmax(), f.shape)]
        assert abs(period - PERIOD) < 1.5, period


@pytest.mark.parametrize("name", ["socofing", "casia", "nist_sd10"])
def test_shapes_dtypes_determinism_per_profile(name):
    p = get_profile(name)
    m = ring_master(*p.master_size, n_minutiae=80)
    a, ga = render_impression(m, p, 2, seed=11)
    render_impression(m, p, 1, seed=11)  # other impressions do not disturb impression 2
    b, gb = render_impression(m, p, 2, seed=11)
    c, _ = render_impression(m, p, 3, seed=11)
    assert a.shape == p.output_size and a.dtype == np.uint8 and p.domain == f"synth:{name}"
    assert np.array_equal(a, b) and np.array_equal(ga.minutiae, gb.minutiae)
    assert not np.array_equal(a, c)
    assert a.std() > 20  # a print, not a flat image
    h, w = a.shape
    mm = ga.minutiae
    assert mm.dtype == np.float64 and mm.shape[1] == 4 and len(mm) > 0
    assert np.all((mm[:, 0] >= 0) & (mm[:, 0] < w) & (mm[:, 1] >= 0) & (mm[:, 1] < h))
    assert np.all((mm[:, 2] >= 0) & (mm[:, 2] < 2 * np.pi)) and set(mm[:, 3]) <= {ENDING, BIFURCATION}
    assert ga.pattern == "whorl" and ga.cores.shape[1] == 2
    with pytest.raises(ValueError, match="impression"):
        render_impression(m, p, -1, seed=0)


def test_pattern_priors_follow_table1():
    # Yan et al. 2025 Table 1: whorls most frequent among Asian fingers, arches among Black fingers.
    casia, nist, soco = (get_profile(n).pattern_prior for n in ("casia", "nist_sd10", "socofing"))
    assert casia["whorl"] > soco["whorl"] > nist["whorl"]
    assert soco["arch"] > nist["arch"] > casia["arch"]
    for prior in (casia, nist, soco):
        assert sum(prior.values()) == pytest.approx(1.0) and min(prior.values()) > 0
    # the population tables are Yan et al. 2025 Table 1's Black, White and Asian columns
    import tomllib

    from fedprint.data.synth.profiles import PROFILES_FILE

    pops = tomllib.loads(PROFILES_FILE.read_text())["populations"]
    assert pops["african"] == {"loops": 27, "whorls": 22, "arches": 32, "tented_arches": 15}
    assert pops["us"] == {"loops": 26, "whorls": 18, "arches": 26, "tented_arches": 27}
    assert pops["chinese"] == {"loops": 21, "whorls": 34, "arches": 18, "tented_arches": 23}
    base = {"arch": 1, "tented_arch": 1, "left_loop": 1, "right_loop": 1, "whorl": 1}
    doubled = pattern_prior(base, {"loops": 25, "whorls": 50, "arches": 25, "tented_arches": 25})
    assert doubled["whorl"] == pytest.approx(2 * doubled["arch"])


@pytest.mark.parametrize(("old", "new", "match"), [
    ("blur_sigma = [0.6, 1.3]", "blur_sigma = [1.3, 0.6]", r"casia.*blur_sigma.*lo <= hi"),
    ("rotation_deg = 18.0", "rotation_deg = \"big\"", r"casia.*rotation_deg"),
    ("edge_fade_px = 14.0", "", r"casia.*missing keys \['edge_fade_px'\]"),
    ("population = \"chinese\"", "population = \"martian\"", r"casia.*martian"),
    ("output_size = [356, 328]", "output_size = [356]", r"casia.*output_size"),
    ("[profiles.casia]", "[profiles.casia\n", r"cannot read"),
    ("anchor_shift = [0.0, 0.0]", "anchor_shift = 0.0", r"casia.*anchor_shift"),
    ("ink_gain = [2.5, 3.5]", "ink_gain = [0.0, 3.5]", r"casia.*ink_gain"),
])
def test_bad_profile_toml_names_the_problem(tmp_path, old, new, match):
    from fedprint.data.synth.profiles import PROFILES_FILE

    text = PROFILES_FILE.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=match):
        load_profiles(bad)


def test_shipped_profile_names():
    assert {"socofing", "casia", "nist_sd10"} <= set(profile_names())
    assert get_profile("socofing").output_size == (103, 96) and get_profile("casia").output_size == (356, 328)
    assert get_profile("nist_sd10").output_size == (768, 832) and get_profile("socofing").scale < 1


@pytest.mark.parametrize("name", ["socofing", "casia"])
def test_coarse_remap_grid_matches_the_exact_map_everywhere(name):
    """The upsampled coarse map equals the exact inverse map at every output pixel, image borders included."""
    from fedprint.data.synth.impression import _remap_grid

    p = get_profile(name)
    m = ring_master(*p.master_size)
    h, w = p.output_size
    centre = np.array([(w - 1) / 2, (h - 1) / 2])
    yy, xx = np.mgrid[0:h, 0:w].astype(float)
    for k in range(3):
        pl = sample_placement(m, p, np.random.default_rng([5, k]))
        mx, my = _remap_grid((h, w), pl, centre, p.scale)
        exact = inverse_map(np.stack([xx, yy], axis=-1), pl, centre, p.scale)
        err = np.hypot(mx - exact[..., 0], my - exact[..., 1])
        assert err.max() * p.scale < 0.25, err.max()  # in output pixels


def test_a_profile_takes_its_base_profiles_keys_and_siblings(tmp_path):
    from fedprint.data.synth.profiles import PROFILES_FILE

    casia, whole, sib = get_profile("casia"), get_profile("casia_whole"), get_profile("casia_siblings")
    assert whole.master_size == (440, 400) and whole.contact_fraction == (0.8, 1.05)  # its own keys win
    assert whole.noise_sigma == casia.noise_sigma and whole.population == casia.population  # the rest: the base's
    assert sib.siblings == 4 and casia.siblings == 1 and sib.base == "casia" and casia.base == ""
    assert set(profile_names(variants=False)) == {"socofing", "casia", "nist_sd10"} < set(profile_names())
    assert "siblings" not in casia.to_json() and sib.to_json()["siblings"] == 4  # older profiles hash as before
    text = PROFILES_FILE.read_text()
    for old, new, match in [('base = "casia"\ndescription = "casia in', 'base = "nope"\ndescription = "casia in',
                             r"casia_siblings.*base 'nope' is not a profile"),
                            ("siblings = 4", "siblings = 0", r"casia_siblings.*siblings must be an integer >= 1"),
                            ("[profiles.casia]\n", '[profiles.casia]\nbase = "casia_whole"\n', r"cycle")]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text.replace(old, new, 1))
        with pytest.raises(ValueError, match=match):
            load_profiles(bad)


def test_finger_records_draw_sibling_masters_from_the_profile(monkeypatch):
    import fedprint.data.synth.generate as generate

    seen = []
    real = generate.make_master

    def spy(finger, **kw):
        seen.append((finger, kw["family"]))
        return real(finger, **kw)

    monkeypatch.setattr(generate, "make_master", spy)
    small = get_profile("socofing_siblings").replace(siblings=3)
    for f in (0, 2, 3, 7):
        generate.finger_records(small, f, 2, seed=0)
    generate.finger_records(get_profile("socofing"), 5, 2, seed=0)
    assert seen == [(0, 0), (2, 0), (3, 1), (7, 2), (5, None)]
