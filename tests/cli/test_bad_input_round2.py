"""Issue 60, every bad input round 2 (§1, §3, §4 and §5's first point): one test class per class of bad input.

§1 accepted values that void what the output claims (template parameters, thresholds, ε, simulate --check);
§3 messages that name the culprit; §4 nothing left behind, nothing waited on in silence; §5 README and program.
All fast: no network is trained.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import fedprint.cli.main as fedprint_cli
from fedprint.config.experiment import parse_config, read_toml
from fedprint.data.stripes import stripe_records, write_generic

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def run(capsys, *argv):
    code = fedprint_cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> bool:
    return err.count("\n") == 1 and "Traceback" not in err and "a bug" not in err


@pytest.fixture
def image(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path / "print.png"
    Image.fromarray(rng.integers(0, 256, (64, 64), dtype=np.uint8)).save(path)
    return path


# ------------------------------------------------------------------------------------------ §1 template parameters
def _vault_params(**changes) -> dict:
    from fedprint.privacy.templates.vault_template import VaultParams, template_params

    return {**template_params(VaultParams(), 1), **changes}


def _template_file(path: Path, params: dict) -> Path:
    """A vault template file whose (checksummed) params are ``params``, written past the writer's own check."""
    from fedprint.privacy.templates import template_file as tf

    good = tf.write_template(path, "vault", _vault_params(), {"xs": np.arange(4, dtype=np.uint32)}, hardened=False)
    doc = json.loads(good.read_text())
    doc["params"] = params
    doc["sha256"] = tf._digest(doc)
    path.write_text(json.dumps(doc))
    return path


class TestTemplateParameters:
    @pytest.mark.parametrize("option, value, named", [
        ("--chaff", "-5", "--chaff"), ("--chaff", "0", "--chaff"), ("--chaff", "1000000000", "--chaff"),
        ("--degree", "-1", "--degree"), ("--degree", "0", "--degree"), ("--degree", "24", "--degree"),
    ])
    def test_enroll_refuses_parameters_outside_their_range_before_reading_images(self, capsys, tmp_path, option,
                                                                                  value, named):
        out = tmp_path / "t.fpt"
        code, _, err = run(capsys, "enroll", tmp_path / "absent.png", option, value, "-o", out)
        assert code == 2 and one_line(err) and f"{named}: expected an integer in" in err, err
        assert not out.exists()

    def test_enroll_refuses_a_sketch_k_outside_the_code(self, capsys, tmp_path):
        code, _, err = run(capsys, "enroll", tmp_path / "a.png", "--scheme", "sketch", "--sketch-k", "128",
                           "-o", tmp_path / "t.fpt")
        assert code == 2 and one_line(err) and "--sketch-k: expected an integer in [1, 127]" in err

    @pytest.mark.parametrize("change, named", [
        ({"degree": -1}, "degree"), ({"tol_px": float("nan")}, "tol_px"), ({"n_chaff": -5}, "n_chaff"),
        ({"tol_angle": 7.0}, "tol_angle"), ({"max_trials": 0}, "max_trials"), ({"weighted": "yes"}, "weighted"),
        ({"slots": 3}, "slots"),  # more than one slot only in a weighted vault
    ])
    def test_a_template_file_with_a_bad_parameter_is_a_damaged_template(self, tmp_path, change, named):
        from fedprint.privacy.templates.template_file import read_template

        path = _template_file(tmp_path / "t.fpt", _vault_params(**change))
        with pytest.raises(ValueError, match=rf"t\.fpt: damaged template: {named}: expected"):
            read_template(path)

    def test_verify_against_a_damaged_template_is_one_line_exit_2(self, capsys, tmp_path, image):
        path = _template_file(tmp_path / "t.fpt", _vault_params(tol_px=float("nan")))
        code, _, err = run(capsys, "verify", image, "--template", path)
        assert code == 2 and one_line(err) and "damaged template: tol_px" in err  # never "NO MATCH"

    def test_the_writer_refuses_them_too(self, tmp_path):
        from fedprint.privacy.templates.template_file import read_template, write_template

        with pytest.raises(ValueError, match="n_chaff: expected an integer in"):
            write_template(tmp_path / "w.fpt", "vault", _vault_params(n_chaff=0), {}, hardened=False)
        assert not (tmp_path / "w.fpt").exists()
        good = _template_file(tmp_path / "g.fpt", _vault_params())
        assert read_template(good)[1]["n_chaff"] == 200  # the defaults (NJP07) lie inside every range


