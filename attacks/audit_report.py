"""Markdown sections of ``audit.md``: one function per section, each from the saved results of its part."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedprint.config.rundir import markdown_table


def fmt(v: Any) -> Any:
    if v is None:
        return "–"
    if isinstance(v, float | np.floating):
        return f"{v:.3f}"
    return v


def mia_rows(rows: list[dict], key: str) -> list[dict]:
    out = []
    for r in rows:
        for attack, m in r["attacks"].items():
            lo, hi = m["auc_ci95"]
            out.append({key: r[key], "attack": attack, "AUC": m["auc"], "AUC 95% CI": f"[{lo:.2f}, {hi:.2f}]",
                        "bal. acc": m["balanced_accuracy"],
                        "TPR@1%FPR": m["tpr_at_1pct_fpr"], "TPR@0.1%FPR": m["tpr_at_0.1pct_fpr"],
                        "I(M;Ŝ) bits": m["mi_decision_bits"], "H(Ŝ) bits": m["entropy_decision_bits"],
                        "I(M;B10) bits": m["mi_binned_bits"], "members": m["n_members"],
                        "non-members": m["n_nonmembers"]})
    return out


def table6(rows: list[dict]) -> list[dict]:
    """Yan et al. 2025 Table 6 shape: one row per attack, AUC per condition."""
    attacks = list(rows[0]["attacks"])
    return [{"attack": a, **{r["condition"]: r["attacks"][a]["auc"] for r in rows}} for a in attacks]


MIA_DEFINITIONS = (
    "**Definitions.** Unit = finger identity; score per finger, higher = member. AUC: Mann-Whitney ROC area. "
    "Balanced accuracy (TPR + TNR)/2 of decisions Ŝ whose threshold was chosen on the *other* half of the "
    "fingers (2-fold stratified cross-fitting, seeded), so no finger is classified by a threshold fitted on it. "
    "TPR@FPR: highest TPR with FPR ≤ 1% / 0.1%, only with ≥ 100 / ≥ 1000 non-members, else marked not "
    "resolvable. I(M;Ŝ): mutual information in bits between the membership bit M and Ŝ, plug-in estimate "
    "under the evaluated set's member fraction; H(Ŝ): entropy of Ŝ in bits (Yan et al. 2025 Table 6's 'mutual "
    "information' and 'entropy' made precise; the ceiling of I(M;Ŝ) is H(M), 1 bit for a balanced set). "
    "I(M;B10): I(M; score in 10 equal-frequency bins), threshold-free, biased upwards by ≈ 9/(2 n ln 2) bits "
    "for n fingers.\n")


LIRA_SAME_NOTE = (
    "**LiRA online and offline rows are identical** for {conds}: with one IN and one OUT shadow model per finger "
    "(`--shadows 2`), the membership effect and the variance are fitted once for all fingers (pooled), so both "
    "scores are increasing functions of the same (φ − μ_out) / σ and rank the fingers the same way; every metric "
    "here depends only on that ranking. More shadows (`--shadows 8`) separate them.\n")


def lira_identical(rows: list[dict]) -> list[str]:
    """Conditions (or models) whose LiRA online and offline metrics coincide (see :data:`LIRA_SAME_NOTE`)."""
    keys = ("auc", "balanced_accuracy", "tpr_at_1pct_fpr", "mi_decision_bits")
    return [str(r.get("condition", r.get("model"))) for r in rows
            if {"lira_online", "lira_offline"} <= set(r["attacks"])
            and all(r["attacks"]["lira_online"].get(k) == r["attacks"]["lira_offline"].get(k) for k in keys)]


def _leak_words(auc: float, lo: float) -> str:
    if lo > 0.5:
        return "**membership leaks**" if auc >= 0.6 else "a weak but detectable membership signal"
    return "no detectable membership signal at this sample size (the AUC interval includes 0.5)"


def summary_section(run_rows: list[dict] | None, cond_rows: list[dict], inversion: dict[str, dict],
                    client_dp_rows: list[dict] | None, missing: list[str]) -> str:
    """The verdict a reader can act on, first: strongest membership attack per model / condition, the
    inversion outcome per condition, the client-level DP check, and what is still missing."""
    lines = ["## Summary\n"]
    for label, rows in (("run's model", run_rows or []), ("comparison condition", cond_rows)):
        for r in rows:
            name = r.get("model", r.get("condition"))
            attack, m = max(r["attacks"].items(), key=lambda kv: kv[1]["auc"])
            lo, hi = m["auc_ci95"]
            weak = " — model barely verifies (test EER ≥ 30 %), not a result" if r.get("test_eer", 0) >= WEAK_EER \
                else ""
            lines.append(f"- Membership, {label} `{name}`: strongest attack {attack}, AUC {m['auc']:.2f} "
                         f"[{lo:.2f}, {hi:.2f}] — {_leak_words(m['auc'], lo)}{weak}.")
    for label, res in inversion.items():
        rows = res.get("table") or []
        best = [r for r in rows if isinstance(r.get("verifies"), bool)]
        if best:
            hits = sum(r["verifies"] for r in best)
            lines.append(f"- Inversion, {label}: {hits} of {len(best)} reconstructions verify as the attacked "
                         f"finger{' — **the images leak**' if hits else ''}.")
        else:
            lines.append(f"- Inversion, {label}: see Table 5 below.")
    if client_dp_rows:
        bad = [r["method"] for r in client_dp_rows if r.get("verdict") != "ok"]
        lines.append("- Client-level DP: " + (f"**VIOLATION** for {', '.join(bad)} (ε_lb above the claimed ε)"
                                              if bad else "every audited method's ε_lb ≤ its claimed ε (ok)") + ".")
    if missing:
        lines.append(f"- Not finished: {', '.join(missing)} — the verdict above covers the finished parts only.")
    if len(lines) == 1:
        lines.append("- No part finished yet.")
    return "\n".join(lines) + "\n"


#: Test EER from which a comparison model is flagged as barely verifying (chance is 0.5).
WEAK_EER = 0.30


def run_models_section(rows: list[dict]) -> str:
    """Membership inference against the run's own checkpoint(s)."""
    return "\n".join([
        "## Membership inference against the run's checkpoint(s)\n",
        "Members = training fingers of the clients the model trained on; non-members = their held-out "
        "(val + test) fingers; queries with raw images. Shadow-free attacks only (LiRA needs shadows "
        "trained like the target: see the controlled comparison below).\n",
        markdown_table([{k: fmt(v) for k, v in r.items()} for r in mia_rows(rows, "model")]),
        "![MIA ROC, run models](mia_roc_run.png)\n"])


