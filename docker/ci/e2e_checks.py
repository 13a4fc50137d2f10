"""Assertions of the container stage (docker/e2e.sh) on what a deployed run wrote: one line per failure, exit 1.

    python docker/ci/e2e_checks.py final   RUNS PREFIX INSTITUTION...   newest RUNS/PREFIX*: all aggregated, no problems
    python docker/ci/e2e_checks.py killed  RUN_DIR KILLED               a round completed without KILLED, reported
    python docker/ci/e2e_checks.py resumed RUN_DIR SERVER_LOG INST...   resumed from a checkpoint, then completed
    python docker/ci/e2e_checks.py secure  RUN_DIR INSTITUTION...       every round a SecAgg+ sum of all of them
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def _load(run_dir: Path) -> tuple[list[dict], dict]:
    missing = [n for n in ("rounds.json", "final.json") if not (run_dir / n).is_file()]
    if missing:
        raise AssertionError(f"{run_dir}: no {', '.join(missing)} (files: {sorted(p.name for p in run_dir.iterdir())})")
    return json.loads((run_dir / "rounds.json").read_text()), json.loads((run_dir / "final.json").read_text())


def _complete(run_dir: Path, institutions: list[str]) -> str:
    history, final = _load(run_dir)
    clients = sorted(c["client"] for c in final["clients"])
    if clients != sorted(institutions):
        raise AssertionError(f"{run_dir}/final.json: clients {clients}, expected {sorted(institutions)}")
    if final["problems"]:
        raise AssertionError(f"{run_dir}/final.json: problems {final['problems']}")
    rounds = [r["round"] for r in history]
    if rounds != list(range(1, len(rounds) + 1)) or not rounds:
        raise AssertionError(f"{run_dir}/rounds.json: rounds {rounds}")
    short = [(r["round"], r["train_ok"], r["eval_ok"]) for r in history
             if r["train_ok"] != len(institutions) or r["eval_ok"] != len(institutions)]
    if short:
        raise AssertionError(f"{run_dir}/rounds.json: (round, train_ok, eval_ok) short of {len(institutions)}: {short}")
    return f"{run_dir.name}: {len(rounds)} rounds, {len(clients)} clients, EER " + \
        ", ".join(f"{c['client']} {c['eer']:.3f}" for c in final["clients"])


def final(runs: str, prefix: str, *institutions: str) -> str:
    dirs = sorted((p for p in Path(runs).iterdir() if p.name.startswith(prefix)), key=lambda p: p.stat().st_mtime)
    if not dirs:
        raise AssertionError(f"{runs}: no run directory {prefix}*")
    return _complete(dirs[-1], list(institutions))


def killed(run_dir: str, victim: str) -> str:
    history, final = _load(Path(run_dir))
    if history[0]["train_ok"] != 3:
        raise AssertionError(f"{run_dir}: round 1 had {history[0]['train_ok']} trained clients, expected 3")
    without = [r["round"] for r in history[1:] if r["train_ok"] >= 2 and sorted(
        c["client"] for c in r["clients"] if c.get("train_status") == "ok") == sorted(
        {c["client"] for c in r["clients"]} - {victim})]
    if not without:
        raise AssertionError(f"{run_dir}: no round after the kill completed with the others: "
                             f"{[(r['round'], r['train_ok']) for r in history]}")
    reported = {p.get("client") for p in final["problems"]}
    if victim not in reported:
        raise AssertionError(f"{run_dir}/final.json: {victim} not among the problems {final['problems']}")
    return f"round {without[0]} completed without {victim}; final.json reports it"


def resumed(run_dir: str, server_log: str, *institutions: str) -> str:
    text = Path(server_log).read_text(errors="replace")
    found = re.findall(r"Resuming (\w+) from (\S+) after round (\d+) of (\d+)", text)
    hits = [f for f in found if f[1].rstrip("/").endswith(Path(run_dir).name) and int(f[2]) >= 1]
    if not hits:
        raise AssertionError(f"{server_log}: no 'Resuming ... from .../{Path(run_dir).name} after round k' (k >= 1)")
    summary = _complete(Path(run_dir), list(institutions))
    return f"resumed after round {hits[-1][2]} of {hits[-1][3]}; {summary}"


def secure(run_dir: str, *institutions: str) -> str:
    summary = _complete(Path(run_dir), list(institutions))
    history, final = _load(Path(run_dir))
    if not isinstance(final.get("secure_aggregation"), dict):
        raise AssertionError(f"{run_dir}/final.json: no secure_aggregation statement (the run was not secure)")
    bad = [(r["round"], r.get("secagg_status"), r.get("secagg_in_sum")) for r in history
           if r.get("secagg_status") != "ok" or r.get("secagg_in_sum") != len(institutions)]
    if bad:
        raise AssertionError(f"{run_dir}/rounds.json: (round, secagg_status, secagg_in_sum) not ok with "
                             f"{len(institutions)} in the sum: {bad}")
    up = [round(r["secagg_bytes_up_per_client"] / r["plain_bytes_up_per_client"], 3) for r in history]
    return (f"{len(history)} secure round(s), {len(institutions)} clients in every sum (bytes up x plain {up}); "
            f"{summary}")


def main(argv: list[str]) -> int:
    checks = {"final": final, "killed": killed, "resumed": resumed, "secure": secure}
    if len(argv) < 2 or argv[0] not in checks:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        print(f"[check {argv[0]}] {checks[argv[0]](*argv[1:])}")
    except (AssertionError, OSError, ValueError, KeyError) as exc:
        print(f"[check {argv[0]}] FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