# ------------------------------------------------------------------------------------------------ §1 thresholds
@pytest.fixture(scope="module")
def shipped() -> Path:
    from fedprint.models.model_file import pretrained_path

    return pretrained_path()


class TestThresholds:
    @pytest.mark.parametrize("value", ["5", "-1", "2.0001"])
    def test_verify_threshold_outside_the_distance_range_is_refused(self, capsys, tmp_path, shipped, value):
        code, _, err = run(capsys, "verify", tmp_path / "a.png", tmp_path / "b.png", "--model", shipped,
                           "--threshold", value, "--score", "global")
        assert code == 2 and one_line(err) and "--threshold (--score global): expected a distance threshold in " \
            "[0, 2]" in err, err

    def test_fused_thresholds_have_the_fused_scores_range(self, shipped):
        from fedprint.models.model_file import load_model
        from fedprint.models.score_range import check_threshold, distance_range

        model = load_model(shipped)
        lo, hi = distance_range(model.meta, "fused")
        cal = model.meta["score_fusion"]
        assert lo < -cal["threshold"] < hi  # the stored one lies inside
        # the ends: the fused score of (distance 0, dense 1) and of (distance 2, dense -1)
        top = (0 - cal["global_mean"]) / cal["global_std"] + (1 - cal["dense_mean"]) / cal["dense_std"]
        assert math.isclose(lo, -top)
        with pytest.raises(ValueError, match="expected a"):
            check_threshold(hi + 1, lo, hi, "--threshold")

    def test_a_model_file_whose_threshold_is_out_of_range_is_refused_on_loading(self, tmp_path, shipped):
        from fedprint.models.model_file import load_model, recalibrated_bytes

        bad = tmp_path / "bad.pt"
        bad.write_bytes(recalibrated_bytes(shipped, -0.5, "test", {}))
        with pytest.raises(ValueError, match=r"bad\.pt: threshold: expected a distance threshold in \[0, 2\]"):
            load_model(bad)

    def test_malformed_fusion_data_names_the_file_and_the_entry(self, capsys, tmp_path, shipped):
        from fedprint.models.model_file import load_model, with_minutiae_fusion_bytes, with_score_fusion_bytes

        bad = tmp_path / "fusion.pt"
        bad.write_bytes(with_score_fusion_bytes(shipped, {"threshold": 1.0}))  # no means, no spreads
        with pytest.raises(ValueError, match=r"fusion\.pt: score_fusion\.global_mean: expected a finite number"):
            load_model(bad)
        code, _, err = run(capsys, "verify", tmp_path / "a.png", tmp_path / "b.png", "--model", bad)
        assert code == 2 and one_line(err) and "score_fusion.global_mean" in err
        bad.write_bytes(with_minutiae_fusion_bytes(shipped, {"cosine": [0.1, 0.0], "minutiae": [1, 1],
                                                             "threshold": 0.0}))
        with pytest.raises(ValueError, match=r"minutiae_fusion\.cosine\[1\]: expected a finite number > 0"):
            load_model(bad)