def comparison_section(setup: dict, rows: list[dict], planned: list[str], dp_note: str) -> str:
    """Table 6 shape: the conditions finished so far (and which are still missing)."""
    s = setup
    missing = [c for c in planned if c not in {r["condition"] for r in rows}]
    lines = ["## Table 6 — membership inference with vs without FP-DFSN, and with DP-SGD\n",
             f"Controlled comparison trained **by this audit** on the run's clients (union of their training "
             f"pairs), same splits and seeds: encoder `{s['encoder']}`, {s['input_size']} px inputs, "
             f"{s['epochs']} epochs, ≤ {s['max_pairs_per_epoch']} pairs/epoch; {s['members']} member and "
             f"{s['nonmembers']} non-member fingers. LiRA: {s['shadow_models']} shadow models per "
             f"condition, each trained like that condition's target (same encoder, epochs, defence; DP "
             f"shadows at the same ε) on a disjoint synthetic population of {s['shadow_synthetic_fingers']} "
             f"fingers × {s['shadow_impressions']} impressions plus a balanced half of the candidate fingers "
             f"({s['shadow_candidates_in']} IN shadows per candidate); pooled variance. FP-DFSN condition: "
             f"target trained on FP-DFSN images, queried with raw prints. Every model starts from the run's "
             f"initial model (`init = {s.get('init', 'random')}`).\n"]
    weak = [r["condition"] for r in rows if r["test_eer"] >= WEAK_EER]
    if weak:
        lines.append(f"**Warning:** test EER ≥ {WEAK_EER:.0%} for {', '.join(weak)}: these models barely verify, "
                     "so their membership numbers say little about a deployed verifier — do not read them as "
                     "results (train longer: `--epochs`).\n")
    if missing:
        lines.append(f"**Not finished yet:** {', '.join(missing)} (re-run the same command with the same "
                     "`--out` to complete the audit; finished conditions are kept).\n")
    if rows:
        lines += ["### AUC per condition\n",
                  markdown_table([{k: fmt(v) for k, v in r.items()} for r in table6(rows)]),
                  "### Conditions\n",
                  markdown_table([{k: fmt(r[k]) for k in ("condition", "target_epsilon", "epsilon", "delta",
                                                          "noise_multiplier", "test_eer", "seconds")}
                                  for r in rows]),
                  "DP-SGD: record = pair (training.dp_sgd); a finger spans many pairs, so its own guarantee is "
                  f"only group privacy. ε from Opacus's RDP accountant at δ. {dp_note}\n",
                  "### All metrics\n",
                  markdown_table([{k: fmt(v) for k, v in r.items()} for r in mia_rows(rows, "condition")]),
                  *([LIRA_SAME_NOTE.format(conds=", ".join(same))] if (same := lira_identical(rows)) else []),
                  *[f"![MIA ROC {r['condition']}](mia_roc_{planned.index(r['condition'])}.png)\n" for r in rows]]
    return "\n".join(lines)


