"""Privacy ledger: refusal, atomic persistence under a simulated crash, windowed budget, parallel units."""

from __future__ import annotations

import json

import pytest

from fedprint.privacy import ledger as ledger_mod
from fedprint.privacy.ledger import BudgetExceeded, Ledger


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


def test_window_is_a_rate_limit_on_the_ledgers_own_clock(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=10.0, window=3, window_epsilon=1.0)
    for _ in range(2):
        led.commit(led.reserve(0.5, "f1"))  # releases 1, 2: window full
    with pytest.raises(BudgetExceeded, match="rate limit"):
        led.reserve(0.1, "f1")  # release 3 is in the window 1..3
    led.commit(led.reserve(0.1, "f2"))  # release 3 spent by another unit
    led.commit(led.reserve(0.5, "f1"))  # release 4: window 2..4 holds 0.5 + 0.5
    assert [r["round"] for r in led.history()] == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="reserved"):
        led.reserve(0.1, "f1", round=9)  # a caller cannot choose the round


def test_a_finger_always_has_a_total_cap(tmp_path):
    """A fingerprint never changes: windowed budgets alone would let releases of one finger add up forever."""
    with pytest.raises(ValueError, match="total cap is required"):
        Ledger(tmp_path / "l.json", total_epsilon=None, window=1, window_epsilon=1.0)
    led = Ledger(tmp_path / "l.json", total_epsilon=2.0, window=1, window_epsilon=1.0)
    accepted = 0
    for _ in range(50):
        try:
            led.commit(led.reserve(0.5, "f1"))
            accepted += 1
        except BudgetExceeded as exc:
            assert "of 2 already spent" in str(exc)
    assert accepted == 4 and led.remaining("f1") == 0.0


def test_bad_ledger_files_are_one_clear_error_and_refusals_leave_no_lock_file(tmp_path):
    path = tmp_path / "l.json"
    led = Ledger(path, total_epsilon=1.0)
    led.commit(led.reserve(0.4, "f1"))
    good = json.loads(path.read_text())
    cases = {
        "unknown config key": {**good, "config": {**good["config"], "colour": "red"}},
        "incomplete entry": {**good, "releases": [{k: v for k, v in good["releases"][0].items() if k != "costs"}]},
        "bad costs": {**good, "releases": [{**good["releases"][0], "costs": {"f1": "lots"}}]},
        "not a list": {**good, "releases": {}},
    }
    for name, doc in cases.items():
        bad = tmp_path / f"{name.replace(' ', '_')}.json"
        bad.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match=f"{bad.name}: not a valid"):
            Ledger.open(bad)
    fresh = tmp_path / "fresh" / "l.json"
    with pytest.raises(BudgetExceeded):
        Ledger(fresh, total_epsilon=1.0).reserve(2.0, "f1")
    assert sorted(p.name for p in fresh.parent.iterdir()) == []  # no ledger, no lock file
    assert not any(p.name.endswith(".lock") for p in tmp_path.rglob("*"))
    with pytest.raises(ValueError, match="reserved"):
        led.reserve(0.1, "f1", epsilon_note=1, costs={})


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
    with pytest.raises(ValueError, match="total_epsilon"):
        Ledger(tmp_path / "a.json", total_epsilon=None, window=2, window_epsilon=1.0)
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
