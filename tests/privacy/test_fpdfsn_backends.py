"""FP-DFSN takes its minutiae from the chosen backend, records it, keeps Eq. 9's T_d, and caches per backend."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fedprint.data.minutiae_border as border_mod
import fedprint.privacy.fpdfsn as fp
from fedprint.config import parse_config
from fedprint.data.minutiae import border_distance
from fedprint.data.minutiae_backends import available, default_backend
from fedprint.data.minutiae_border import extract_within_border, keep_within_border
from fedprint.privacy.fpdfsn import FPDFSNParams, FPDFSNResult, fpdfsn
from fedprint.privacy.fpdfsn_cache import FPDFSNCache
from fedprint.training.experiment_data import fpdfsn_params

REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "real"
PRINT = REAL / "fvc2002_db1_b" / "101_1.tif"


def _img(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (64, 64), dtype=np.uint8)


def test_params_resolve_auto_and_refuse_unknown_in_one_line():
    assert FPDFSNParams().backend == default_backend()
    assert FPDFSNParams(backend="crossing").to_dict()["backend"] == "crossing"
    with pytest.raises(ValueError) as e:
        FPDFSNParams(backend="mindtct")
    assert "\n" not in str(e.value) and str(e.value).startswith("backend:") and "'mindtct'" in str(e.value)


def test_the_default_extractor_is_the_params_backend_with_its_border(monkeypatch):
    calls = []

    def fake(image, backend, *, border, **kw):
        calls.append((backend, border))
        return np.array([[20.0, 30.0, 0.5, 1.0, 0.9]])

    monkeypatch.setattr(border_mod, "extract_within_border", fake)
    monkeypatch.setattr(fp, "resolve_backend", lambda name, option: name)  # "leader" need not be installed
    res = fpdfsn(_img(), FPDFSNParams(backend="leader", border=7), 0)
    assert calls == [("leader", 7)] and res.backend == "leader" and res.n_minutiae == 1
    assert res.minutiae.shape == (1, 4) and res.noise_mask[30, 20]
    # a caller's own extractor is not attributed to a backend
    assert fpdfsn(_img(), FPDFSNParams(backend="crossing"), 0, extractor=lambda im, border: np.zeros((0, 4))
                  ).backend is None


def test_a_cache_made_with_another_backend_is_not_reused(tmp_path, monkeypatch):
    monkeypatch.setattr(fp, "resolve_backend", lambda name, option: name)  # nbis need not be installed
    seen = []

    def compute(image, params, rng):
        seen.append(params.backend)
        return FPDFSNResult(image=image, minutiae=np.zeros((0, 4)), n_minutiae=0,
                            noise_mask=np.zeros(image.shape, bool), backend=params.backend)

    img = _img()
    crossing, nbis = FPDFSNParams(backend="crossing"), FPDFSNParams(backend="nbis")
    FPDFSNCache(tmp_path, compute=compute).get_or_compute(img, crossing, 0)
    cache = FPDFSNCache(tmp_path, compute=compute)
    assert cache.get_or_compute(img, nbis, 0).backend == "nbis" and cache.misses == 1 and cache.disk_hits == 0
    assert seen == ["crossing", "nbis"]
    fresh = FPDFSNCache(tmp_path, compute=compute)
    assert fresh.get_or_compute(img, crossing, 0).backend == "crossing" and fresh.disk_hits == 1
    assert seen == ["crossing", "nbis"]  # served from disk, with the backend it was made with
    assert cache.key(img, crossing, 0)[0] != cache.key(img, nbis, 0)[0]
    with np.load(next(tmp_path.glob("*.npz"))) as z:
        assert json.loads(str(z["key_fields"]))["params"]["backend"] in ("crossing", "nbis")


def test_the_experiment_chooses_fpdfsn_s_backend():
    cfg = parse_config({"minutiae": {"backend": "crossing"}, "fpdfsn": {"enabled": True, "border": 12}})
    params = fpdfsn_params(cfg, 0.5)
    assert params.backend == "crossing" and params.border == 12
    assert fpdfsn_params(parse_config({}), 0.5).backend == default_backend()


def test_keep_within_border_is_the_crossing_number_s_t_d_rule():
    image = np.full((50, 60), 128, np.uint8)
    mask = np.zeros((50, 60), bool)
    mask[10:40, 10:50] = True
    pts = np.array([[30.0, 25.0, 0, 1, 1], [12.0, 25.0, 0, 1, 1], [30.0, 38.0, 0, 1, 1], [2.0, 2.0, 0, 1, 1]])
    kept = keep_within_border(pts, image, 5, mask)
    assert kept[:, :2].tolist() == [[30.0, 25.0]]  # the others are nearer than 5 px to the mask's edge
    d = border_distance(mask, mask.shape)
    assert d[25, 30] >= 5 > d[25, 12]
    assert len(keep_within_border(pts, image, 0, mask)) == 4
    with pytest.raises(ValueError, match="border"):
        keep_within_border(pts, image, -1, mask)


def test_crossing_through_the_backend_is_the_old_extractor():
    from fedprint.data.minutiae import extract_minutiae
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile

    image = finger_records(get_profile("casia"), finger=0, impressions=1, seed=0)[0].image
    old = extract_minutiae(image, border=14)
    new = extract_within_border(image, "crossing", border=14)
    assert new.shape == (len(old), 5) and np.array_equal(new[:, :4], old) and np.all(new[:, 4] == 1.0)


@pytest.mark.skipif(not available("nbis"), reason="nbis-py not installed (the classical extra)")
@pytest.mark.skipif(not PRINT.is_file(), reason="real samples absent")
def test_nbis_fpdfsn_on_a_real_print_keeps_t_d():
    from fedprint.data.datasets.imread import read_gray
    from fedprint.data.minutiae import segment
    from fedprint.privacy.fpdfsn import sharpen, to_uint8

    img = read_gray(PRINT)
    params = FPDFSNParams(backend="nbis", border=16)
    res = fpdfsn(img, params, 0)
    assert res.backend == "nbis" and 10 <= res.n_minutiae <= 150 and 0 < res.noise_mask.mean() < 0.6
    sharp = to_uint8(sharpen(img, params.d0))
    d = border_distance(segment(sharp), img.shape)
    xy = np.rint(res.minutiae[:, :2]).astype(int)
    assert np.all(d[xy[:, 1], xy[:, 0]] >= 16)
