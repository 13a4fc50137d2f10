"""``fedprint ledger show LEDGER``: what a privacy ledger holds — its budget, each finger's balance, every release.

    fedprint ledger show ledger.json [--unit FINGER_ID] [--json]

Read-only (it takes no lock and writes nothing). The file is validated exactly as a publish would validate it
(:func:`fedprint.privacy.ledger._problem`): a damaged or hand-edited file is one line naming the file and its first
problem, exit status 2. Balances are recomputed from each release's ε, δ and units, never read from the file.
Inputs are identified by ``content_sha256`` (the pixels' digest), never by a file name.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from fedprint.privacy.ledger import Ledger


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ledger", help="inspect a privacy ledger (balance per finger, releases, remaining budget)")
    actions = p.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    s = actions.add_parser("show", help="budget, balance per finger and every release of a ledger")
    s.add_argument("ledger", type=Path, help="privacy ledger JSON (as written by `fedprint publish --ledger`)")
    s.add_argument("--unit", help="show only this finger identity")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    s.set_defaults(func=run_show)


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))


def _release_row(r: dict) -> dict:
    return {"id": r["id"], "time": _when(r.get("time")), "units": r["units"], "epsilon": r["epsilon"],
            "delta": r["delta"], "mechanism": r.get("mechanism", "-"), "variant": r.get("variant", "-"),
            "relation": r.get("relation", "-"), "stated_epsilon": r.get("stated_epsilon"),
            "group": r.get("group"), "content_sha256": r.get("content_sha256")}


def run_show(args: argparse.Namespace) -> int:
    led = Ledger.open(args.ledger)  # validates the whole file; one-line error otherwise
    balances = led.balances()
    releases = led.history()
    if args.unit is not None:
        balances = {args.unit: balances.get(args.unit, {"epsilon": 0.0, "delta": 0.0,
                                                         "remaining": led.total_epsilon, "releases": 0})}
        releases = [r for r in releases if args.unit in r["units"]]
    config = {"total_epsilon": led.total_epsilon, "total_delta": led.total_delta, "window": led.window,
              "window_epsilon": led.window_epsilon}
    if args.json:
        print(json.dumps({"ledger": str(args.ledger), "config": config, "balances": balances,
                          "releases": [_release_row(r) for r in releases]}, indent=1))
        return 0
    rate = "" if led.window is None else f"; rate limit {led.window_epsilon:g} per {led.window} releases"
    print(f"Ledger {args.ledger}: finger-level budget epsilon {led.total_epsilon:g}, delta {led.total_delta:g} "
          f"per finger (sequential composition){rate}; {len(led.history())} release(s), {len(led.balances())} "
          f"finger(s).")
    print("\nBalance per finger (finger-level, recomputed from the releases):")
    print(f"  {'unit':<24} {'releases':>8} {'eps spent':>10} {'delta spent':>11} {'eps left':>9}")
    for unit, b in balances.items():
        print(f"  {unit:<24} {b['releases']:>8d} {b['epsilon']:>10.4g} {b['delta']:>11.3g} {b['remaining']:>9.4g}")
    if not balances:
        print("  (none)")
    print("\nReleases:")
    print(f"  {'id':>4} {'time (UTC)':<20} {'units':<24} {'eps':>7} {'delta':>7} {'mechanism':<18} "
          f"{'stated (relation x g)':<26} content sha256")
    for r in map(_release_row, releases):
        stated = "-" if r["stated_epsilon"] is None else \
            f"{r['stated_epsilon']:g} ({r['relation']} x {r['group']})"
        units = ",".join(r["units"])
        print(f"  {r['id']:>4} {r['time']:<20} {units:<24} {r['epsilon']:>7.4g} {r['delta']:>7.3g} "
              f"{r['mechanism'] + '/' + r['variant']:<18} {stated:<26} {(r['content_sha256'] or '-')[:16]}")
    if not releases:
        print("  (none)")
    return 0
