"""Issue 25 §1, "matching must not lie": the print-quality gate, non-finite values, exit codes, dpi, calibration and
open-set identification — with an untrained tiny model (fast) and, where present, the real prints."""

from __future__ import annotations

import importlib.util
import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import fedprint.cli.main as fedprint_cli
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.metrics import threshold_at_eer, threshold_at_fmr
from fedprint.models.model_file import load_model, model_bytes, recalibrated_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder
from fedprint.recognition.identification import identify
from fedprint.recognition.matching import evaluate, verify
from fedprint.recognition.quality import MIN_QUALITY, LowQualityError, print_quality

#: ../shared/data/real beside the checkout (FEDPRINT_TEST_REAL overrides, e.g. from a worktree).
REAL = Path(os.environ.get("FEDPRINT_TEST_REAL") or Path(__file__).resolve().parents[3] / "shared" / "data" / "real")
SPEC = InputSpec(size=32)


def _model(path: Path, threshold=0.5, nan=False) -> Path:
    torch.manual_seed(0)
    net = build_encoder("compact", 16, width=8)
    if nan:
        with torch.no_grad():
            next(iter(net.parameters())).fill_(float("nan"))
    path.write_bytes(model_bytes(net, encoder_name="compact", embedding_dim=16, encoder_kwargs={"width": 8},
                                 spec=SPEC, threshold=threshold, threshold_source="toy pairs", method="toy"))
    return path


def _png(path: Path, arr: np.ndarray, dpi: float | None = None) -> str:
    Image.fromarray(arr.astype(np.uint8)).save(path, **({"dpi": (dpi, dpi)} if dpi else {}))
    return str(path)


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    root = tmp_path_factory.mktemp("qgate")
    recs = stripe_records(n_fingers=4, n_impressions=3, size=48, seed=3)
    data = write_generic(recs, root / "data")
    return {"root": root, "model": _model(root / "m.pt"), "data": data, "recs": recs,
            "a": _png(root / "a.png", recs[0].image), "b": _png(root / "b.png", recs[1].image),
            "black": _png(root / "black.png", np.zeros((64, 64))),
            "white": _png(root / "white.png", np.full((64, 64), 255)),
            "tiny": _png(root / "tiny.png", np.zeros((1, 1)))}


def run(capsys, *argv):
    code = fedprint_cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


