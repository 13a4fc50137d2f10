"""Tests for data.datasets: the validated image reader and every layout loader, on fixtures written here."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from fedprint.data.datasets import LAYOUTS, DatasetError, ImageReadError, detect_layout, load_dataset, read_gray
from fedprint.data.record import BIFURCATION, ENDING

H, W = 13, 17  # deliberately non-square, so a transposed or resized read would show


def _img(seed: int, shape: tuple[int, int] = (H, W)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _write(path: Path, arr: np.ndarray, **save_kw) -> np.ndarray:
    """Write ``arr`` with Pillow (mode from dtype/shape); returns it for comparison."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, **save_kw)
    return arr


def _truncate(path: Path, cut: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut])


# ---------------------------------------------------------------- imread


@pytest.mark.parametrize("ext", ["png", "bmp", "tif", "tiff"])
def test_read_gray_roundtrip_exact(tmp_path, ext):
    arr = _write(tmp_path / f"a.{ext}", _img(1))
    out = read_gray(tmp_path / f"a.{ext}")
    assert out.dtype == np.uint8 and out.shape == (H, W)
    np.testing.assert_array_equal(out, arr)


@pytest.mark.parametrize(
    "ext, save_kw, writer",
    [
        ("png", {}, "pil"),
        ("bmp", {}, "pil"),
        ("tif", {}, "pil"),
        ("tif", {"compression": "tiff_lzw"}, "pil"),
        ("tif", {}, "cv2"),  # OpenCV puts the IFD at the end of the file
        ("png", {}, "cv2"),
    ],
)
@pytest.mark.parametrize("cut", [1, 4, 12, "half"])
def test_read_gray_catches_truncation(tmp_path, ext, save_kw, writer, cut):
    path = tmp_path / f"t.{ext}"
    arr = _img(2, (40, 30))
    if writer == "pil":
        _write(path, arr, **save_kw)
    else:
        assert cv2.imwrite(str(path), arr)
    _truncate(path, path.stat().st_size // 2 if cut == "half" else cut)
    with pytest.raises(ImageReadError) as info:
        read_gray(path)
    assert str(path) in str(info.value)


def test_read_gray_empty_missing_and_garbage(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(ImageReadError, match="empty file"):
        read_gray(tmp_path / "empty.png")
    with pytest.raises(ImageReadError, match="does not exist"):
        read_gray(tmp_path / "nope.png")
    (tmp_path / "junk.bmp").write_bytes(b"this is not an image at all" * 10)
    with pytest.raises(ImageReadError, match="junk.bmp"):
        read_gray(tmp_path / "junk.bmp")


def test_read_gray_rejects_other_bit_depths(tmp_path):
    deep = (np.arange(H * W, dtype=np.uint16).reshape(H, W) * 300).astype(np.uint16)
    assert cv2.imwrite(str(tmp_path / "g16.png"), deep)
    assert cv2.imwrite(str(tmp_path / "g16.tif"), deep)
    assert cv2.imwrite(str(tmp_path / "rgb16.png"), np.dstack([deep] * 3))
    _write(tmp_path / "f32.tif", np.random.default_rng(0).random((H, W)).astype(np.float32))
    Image.fromarray(_img(3) > 127).save(tmp_path / "bilevel.png")
    Image.fromarray(_img(3) > 127).save(tmp_path / "bilevel.tif")
    for name, pattern in [
        ("g16.png", "16 bits"),
        ("g16.tif", "16 bits"),
        ("rgb16.png", "16 bits"),  # Pillow alone would silently hand back 8-bit RGB here
        ("f32.tif", "32 bits|float"),
        ("bilevel.png", "1 bits"),
        ("bilevel.tif", "1 bits"),
    ]:
        with pytest.raises(ImageReadError, match=pattern) as info:
            read_gray(tmp_path / name)
        assert name in str(info.value)


def test_read_gray_colour_rules(tmp_path):
    gray = _img(4)
    _write(tmp_path / "rgb_eq.png", np.dstack([gray] * 3))
    np.testing.assert_array_equal(read_gray(tmp_path / "rgb_eq.png"), gray)

    colour = np.dstack([gray, gray, 255 - gray])
    _write(tmp_path / "rgb.bmp", colour)
    with pytest.raises(ImageReadError, match="colour"):
        read_gray(tmp_path / "rgb.bmp")

    # Inert alpha, as in SOCOFing Real/: transparent exactly where the gray value is 0 -> accepted losslessly.
    g0 = gray.copy()
    g0[:, :3] = 0
    alpha = np.where(g0 == 0, 0, 255).astype(np.uint8)
    _write(tmp_path / "rgba_inert.bmp", np.dstack([g0, g0, g0, alpha]))
    _write(tmp_path / "rgba_inert.png", np.dstack([g0, g0, g0, alpha]))
    for name in ("rgba_inert.bmp", "rgba_inert.png"):
        np.testing.assert_array_equal(read_gray(tmp_path / name), g0)

    # Alpha that would change the image when composited -> rejected, not guessed at.
    alpha[5, 5], g0[5, 5] = 0, 200
    _write(tmp_path / "rgba_real_alpha.png", np.dstack([g0, g0, g0, alpha]))
    with pytest.raises(ImageReadError, match="alpha"):
        read_gray(tmp_path / "rgba_real_alpha.png")


def test_read_gray_palette_and_multipage(tmp_path):
    gray = _img(5)
    pal = Image.fromarray(gray).convert("P")  # gray palette -> accepted through the R == G == B rule
    pal.save(tmp_path / "pal.png")
    np.testing.assert_array_equal(read_gray(tmp_path / "pal.png"), gray)

    frames = [Image.fromarray(_img(6)), Image.fromarray(_img(7))]
    frames[0].save(tmp_path / "multi.tif", save_all=True, append_images=frames[1:])
    with pytest.raises(ImageReadError, match="2 pages"):
        read_gray(tmp_path / "multi.tif")


# ---------------------------------------------------------------- layout fixtures


def _socofing(root: Path) -> dict[str, np.ndarray]:
    """Real/ as 32-bit RGBA BMP with equal channels (like the real files), Altered/ as 8-bit gray BMP."""
    written = {}
    for stem, seed in [
        ("1__M_Left_index_finger", 10),
        ("10__F_Right_thumb_finger", 11),
        ("2__M_Left_ring_finger", 12),
    ]:
        g = _img(seed)
        g[0, :] = 0
        a = np.where(g == 0, 0, 255).astype(np.uint8)
        _write(root / "Real" / f"{stem}.BMP", np.dstack([g, g, g, a]))
        written[stem] = g
    for level, stem, kind, seed in [
        ("Easy", "1__M_Left_index_finger", "CR", 20),
        ("Hard", "1__M_Left_index_finger", "Zcut", 21),
        ("Medium", "1__M_Left_index_finger", "Obl", 22),
        ("Easy", "7__F_Right_little_finger", "Obl", 23),  # alteration whose real image is absent
    ]:
        written[f"{level}/{stem}_{kind}"] = _write(
            root / "Altered" / f"Altered-{level}" / f"{stem}_{kind}.BMP", _img(seed)
        )
    return written


def _casia(root: Path) -> None:
    for subject in ("000", "001"):
        for hand in ("L", "R"):
            for finger in (0, 3):
                for imp in (0, 1):
                    seed = int(subject) * 100 + (hand == "R") * 10 + finger * 2 + imp
                    _write(root / subject / hand / f"{subject}_{hand}{finger}_{imp}.bmp", _img(seed))


def _nist(root: Path) -> None:
    for figs, num, pos in [("figs_0", "0001", "01"), ("figs_0", "0002", "05"), ("figs_1", "0251", "10")]:
        for prefix, seed in (("f", 1), ("s", 2)):
            stem = f"{prefix}{num}_{pos}"
            _write(root / figs / f"{stem}.png", _img(int(num) * 10 + seed))
            (root / figs / f"{stem}.txt").write_text("Gender: M\nClass: W\nHistory: x\n")


def _fvc(root: Path, fingers=(101, 102, 110), impressions=(1, 2, 3)) -> None:
    for finger in fingers:
        for imp in impressions:
            _write(root / f"{finger}_{imp}.tif", _img(finger * 10 + imp))


def _manifest(root: Path, keys: list[str], profile: str = "casia") -> dict:
    truth = {
        key: {
            "pattern": "left_loop",
            "cores": [[5.0, 6.0]],
            "deltas": [],
            "minutiae": [[1.0, 2.0, 0.5, ENDING], [3.0, 4.0, 1.5, BIFURCATION]],
        }
        for key in keys
    }
    manifest = {"format": "fedprint-synth/1", "profile": {"name": profile}, "ground_truth": truth}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def _generic(root: Path) -> None:
    for ident in ("a", "b10", "b9"):
        for imp in (0, 2, 10):
            _write(root / ident / f"{imp:02d}.png", _img(len(ident) * 100 + imp))


# ---------------------------------------------------------------- SOCOFing


def test_socofing_real_and_altered(tmp_path):
    written = _socofing(tmp_path)
    recs = load_dataset("socofing", tmp_path)
    keys = [r.key for r in recs]
    assert keys == [
        "1__M_Left_index/0",
        "1__M_Left_index/0/Easy/CR",
        "1__M_Left_index/0/Hard/Zcut",
        "1__M_Left_index/0/Medium/Obl",
        "2__M_Left_ring/0",
        "7__F_Right_little/0/Easy/Obl",
        "10__F_Right_thumb/0",
    ]
    assert {r.domain for r in recs} == {"socofing"}
    by_key = {r.key: r for r in recs}
    real = by_key["1__M_Left_index/0"]
    np.testing.assert_array_equal(real.image, written["1__M_Left_index_finger"])
    altered = by_key["1__M_Left_index/0/Easy/CR"]
    assert (altered.identity, altered.impression, altered.alteration) == (
        real.identity,
        real.impression,
        "Easy/CR",
    )
    np.testing.assert_array_equal(altered.image, written["Easy/1__M_Left_index_finger_CR"])
    assert all(r.image.shape == (H, W) for r in recs)

    real_only = load_dataset("socofing", tmp_path, altered=False)
    assert [r.alteration for r in real_only] == [None, None, None]


def test_socofing_layout_errors(tmp_path):
    _write(tmp_path / "Altered" / "Altered-Easy" / "1__M_Left_index_finger_CR.BMP", _img(0))
    with pytest.raises(DatasetError, match="Real.*missing folder"):
        load_dataset("socofing", tmp_path)
    _write(tmp_path / "Real" / "1__M_Left_index_finger.BMP", _img(1))
    _write(tmp_path / "Real" / "1__X_Left_index_finger.BMP", _img(2))
    with pytest.raises(DatasetError, match="1__X_Left_index_finger.BMP: file name does not match"):
        load_dataset("socofing", tmp_path)

    report: list = []
    recs = load_dataset("socofing", tmp_path, skip_bad=True, report=report)
    assert [r.key for r in recs] == ["1__M_Left_index/0", "1__M_Left_index/0/Easy/CR"]
    assert len(report) == 1 and report[0][0].endswith("1__X_Left_index_finger.BMP")

    (tmp_path / "Real" / "1__X_Left_index_finger.BMP").unlink()
    (tmp_path / "Altered" / "Altered-Extreme").mkdir()
    with pytest.raises(DatasetError, match="Altered-Extreme"):
        load_dataset("socofing", tmp_path, skip_bad=False, report=None)


def test_socofing_rejects_coloured_real_image(tmp_path):
    g = _img(3)
    _write(tmp_path / "Real" / "3__F_Left_index_finger.BMP", np.dstack([g, g, 255 - g, np.full_like(g, 255)]))
    with pytest.raises(DatasetError, match=r"3__F_Left_index_finger\.BMP: .*colour"):
        load_dataset("socofing", tmp_path)


def test_socofing_altered_required(tmp_path):
    _write(tmp_path / "Real" / "1__M_Left_index_finger.BMP", _img(1))
    assert len(load_dataset("socofing", tmp_path)) == 1
    with pytest.raises(DatasetError, match="Altered"):
        load_dataset("socofing", tmp_path, altered=True)


# ---------------------------------------------------------------- CASIA


def test_casia_layout(tmp_path):
    root = tmp_path / "CASIA-FingerprintV5(BMP)"
    _casia(root)
    (root / "000" / "L" / "Thumbs.db").write_bytes(b"\0" * 10)  # non-image files are not part of the dataset
    recs = load_dataset("casia", tmp_path)  # subject folders one level down are found
    assert len(recs) == 16
    assert [r.key for r in recs[:4]] == ["000_L0/0", "000_L0/1", "000_L3/0", "000_L3/1"]
    assert recs[-1].key == "001_R3/1"
    assert {r.domain for r in recs} == {"casia_v5"}
    np.testing.assert_array_equal(recs[-1].image, _img(100 + 10 + 6 + 1))


def test_casia_file_in_wrong_folder(tmp_path):
    _casia(tmp_path)
    _write(tmp_path / "001" / "L" / "000_L1_0.bmp", _img(0))
    with pytest.raises(DatasetError, match=r"000_L1_0\.bmp: file is not in its folder 000/L/"):
        load_dataset("casia", tmp_path)


# ---------------------------------------------------------------- NIST


def test_nist_layout(tmp_path):
    root = tmp_path / "sd04" / "png_txt"
    _nist(root)
    recs = load_dataset("nist_sd10", root)
    assert [r.key for r in recs] == [
        "0001_01/0",
        "0001_01/1",
        "0002_05/0",
        "0002_05/1",
        "0251_10/0",
        "0251_10/1",
    ]
    assert {r.domain for r in recs} == {"nist_sd4"}
    first, second = recs[0], recs[1]
    assert first.source.endswith("f0001_01.png") and second.source.endswith("s0001_01.png")
    np.testing.assert_array_equal(second.image, _img(12))

    plain = tmp_path / "converted"
    _write(plain / "f0000001.png", _img(1))
    _write(plain / "s0000001.png", _img(2))
    recs = load_dataset("nist_sd10", plain)
    assert [(r.identity, r.impression, r.domain) for r in recs] == [
        ("0000001", 0, "nist"),
        ("0000001", 1, "nist"),
    ]


# ---------------------------------------------------------------- FVC


def test_fvc_flat_folder(tmp_path):
    _fvc(tmp_path)
    recs = load_dataset("fvc", tmp_path)
    assert [r.key for r in recs] == [f"{f}/{i}" for f in (101, 102, 110) for i in (0, 1, 2)]
    assert {r.domain for r in recs} == {"fvc"}
    np.testing.assert_array_equal(recs[0].image, _img(1011))  # 101_1.tif -> impression 0


def test_fvc_db_folders_and_domain(tmp_path):
    root = tmp_path / "FVC2004"
    _fvc(root / "DB1_A", fingers=(1, 2), impressions=(1, 2))
    _fvc(root / "DB3_B", fingers=(101,), impressions=(1,))
    recs = load_dataset("fvc", root)
    assert [(r.key, r.domain) for r in recs] == [
        ("DB1_A/1/0", "fvc2004_db1"),
        ("DB1_A/1/1", "fvc2004_db1"),
        ("DB1_A/2/0", "fvc2004_db1"),
        ("DB1_A/2/1", "fvc2004_db1"),
        ("DB3_B/101/0", "fvc2004_db3"),
    ]
    single = load_dataset("fvc", root / "DB1_A")
    assert [r.identity for r in single] == ["1", "1", "2", "2"] and single[0].domain == "fvc2004_db1"


def test_fvc_bad_names(tmp_path):
    _fvc(tmp_path, fingers=(1,), impressions=(1,))
    _write(tmp_path / "1_0.tif", _img(0))
    with pytest.raises(DatasetError, match=r"1_0\.tif: impression number 0"):
        load_dataset("fvc", tmp_path)
    (tmp_path / "1_0.tif").unlink()
    _write(tmp_path / "1_1.png", _img(0))
    with pytest.raises(DatasetError, match="duplicate record 1/0"):
        load_dataset("fvc", tmp_path)


# ---------------------------------------------------------------- generic / synthetic


def test_generic_layout(tmp_path):
    _generic(tmp_path)
    recs = load_dataset("generic", tmp_path)
    assert [r.key for r in recs] == [f"{i}/{n}" for i in ("a", "b9", "b10") for n in (0, 2, 10)]
    assert {r.domain for r in recs} == {"generic"} and all(r.ground_truth is None for r in recs)
    np.testing.assert_array_equal(recs[-1].image, _img(310))
    assert load_dataset("generic", tmp_path, domain="site-a")[0].domain == "site-a"


def test_generic_synthetic_manifest(tmp_path):
    _generic(tmp_path)
    keys = [f"{i}/{n}" for i in ("a", "b10", "b9") for n in (0, 2, 10)]
    _manifest(tmp_path, keys, profile="fvc2004_db1")
    recs = load_dataset("generic", tmp_path)
    assert {r.domain for r in recs} == {"synth:fvc2004_db1"}
    gt = recs[0].ground_truth
    assert gt is not None and gt.pattern == "left_loop"
    np.testing.assert_allclose(gt.cores, [[5.0, 6.0]])
    assert gt.deltas.shape == (0, 2) and gt.minutiae.shape == (2, 4)
    assert gt.minutiae[1, 3] == BIFURCATION


def test_generic_manifest_errors(tmp_path):
    _generic(tmp_path)
    keys = [f"{i}/{n}" for i in ("a", "b10", "b9") for n in (0, 2, 10)]
    _manifest(tmp_path, keys[1:])
    with pytest.raises(DatasetError, match=r"00\.png: no ground truth for 'a/0'"):
        load_dataset("generic", tmp_path)
    _manifest(tmp_path, [*keys, "zz/1"])
    with pytest.raises(
        DatasetError, match=r"manifest\.json: 1 ground-truth entries have no image file: zz/1"
    ):
        load_dataset("generic", tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "other/2"}))
    with pytest.raises(DatasetError, match="unsupported manifest format 'other/2'"):
        load_dataset("generic", tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(DatasetError, match="cannot parse JSON"):
        load_dataset("generic", tmp_path)


def test_generic_structure_errors(tmp_path):
    _generic(tmp_path)
    _write(tmp_path / "stray.png", _img(0))
    with pytest.raises(DatasetError, match=r"stray\.png: image directly in the dataset root"):
        load_dataset("generic", tmp_path)
    (tmp_path / "stray.png").unlink()
    _write(tmp_path / "a" / "first.png", _img(0))
    with pytest.raises(DatasetError, match=r"first\.png: file name is not an integer"):
        load_dataset("generic", tmp_path)


# ---------------------------------------------------------------- bad input, skip_bad, order


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("truncate", "truncated"),
        ("empty", "empty file"),
        ("depth16", "16 bits"),
        ("rgb", "colour"),
    ],
)
def test_bad_file_raises_or_is_reported(tmp_path, caplog, damage, reason):
    _fvc(tmp_path)
    bad = tmp_path / "102_2.tif"
    if damage == "truncate":
        _truncate(bad, 50)
    elif damage == "empty":
        bad.write_bytes(b"")
    elif damage == "depth16":
        assert cv2.imwrite(str(bad), _img(0).astype(np.uint16) * 257)
    else:
        _write(bad, np.dstack([_img(0), _img(1), _img(2)]))

    with pytest.raises(DatasetError, match=reason) as info:
        load_dataset("fvc", tmp_path)
    assert str(bad) in str(info.value)

    report: list = []
    with caplog.at_level(logging.WARNING, logger="fedprint.data.datasets"):
        recs = load_dataset("fvc", tmp_path, skip_bad=True, report=report)
    assert len(recs) == 8 and "102/1" not in {r.key for r in recs}
    assert len(report) == 1 and report[0][0] == str(bad) and reason.split()[0] in report[0][1]
    assert any(str(bad) in rec.getMessage() for rec in caplog.records)


