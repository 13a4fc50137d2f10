"""Issue 25 §2, "limits, interruptions, promises": stated limits checked up front, Ctrl-C, write contracts, messages
that name the file or option, help that agrees with behaviour, and audit.md's summary. All fast (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import fedprint.cli.main as fedprint_cli
from fedprint.config.experiment import parse_config, read_toml
from fedprint.data.atomic_io import staged_folder, write_text
from fedprint.data.datasets.imread import ImageReadError, read_gray
from fedprint.data.synth.limits import MAX_FINGERS, check_size

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    code = fedprint_cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


class TestLimits:
    def test_synth_counts_are_refused_up_front_and_nothing_is_written(self, capsys, tmp_path):
        out = tmp_path / "s"
        code, _, err = run(capsys, "data", "synth", "--out", out, "--fingers", "10000000000")
        assert code == 2 and f"--fingers: at most {MAX_FINGERS:,}" in err and err.count("\n") == 1
        assert not out.exists()
        code, _, err = run(capsys, "data", "synth", "--out", out, "--fingers", "50000", "--impressions", "50")
        assert code == 2 and "at most 1,000,000 images" in err and not out.exists()

    def test_toml_counts_name_the_key(self):
        with pytest.raises(ValueError, match=r"x\.toml: .*data\.sources\.fingers: at most"):
            parse_config({"data": {"sources": [{"kind": "synth", "fingers": 10_000_000_000}]}}, source="x.toml")
        check_size(100, 8)  # within the limits: no error

    def test_oversized_images_are_refused_from_the_header(self, tmp_path):
        big = tmp_path / "big.png"
        Image.fromarray(np.zeros((4100, 4100), np.uint8)).save(big)
        with pytest.raises(ImageReadError, match=r"4100x4100 pixels is larger than the 16,777,216"):
            read_gray(big)

    def test_publish_of_an_oversized_image_is_one_line_and_writes_nothing(self, capsys, tmp_path):
        big = tmp_path / "big.png"
        Image.fromarray(np.zeros((4100, 4100), np.uint8)).save(big)
        out = tmp_path / "pts.json"
        code, _, err = run(capsys, "publish", str(big), "--mechanism", "pointset", "--epsilon", "1", "-o", out)
        assert code == 2 and err.count("\n") == 1 and not out.exists()


class TestInterrupts:
    def test_ctrl_c_in_data_synth_says_how_to_resume_and_exits_130(self, capsys, tmp_path, monkeypatch):
        import fedprint.data.synth.generate as generate

        def interrupted(*a, **k):
            raise KeyboardInterrupt

        monkeypatch.setattr(generate, "generate_dataset", interrupted)
        code, _, err = run(capsys, "data", "synth", "--out", tmp_path / "s", "--fingers", "2")
        assert code == 130
        assert err == "fedprint data: interrupted; run the same command again to resume (finished fingers are kept)\n"

    def test_ctrl_c_in_publish_is_one_line_without_a_resume_promise(self, capsys, tmp_path, monkeypatch):
        import fedprint.cli.publish as publish_cli

        def interrupted(*a, **k):
            raise KeyboardInterrupt

        monkeypatch.setattr(publish_cli, "read_gray", interrupted)
        code, _, err = run(capsys, "publish", tmp_path / "a.png", "--mechanism", "pointset", "--epsilon", "1",
                           "-o", tmp_path / "p.json")
        assert code == 130 and err == "fedprint publish: interrupted\n"


class TestWriteContracts:
    def test_run_name_must_be_a_plain_folder_name(self):
        for bad in ("../../x", "a/b", "", ".hidden", "x" * 101):
            with pytest.raises(ValueError, match="run.name: expected a plain folder name"):
                parse_config({"run": {"name": bad}}, source="e.toml")
        assert parse_config({"run": {"name": "demo-2.run_1"}}).run.name == "demo-2.run_1"

    def test_realism_and_publish_eval_refuse_a_non_empty_out(self, capsys, tmp_path):
        out = tmp_path / "full"
        out.mkdir()
        (out / "keep.txt").write_text("mine")
        code, _, err = run(capsys, "data", "realism", "--synth", "casia", "--out", out)
        assert code == 2 and "is not empty" in err
        code, _, err = run(capsys, "publish-eval", "--out", out)
        assert code == 2 and "is not empty" in err
        assert [p.name for p in out.iterdir()] == ["keep.txt"]

    def test_a_failed_staged_write_leaves_no_folder(self, tmp_path):
        out = tmp_path / "o"
        with pytest.raises(RuntimeError), staged_folder(out) as tmp:
            write_text(tmp / "half.txt", "x")
            raise RuntimeError("failed half-way")
        assert not out.exists() and list(tmp_path.iterdir()) == []
        with staged_folder(out) as tmp:
            write_text(tmp / "all.txt", "x")
        assert (out / "all.txt").read_text() == "x" and len(list(tmp_path.iterdir())) == 1

    def test_simulate_check_help_says_what_it_writes(self, capsys):
        code, out, _ = run(capsys, "simulate", "--help")
        assert code == 0 and "nothing written" not in out and "runs/.cache/synth" in out


class TestMessages:
    def test_a_pdf_renamed_png_is_named_as_a_pdf(self, tmp_path):
        fake = tmp_path / "scan.png"
        fake.write_bytes(b"%PDF-1.7\n...")
        with pytest.raises(ImageReadError, match=r"scan\.png: a PDF file, not an image") as exc:
            read_gray(fake)
        assert "BytesIO" not in str(exc.value)

    def test_binary_toml_names_the_file(self, tmp_path):
        bad = tmp_path / "exp.toml"
        bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
        with pytest.raises(ValueError, match=r"exp\.toml: not a TOML text file"):
            read_toml(bad)

    def test_n_clients_zero_names_the_file_and_key(self):
        with pytest.raises(ValueError, match=r"x\.toml: .*partition\.n_clients: expected an integer >= 1, got 0"):
            parse_config({"partition": {"n_clients": 0}}, source="x.toml")

    def test_sweep_empty_beta_names_beta(self, capsys):
        code, _, err = run(capsys, "sweep", "--beta", "")
        last = err.strip().splitlines()[-1]
        assert code == 2 and "argument --beta: expected one or more" in last and "sigma2" not in last

    def test_os_errors_have_no_raw_errno(self, capsys, tmp_path, monkeypatch):
        import fedprint.data.synth.generate as generate

        def full(*a, **k):
            raise OSError(28, "No space left on device", str(tmp_path / "s" / "f00000"))

        monkeypatch.setattr(generate, "generate_dataset", full)
        code, _, err = run(capsys, "data", "synth", "--out", tmp_path / "s", "--fingers", "2")
        assert code == 2 and "[Errno" not in err and "No space left on device:" in err and "f00000" in err


class TestHelpAgrees:
    def test_every_command_has_a_description_and_no_doubled_percent(self, capsys):
        parser = fedprint_cli.build_parser()
        stack = [parser]
        while stack:
            p = stack.pop()
            text = p.format_help()
            assert "%%" not in text, p.prog
            for action in p._actions:
                if hasattr(action, "choices") and isinstance(action.choices, dict):
                    for child in action.choices.values():
                        assert child.description, child.prog
                        stack.append(child)

    def test_audit_quick_time_is_the_same_in_readme_and_help(self, capsys):
        code, out, _ = run(capsys, "audit", "--help")
        readme = (ROOT / "README.md").read_text()
        assert "about 2 min" in " ".join(out.split()) and "about 2 min for the demo run" in readme
        assert "1 min 40 s" not in readme


class TestAuditReport:
    def _row(self, name, online_auc, offline_auc, lo=0.55):
        def m(auc):
            return {"auc": auc, "auc_ci95": [lo, auc + 0.05], "balanced_accuracy": 0.6, "tpr_at_1pct_fpr": 0.1,
                    "mi_decision_bits": 0.01}
        return {"condition": name, "test_eer": 0.1,
                "attacks": {"yeom_distance": m(0.52), "lira_online": m(online_auc), "lira_offline": m(offline_auc)}}

    def test_summary_gives_a_verdict_per_condition(self):
        from fedprint.attacks.audit_report import summary_section

        text = summary_section(None, [self._row("none", 0.7, 0.7), self._row("dp", 0.51, 0.5, lo=0.4)], {}, [],
                               ["mia: fp-dfsn"])
        assert text.startswith("## Summary")
        assert "`none`: strongest attack lira_online, AUC 0.70" in text and "**membership leaks**" in text
        assert "`dp`" in text and "no detectable membership signal" in text and "Not finished: mia: fp-dfsn" in text

    def test_identical_lira_rows_say_why(self):
        from fedprint.attacks.audit_report import lira_identical

        assert lira_identical([self._row("none", 0.7, 0.7), self._row("dp", 0.6, 0.55)]) == ["none"]

    def test_client_dp_audit_of_a_non_dp_run_is_refused(self, tmp_path):
        from fedprint.attacks.audit import check_attacks_apply

        (tmp_path / "fedavg").mkdir()
        (tmp_path / "fedavg" / "final.json").write_text(json.dumps({"privacy": None}))
        with pytest.raises(ValueError, match="no method of .* used client-level DP"):
            check_attacks_apply(tmp_path, ["mia", "client-dp"])
        check_attacks_apply(tmp_path, ["mia"])
        (tmp_path / "dp").mkdir()
        (tmp_path / "dp" / "final.json").write_text(json.dumps({"privacy": {"level": "client"}}))
        check_attacks_apply(tmp_path, ["client-dp"])
