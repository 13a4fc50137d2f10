"""Client-level DP study (issue 13 §3), run on demand: FedAvg and AFFR on the demo's three institutions at
client-level ε ∈ {∞, 8, 4, 1} (δ = 1e-5): test EER, claimed ε, the canary audit's ε lower bound for one release
with each run's own noise and largest weight, and the wall time per round against the non-private run measured in
the same study (ratio).

    .venv/bin/python -m studies.study_client_dp --out /tmp/client_dp_study [--rounds 3] [--epsilons 8,4,1]

Writes ``study.md`` (table), ``study.json`` and ``study.png`` (EER and ε_lb vs ε) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from fedprint.attacks.one_run_audit import audit_client_dp_release
from fedprint.config import resolve_experiment
from fedprint.config.rundir import markdown_table
from fedprint.lab.simulate import simulate
from fedprint.privacy.client_dp import client_epsilon
from fedprint.server.checkpoint import load_releases


def _experiment(out: Path, eps: float, rounds: int) -> Path:
    text = resolve_experiment("demo").read_text()
    text = text.replace('name = "demo"', f'name = "dp-{"inf" if math.isinf(eps) else f"{eps:g}"}"\nout = "{out}"')
    text = text.replace("rounds = 3", f"rounds = {rounds}")
    if not math.isinf(eps):
        text += f'\n[dp]\nenabled = true\nlevel = "client"\ntarget_epsilon = {eps}\ndelta = 1e-5\n'
    path = out / f"demo_eps_{eps:g}.toml"
    path.write_text(text)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epsilons", default="8,4,1")
    ap.add_argument("--report-only", action="store_true", help="re-render study.md/png from study.json")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        write_outputs(json.loads((args.out / "study.json").read_text()), args.out)
        return
    rows, base_round = [], {}
    for eps in [math.inf, *(float(e) for e in args.epsilons.split(","))]:
        t0 = time.perf_counter()
        run = simulate(_experiment(args.out, eps, args.rounds), methods=["fedavg", "affr"],
                       out=args.out / f"eps-{eps:g}", progress=False)
        for method in ("fedavg", "affr"):
            final = json.loads((run / method / "final.json").read_text())
            rounds = json.loads((run / method / "rounds.json").read_text())
            secs = float(np.mean([r["round_seconds"] for r in rounds]))
            eer = float(np.mean([c["eer"] for c in final["clients"]]))
            row = {"method": method, "target ε": eps, "avg test EER": eer,
                   "worst-client EER": max(c["eer"] for c in final["clients"]), "s / round": secs}
            p = final["privacy"]
            if p.get("level") == "client":
                cohorts = [r["weights"] for r in load_releases(run / method)] or [{"c": 1 / 3, "d": 1 / 3, "e": 1 / 3}]
                audit = audit_client_dp_release(noise_multiplier=p["noise_multiplier"], clip=p["clip"],
                                                weights=max(cohorts, key=lambda w: max(w.values())), delta=p["delta"],
                                                claimed_epsilon=client_epsilon(p["noise_multiplier"], None, 1,
                                                                               p["delta"]),
                                                rng=np.random.default_rng(0))
                row.update({"claimed ε (run)": p["epsilon"], "z": p["noise_multiplier"],
                            "claimed ε (1 release)": audit["claimed_epsilon"], "ε_lb (1 release)": audit["epsilon_lb"],
                            "ε_lb cap": audit["max_bound"]})
            else:
                base_round[method] = secs
            row["round time ratio"] = secs / base_round.get(method, secs)
            rows.append(row)
        print(f"ε = {eps}: {time.perf_counter() - t0:.0f} s", flush=True)
    (args.out / "study.json").write_text(json.dumps(rows, indent=1, default=str))
    write_outputs(rows, args.out)


def write_outputs(rows: list[dict], out: Path) -> None:
    """study.md (every column, "–" where a run has none) and study.png."""
    for r in rows:
        r["target ε"] = float(r["target ε"])
    keys = list(dict.fromkeys(k for r in rows for k in r))
    rows = [{k: r.get(k, "–") for k in keys} for r in rows]
    table = markdown_table([{k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows])
    (out / "study.md").write_text("# Client-level DP: FedAvg vs AFFR on the demo's three institutions\n\n"
                                       + table)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    for method in ("fedavg", "affr"):
        rs = [r for r in rows if r["method"] == method]
        xs = [16.0 if math.isinf(r["target ε"]) else r["target ε"] for r in rs]
        ax[0].plot(xs, [r["avg test EER"] for r in rs], "o-", label=method)
        dp = [r for r in rs if r.get("ε_lb (1 release)", "–") != "–"]
        ax[1].plot([r["target ε"] for r in dp], [r["ε_lb (1 release)"] for r in dp], "o-", label=f"{method} ε_lb")
        ax[1].plot([r["target ε"] for r in dp], [r["claimed ε (1 release)"] for r in dp], "x--",
                   label=f"{method} claimed (1 release)")
    ax[0].set(xscale="log", xlabel="target ε (16 = no DP)", ylabel="avg test EER", title="utility")
    ax[0].axhline(0.5, color="grey", lw=0.5)
    ax[1].set(xlabel="target ε of the run", ylabel="ε", title="canary audit, one release")
    for a in ax:
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "study.png", dpi=120)
    print(table)


if __name__ == "__main__":
    main()
