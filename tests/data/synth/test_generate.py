"""Impressions, profiles and on-disk generation of the synthetic fingerprint generator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedprint.cli.main import main
from fedprint.data.minutiae import extract_minutiae
from fedprint.data.synth.generate import finger_records, generate_dataset, load_generated
from fedprint.data.synth.impression import render_impression
from fedprint.data.synth.master import make_master
from fedprint.data.synth.profiles import get_profile


@pytest.fixture(scope="module")
def socofing():
    return get_profile("socofing")


@pytest.fixture(scope="module")
def casia_master():
    p = get_profile("casia")
    return p, make_master(1, seed=0, size=p.master_size, pattern_prior=p.pattern_prior, period_px=p.period_px)








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
    recs = load_generated(a)
    assert len(recs) == 6 and recs[0].ground_truth.pattern in {"arch", "tented_arch", "left_loop", "right_loop",
                                                                 "whorl"}
    assert len(recs) and recs[0].domain == "synth:socofing" and recs[0].ground_truth is not None
    manifest = json.loads((a / "manifest.json").read_text())
    assert manifest["format"] == "fedprint-synth/1" and len(manifest["ground_truth"]) == 6

    # Killed run: fingers 1 and 2 incomplete (no ground truth; a missing and a half-written PNG), no manifest.
    # The rerun keeps finger 0 as it is and redoes 1 and 2 in a 2-process pool, with identical bytes.
    b = tmp_path / "b"
    generate_dataset(socofing, fingers=3, impressions=2, seed=1, out=b, workers=1, progress=False)
    (b / "manifest.json").unlink()
    for f in ("f00001", "f00002"):
        (b / f / "ground_truth.json").unlink()
    (b / "f00001" / "1.png").unlink()
    (b / "f00002" / "0.png").write_bytes(b"\x89PNG truncated")
    kept = (b / "f00000" / "0.png").stat().st_mtime_ns
    generate_dataset(socofing, fingers=3, impressions=2, seed=1, out=b, workers=2, progress=False)
    assert (b / "f00000" / "0.png").stat().st_mtime_ns == kept
    for f in ("f00000/0.png", "f00001/1.png", "f00002/0.png", "f00002/ground_truth.json"):
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
    with pytest.raises(ValueError, match=r"differs in \['profile'\]"):
        generate_dataset(get_profile("casia"), fingers=2, impressions=2, seed=1, out=out, progress=False)
    with pytest.raises(ValueError, match="fingers"):
        generate_dataset(socofing, fingers=0, impressions=2, out=tmp_path / "z", progress=False)
    with pytest.raises(ValueError, match="workers"):
        generate_dataset(socofing, fingers=1, impressions=2, out=tmp_path / "w", workers=0, progress=False)
    assert not (tmp_path / "w").exists()


def test_load_generated_needs_a_finished_run(tmp_path, socofing):
    out = tmp_path / "g"
    generate_dataset(socofing, fingers=1, impressions=2, seed=0, out=out, workers=1, progress=False)
    (out / "manifest.json").unlink()
    with pytest.raises(ValueError, match="manifest"):
        load_generated(out)


def test_cli_synth_and_gallery(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["data", "synth", "--profile", "socofing", "--fingers", "2", "--impressions", "2", "--seed", "3",
                 "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert sorted(p.name for p in (out / "f00001").iterdir()) == ["0.png", "1.png", "ground_truth.json"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["profile"]["name"] == "socofing" and manifest["impressions"] == 2
    # resuming with another seed is refused with one clear line and exit code 2
    assert main(["data", "synth", "--profile", "socofing", "--fingers", "2", "--impressions", "2", "--seed", "4",
                 "--out", str(out), "--quiet"]) == 2
    assert "different synthetic generation" in capsys.readouterr().err
    png = tmp_path / "g.png"
    assert main(["data", "gallery", "-o", str(png), "--profiles", "socofing", "--fingers", "1",
                 "--impressions", "2"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_finger_records_in_memory(socofing):
    recs = finger_records(socofing, 4, 3, seed=0)
    assert [r.impression for r in recs] == [0, 1, 2] and {r.identity for r in recs} == {"f00004"}
    assert recs[0].image.shape == socofing.output_size


def test_generated_dataset_is_readable_by_the_container_user(tmp_path, socofing):
    """`fedprint data synth` output mounted read-only into a ClientApp container that runs as another uid."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        out = generate_dataset(socofing, fingers=2, impressions=2, seed=1, out=tmp_path / "d", workers=1,
                               progress=False)
    finally:
        os.umask(old)
    paths = [out, *out.rglob("*")]
    assert any(p.name == "manifest.json" for p in paths) and any(p.suffix == ".png" for p in paths)
    for p in paths:
        mode = p.stat().st_mode
        assert mode & stat.S_IROTH, f"{p}: {stat.filemode(mode)} is not readable by others"
        assert not p.is_dir() or mode & stat.S_IXOTH, f"{p}: {stat.filemode(mode)} cannot be entered by others"
