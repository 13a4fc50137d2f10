"""report.md, results tables and plots of a ``fedprint simulate`` run directory.

Tables follow Yan et al. 2025: Table 3 (per-client accuracy of each method) and Table 4 (average accuracy per
method); EER is reported next to accuracy. Plots: mean test accuracy / EER per round per federated method,
AFFR aggregation weights α_i per round, and per-client test accuracy of every method.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedprint.config.rundir import markdown_table, report_provenance
from fedprint.data.atomic_io import write_csv, write_json, write_text


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rounds(run_dir: Path, method: str) -> list[dict[str, Any]]:
    path = run_dir / method / "rounds.json"
    return json.loads(path.read_text()) if path.is_file() else []


def plot_curves(run_dir: Path, methods: Sequence[str]) -> Path | None:
    """``curves.png``: mean test accuracy and EER over clients, per round, per federated method."""
    series = {m: _rounds(run_dir, m) for m in methods}
    series = {m: r for m, r in series.items() if r}
    if not series:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for m, rows in series.items():
        x = [r["round"] for r in rows]
        axes[0].plot(x, [r["accuracy"] for r in rows], marker="o", label=m)
        axes[1].plot(x, [r["eer"] for r in rows], marker="o", label=m)
    for ax, what in zip(axes, ("test accuracy (mean over clients)", "test EER (mean over clients)"),
                        strict=True):
        ax.set_xlabel("round")
        ax.set_title(what)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    path = run_dir / "curves.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_alpha(run_dir: Path, methods: Sequence[str]) -> Path | None:
    """``alpha.png``: AFFR aggregation weight α_i of each client per round (one panel per AFFR run)."""
    affr = [m for m in methods if m.startswith("affr") and _rounds(run_dir, m)]
    if not affr:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(affr), figsize=(5 * len(affr), 4), squeeze=False)
    for ax, m in zip(axes[0], affr, strict=True):
        per_client: dict[str, list[tuple[int, float]]] = {}
        for r in _rounds(run_dir, m):
            for row in r["clients"]:
                if "alpha" in row and row["alpha"] is not None and math.isfinite(row["alpha"]):
                    per_client.setdefault(row["client"], []).append((r["round"], row["alpha"]))
        for client, pts in sorted(per_client.items()):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=client)
        ax.set_title(f"{m}: aggregation weights α_i")
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = run_dir / "alpha.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_per_client(run_dir: Path, results: Mapping[str, list[dict]]) -> Path | None:
    """``per_client_accuracy.png``: grouped bars, final test accuracy of every client under every method."""
    clients = sorted({r["client"] for rows in results.values() for r in rows})
    if not clients:
        return None
    plt = _plt()
    methods = list(results)
    width = 0.8 / max(len(methods), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(clients) * max(1, len(methods)) / 3), 4))
    x = np.arange(len(clients))
    for k, m in enumerate(methods):
        acc = {r["client"]: r["accuracy"] for r in results[m]}
        ax.bar(x + k * width, [acc.get(c, np.nan) for c in clients], width, label=m)
    ax.set_xticks(x + width * (len(methods) - 1) / 2, clients, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0.4, 1.0)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = run_dir / "per_client_accuracy.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _pivot(results: Mapping[str, list[dict]], key: str, clients: list[str]) -> list[dict[str, Any]]:
    rows = []
    for c in clients:
        row: dict[str, Any] = {"client": c}
        for m, rs in results.items():
            v = {r["client"]: r[key] for r in rs}.get(c)
            row[m] = v if v is not None else "failed"
        rows.append(row)
    avg: dict[str, Any] = {"client": "**Average**"}
    for m, rs in results.items():
        avg[m] = float(np.mean([r[key] for r in rs])) if rs else "failed"
    return rows + [avg]


#: Average EER at or above which a model is reported as barely verifying (chance is 0.5).
NEAR_CHANCE_EER = 0.3


def _privacy_cell(p: dict | None) -> str:
    """Short guarantee of one method for the summary table."""
    if not p or p.get("level") in (None, "none"):
        return "none"
    return f"client-level ({p['epsilon']:.3g}, {p['delta']:.0e})-DP"


def noise_swings(run_dir: Path, methods: Sequence[str]) -> str:
    """How often each AFFR method moved its weights on gap differences inside the validation noise."""
    lines = []
    for m in methods:
        path = run_dir / m / "rounds.json"
        if not m.startswith("affr") or not path.is_file():
            continue
        rounds = [r for r in json.loads(path.read_text()) if r.get("within_noise") is not None]
        if rounds:
            k = sum(bool(r["within_noise"]) for r in rounds)
            lines.append(f"- **{m}**: in {k} of {len(rounds)} rounds with gaps, the spread of the gaps max|G − μ| "
                         f"was below 2 standard errors of the validation accuracy (median spread "
                         f"{np.median([r['gap_spread'] for r in rounds]):.4f}, median SE "
                         f"{np.median([r['gap_se'] for r in rounds]):.4f}) — AFFR's normalisation still made a full "
                         "step in those rounds unless `[federation] gap_noise_floor` > 0.")
    return ("## AFFR weight moves vs validation noise\n\n" + "\n".join(lines) + "\n") if lines else ""


def privacy_section(privacy: Mapping[str, dict]) -> str:
    """What is released under client-level DP, with its full guarantee, per method that has one (empty if none).

    Only the model files (weights, a user-set threshold or none) are releases; everything else in the report and
    the run directory is the server's internal record, which DP does not protect (:func:`internal_heading`).
    """
    dp = {m: p for m, p in privacy.items() if p.get("level") == "client"}
    if not dp:
        return ""
    lines = ["## Released under client-level DP\n",
             "Released: each DP method's global models θ_g^t (sent to the clients every round) and its final "
             "`<method>/model.pt` — noisy weights, the threshold set in `[dp] threshold` (public) or none, the "
             "guarantee, no client metric. `<method>/released.json` lists the split.\n"]
    for m, p in dp.items():
        zg = p["gap_noise_multiplier"]
        repeated = (f" (round(s) {', '.join(map(str, p['repeated_rounds']))} released twice: a restart re-ran them "
                    "after their model had left the server)" if p.get("repeated_rounds") else "")
        lines.append(f"- **{m}**: ({p['epsilon']:.3g}, {p['delta']:.0e})-DP for one {p['unit']}, composed over "
                     f"{p.get('releases', p['rounds'])} releases of {p['rounds']} rounds{repeated}; "
                     f"{p.get('delta_rule', '')}; noise multiplier z = {p['noise_multiplier']:.3g}, gap noise "
                     f"multiplier {'none (no gaps released)' if zg is None else f'{zg:.3g}'}, "
                     f"update clip C = {p['clip']:g}, weights capped at {p['alpha_cap']}; accountant: "
                     f"{p['accountant']}; sampling: {p['sampling']}. Not protected: {p['not_protected']}.")
    lines.append("- local / centralized rows are non-private baselines (no guarantee).\n")
    return "\n".join(lines)


def internal_heading(privacy: Mapping[str, dict]) -> str:
    """The line that separates the DP release from the server-internal record in a DP run's report."""
    dp = [m for m, p in privacy.items() if p.get("level") == "client"]
    if not dp:
        return ""
    return ("## Server-internal record — NOT protected by DP\n\nEverything below, and `rounds.json`, `rounds.csv`, "
            "`clients.csv`, `final.json` and `checkpoint/` of " + ", ".join(f"**{m}**" for m in dp) + ", is computed "
            "from what the clients reported in the clear (test metrics, thresholds, gaps and their standard errors): "
            "a record for the trusted server, not a release. Publishing it is a release without DP.\n")


