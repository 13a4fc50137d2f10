"""Privacy ledger: refusal, atomic persistence under a simulated crash, windowed budget, parallel units."""

from __future__ import annotations

import json
import math

import pytest

from privacy import ledger as ledger_mod
from privacy.ledger import BudgetExceeded, Ledger


def test_sequential_composition_refuses_over_budget(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=1.0)
    with led.charge(0.4, "f1", mechanism="pointset", variant="sound", image_id="a.png"):
        pass
    with led.charge(0.6, "f1"):
        pass
    assert led.remaining("f1") == pytest.approx(0.0)
    with pytest.raises(BudgetExceeded, match="f1"):
        led.reserve(0.01, "f1")
    assert led.remaining("f2") == 1.0  # another finger is untouched
    hist = Ledger(tmp_path / "l.json", 1.0).history()  # persisted and reloadable
    assert [r["epsilon"] for r in hist] == [0.4, 0.6]
    assert hist[0]["mechanism"] == "pointset" and hist[0]["image_id"] == "a.png" and "time" in hist[0]


def test_failed_mechanism_charges_nothing(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=1.0)
    with pytest.raises(RuntimeError):
        with led.charge(0.5, "f1"):
            raise RuntimeError("mechanism crashed")
    assert led.history() == [] and led.remaining("f1") == 1.0
    res = led.reserve(0.5, "f1")  # two-phase: reserve alone records nothing
    assert led.history() == []
    led.commit(res)
    assert led.remaining("f1") == pytest.approx(0.5)


def test_commit_rechecks_budget(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=1.0)
    r1, r2 = led.reserve(0.7, "f1"), led.reserve(0.7, "f1")  # both fit on their own
    led.commit(r1)
    with pytest.raises(BudgetExceeded):
        led.commit(r2)
    assert len(led.history()) == 1


def test_atomic_write_survives_crash_mid_write(tmp_path, monkeypatch):
    path = tmp_path / "l.json"
    led = Ledger(path, total_epsilon=5.0)
    led.commit(led.reserve(1.0, "f1"))
    before = path.read_text()

    real_dump = json.dump

    def crashing_dump(obj, fh, **kw):  # write half the document, then "crash"
        text = json.dumps(obj, **kw)
        fh.write(text[: len(text) // 2])
        raise OSError("simulated crash during write")

    monkeypatch.setattr(ledger_mod.json, "dump", crashing_dump)
    with pytest.raises(OSError, match="simulated crash"):
        led.commit(led.reserve(1.0, "f1"))
    monkeypatch.setattr(ledger_mod.json, "dump", real_dump)
    assert path.read_text() == before  # the old, complete ledger
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert Ledger(path, 5.0).remaining("f1") == pytest.approx(4.0)

    def crashing_replace(src, dst):  # crash after the temporary file is complete, before the rename
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(ledger_mod.os, "replace", crashing_replace)
    with pytest.raises(OSError, match="before rename"):
        led.commit(led.reserve(1.0, "f1"))
    monkeypatch.undo()
    assert path.read_text() == before


def test_windowed_budget_thm4(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=None, window=3, window_epsilon=1.0)
    for _ in range(2):
        led.commit(led.reserve(0.5, "f1"))  # rounds 1, 2: window full
    with pytest.raises(BudgetExceeded, match="window"):
        led.reserve(0.1, "f1")  # round 3 is in the window 1..3
    led.commit(led.reserve(0.1, "f2"))  # round 3 spent by another unit
    led.commit(led.reserve(0.5, "f1"))  # round 4: window 2..4 holds 0.5 + 0.5
    assert [r["round"] for r in led.history()] == [1, 2, 3, 4]
    with pytest.raises(BudgetExceeded, match="rounds 4..6"):
        led.reserve(0.6, "f1", round=6)  # window 4..6 would hold 1.1
    led.reserve(0.5, "f1", round=6)  # exactly ε_w fits


def test_windowed_budget_sliding(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=None, window=3, window_epsilon=1.0)
    led.commit(led.reserve(0.6, "f1", round=1))
    with pytest.raises(BudgetExceeded, match="rounds 1..3"):
        led.reserve(0.6, "f1", round=3)
    led.commit(led.reserve(0.6, "f1", round=4))  # window 2..4: only this release
    led.commit(led.reserve(0.4, "f1", round=5))  # window 3..5: 0.6 + 0.4
    with pytest.raises(BudgetExceeded):
        led.reserve(0.1, "f1", round=6)  # window 4..6 would hold 1.1
    led.commit(led.reserve(0.6, "f1", round=7))  # window 5..7: 0.4 + 0.6
    # every window of 3 consecutive rounds spends <= 1.0 while the total keeps growing (Thm 4)
    spent = {r["round"]: r["epsilon"] for r in led.history()}
    assert all(sum(spent.get(s + i, 0) for i in range(3)) <= 1.0 + 1e-12 for s in range(1, 8))
    assert sum(spent.values()) == pytest.approx(2.2) and led.remaining("f1") == math.inf


def test_parallel_units_and_sequential_fallback(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=1.0)
    led.commit(led.reserve(0.5, ["f1", "f2", "f3"], disjoint=True))  # one image each: parallel
    assert [led.remaining(u) for u in ("f1", "f2", "f3")] == [0.5, 0.5, 0.5]
    led.commit(led.reserve(0.25, ["f4", "f4"], disjoint=True))  # the same finger twice: sequential
    assert led.remaining("f4") == pytest.approx(0.5)
    with pytest.raises(BudgetExceeded, match="f5"):
        led.reserve(0.4, ["f5", "f6", "f7"], disjoint=False)  # not disjoint: each pays 3 x 0.4
    led.commit(led.reserve(0.3, ["f5", "f6", "f7"], disjoint=False))
    assert led.remaining("f6") == pytest.approx(0.1)


def test_bad_configuration_and_arguments(tmp_path):
    with pytest.raises(ValueError, match="total_epsilon"):
        Ledger(tmp_path / "a.json", total_epsilon=0)
    with pytest.raises(ValueError, match="window"):
        Ledger(tmp_path / "a.json", total_epsilon=1.0, window=3)
    with pytest.raises(ValueError, match="total_epsilon"):
        Ledger(tmp_path / "a.json", total_epsilon=None)
    led = Ledger(tmp_path / "a.json", total_epsilon=1.0)
    led.commit(led.reserve(0.1, "f1"))
    with pytest.raises(ValueError, match="created with"):
        Ledger(tmp_path / "a.json", total_epsilon=2.0)
    assert Ledger.open(tmp_path / "a.json").total_epsilon == 1.0
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="epsilon"):
            led.reserve(bad, "f1")
    with pytest.raises(ValueError, match="units"):
        led.reserve(0.1, [])
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable"):
        Ledger(tmp_path / "junk.json", 1.0)