# ---------------------------------------------------------------------------------------------------- §1 epsilon
class TestLargestMeaningfulEpsilon:
    def test_publish_lap_above_the_ceiling_is_refused_and_writes_nothing(self, capsys, tmp_path, image):
        out = tmp_path / "o.png"
        code, _, err = run(capsys, "publish", image, "--mechanism", "lap", "--epsilon", "1e300", "-o", out)
        assert code == 2 and one_line(err) and "above 255" in err and "--allow-large-epsilon" in err
        assert not out.exists()
        code, out_text, err = run(capsys, "publish", image, "--mechanism", "lap", "--epsilon", "1e300", "-o", out,
                                  "--allow-large-epsilon")
        assert code == 0 and out.is_file()
        code, _, _ = run(capsys, "publish", image, "--mechanism", "lap", "--epsilon", "200", "-o",
                         tmp_path / "p.png")
        assert code == 0  # below the ceiling: released as before

    def test_every_mechanism_and_variant_states_a_finite_ceiling(self):
        from fedprint.privacy.publish import registry
        from fedprint.privacy.publish.ceiling import largest_meaningful_epsilon

        for name in registry.known():
            for variant in ("sound", "paper"):
                ceiling, why = largest_meaningful_epsilon(name, variant, (96, 80), {})
                assert math.isfinite(ceiling) and ceiling > 1 and why, (name, variant)

    @pytest.mark.parametrize("mechanism", ["lap", "fip"])
    def test_the_noise_is_below_one_grey_level_above_the_ceiling_and_above_it_below(self, mechanism):
        """Measured: two releases of one image differ by the noise only; above the ceiling by < 1 grey level (RMS
        of the difference / √2 is the per-release noise), well below it by several."""
        from fedprint.privacy.publish import registry
        from fedprint.privacy.publish.ceiling import largest_meaningful_epsilon

        img = np.full((64, 64), 128, np.uint8)
        ceiling, _ = largest_meaningful_epsilon(mechanism, "sound", img.shape, {})

        def noise(eps: float) -> float:
            a, b = (registry.publish(mechanism, img, None, eps, np.random.default_rng(s)).image for s in (1, 2))
            return float(np.sqrt(np.mean((a.astype(float) - b) ** 2) / 2))

        assert noise(4 * ceiling) < 1.0
        assert noise(ceiling / 8) > 2.0


# ------------------------------------------------------------------------------------------------ §1 simulate
TINY = """
[run]
name = "tiny"
out = "{runs}"
seed = 3

[[data.sources]]
kind = "dataset"
layout = "generic"
root = "{data}"
dpi = 250.0

[partition]
mode = "iid"
n_clients = 2

[model]
embedding_dim = 16
input_size = 32
{model}

[train]
epochs = 1
batch_size = 16
{train}

[federation]
rounds = 1
methods = {methods}
"""


def _experiment(tmp_path: Path, *, model: str = "", train: str = "", methods: str = '["centralized"]') -> Path:
    data = tmp_path / "prints"
    if not data.is_dir():
        write_generic(stripe_records(n_fingers=6, n_impressions=3, size=40), data)
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.format(runs=(tmp_path / "runs").as_posix(), data=data.as_posix(), model=model,
                                train=train, methods=methods))
    return path


class TestSimulateCheckIsTheRunsValidation:
    @pytest.mark.parametrize("extra, named", [
        (["--seeds", "a"], "--seeds"), (["--seeds", "0"], "--seeds"), (["--seeds=-3"], "--seeds"),
        (["--rounds", "0"], "--rounds"), (["--rounds=-2"], "--rounds"), (["--rounds", "1000000000000"], "--rounds"),
        (["--methods", "centralized,centralized"], "--methods"),
    ])
    def test_options_are_refused_by_check_as_by_the_run(self, capsys, tmp_path, extra, named):
        exp = _experiment(tmp_path)
        for check in (["--check"], []):
            code, _, err = run(capsys, "simulate", "--config", exp, *check, *extra, "--out", tmp_path / "o")
            assert code == 2 and one_line(err) and err.split(": error: ")[1].startswith(named), (check, err)
        assert not (tmp_path / "o").exists()

    @pytest.mark.parametrize("section, line, named", [
        ("train", "lr = inf", "lr"), ("train", "lr = nan", "lr"), ("model", "width = 100000", "model.width"),
    ])
    def test_experiment_values_the_run_cannot_use_are_refused_when_read(self, tmp_path, section, line, named):
        exp = _experiment(tmp_path, **{section: line})
        with pytest.raises(ValueError, match=named):
            parse_config(read_toml(exp), source=str(exp))

    def test_duplicate_methods_in_the_experiment_are_refused(self, tmp_path):
        exp = _experiment(tmp_path, methods='["local", "local"]')
        with pytest.raises(ValueError, match="federation.methods: local named more than once"):
            parse_config(read_toml(exp), source=str(exp))

    @pytest.mark.parametrize("init, named", [("missing.pt", "model file not found"),
                                             ("notamodel.pt", "not a readable FedPrint model file")])
    def test_check_refuses_an_init_that_is_not_a_model_file(self, capsys, tmp_path, monkeypatch, init, named):
        (tmp_path / "notamodel.pt").write_bytes(b"junk")
        exp = _experiment(tmp_path, model=f'init = "{(tmp_path / init).as_posix()}"')
        code, _, err = run(capsys, "simulate", "--config", exp, "--check")
        assert code == 2 and one_line(err) and named in err, err