def evaluated_model(method: str) -> str:
    """Which model a method's per-client rows score (personalised methods: each client's own, as their papers)."""
    from fedprint.config import PERSONALIZED

    if method in PERSONALIZED:
        return "personalised (each client's own)"
    if method == "local":
        return "each client's local model"
    return "one shared model"


def unseen_section(cfg, rows: list[dict]) -> str:
    """Report section: every model on the held-out domains (threshold-free metrics; nothing fitted there)."""
    if not cfg.partition.unseen:
        return ""
    return ("## Unseen domain(s): " + ", ".join(cfg.partition.unseen) + " (no client trained on them)\n\n"
            + markdown_table(rows) + "\nAll pairs of the held-out domain's images; EER and FNMR@FMR1% need no "
            "threshold, so nothing is fitted on the unseen data. Personalised methods are scored with their "
            "GLOBAL model here (a new institution has no personal model).\n")


def pair_pivot(rows: list[dict], key: str) -> str:
    """EER and FNMR@FMR1% tables of score rows: one line per model, one column per ``key`` value (a set or an
    institution), each column headed by the genuine (g) / impostor (i) pairs behind its numbers."""
    heads: dict[str, str] = {}
    for r in rows:  # the pairs of a column are the same for every model (own-model rows may differ: say so)
        head = f"{r[key]} ({r['genuine']} g / {r['impostor']} i)"
        heads.setdefault(r[key], head)
    tables = []
    for metric in ("EER", "FNMR@FMR1%"):
        table: dict[str, dict] = {}
        for r in rows:
            table.setdefault(r["model"], {"model": r["model"]})[heads[r[key]]] = r[metric]
        tables.append(f"**{metric}**\n\n" + markdown_table(list(table.values()), ["model", *heads.values()]))
    return "\n".join(tables)