def inversion_section(model: str, client: str, beta: float, results: dict[str, dict], out_name: str = "") -> str:
    """Table 5 shape: gradient inversion / imprint with vs without FP-DFSN (the parts finished so far)."""
    table = [{"condition": label, **row} for label, res in results.items() for row in res.get("table", [])]
    md = ["## Table 5 — gradient inversion / imprint with vs without FP-DFSN\n",
          f"Attacked model: `{model}` (the run's checkpoint), client `{client}`; FP-DFSN condition recomputed "
          f"with the run's FP-DFSN parameters at β = {beta:g} and the client's seed. Metrics "
          "against the RAW image and the image trained on; full rows in inversion.csv.\n",
          markdown_table([{k: fmt(v) for k, v in r.items()} for r in table])]
    for label, res in results.items():
        md += [f"![{label}]({png})\n" for png in res.get("grids", [])]
        notes = res.get("notes") if isinstance(res.get("notes"), list) else [res.get("notes")]
        md += [f"- {label}: {note}" for note in notes if note] + [""]
    return "\n".join(md) + "\n"


def client_dp_section(rows: list[dict]) -> str:
    """The canary audit of the run's client-level DP (or why there is nothing to audit)."""
    head = "## Client-level DP — one-run canary audit (Steinke, Nasr & Jagielski 2023)\n"
    if not rows:
        return head + "\nNo method of this run used client-level DP (`[dp] level = \"client\"`): nothing to audit.\n"
    return "\n".join([head, "Replace-one canaries: in each of the trials the real DP-AFFR aggregator runs once with "
                       "the run's own noise multiplier, clip and the cohort weights of its most concentrated "
                       "release, the canary in the heaviest client's place with update +C·u or −C·u (a fair coin), "
                       "the other members' updates zero; the top / bottom scores <release, u> are guessed. ε_lb is a "
                       "95 % lower bound; it can never exceed the cap, whatever the truth, and one-run bounds are "
                       "loose for Gaussian noise. Each canary takes part in `rounds / canary` releases (scores "
                       "summed), which audits like one release at z/√rounds, and is compared with the claimed ε of "
                       "that many releases; a sound mechanism must give ε_lb ≤ it. Power: the smallest noise "
                       "shortfall (the aggregator's σ below the claimed one by that share) this audit catches with "
                       "probability ≥ 0.9 at the run's z, simulated (`fedprint.attacks.audit_power`); a smaller "
                       "shortfall can pass unseen.\n",
                       markdown_table([{k: fmt(v) for k, v in r.items()} for r in rows])])


