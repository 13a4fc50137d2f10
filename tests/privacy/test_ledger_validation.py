"""Issue 24 item 10: a hand-edited ledger cannot bypass the budget — every number is validated, sums recomputed.

Each case edits a valid ledger the way a new user would (by hand) and must be refused with one line naming the
file and the first problem — by the Python API, by ``fedprint publish`` (nothing written, nothing charged) and
by ``fedprint ledger show``.
"""

from __future__ import annotations

import json
import math

import pytest

from fedprint.cli.main import main
from fedprint.privacy.ledger import Ledger


def _valid(path):
    led = Ledger(path, total_epsilon=10.0)
    led.commit(led.reserve(2.0, "f1", mechanism="pointset", variant="sound", relation="finger", group=1,
                           stated_epsilon=2.0))
    led.commit(led.reserve(1.0, ["f2", "f3"], disjoint=True))
    return json.loads(path.read_text())


def _edit(doc: dict, case: str) -> dict:
    doc = json.loads(json.dumps(doc))
    r0 = doc["releases"][0]
    if case == "negative cost":  # the issue's −100: "102 left" of 10
        r0["epsilon"], r0["stated_epsilon"], r0["costs"]["f1"] = -100.0, -100.0, [-100.0, 0.0]
    elif case == "nan cost":
        r0["costs"]["f1"] = [math.nan, 0.0]
    elif case == "nan epsilon":
        r0["epsilon"] = r0["stated_epsilon"] = math.nan
        r0["costs"]["f1"] = [math.nan, 0.0]
    elif case == "-infinity cost":
        r0["costs"]["f1"] = [-math.inf, 0.0]
    elif case == "empty costs":
        r0["costs"] = {}
    elif case == "true as a cost":
        r0["costs"]["f1"] = [True, 0.0]
    elif case == "version 99":
        doc["version"] = 99
    elif case == "cost below its epsilon":  # the cost a budget check would add, edited down
        r0["costs"]["f1"] = [0.001, 0.0]
    elif case == "epsilon below group x stated":
        r0["epsilon"], r0["costs"]["f1"] = 0.5, [0.5, 0.0]
    elif case == "finger release with a group":
        r0["group"] = 3
    elif case == "release removed":
        del doc["releases"][0]
    elif case == "cap lowered below spending":
        doc["config"]["total_epsilon"] = 1.0
    elif case == "nan cap":
        doc["config"]["total_epsilon"] = math.nan
    elif case == "negative delta":
        r0["delta"], r0["costs"]["f1"] = -1.0, [2.0, -1.0]
    elif case == "disjoint not a boolean":
        doc["releases"][1]["disjoint"] = "yes"
    else:
        raise AssertionError(case)
    return doc


CASES = ["negative cost", "nan cost", "nan epsilon", "-infinity cost", "empty costs", "true as a cost", "version 99",
         "cost below its epsilon", "epsilon below group x stated", "finger release with a group", "release removed",
         "cap lowered below spending", "nan cap", "negative delta", "disjoint not a boolean"]


@pytest.mark.parametrize("case", CASES)
def test_hand_edited_ledger_is_refused_with_one_line(tmp_path, case):
    good = _valid(tmp_path / "good.json")
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(_edit(good, case)))  # json writes NaN / -Infinity literals, as a hand edit may
    with pytest.raises(ValueError, match=r"edited\.json: not a valid fedprint-privacy-ledger file: ") as info:
        Ledger.open(bad).remaining("f1")
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="edited.json"):
        Ledger(bad, total_epsilon=10.0)  # opening with the same budget: refused as well


def test_the_issues_reproduction_no_longer_gives_102_left(tmp_path):
    """On the old code a −100 cost read back as 102 left of 10; NaN as 'nan left' with every check off."""
    good = _valid(tmp_path / "good.json")
    for case in ("negative cost", "nan cost", "-infinity cost"):
        bad = tmp_path / f"{case.replace(' ', '_')}.json"
        bad.write_text(json.dumps(_edit(good, case)))
        with pytest.raises(ValueError, match="not a valid"):
            Ledger(bad, total_epsilon=10.0).reserve(50.0, "f1")


def test_a_valid_ledger_still_opens_and_sums_are_recomputed(tmp_path):
    path = tmp_path / "good.json"
    _valid(path)
    led = Ledger.open(path)
    assert led.remaining("f1") == pytest.approx(8.0) and led.balances()["f2"]["remaining"] == pytest.approx(9.0)


def test_cli_refuses_edited_ledger_in_one_line_and_charges_nothing(tmp_path, capsys):
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(_edit(_valid(tmp_path / "good.json"), "negative cost")))
    before = bad.read_text()
    assert main(["ledger", "show", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "edited.json" in err and "epsilon" in err
    image = tmp_path / "p.png"
    image.write_bytes(b"")  # never read: the ledger is refused first
    assert main(["publish", "--mechanism", "pointset", "--protect", "finger", "--epsilon", "1", str(image),
                 "-o", str(tmp_path / "out.json"), "--ledger", str(bad), "--unit", "f1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "edited.json: not a valid" in err
    assert bad.read_text() == before and not (tmp_path / "out.json").exists()


def test_ledger_show_prints_balances_and_releases(tmp_path, capsys):
    path = tmp_path / "good.json"
    _valid(path)
    assert main(["ledger", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "budget epsilon 10" in out and "2 release(s), 3 finger(s)" in out
    f1 = next(line for line in out.splitlines() if line.strip().startswith("f1 "))
    assert f1.split()[1:] == ["1", "2", "0", "8"]  # releases, eps spent, delta spent, eps left
    assert main(["ledger", "show", str(path), "--unit", "f2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["balances"]) == ["f2"] and doc["balances"]["f2"]["remaining"] == 9.0
    assert [r["id"] for r in doc["releases"]] == [2]
    assert main(["ledger", "show", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err
