"""report.md sections (lab/report.py)."""

from __future__ import annotations

import json

from fedprint.lab.report import secure_section


def _method(run, name, final, rounds):
    (run / name).mkdir(parents=True)
    (run / name / "final.json").write_text(json.dumps(final))
    (run / name / "rounds.json").write_text(json.dumps(rounds))


def test_secure_section_shows_who_was_in_each_sum_and_the_cost(tmp_path):
    secure = {"protocol": "SecAgg+", "server_sees": "the sum", "server_does_not_see": "one update",
              "not_protected_against": "t colluders"}
    rounds = [{"round": t, "secagg_status": st, "secagg_in_sum": n, "secagg_cohort": 3, "secagg_dropped": 3 - n,
               "secagg_shares": 2, "secagg_threshold": 2, "secagg_seconds": 0.5, "secagg_bytes_up_per_client": 2000.0,
               "plain_bytes_up_per_client": 1000.0, "secagg_bytes_down_per_client": 300.0}
              for t, st, n in ((1, "ok", 3), (2, "ok", 2))]
    _method(tmp_path, "affr", {"secure_aggregation": secure}, rounds)
    _method(tmp_path, "fedavg", {"privacy": {}}, [{"round": 1}])
    text = secure_section(tmp_path, ["fedavg", "affr"])
    assert "### affr: SecAgg+" in text and "### fedavg" not in text
    assert "the server sees: the sum" in text and "not protected against: t colluders" in text
    assert "| 2 | ok | 2/3 | 1 |" in text and "2.000" in text  # round 2: one client dropped, 2x the plain upload
    assert secure_section(tmp_path, ["fedavg"]) == ""