# ------------------------------------------------------------------------------------- §3 messages name the culprit
class TestMessagesNameTheCulprit:
    def test_an_argument_that_is_not_utf8_is_one_line(self, capsys, tmp_path):
        folder = os.fsdecode(bytes(tmp_path) + b"/caf\xe9")
        code, _, err = run(capsys, "evaluate", "--data", folder, "--model", "m.pt")
        assert code == 2 and one_line(err) and "--data: " in err and "is not UTF-8 text" in err

    def test_deeply_nested_toml(self, capsys, tmp_path):
        deep = tmp_path / "deep.toml"
        deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
        code, _, err = run(capsys, "simulate", "--config", deep, "--check")
        assert code == 2 and one_line(err) and "deep.toml: TOML nested too deeply" in err

    def test_pin_without_a_terminal_or_an_empty_pin_variable(self, capsys, tmp_path, monkeypatch, image):
        import getpass

        monkeypatch.setenv("FEDPRINT_PIN", "")
        code, _, err = run(capsys, "enroll", image, "--pin", "-o", tmp_path / "t.fpt", "--min-quality", "0")
        assert code == 2 and one_line(err) and "$FEDPRINT_PIN is set but empty" in err
        monkeypatch.delenv("FEDPRINT_PIN")

        def closed(prompt=""):
            raise EOFError

        monkeypatch.setattr(getpass, "getpass", closed)
        code, _, err = run(capsys, "enroll", image, "--pin", "-o", tmp_path / "t.fpt", "--min-quality", "0")
        assert code == 2 and one_line(err) and "--pin: no terminal to ask for the PIN" in err
        assert not (tmp_path / "t.fpt").exists()

    def test_evaluate_with_a_refused_pin_leaves_no_folder(self, capsys, tmp_path, monkeypatch):
        data = write_generic(stripe_records(n_fingers=4, n_impressions=4, size=40), tmp_path / "d")
        monkeypatch.setenv("FEDPRINT_PIN", "")
        out = tmp_path / "ev"
        code, _, err = run(capsys, "evaluate", "--data", data, "--template-scheme", "vault", "--pin", "--out", out)
        assert code == 2 and one_line(err) and "FEDPRINT_PIN" in err and not out.exists()

    @pytest.mark.parametrize("argv, named", [
        (["verify", "a.png", "b.png", "--dpi", "1e9"], "--dpi"),
        (["verify", "a.png", "b.png", "--dpi-a", "5"], "--dpi-a"),
        (["enroll", "a.png", "-o", "t.fpt", "--dpi", "1e9"], "--dpi"),
        (["identify", "--gallery", "g", "--probe", "p", "--probe-dpi", "0"], "--probe-dpi"),
    ])
    def test_implausible_resolutions_are_refused_as_options(self, capsys, argv, named):
        code, _, err = run(capsys, *argv)
        assert code == 2 and f"argument {named}: expected a scan resolution in [100, 2000]" in err

    def test_huge_counts_are_refused_before_anything_is_allocated(self, capsys, tmp_path, image):
        code, _, err = run(capsys, "publish", image, "--mechanism", "pointset", "--protect", "finger",
                           "--epsilon", "1", "--points", "1000000000", "-o", tmp_path / "p.json")
        assert code == 2 and one_line(err) and "--points): expected an integer in [1, 4096]" in err
        code, _, err = run(capsys, "enroll", image, "--chaff", "1000000000", "-o", tmp_path / "t.fpt")
        assert code == 2 and one_line(err) and "--chaff: expected an integer in [24, 1000]" in err

    @pytest.mark.parametrize("argv, named", [
        (["data", "gallery", "-o", "{t}/g.png", "--fingers", "0"], "--fingers: expected an integer >= 1"),
        (["data", "gallery", "-o", "{t}/g.png", "--impressions", "-2"], "--impressions: expected an integer >= 1"),
        (["data", "gallery", "-o", "{t}/g.png", "--profiles", "nope"], "--profiles: unknown nope"),
        (["data", "realism", "--synth", "casia", "--n-impostor", "-1", "--out", "{t}/r"],
         "--n-impostor: expected an integer >= 1"),
        (["data", "realism", "--fvc", "{t}/absent", "--out", "{t}/r"], "--fvc: no such folder"),
    ])
    def test_data_commands_name_the_option(self, capsys, tmp_path, argv, named):
        code, _, err = run(capsys, *[a.replace("{t}", str(tmp_path)) for a in argv])
        assert code == 2 and one_line(err) and named in err, err
        assert not (tmp_path / "g.png").exists() and not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------- §4 nothing left behind or waited on