class TestQualityGate:
    def test_non_prints_score_below_the_gate_and_stripes_above(self):
        rng = np.random.default_rng(0)
        yy, xx = np.mgrid[:200, :200]
        junk = {"black": np.zeros((200, 200)), "white": np.full((200, 200), 255.0), "1x1": np.zeros((1, 1)),
                "noise": rng.integers(0, 256, (200, 200)), "ramp": xx * 255.0 / 199,
                "checker": ((xx // 20 + yy // 20) % 2) * 255.0}
        for name, img in junk.items():
            assert print_quality(img) < MIN_QUALITY, name
        ridges = 127 + 100 * np.sin(2 * np.pi * (xx + 0.3 * yy) / 9)
        assert print_quality(ridges) > 0.8

    def test_blank_images_are_refused_before_any_comparison(self, kit, capsys):
        code, out, err = run(capsys, "verify", kit["black"], kit["white"], "--model", kit["model"])
        assert code == 2 and out == ""
        assert f"no fingerprint found in {kit['black']}: degenerate image" in err and "\n" not in err.strip()
        assert "fewer than 8 gray levels" in err  # the check that refused it is named

    def test_a_degenerate_image_is_refused_even_with_the_gate_off(self, kit, capsys):
        code, _, err = run(capsys, "verify", kit["a"], kit["tiny"], "--model", kit["model"])
        assert code == 2 and f"no fingerprint found in {kit['tiny']}" in err and "1x1 px" in err
        code, out, err = run(capsys, "verify", kit["black"], kit["white"], "--model", kit["model"],
                             "--min-quality", "0")
        assert code == 2 and out == "" and "degenerate image" in err  # black vs white never "match"
        code, out, _ = run(capsys, "verify", kit["a"], kit["b"], "--model", kit["model"], "--min-quality", "0")
        assert code in (0, 1) and "quality A 0." in out  # a real picture is scored with the gate off

    def test_quality_and_threshold_source_printed_with_every_score(self, kit, capsys):
        code, out, _ = run(capsys, "verify", kit["a"], kit["b"], "--model", kit["model"])
        assert code in (0, 1) and "quality A 0." in out and "threshold: model's: toy pairs" in out
        code, out, _ = run(capsys, "verify", kit["a"], kit["b"], "--model", kit["model"], "--json")
        res = json.loads(out)
        assert res["quality"]["a"] > MIN_QUALITY and res["threshold_source"] == "model's: toy pairs"
        assert res["match"] == (code == 0) and res["dpi"]["a"]["value"] == 500

    def test_identify_refuses_a_blank_probe_and_skip_bad_leaves_it_out(self, kit, capsys):
        code, out, err = run(capsys, "identify", "--gallery", kit["data"], "--probe", kit["black"],
                             "--model", kit["model"])
        assert code == 2 and out == "" and "no fingerprint found" in err
        m = load_model(kit["model"])
        report: list = []
        blank = kit["recs"][0].__class__(identity="x", impression=0, image=np.zeros((48, 48), np.uint8),
                                         domain="t", source="blank.png")
        res = identify(m, kit["recs"], [blank, kit["recs"][0]], skip_bad=True, report=report)
        assert len(res) == 1 and report[0][0] == "blank.png" and "degenerate image" in report[0][1]

    def test_evaluate_skip_bad_reports_blank_files(self, kit, capsys, tmp_path):
        data = write_generic(kit["recs"], tmp_path / "d")
        blank_dir = Path(data) / "zz"
        blank_dir.mkdir()
        _png(blank_dir / "1.png", np.zeros((48, 48)))
        _png(blank_dir / "2.png", np.zeros((48, 48)))
        code, _, err = run(capsys, "evaluate", "--data", data, "--model", kit["model"], "--layout", "generic",
                           "--out", tmp_path / "e1")
        assert code == 2 and "no fingerprint found" in err and not (tmp_path / "e1").exists()
        code, out, _ = run(capsys, "evaluate", "--data", data, "--model", kit["model"], "--layout", "generic",
                           "--out", tmp_path / "e2", "--skip-bad")
        assert code == 0 and "2 file(s) skipped" in out
        assert json.loads((tmp_path / "e2" / "metrics.json").read_text())["skipped_low_quality"] == 0


class TestNonFiniteValues:
    def test_nan_and_inf_thresholds_are_refused_at_parse_time(self, kit, capsys):
        for bad in ("nan", "inf", "-inf"):
            code, _, err = run(capsys, "verify", kit["a"], kit["b"], "--model", kit["model"], f"--threshold={bad}")
            assert code == 2 and "expected a finite number" in err

    def test_string_threshold_in_a_model_file_is_exit_2_not_1(self, kit, capsys, tmp_path):
        payload = torch.load(kit["model"], weights_only=True)
        payload["threshold"] = "0.5"
        buf = io.BytesIO()
        torch.save(payload, buf)
        bad = tmp_path / "str.pt"
        bad.write_bytes(buf.getvalue())
        code, _, err = run(capsys, "verify", kit["a"], kit["b"], "--model", bad)
        assert code == 2 and "threshold must be a finite distance" in err and "Traceback" not in err

    def test_nan_weights_are_refused(self, kit, capsys, tmp_path):
        bad = _model(tmp_path / "nan.pt", nan=True)
        code, _, err = run(capsys, "verify", kit["a"], kit["b"], "--model", bad)
        assert code == 2 and "NaN or infinite" in err

    def test_python_api_refuses_non_finite_thresholds(self, kit):
        m = load_model(kit["model"])
        a, b = kit["recs"][0].image, kit["recs"][1].image
        for t in (math.nan, math.inf):
            with pytest.raises(ValueError, match="finite"):
                verify(m, a, b, dpi_a=None, dpi_b=None, threshold=t)


class TestExitCodes:
    def test_an_unexpected_failure_is_one_line_and_exit_2(self, kit, capsys, monkeypatch):
        import fedprint.recognition.matching as matching

        def boom(*a, **k):
            raise RuntimeError("kaput\nsecond line")

        monkeypatch.setattr(matching, "verify", boom)
        code, _, err = run(capsys, "verify", kit["a"], kit["b"], "--model", kit["model"])
        assert code == 2 and err.count("\n") == 1 and "unexpected RuntimeError: kaput second line" in err

    def test_ctrl_c_is_one_line_and_exit_130(self, kit, capsys, monkeypatch):
        import fedprint.recognition.matching as matching

        def interrupted(*a, **k):
            raise KeyboardInterrupt

        monkeypatch.setattr(matching, "verify", interrupted)
        code, _, err = run(capsys, "verify", kit["a"], kit["b"], "--model", kit["model"])
        assert code == 130 and err == "fedprint verify: interrupted\n"

    def test_os_errors_name_the_path_without_errno(self, kit, capsys, tmp_path, monkeypatch):
        import fedprint.recognition.matching as matching

        def denied(*a, **k):
            raise PermissionError(13, "Permission denied", str(tmp_path / "x"))

        monkeypatch.setattr(matching, "verify", denied)
        code, _, err = run(capsys, "verify", kit["a"], kit["b"], "--model", kit["model"])
        assert code == 2 and "[Errno" not in err and f"Permission denied: {tmp_path / 'x'}" in err


class TestDpi:
    def test_the_files_plausible_dpi_is_used_and_named(self, kit, capsys, tmp_path):
        a = _png(tmp_path / "a.png", kit["recs"][0].image, dpi=600)
        b = _png(tmp_path / "b.png", kit["recs"][1].image, dpi=96)
        code, out, _ = run(capsys, "verify", a, b, "--model", kit["model"], "--json")
        dpi = json.loads(out)["dpi"]
        assert dpi["a"] == {"value": 600.0, "source": "file: 600 dpi"}
        assert dpi["b"]["value"] == 500 and "96 dpi, a software default" in dpi["b"]["source"]
        code, out, _ = run(capsys, "verify", a, b, "--model", kit["model"], "--dpi-b", "250", "--json")
        assert json.loads(out)["dpi"]["b"] == {"value": 250.0, "source": "--dpi-b"}

    def test_a_probe_from_the_gallery_takes_the_gallery_dpi_and_probe_dpi_may_differ(self, kit, capsys):
        probe = sorted(Path(kit["data"]).rglob("*.png"))[0]
        code, out, _ = run(capsys, "identify", "--gallery", kit["data"], "--probe", probe, "--model", kit["model"],
                           "--dpi", "400", "--json")
        res = json.loads(out)
        assert res["gallery_dpi"] == [400.0] and res["probe_dpi"].startswith("400 dpi")
        code, out, _ = run(capsys, "identify", "--gallery", kit["data"], "--probe", probe, "--model", kit["model"],
                           "--probe-dpi", "600", "--json")
        assert json.loads(out)["probe_dpi"] == "600 dpi (--probe-dpi)"


class TestCalibrationAndOpenSet:
    def test_threshold_at_fmr_reaches_its_target(self):
        rng = np.random.default_rng(1)
        d = np.r_[rng.normal(0.55, 0.12, 500), rng.normal(0.8, 0.1, 5000)]
        lab = np.r_[np.ones(500), np.zeros(5000)].astype(int)
        p = threshold_at_fmr(d, lab, 0.01)
        assert p["fmr"] <= 0.01 and np.mean(d[lab == 0] <= p["threshold"]) == pytest.approx(p["fmr"])
        assert np.mean(d[lab == 1] > p["threshold"]) == pytest.approx(p["fnmr"])
        e = threshold_at_eer(d, lab)
        assert abs(e["fmr"] - e["fnmr"]) < 0.02 and e["threshold"] > p["threshold"]

    def test_evaluate_reports_operating_point_thresholds(self, kit):
        metrics, d, pairs = evaluate(load_model(kit["model"]), kit["recs"], "all")
        assert set(metrics["operating_points"]) == {"eer"}  # 54 impostor pairs: FMR 1 % not resolvable
        assert metrics["quality_min"] >= MIN_QUALITY

    def test_calibrate_writes_a_new_model_that_verify_credits(self, kit, capsys, tmp_path):
        out = tmp_path / "cal.pt"
        code, _, err = run(capsys, "calibrate", "--model", kit["model"], "--data", kit["data"], "--fmr", "0.01",
                           "-o", out)
        assert code == 2 and "cannot resolve FMR 1 %" in err and not out.exists()
        code, text, _ = run(capsys, "calibrate", "--model", kit["model"], "--data", kit["data"], "--eer", "-o", out)
        assert code == 0 and out.exists()
        m = load_model(out)
        assert m.meta["calibration"]["n_impostor"] == 54 and m.meta["calibration"]["previous_threshold"] == 0.5
        assert "calibrated at the EER point on 12 genuine / 54 impostor pairs" in m.threshold_source
        code, text, _ = run(capsys, "verify", kit["a"], kit["b"], "--model", out)
        assert "threshold: model's: calibrated at the EER point" in text
        code, _, err = run(capsys, "calibrate", "--model", kit["model"], "--data", kit["data"], "--eer", "-o", out)
        assert code == 2 and "exists" in err

    def test_recalibrated_bytes_refuses_non_finite(self, kit):
        with pytest.raises(ValueError, match="finite"):
            recalibrated_bytes(kit["model"], math.nan, "x", {})

    def test_identify_is_open_set_and_one_probe_looks_like_a_folder(self, kit, capsys):
        probe = sorted(Path(kit["data"]).rglob("*.png"))[0]
        code, out, _ = run(capsys, "identify", "--gallery", kit["data"], "--probe", probe, "--model", kit["model"],
                           "--threshold", "0.0001")
        assert code == 0 and "not enrolled (nearest" in out and "top-4 by distance" in out
        code, one, _ = run(capsys, "identify", "--gallery", kit["data"], "--probe", probe, "--model", kit["model"],
                           "--json")
        code, many, _ = run(capsys, "identify", "--gallery", kit["data"], "--probe", kit["data"], "--model",
                            kit["model"], "--json")
        one, many = json.loads(one), json.loads(many)
        assert set(one["results"][0]) == set(many["results"][0])
        assert {"identity", "distance"} == set(one["results"][0]["top"][0])


@pytest.mark.skipif(not (REAL / "fvc2002_db1_b").is_dir(), reason="real prints (../shared/data/real) absent")
class TestRealPrints:
    def test_every_real_print_passes_the_default_gate(self):
        from fedprint.data.datasets import load_dataset

        for name, layout in (("fvc2002_db3_b", "fvc"), ("fvc2002_db1_b", "fvc"), ("socofing_sample", "socofing")):
            q = [print_quality(r.image, r.dpi) for r in load_dataset(layout, REAL / name)]
            assert min(q) > 1.5 * MIN_QUALITY, name

    def test_a_blank_image_is_refused_against_a_real_print(self, kit):
        from fedprint.data.datasets.imread import read_gray

        m = load_model(kit["model"])
        with pytest.raises(LowQualityError, match="no fingerprint found in B"):
            verify(m, read_gray(REAL / "fvc2002_db1_b" / "101_1.tif"), np.zeros((300, 300), np.uint8),
                   dpi_a=500, dpi_b=500)


@pytest.mark.skipif(importlib.util.find_spec("nbis") is None, reason="nbis-py (the classical extra) not installed")
def test_a_stripe_pattern_with_the_clarity_of_a_print_fails_the_minutiae_check():
    from fedprint.recognition.quality import MIN_MINUTIAE, gate

    yy, xx = np.mgrid[:300, :300]
    for phase in (0.0, np.pi / 2):  # the two phase-shifted stripes that matched each other before
        stripes = (127 + 100 * np.sin(2 * np.pi * (xx + 0.3 * yy) / 9 + phase)).astype(np.uint8)
        q, why = gate(stripes, 500.0)
        assert q > 0.8 and why is not None and f"< {MIN_MINUTIAE}" in why
    assert gate(stripes, 500.0, min_quality=0)[1] is None  # the gate off: only degenerate images are refused


def test_real_prints_pass_the_minutiae_check():
    from fedprint.data.datasets import load_dataset
    from fedprint.recognition.quality import gate
    from fedprint.recognition.real_samples import real_samples_dir

    root = real_samples_dir()
    if root is None or importlib.util.find_spec("nbis") is None:
        pytest.skip("needs ../shared/data/real and nbis-py")
    recs = load_dataset("auto", root / "fvc2002_db1_b", dpi=None)[::20]
    assert all(gate(r.image, r.dpi)[1] is None for r in recs)