def trained_real_sets(sources, unseen=()) -> list[str]:
    """Real sets (folders under the real-set root) that an experiment's ``[[data.sources]]`` train on.

    ``kind = "real"`` names its set; a ``kind = "dataset"`` whose root lies inside one of the real-set folders counts
    too. Their rows in the "every real set" table include training fingers: not held-out figures. A source whose
    domain is in ``unseen`` (``[partition] unseen``: no client gets it) trains nothing and is left out.
    """
    from fedprint.data.real_sets import real_set_dirs

    try:
        dirs = {d.resolve(): d.name for d, _layout in real_set_dirs()}
    except OSError:
        dirs = {}
    sources = [s for s in sources if (s.domain or (s.name if s.kind == "real" else "")) not in set(unseen)]
    names = {s.name for s in sources if s.kind == "real"}
    for s in sources:
        if s.kind == "dataset" and s.root:
            root = Path(s.root).resolve()
            names |= {name for d, name in dirs.items() if root == d or d in root.parents}
    return sorted(names)


def real_sample_heading(sources, unseen=()) -> str:
    """Heading (and caveat) of the "EER on real fingerprints" section: honest about sets this run trained on
    (``unseen``: the ``[partition] unseen`` domains, which it did not)."""
    trained = trained_real_sets(sources, unseen)
    if not trained:
        return "## EER on real fingerprints (never used in training)\n"
    return ("## EER on every real set\n\n"
            f"**{', '.join(trained)}: this run trained on these sets' training fingers, so their rows (and the pooled "
            "column) are not held-out figures** — the held-out ones are the test metrics and the common test set "
            "above. The other sets were never used in training.\n")


def real_sample_section(real: list[dict] | None) -> str:
    """Body of a report's "EER on real fingerprints" section from
    :func:`fedprint.recognition.real_samples.real_sample_rows`."""
    if not real:
        return ("No real samples available (set FEDPRINT_REAL_SAMPLES, or --real-samples, to the folder holding the "
                "real sets, one sub-folder per set in the FVC or generic layout).\n")
    return (pair_pivot(real, "real set") + "\nFVC protocol within each set (all genuine pairs, first-impression "
            "impostor pairs); column headers give the genuine (g) / impostor (i) pairs behind every number; the "
            "pooled column scores all sets' pairs together (no cross-set pair). Each model with its own input "
            "pipeline; — : FNMR@FMR1% needs at least 100 impostor pairs.\n")


