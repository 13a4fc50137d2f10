"""Bad input across every command: one clear line naming the file / parameter, exit 2, nothing written.

Each case runs ``fedprint <command> ...`` in-process in an empty working folder, with files that exist but are
wrong (corrupt, empty, the wrong kind) or arguments out of range. The sweep is the documentation of what was
tried: adding a command means adding its cases here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fedprint.cli.main as fedprint_cli


def _setup(tmp: Path) -> dict[str, str]:
    (tmp / "afile").write_text("x")
    (tmp / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (tmp / "empty.png").write_bytes(b"")
    (tmp / "bad.toml").write_text("[run\nname = ")
    (tmp / "unknown_key.toml").write_text('[run]\nname = "x"\ncolour = "red"\n')
    (tmp / "bad_value.toml").write_text('[data]\nval_fraction = 0.0\n')
    (tmp / "model.pt").write_bytes(b"corrupt")
    (tmp / "emptydir").mkdir()
    run = tmp / "run"
    run.mkdir()
    (run / "config.json").write_text('{"mode": "centralized"}')
    (run / "model_centralized.pt").write_bytes(b"corrupt")
    (tmp / "ledger.json").write_text(json.dumps({"format": "fedprint-privacy-ledger", "config": {"x": 1},
                                                 "releases": []}))
    return {"t": str(tmp)}


# (argv with {t} for the folder, text the message must contain)
CASES = [
    (["gallery", "info", "{t}/absent.fpg"], "absent.fpg"),
    (["demo", "--out", "{t}/afile"], "afile"),
    (["simulate", "--config", "demo", "--out", "{t}/run"], "is not empty"),
    (["train", "--mode", "local", "--config", "demo", "--out", "{t}/run"], "is not empty"),
    (["simulate", "--config", "{t}/absent.toml"], "absent.toml"),
    (["simulate", "--config", "{t}/bad.toml"], "bad.toml"),
    (["simulate", "--config", "{t}/unknown_key.toml"], "colour"),
    (["simulate", "--config", "{t}/bad_value.toml"], "val_fraction"),
    (["simulate", "--config", "demo", "--methods", "fedavg,nope"], "nope"),
    (["simulate", "--config", "demo", "--rounds", "0"], "--rounds"),
    (["simulate", "--config", "no_such_experiment"], "no_such_experiment"),
    (["train", "--mode", "local", "--config", "{t}/bad.toml"], "bad.toml"),
    (["train", "--mode", "centralized", "--config", "{t}/unknown_key.toml"], "colour"),
    (["train", "--mode", "centralized", "--config", "demo", "--classical-pairs", "-3"], "--classical-pairs"),
    (["sweep", "--config", "{t}/absent.toml"], "absent.toml"),
    (["sweep", "--config", "demo", "--beta", "0.2,x"], "--beta"),
    (["sweep", "--config", "demo", "--beta", "1.5"], "β must lie in [0, 1)"),
    (["verify", "{t}/corrupt.png", "{t}/corrupt.png"], "corrupt.png"),
    (["verify", "{t}/absent.png", "{t}/corrupt.png"], "absent.png"),
    (["verify", "{t}/empty.png", "{t}/empty.png"], "empty.png"),
    (["verify", "{t}/corrupt.png", "{t}/corrupt.png", "--model", "{t}/model.pt"], "model.pt"),
    (["verify", "{t}/corrupt.png", "{t}/corrupt.png", "--dpi", "-5"], "dpi"),
    (["verify", "{t}/corrupt.png", "--template", "{t}/absent.json"], "absent.json"),
    (["verify", "{t}/corrupt.png", "--template", "{t}/afile"], "not a FedPrint protected template"),
    (["verify", "{t}/corrupt.png"], "--template"),
    (["enroll", "{t}/absent.png", "--out", "{t}/t.json"], "absent.png"),
    (["enroll", "{t}/corrupt.png", "--out", "{t}/t.json"], "corrupt.png"),
    (["enroll", "{t}/corrupt.png", "--out", "{t}/afile"], "afile"),
    (["evaluate", "--data", "{t}/absent", "--template-scheme", "vault"], "absent"),
    (["evaluate", "--data", "{t}/absent"], "absent"),
    (["evaluate", "--data", "{t}/emptydir"], "emptydir"),
    (["evaluate", "--data", "{t}/afile"], "afile"),
    (["evaluate", "--data", "{t}/emptydir", "--model", "{t}/model.pt"], "model.pt"),
    (["identify", "--gallery", "{t}/emptydir", "--probe", "{t}/corrupt.png"], "emptydir"),
    (["calibrate", "--data", "{t}/absent", "-o", "{t}/m2.pt"], "absent"),
    (["ledger", "show", "{t}/absent.json"], "absent.json"),
    (["calibrate", "--data", "{t}/emptydir", "-o", "{t}/afile"], "afile"),
    (["identify", "--gallery", "{t}/absent", "--probe", "{t}/corrupt.png"], "absent"),
    (["data", "synth", "--out", "{t}/afile", "--fingers", "2", "--impressions", "2"], "afile"),
    (["data", "synth", "--out", "{t}/new", "--fingers", "0", "--impressions", "2"], "fingers"),
    (["data", "synth", "--out", "{t}/new", "--profile", "nope"], "nope"),
    (["data", "inspect", "{t}/absent"], "absent"),
    (["data", "inspect", "{t}/emptydir"], "emptydir"),
    (["publish", "--mechanism", "lap", "--epsilon", "1", "{t}/corrupt.png", "-o", "{t}/o.png"], "corrupt.png"),
    (["publish", "--mechanism", "lap", "--epsilon", "nan", "{t}/corrupt.png", "-o", "{t}/o.png"], "epsilon"),
    (["publish", "--mechanism", "lap", "--epsilon", "1", "{t}/corrupt.png", "-o", "{t}/nodir/o.png"], "nodir"),
    (["publish", "--mechanism", "pointset", "--epsilon", "1", "{t}/corrupt.png", "-o", "{t}/o.json",
      "--ledger", "{t}/ledger.json", "--unit", "f1"], "ledger.json"),
    (["publish", "--mechanism", "pointset", "--epsilon", "1", "{t}/corrupt.png", "-o", "{t}/o.json",
      "--ledger", "{t}/new-ledger.json", "--unit", "f1", "--window", "2", "--window-epsilon", "1"], "--budget"),
    (["publish-eval", "--fingers", "1", "--out", "{t}/pe"], "--fingers"),
    (["publish-eval", "--epsilons", "a,b", "--out", "{t}/pe"], "--epsilons"),
    (["audit", "--run", "{t}/absent"], "absent"),
    (["audit", "--run", "{t}/run"], "model_centralized.pt"),
    (["audit", "--run", "{t}/emptydir"], "emptydir"),
    (["audit", "--run", "{t}/run", "--attacks", "nope"], "nope"),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(c[0][:2]) + f" #{i}" for i, c in enumerate(CASES)])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, monkeypatch, capsys, argv, needle):
    work = tmp_path / "w"
    work.mkdir()
    _setup(work)
    monkeypatch.chdir(work)
    monkeypatch.setenv("FEDPRINT_RUNS", str(work / "runs"))
    before = _snapshot(work)
    code = fedprint_cli.main([a.format(t=work) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]
    assert len(lines) == 1, err
    assert needle.format(t=work) in lines[0], err
    assert _snapshot(work) == before, "something was written"


def test_the_sweep_covers_every_command():
    covered = {c[0][0] for c in CASES}
    assert covered >= set(fedprint_cli.COMMANDS), sorted(set(fedprint_cli.COMMANDS) - covered)