class TestNothingLeftBehind:
    def test_a_failed_train_leaves_its_out_as_it_found_it_and_can_be_rerun(self, capsys, tmp_path, monkeypatch):
        import fedprint.lab.train_run as train_run

        calls = []

        def failing(cfg, mode, *, out, **kw):
            calls.append(out)
            out.mkdir(parents=True, exist_ok=True)
            for name in ("clients.csv", "config.json", "provenance.json"):
                (out / name).write_text("partial")
            if len(calls) == 1:
                raise KeyboardInterrupt
            return out

        monkeypatch.setattr(train_run, "run_training", failing)
        out = tmp_path / "run"
        code, _, err = run(capsys, "train", "--mode", "centralized", "--config", "demo", "--out", out)
        assert code == 130 and one_line(err) and not out.exists()
        out.mkdir()  # an empty folder given by the user is kept, emptied
        code, _, _ = run(capsys, "train", "--mode", "centralized", "--config", "demo", "--out", out)
        assert code == 0 and sorted(p.name for p in out.iterdir()) == ["clients.csv", "config.json",
                                                                        "provenance.json"]

    def test_discarded_on_failure_empties_a_folder_that_existed(self, tmp_path):
        from fedprint.config.rundir import discarded_on_failure

        out = tmp_path / "given"
        out.mkdir()
        with pytest.raises(RuntimeError), discarded_on_failure(out) as path:
            (path / "sub").mkdir()
            (path / "sub" / "f").write_text("x")
            (path / "g").write_text("x")
            raise RuntimeError("boom")
        assert out.is_dir() and not any(out.iterdir())

    def test_audit_reports_a_listed_method_without_a_model(self, tmp_path):
        from fedprint.attacks.audit import unaudited_methods
        from fedprint.attacks.run_loading import RunInfo

        (tmp_path / "config.json").write_text(json.dumps({"methods": ["local", "fedavg", "affr"]}))
        info = RunInfo(run_dir=tmp_path, kind="simulate", cfg=None, epochs_per_client=1,
                       models={"fedavg (round 2)": (None, None)})
        assert unaudited_methods(info) == ["affr"]  # local is not a federated checkpoint; fedavg is there
        info.models["affr (round 2)"] = (None, None)
        assert unaudited_methods(info) == []

    def test_gallery_refuses_to_overwrite_and_draws_the_set_just_made(self, capsys, tmp_path):
        png = tmp_path / "g.png"
        png.write_bytes(b"mine")
        code, _, err = run(capsys, "data", "gallery", "-o", png)
        assert code == 2 and one_line(err) and "exists (pass --force" in err and png.read_bytes() == b"mine"
        data = write_generic(stripe_records(n_fingers=3, n_impressions=2, size=40), tmp_path / "set")
        code, out, _ = run(capsys, "data", "gallery", "-o", png, "--data", data, "--force", "--fingers", "2")
        assert code == 0 and f"gallery of {data}" in out
        with Image.open(png) as im:
            assert im.format == "PNG"

    def test_scores_name_images_by_their_files(self, tmp_path):
        from fedprint.cli.verify import _image_name
        from fedprint.data.datasets import load_dataset

        data = write_generic(stripe_records(n_fingers=2, n_impressions=2, size=40), tmp_path / "set")
        names = sorted(_image_name(r, str(data)) for r in load_dataset("generic", data))
        files = sorted(p.relative_to(data).as_posix() for p in data.rglob("*.png"))
        assert names == files and all("/" not in n or n.endswith(".png") for n in names)

    def test_realism_prints_a_table(self):
        from fedprint.cli.data import realism_table

        stats = {"n": 4, "median": 31.0}
        text = realism_table({"fvc": {"afis_minutiae": stats, "our_minutiae": stats, "quality": {"n": 4,
                                                                                                 "median": 0.5},
                                      "ground_truth": None, "eer": 0.125, "seconds": {"afis_extract_per_image": 0.2}}})
        assert text.startswith("| set |") and "| fvc | 31.000 | 31.000 | 0.500 | 0.125 |" in text

    def test_a_held_ledger_says_whom_it_waits_for_and_gives_up(self, tmp_path, caplog):
        from fedprint.privacy.ledger import Ledger, LedgerBusy

        folder = tmp_path / "led"
        folder.mkdir()
        holder = subprocess.Popen([PYTHON, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY);"
                                   " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
                                   str(folder)], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            ledger = Ledger(folder / "l.json", 10.0)
            ledger.lock_timeout = 0.5
            t0 = time.monotonic()
            with caplog.at_level("WARNING"), pytest.raises(LedgerBusy, match=rf"still locked by process "
                                                                               rf"{holder.pid}.* after 0.5 s"):
                ledger.reserve(1.0, "f1")
            assert 0.5 <= time.monotonic() - t0 < 5
            assert f"locked by process {holder.pid}" in caplog.text and "waiting up to 0.5 s" in caplog.text
        finally:
            holder.kill()
            holder.wait()
        assert Ledger(folder / "l.json", 10.0).reserve(1.0, "f1") is not None  # free again

    def test_a_lock_held_in_this_process_is_waited_on_too(self, tmp_path):
        from fedprint.privacy.ledger import Ledger, LedgerBusy

        fd = os.open(tmp_path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            ledger = Ledger(tmp_path / "l.json", 10.0)
            ledger.lock_timeout = 0.2
            with pytest.raises(LedgerBusy, match="another process"):
                ledger.reserve(1.0, "f1")
        finally:
            os.close(fd)


class TestCtrlC:
    @pytest.mark.parametrize("after", [0.15, 0.6, 1.5])
    def test_ctrl_c_at_any_instant_is_one_line_and_130(self, tmp_path, image, after):
        """Ctrl-C while Python imports the command's modules (the first seconds of publish) or once it works."""
        proc = subprocess.Popen([PYTHON, "-m", "fedprint", "publish", str(image), "--mechanism", "lap",
                                 "--epsilon", "1", "-o", str(tmp_path / "o.png")], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # finished before the signal: nothing to check at this instant
            pytest.skip(f"publish finished within {after} s")
        assert proc.returncode == 130, err
        assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err, err


# ------------------------------------------------------------------------------------------- §5 README and program
class TestReadmeAndProgram:
    def test_enroll_takes_dash_o_and_keeps_out_as_a_hidden_alias(self):
        for flag in ("-o", "--output", "--out"):
            args = fedprint_cli.parse(["enroll", "a.png", flag, "t.fpt"])
            assert args.out == "t.fpt"
        text = fedprint_cli.build_parser(["enroll"])._subparsers._group_actions[0].choices["enroll"].format_help()
        assert "-o OUT, --output OUT" in text and "--out " not in text

    def test_readme_lists_every_command_it_should(self):
        readme = (ROOT / "README.md").read_text()
        for command in ("fedprint enroll", "fedprint calibrate", "fedprint ledger show"):
            assert command in readme
        assert "enroll imp1.png imp2.png imp3.png -o alice.fpt" in readme


class TestEveryPathThatReadsAPrintPassesTheGate:
    """Issue 60 §2: enroll and verify --template pass the same gate as verify, and say the same facts."""

    def test_a_black_enrolment_or_probe_is_refused_naming_the_file(self, capsys, tmp_path):
        import numpy as np
        from PIL import Image

        black = tmp_path / "black.png"
        Image.fromarray(np.zeros((300, 300), np.uint8)).save(black)
        code, _, err = run(capsys, "enroll", black, "-o", tmp_path / "t.fpt", "--min-quality", "0")
        assert code == 2 and one_line(err) and f"no fingerprint found in {black}: degenerate image" in err
        assert not (tmp_path / "t.fpt").exists()