def client_pairs_note(common: list[dict]) -> str:
    """One line: the genuine / impostor test pairs behind each client's numbers (from the common-test rows)."""
    seen: dict[str, str] = {}
    for r in common:
        if not str(r[COMMON_COLUMN]).startswith("pooled"):
            seen.setdefault(r[COMMON_COLUMN], f"{r[COMMON_COLUMN]} {r['genuine']} / {r['impostor']}")
    return ("Test pairs behind each client's numbers (genuine / impostor): " + "; ".join(seen.values()) + ".\n"
            if seen else "")


#: Column naming the institution (or the pooled set) of a common-test row (:mod:`fedprint.lab.common_test`).
COMMON_COLUMN = "test set"


def common_test_section(rows: list[dict]) -> str:
    """Report section: every model on each institution's held-out test fingers and on all of them pooled."""
    if not rows:
        return ""
    return ("## Common test set: every institution's held-out fingers, pooled\n\n" + pair_pivot(rows, COMMON_COLUMN)
            + "\nThreshold-free metrics on each institution's test pairs (open set: fingers no method trained on; "
            "no cross-institution pair) and on all of them pooled. `local (own models)`: each institution scored "
            "with its own local model. — : FNMR@FMR1% needs at least 100 impostor pairs.\n")


def secure_section(run_dir: Path, methods: Sequence[str]) -> str:
    """"Secure aggregation" of report.md: per secure method, the trust statement of its ``final.json`` and, per
    round, the clients in the unmasked sum and what the protocol cost (seconds, bytes per client vs plain)."""
    out = []
    for m in methods:
        path = run_dir / m / "final.json"
        if not path.is_file():
            continue
        secure = json.loads(path.read_text()).get("secure_aggregation")
        if not isinstance(secure, dict):
            continue
        rows = [{"round": r["round"], "status": r.get("secagg_status"),
                 "in sum / cohort": f"{r.get('secagg_in_sum')}/{r.get('secagg_cohort')}",
                 "dropped": r.get("secagg_dropped"), "k / t": f"{r.get('secagg_shares')}/{r.get('secagg_threshold')}",
                 "protocol s": f"{r.get('secagg_seconds', float('nan')):.2f}",
                 "bytes up / client": f"{r.get('secagg_bytes_up_per_client', float('nan')):,.0f}",
                 "x plain": f"{r['secagg_bytes_up_per_client'] / r['plain_bytes_up_per_client']:.3f}"
                 if r.get("plain_bytes_up_per_client") else "-",
                 "bytes down / client": f"{r.get('secagg_bytes_down_per_client', float('nan')):,.0f}"}
                for r in _rounds(run_dir, m) if "secagg_status" in r]
        out += [f"### {m}: {secure.get('protocol', 'secure aggregation')}\n",
                f"- the server sees: {secure.get('server_sees')}",
                f"- it does not see: {secure.get('server_does_not_see')}",
                f"- not protected against: {secure.get('not_protected_against')}\n",
                markdown_table(rows) if rows else "No secure round was logged.\n"]
    if not out:
        return ""
    return "## Secure aggregation: who saw what, and what it cost\n\n" + "\n".join(out) + "\n"