def timing_section(parts: list[dict], estimate_s: float | None) -> str:
    """Wall time per finished part, beside the estimate printed before the audit started."""
    rows = [{"part": p["name"], "seconds": round(p["seconds"], 1), "finished (UTC)": p["finished"]} for p in parts]
    head = "## Wall time per part\n"
    est = (f"Estimated before the start: {estimate_s / 60:.1f} min (model training only); measured total "
           f"{sum(p['seconds'] for p in parts) / 60:.1f} min.\n") if estimate_s else ""
    return "\n".join([head, est, markdown_table(rows) if rows else "(no part finished yet)\n"])




#: Columns of the secure-aggregation table in audit.md (full rows in secure_aggregate.csv).
SECURE_COLUMNS = ("clients", "batch_pairs", "bins", "local", "condition", "quant_step", "images", "alone_in_bin",
                  "exact", "exact_fraction", "psnr_median", "ssim", "lpips", "clipped")


def secure_summary_line(part: dict) -> str:
    """One summary bullet: exact prints from the secure sum vs from the plain updates, per number of clients."""
    rows = part["result"]["rows"]
    first = rows[0]
    sel = [r for r in rows if (r["batch_pairs"], r["bins"], r["local"]) ==
           (first["batch_pairs"], first["bins"], first["local"])]
    by = {(r["clients"], r["condition"]): r for r in sel}
    bits = []
    for n in sorted({r["clients"] for r in sel}):
        p, s, c = by.get((n, "plain")), by.get((n, "secure")), by.get((n, "secure, server's c"))
        if p and s:
            bits.append(f"{n} clients: {s['exact']}/{s['images']} exact (median PSNR {s['psnr_median']:.1f} dB) "
                        f"from the secure sum at the run's ring"
                        + (f", {c['exact']}/{c['images']} ({c['psnr_median']:.1f} dB) with the server's clipping "
                           "range" if c else "")
                        + f", vs {p['exact']}/{p['images']} from the plain updates")
    leak = any(by[k]["exact"] for k in by if k[1].startswith("secure"))
    return (f"- Imprint on the **secure aggregate** (`{part['method']}`, B = {first['batch_pairs']} pairs per client, "
            f"k = {first['bins']} bins, {first['local']}): " + "; ".join(bits)
            + (" — **secure aggregation does not stop a malicious server's imprint module**" if leak else
               " — no print comes out exactly, but see PSNR / SSIM for the mixtures and blurred prints that do")
            + ".\n")


def secure_section(part: dict, *, mia_done: bool) -> str:
    """What the server of a secure-aggregation run can still reconstruct from the unmasked sum."""
    res, sec = part["result"], part["secagg"]
    table = [{k: (f"{r[k]:.1e}" if k == "quant_step" and r.get(k) else fmt(r.get(k))) for k in SECURE_COLUMNS}
             for r in res["rows"]]
    md = ["## Secure aggregation — the imprint attack on what the server unmasks\n",
          f"Method `{part['method']}` ran under SecAgg+ (clipping range {sec['clipping_range']:g}, quantisation range "
          f"{sec['quantization_range']}, shares {sec['num_shares']}, threshold {sec['reconstruction_threshold']}). "
          f"A malicious server sends the imprint-tampered model `{part['model']}`; every client computes its update "
          f"at the run's learning rate {part['lr']:g}; the clients' updates go through the real protocol stages "
          "(masks, stochastic rounding onto the ring, unmasking) and the attack runs on the unmasked sum. Raw "
          f"training prints of {', '.join(part['institutions'])} (no FP-DFSN); full rows in secure_aggregate.csv.\n",
          markdown_table(table)]
    md += [f"![secure sum]({png})\n" for png in res.get("grids", [])]
    md += [f"- {note}" for note in res.get("notes", [])]
    md += ["- Gradient inversion (DLG / IG): the sum of n ≥ 3 clients' updates is the gradient of a batch of "
           "n·B pairs; the optimisation attacks are not run against it here (Table 5 measures them on one "
           "client's batch of at most 2 pairs, the easiest case).",
           "- Membership inference attacks the released global model, which secure aggregation leaves the same "
           "within quantisation: " + ("the run-model rows above apply to this secure run unchanged."
                                      if mia_done else "`--attacks mia` on this run measures it unchanged."), ""]
    return "\n".join(md) + "\n"
