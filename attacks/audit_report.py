"""Markdown sections of ``audit.md``: one function per section, each from the saved results of its part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fedprint.config.rundir import markdown_table
from fedprint.privacy.secure_sum import quantization_step


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


def secure_section(part: dict) -> str:
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
    md += ["- Gradient inversion (DLG / IG) on the same sum: `--attacks inversion` adds the part `inversion: "
           "secure aggregate` (its own section).", ""]
    return "\n".join(md) + "\n"


#: Columns of the secure-aggregate inversion table in audit.md (full rows in secure_inversion.csv).
SECURE_INVERSION_COLUMNS = ("clients", "attack", "condition", "iterations", "dummy_pairs", "images", "exact",
                            "psnr_median", "ssim", "lpips", "rho_median", "candidates", "mixtures",
                            "ssim_plain_prints", "sum_cosine")


def _above_chance(r: dict, base: dict, ssim_key: str = "ssim") -> bool:
    """A condition shows something of the prints when both its SSIM and its correlation beat the baseline's
    (another client's print as the reconstruction; PSNR is not used: with the oracle affine it favours flat
    images)."""
    return r[ssim_key] > base["ssim"] and r["rho_median"] > base["rho_median"]


def secure_inversion_verdicts(rows: list[dict]) -> list[str]:
    """One plain-language sentence per (n, attack), derived from the measured rows only."""
    by = {(r["clients"], r["attack"], r["condition"]): r for r in rows}
    out = []
    for n in sorted({r["clients"] for r in rows}):
        base = by.get((n, "-", "baseline: another client's print"))
        for attack in dict.fromkeys(r["attack"] for r in rows if r["clients"] == n and r["attack"] != "-"):
            p, s = by.get((n, attack, "plain")), by.get((n, attack, "secure"))
            if not (base and p and s):
                continue
            head = (f"{n} clients, {attack.upper()} ({s['iterations']} iterations, {s['dummy_pairs']} dummy pairs "
                    f"for the sum): ")
            cmp = (f"SSIM {s['ssim_plain_prints']:.3f} from the sum vs {p['ssim']:.3f} from one client's gradient "
                   f"on the same {p['images']} prints, median PSNR {s['psnr_median_plain_prints']:.1f} vs "
                   f"{p['psnr_median']:.1f} dB, ρ {s['rho_median']:.2f} vs {p['rho_median']:.2f}; another client's "
                   f"print as the reconstruction: SSIM {base['ssim']:.3f}, ρ {base['rho_median']:.2f}")
            if not _above_chance(p, base):
                verdict = ("even one client's gradient alone gives nothing above chance at this budget, so this "
                           "row cannot show what the sum hides (" + cmp + ")")
            elif s["ssim_plain_prints"] < p["ssim"]:
                verdict = ("the sum's reconstructions are worse than one client's (" + cmp + ")"
                           + ("; from the sum they are at chance level" if not _above_chance(s, base)
                              else "; but still above chance — **the sum does not stop the attack**"))
            else:
                verdict = "**the sum's reconstructions are as good as one client's** (" + cmp + ")"
            mix = (f"{s['mixtures']} of {s['candidates']} candidates from the sum are cross-client mixtures "
                   f"({p['mixtures']} of {p['candidates']} from single updates)" if s["mixtures"] else
                   f"no candidate from the sum is a cross-client mixture ({p['mixtures']} of {p['candidates']} "
                   "from single updates)")
            exact = s["exact"] + p["exact"]
            out.append(head + verdict + "; " + mix + (f"; exact prints: {s['exact']} from the sum, {p['exact']} "
                                                      "from one client" if exact else "; no print comes out "
                                                      "exactly") + ".")
    return out


def secure_inversion_summary_line(part: dict) -> str:
    """One summary bullet of the secure-aggregate inversion part."""
    v = secure_inversion_verdicts(part["result"]["rows"])
    return (f"- Gradient inversion (DLG / IG) on the **secure aggregate** (`{part['method']}`): "
            + (" ".join(v) if v else "no row measured (see the notes of its section).") + "\n")


def secure_inversion_section(part: dict) -> str:
    """What an honest-but-curious server of a secure run gets from DLG / IG on the unmasked sum."""
    res, sec = part["result"], part["secagg"]
    rows = res["rows"]
    table = [{k: fmt(r.get(k)) for k in SECURE_INVERSION_COLUMNS} for r in rows]
    cos = [f"{r['sum_cosine']:.3f} ({r['clients']} clients)" for r in rows
           if r["condition"] == "secure" and r.get("sum_cosine") is not None]
    md = ["## Secure aggregation — gradient inversion (DLG / IG) on what the server unmasks\n",
          f"Method `{part['method']}` ran under SecAgg+ (clipping range {sec['clipping_range']:g}, quantisation range "
          f"{sec['quantization_range']}). Every client takes one FedSGD step of the run's global model "
          f"`{part['model']}` (learning rate {part['lr']:g}) on its batch of raw training prints of "
          f"{', '.join(part['institutions'])}; the updates go through the real protocol stages and the attack "
          "matches the unmasked sum — the gradient of the union of the clients' batches — with n·B dummy pairs "
          "(labels known), against each client's update on its own (`plain`). Full rows in "
          "secure_inversion.csv.\n",
          markdown_table(table)]
    md += [f"- {v}" for v in secure_inversion_verdicts(rows)]
    if cos:
        md.append("- The ring's quantisation perturbs the gradient the attack matches: cosine of the unmasked sum "
                  "with the float64 sum " + ", ".join(cos) + ".")
    md += [f"![{Path(png).stem}]({png})\n" for png in res.get("grids", [])]
    md += [f"- {note}" for note in res.get("notes", [])]
    return "\n".join(md) + "\n\n"


def secure_mia_paragraph(secagg: dict, in_sum: list[int], run_rows: list[dict] | None) -> str:
    """Why membership inference needs no secure-aggregate part: the numbers are the run's ring and the measured
    sums, and the run-model rows when ``--attacks mia`` ran."""
    step = quantization_step(secagg["clipping_range"], int(secagg["quantization_range"]))
    n = max(in_sum) if in_sum else None
    bound = (f"at most {n} steps, {n * step:.1e}, per coordinate for the {n} clients summed above" if n else
             "at most one step per client and coordinate")
    if run_rows:
        best = max(((r["model"], a, m["auc"]) for r in run_rows for a, m in r["attacks"].items()),
                   key=lambda t: t[2])
        applies = (f"the run-model rows above (strongest: {best[1]} on `{best[0]}`, AUC {best[2]:.3f}) apply to "
                   "this secure run as they are.")
    else:
        applies = "`--attacks mia` on this run measures it as it is; no separate part is needed."
    return "\n".join([
        "## Secure aggregation — membership inference\n",
        "Membership inference attacks the released global model. Secure aggregation changes what the server sees "
        "of each update, not the model it releases: the unmasked sum is the plain weighted sum up to the ring's "
        f"stochastic rounding (step 2c/(R−1) = {step:.1e} at c = {secagg['clipping_range']:g}, R = "
        f"{secagg['quantization_range']}; {bound}), so " + applies,
        "What secure aggregation removes is membership per client from one update: a plain server holds every "
        "client's update and can test whether a finger was in that client's batch; under SecAgg+ it holds only "
        f"the sum of at least t clients (threshold: {secagg['reconstruction_threshold']}"
        + (f"; {', '.join(map(str, sorted(set(in_sum))))} clients per measured sum" if in_sum else "")
        + "), so a membership signal in the sum points at the cohort, not at one client.\n"])