def write_report(run_dir: Path, *, cfg, fed, rounds: int, methods: Sequence[str],
                 results: Mapping[str, list[dict]], failures: Mapping[str, list[dict]],
                 timings: Mapping[str, float], partitions: list[dict], real: list[dict] | None = None,
                 privacy: Mapping[str, dict] | None = None, unseen: list[dict] | None = None,
                 common: list[dict] | None = None) -> Path:
    """Write results.csv/json, the plots and report.md into ``run_dir``; returns the report path."""
    flat = [{"method": m, **r} for m, rows in results.items() for r in rows]
    write_csv(run_dir / "results.csv", flat)
    write_json(run_dir / "results.json", {"results": results, "failures": failures, "timings_s": timings,
                                          "unseen": unseen or [], "real": real or [],
                                          "common_test": common or []})
    plots = [p for p in (plot_curves(run_dir, methods), plot_alpha(run_dir, methods),
                         plot_per_client(run_dir, results)) if p is not None]

    clients = [p["name"] for p in partitions]
    summary = []
    for m in methods:
        rs = results.get(m, [])
        summary.append({
            "method": m,
            "avg accuracy": float(np.mean([r["accuracy"] for r in rs])) if rs else float("nan"),
            "avg EER": float(np.mean([r["eer"] for r in rs])) if rs else float("nan"),
            "worst-client accuracy": float(min(r["accuracy"] for r in rs)) if rs else float("nan"),
            "clients evaluated": f"{len(rs)}/{len(clients)}",
            "evaluated model": evaluated_model(m),
            "wall time (s)": f"{timings.get(m, float('nan')):.1f}",
            "privacy": _privacy_cell((privacy or {}).get(m)),
        })
    problems = [{"method": m, **p} for m, ps in failures.items() for p in ps]
    weak = [s["method"] for s in summary if not s["avg EER"] < NEAR_CHANCE_EER]
    lines = [
        f"# {cfg.run.name}: federated fingerprint verification\n",
        f"Clients: {len(clients)} ({cfg.partition.mode} partition); rounds T = {rounds}, local epochs "
        f"E = {cfg.train.epochs} (local-only / centralized: {rounds * cfg.train.epochs} epochs); input "
        f"{cfg.model.input_size} px at {cfg.model.input_dpi:g} dpi ({cfg.model.crop} crop), encoder "
        f"{cfg.model.encoder} (width {cfg.model.width}), initial weights: {cfg.model.init}; FP-DFSN "
        f"{'on the training prints (evaluation on raw probes)' if cfg.fpdfsn.enabled else 'off'}; AFFR step d = "
        f"{fed.step}; FedProx μ = {fed.proximal_mu}; seed {cfg.run.seed}. Threshold per client from its "
        "validation pairs, metrics on its test pairs (open-set: fingers never seen in training).\n",
        (f"**Warning: {', '.join(weak)} did not get below {NEAR_CHANCE_EER:.0%} average EER; such models barely "
         "verify, so differences between them are not results.**\n" if weak else ""),
        privacy_section(privacy or {}),
        secure_section(run_dir, methods),
        internal_heading(privacy or {}),
        "## Clients\n", markdown_table(partitions),
        "## Per-client test accuracy (shape of Yan et al. 2025 Table 3)\n",
        markdown_table(_pivot(results, "accuracy", clients)),
        "## Per-client test EER\n", markdown_table(_pivot(results, "eer", clients)),
        client_pairs_note(common or []),
        "## Methods (shape of Yan et al. 2025 Table 4)\n", markdown_table(summary),
        noise_swings(run_dir, methods),
        unseen_section(cfg, unseen or []),
        common_test_section(common or []),
        real_sample_heading(cfg.data.sources, cfg.partition.unseen),
        real_sample_section(real),
        "## Failed or dropped clients\n",
        markdown_table(problems) if problems else "None: every client answered every round.\n",
        "## Files\n",
        "\n".join(f"- `{p.name}`" for p in plots)
        + "\n- `results.csv` / `results.json`; per method: `<method>/rounds.csv`, `clients.csv` (α_i, G_i per "
          "round), `checkpoint/`, `final.json`\n",
        "\nThese are results on the configured data (synthetic unless the experiment names real datasets); "
        "they are not the paper's numbers.\n",
        report_provenance(run_dir),
    ]
    return write_text(run_dir / "report.md", "\n".join(lines))