def test_layout_mismatch_and_missing_root(tmp_path):
    _fvc(tmp_path)
    for layout in ("casia", "nist_sd10", "generic"):
        with pytest.raises(DatasetError):
            load_dataset(layout, tmp_path)
    report: list = []
    with pytest.raises(DatasetError, match=r"no image matches the casia layout .*9 file\(s\) skipped"):
        load_dataset("casia", tmp_path, skip_bad=True, report=report)
    assert len(report) == 9
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no image matches the fvc layout"):
        load_dataset("fvc", tmp_path / "empty")
    with pytest.raises(DatasetError, match="root folder does not exist"):
        load_dataset("fvc", tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown layout 'cassia'"):
        load_dataset("cassia", tmp_path)


def test_detect_layout(tmp_path):
    builders = {"socofing": _socofing, "casia": _casia, "nist_sd10": _nist, "fvc": _fvc, "generic": _generic}
    assert set(builders) == set(LAYOUTS)
    for layout, build in builders.items():
        root = tmp_path / layout
        build(root)
        assert detect_layout(root) == layout
        assert [r.key for r in load_dataset("auto", root)] == [r.key for r in load_dataset(layout, root)]
    synth = tmp_path / "synth"
    _write(synth / "s0" / "0.png", _img(0))
    _manifest(synth, ["s0/0"])
    assert detect_layout(synth) == "generic"

    (tmp_path / "nothing").mkdir()
    _write(tmp_path / "nothing" / "picture.png", _img(0))
    with pytest.raises(DatasetError, match="matches no known dataset layout"):
        detect_layout(tmp_path / "nothing")
    both = tmp_path / "both"
    _fvc(both)
    _write(both / "Real" / "1__M_Left_index_finger.BMP", _img(0))
    with pytest.raises(DatasetError, match="several layouts"):
        detect_layout(both)


def test_order_is_deterministic_and_natural(tmp_path):
    _fvc(tmp_path, fingers=(9, 10, 100, 2), impressions=(2, 1))
    first = load_dataset("fvc", tmp_path)
    assert [r.key for r in first] == [f"{f}/{i}" for f in (2, 9, 10, 100) for i in (0, 1)]
    again = load_dataset("fvc", tmp_path)
    assert [r.source for r in first] == [r.source for r in again]
