"""Issue 24 item 11: two processes creating one ledger at once cannot both spend, each against its own cap.

The issue's reproduction: ``--budget 10 --epsilon 3`` and ``--budget 1000 --epsilon 50`` started together both
succeeded (cap 10, 53 spent). The cap is now fixed once, under the lock, by whoever creates the ledger; the other
process is refused with both values named. The processes are forked and held at a barrier after their
reservations, so both reserve against an absent ledger before either commits — the race is hit every time.
"""

from __future__ import annotations

import json
import multiprocessing as mp

import cv2
import numpy as np
import pytest
from scipy import ndimage

from fedprint.cli import publish as publish_cli
from fedprint.cli.main import main
from fedprint.privacy.ledger import Ledger

CTX = mp.get_context("fork")


def _reserve_wait_commit(path, budget, epsilon, barrier, results):
    try:
        led = Ledger(path, total_epsilon=budget)
        res = led.reserve(epsilon, "finger-1")
        barrier.wait(timeout=60)
        led.commit(res)
        results.put((budget, "ok"))
    except ValueError as exc:
        results.put((budget, str(exc)))


def _race(target, *args_per_process):
    barrier, results = CTX.Barrier(len(args_per_process)), CTX.Queue()
    procs = [CTX.Process(target=target, args=(*a, barrier, results)) for a in args_per_process]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    return dict(results.get(timeout=5) for _ in procs)


def _check_outcome(path, outcome):
    winners = [b for b, msg in outcome.items() if msg == "ok"]
    assert len(winners) == 1, outcome  # exactly one creator; the other is refused
    loser = next(b for b in outcome if b not in winners)
    assert f"{winners[0]:g}" in outcome[loser] and f"{loser:g}" in outcome[loser]  # both values named
    doc = json.loads(path.read_text())
    assert doc["config"]["total_epsilon"] == winners[0]
    led = Ledger.open(path)
    spent = led.spent("finger-1")[0]
    assert spent <= led.total_epsilon and len(led.history()) == 1


def test_two_processes_creating_one_ledger_cannot_overspend(tmp_path):
    path = tmp_path / "ledger.json"
    outcome = _race(_reserve_wait_commit, (path, 10.0, 3.0), (path, 1000.0, 50.0))
    _check_outcome(path, outcome)


def _print(size=160, seed=0):
    rng = np.random.default_rng(seed)
    xx = np.mgrid[:size, :size][1].astype(float)
    phase = ndimage.gaussian_filter(rng.normal(size=(size, size)), 12) * 600
    return np.clip(128 + 100 * np.cos(2 * np.pi * xx / 9 + phase), 0, 255).astype(np.uint8)


def _publish_after_barrier(argv, budget, barrier, results):
    original = publish_cli.release

    def release_then_wait(*a, **kw):  # reserved (checked against an absent ledger), not yet committed
        out = original(*a, **kw)
        barrier.wait(timeout=60)
        return out

    publish_cli.release = release_then_wait
    results.put((budget, "ok" if main(argv) == 0 else "refused"))


def test_two_publish_commands_race_on_a_new_ledger(tmp_path, capfd):
    image, path = tmp_path / "print.png", tmp_path / "ledger.json"
    cv2.imwrite(str(image), _print())

    def argv(budget, eps, name):
        return ["publish", "--mechanism", "pointset", "--protect", "finger", "--epsilon", str(eps), str(image),
                "-o", str(tmp_path / name), "--ledger", str(path), "--budget", str(budget), "--unit", "finger-1"]

    outcome = _race(_publish_after_barrier, (argv(10, 3, "a.json"), 10.0), (argv(1000, 50, "b.json"), 1000.0))
    err = capfd.readouterr().err
    assert sorted(outcome.values()) == ["ok", "refused"], (outcome, err)
    winner = next(b for b, v in outcome.items() if v == "ok")
    assert "created with total_epsilon" in err and "10" in err and "1000" in err
    assert Ledger.open(path).total_epsilon == winner and len(Ledger.open(path).history()) == 1
    name = "a.json" if winner == 10 else "b.json"
    written = sorted(p.name for p in tmp_path.iterdir() if p.name[:2] in ("a.", "b.", ".a", ".b"))
    assert written == [name, name + ".guarantee.json"]  # the refused release wrote nothing, no temporary left


def test_a_later_different_budget_is_refused_naming_both_values(tmp_path, capsys):
    path = tmp_path / "ledger.json"
    led = Ledger(path, total_epsilon=10.0)
    led.commit(led.reserve(3.0, "finger-1"))
    with pytest.raises(ValueError, match=r"total_epsilon 10 \(requested 1000\)"):
        Ledger(path, total_epsilon=1000.0)
    image = tmp_path / "print.png"
    cv2.imwrite(str(image), _print())
    assert main(["publish", "--mechanism", "pointset", "--protect", "finger", "--epsilon", "50", str(image), "-o",
                 str(tmp_path / "out.json"), "--ledger", str(path), "--budget", "1000", "--unit", "finger-1"]) == 2
    err = capsys.readouterr().err
    assert "--budget 1000" in err and "total_epsilon 10 (requested 1000)" in err
    assert not (tmp_path / "out.json").exists() and Ledger.open(path).spent("finger-1")[0] == 3.0
