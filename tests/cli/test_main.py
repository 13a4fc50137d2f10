"""The ``fedprint`` dispatcher: fast help, --version, defaults in help, global --quiet."""

from __future__ import annotations

import subprocess
import sys

import pytest

import fedprint.cli.main as fedprint_cli


def test_help_imports_no_subsystem() -> None:
    code = ("import sys; import fedprint.cli.main as fedprint_cli; fedprint_cli.build_parser(['--help']); "
            "print(sorted(m for m in ('torch', 'flwr', 'cv2', 'fedprint.server', 'fedprint.client', 'fedprint.lab', "
            "'fedprint.recognition', 'fedprint.privacy', 'fedprint.attacks') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert fedprint_cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("fedprint ")


def test_every_registered_command_is_listed_and_shows_defaults() -> None:
    full = fedprint_cli.build_parser(None)  # imports every installed subsystem
    sub = next(a for a in full._actions if isinstance(a, fedprint_cli.argparse._SubParsersAction))
    assert set(sub.choices) <= set(fedprint_cli.COMMANDS)
    assert {"demo", "simulate", "train", "data", "publish", "audit"} <= set(sub.choices)
    synth = sub.choices["data"]._subparsers._group_actions[0].choices["synth"].format_help()
    assert "default: 200" in synth and "default: 0" in synth


def test_global_quiet_reaches_the_command() -> None:
    assert fedprint_cli.parse(["-q", "simulate", "--config", "demo"]).quiet is True
    assert fedprint_cli.parse(["simulate", "--config", "demo"]).quiet is False


def test_bad_files_are_one_line_and_exit_2(tmp_path, capsys):
    existing = tmp_path / "afile"
    existing.write_text("x")
    assert fedprint_cli.main(["data", "synth", "--out", str(existing), "--fingers", "2", "--impressions", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "afile" in err and "Traceback" not in err
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"mode": "centralized"}')
    (run / "model_centralized.pt").write_bytes(b"corrupt")
    assert fedprint_cli.main(["audit", "--run", str(run)]) == 2
    err = capsys.readouterr().err
    assert "model_centralized.pt" in err and "Traceback" not in err


def test_log_level_reaches_flower_and_nothing_prints_twice() -> None:
    # Flower resets its logger to DEBUG when imported (after the CLI has configured logging) and has its own
    # console handler: the default level must still hold, and no message may appear twice.
    code = ("import logging; import fedprint.cli.main as fedprint_cli; fedprint_cli._configure_logging('warning'); "
            "from flwr.common.logger import log; "
            "log(logging.DEBUG, 'debug-line'); log(logging.INFO, 'info-line'); log(logging.WARNING, 'warn-line'); "
            "[log(logging.WARNING, 'DEPRECATED FEATURE: old-api') for _ in range(3)]; "
            "logging.getLogger('fedprint.test').warning('own-line')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    assert "debug-line" not in text and "info-line" not in text
    assert text.count("warn-line") == 1 and text.count("old-api") == 1 and text.count("own-line") == 1


def test_a_command_whose_package_cannot_be_imported_is_named_not_hidden(monkeypatch, capsys) -> None:
    # A stale editable install (made before a package existed) used to drop `simulate` silently: argparse then
    # said only "invalid choice". The command must be named with the cure.
    real_import = fedprint_cli.importlib.import_module

    def fake_import(name: str, *args):
        if name == "fedprint.cli.simulate":
            raise ModuleNotFoundError("No module named 'fedprint.lab'", name="fedprint.lab")
        return real_import(name, *args)

    monkeypatch.setattr(fedprint_cli.importlib, "import_module", fake_import)
    assert fedprint_cli.main(["simulate", "--help"]) == 2
    err = capsys.readouterr().err
    assert "'simulate'" in err and "'fedprint.lab'" in err and "reinstall" in err
