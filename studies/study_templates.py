"""Template-protection study (issue 26): accuracy cost, security bounds, attacks and timing of the protected
templates of ``privacy.templates`` on the real prints, beside the unprotected minutiae matcher and the unprotected
deep verifier on the same pairs.

    nice -n 10 .venv/bin/python -m studies.study_templates --out /tmp/template_study [--sets a,b] [--real DIR]

Protocol per set (8 impressions per finger): enrol on impressions 1–3; genuine probes = impressions 4–8 of the
same finger; impostor probes = impression 4 of every other finger. Attacks: a second, independent template of
each finger from impressions 4–6; mated pairs = the two templates of one finger, non-mated = template 1 of one
finger vs template 2 of another. Writes ``study.json``, ``study.md`` and ``template_protection.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from fedprint.attacks.template_attacks import correlation_attack, link_score, linkage_success
from fedprint.data.datasets import load_dataset
from fedprint.data.minutiae_backends import extract
from fedprint.models.metrics import eer, fnmr_at_fmr
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.privacy.templates import embedding_sketch, entropy
from fedprint.privacy.templates.alignment import helper_field, refine, register
from fedprint.privacy.templates.consistency import consistent_minutiae, match_points
from fedprint.privacy.templates.vault_template import VaultParams, enrol, template_params, verify
from fedprint.recognition.matching import embed_images
from fedprint.recognition.template_eval import enrol_probe_split

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
SETS = ("fvc2002_db1_b", "fvc2002_db3_b", "fvc_300x300_b", "pyfnprint_16x8")
PIN = "2468"
ENROL, SECOND = (0, 1, 2), (3, 4, 5)
SKETCH_K = 64


def _fingers(root: Path) -> dict[str, list]:
    by: dict[str, list] = {}
    for r in load_dataset("auto", root):
        by.setdefault(r.identity, []).append(r)
    return {f: sorted(rs, key=lambda r: r.impression) for f, rs in by.items() if len(rs) >= 8}


def _rates(genuine: list[bool], impostor: list[bool]) -> dict:
    return {"GAR": float(np.mean(genuine)), "FAR": float(np.mean(impostor)), "genuine": len(genuine),
            "impostor": len(impostor)}


def _scored(gen: list[float], imp: list[float], higher: bool) -> dict:
    s = np.array(gen + imp, float)
    y = np.array([1] * len(gen) + [0] * len(imp))
    return {"EER": eer(s, y, higher), "FNMR@FMR1%": fnmr_at_fmr(s, y, 0.01, higher),
            "FNMR@FMR0.1%": fnmr_at_fmr(s, y, 0.001, higher), "genuine": len(gen), "impostor": len(imp)}


def run_set(name: str, model, vault_p: VaultParams, real: Path = REAL) -> dict:
    fingers = _fingers(real / name)
    recs = [r for rs in fingers.values() for r in rs]
    t0 = time.perf_counter()
    mins = {r.key: extract(r.image, "auto", dpi=r.dpi)[:, :4] for r in tqdm(recs, desc=f"{name} minutiae")}
    t_min = (time.perf_counter() - t0) / len(recs)
    fields = {r.key: helper_field(r.image) for r in recs}
    emb = dict(zip([r.key for r in recs], embed_images(model, [r.image for r in recs], [r.dpi for r in recs]),
                   strict=True))
    schemes = {"vault": VaultParams(**{**vault_p.__dict__, "weighted": False}),
               "weighted vault": VaultParams(**{**vault_p.__dict__, "weighted": True}),
               "hardened vault": VaultParams(**{**vault_p.__dict__, "weighted": False})}
    pins = {"vault": None, "weighted vault": None, "hardened vault": PIN}
    out: dict = {"fingers": len(fingers), "images": len(recs), "minutiae_median": float(np.median(
        [len(m) for m in mins.values()])), "extract_s": t_min, "schemes": {}}
    keys = list(fingers)
    split = enrol_probe_split(recs, len(ENROL))  # genuine: impressions 4-8; impostor: impression 4 of the others

    def pairs(f):
        return split[f][1]

    templates: dict = {}
    for sname, p in schemes.items():
        gen, imp, t_enrol, t_ver, info_all = [], [], [], [], []
        for f in tqdm(keys, desc=f"{name} {sname}"):
            rs = [fingers[f][i] for i in ENROL]
            t = time.perf_counter()
            data, info = enrol([mins[r.key] for r in rs], [r.image for r in rs], p, pin=pins[sname])
            t_enrol.append(time.perf_counter() - t)
            par = template_params(p, len(rs))
            templates[(sname, f, 1)] = (data, par, info)
            info_all.append(info)
            for probe, genuine in pairs(f):
                t = time.perf_counter()
                res = verify(data, par, mins[probe.key], probe.image, pin=pins[sname], hardened=bool(pins[sname]),
                             probe_field=fields[probe.key])
                t_ver.append(time.perf_counter() - t)
                (gen if genuine else imp).append(res["match"])
            rs2 = [fingers[f][i] for i in SECOND]
            d2, i2 = enrol([mins[r.key] for r in rs2], [r.image for r in rs2], p, pin=pins[sname])
            templates[(sname, f, 2)] = (d2, template_params(p, len(rs2)), i2)
        out["schemes"][sname] = {**_rates(gen, imp), "enrol_s": float(np.mean(t_enrol)),
                                 "verify_s": float(np.mean(t_ver)),
                                 "genuine_elements": float(np.mean([i["genuine"] for i in info_all])),
                                 "on_polynomial": float(np.mean([i["on_polynomial"] for i in info_all])),
                                 "points": float(np.mean([i["points"] for i in info_all]))}
    # unprotected minutiae matcher: the same enrolment clusters, registration and tolerance, no vault
    gen_s, imp_s = [], []
    for f in keys:
        rs = [fingers[f][i] for i in ENROL]
        pts, _ = consistent_minutiae([mins[r.key] for r in rs], [fields[r.key] for r in rs])
        pts = pts[: vault_p.max_genuine]
        for probe, genuine in pairs(f):
            pm = mins[probe.key][:, :3]
            pose = refine(register(fields[probe.key], fields[rs[0].key]), pm, pts)
            n = int((match_points(pose.apply(pm), pts, tol_px=vault_p.tol_px, tol_angle=vault_p.tol_angle) >= 0).sum())
            (gen_s if genuine else imp_s).append(float(n))
    out["schemes"]["minutiae (unprotected)"] = _scored(gen_s, imp_s, True)
    # deep verifier, unprotected: distance of the probe to the normalised mean enrolment embedding
    gen_d, imp_d, gen_e, imp_e, gen_m, imp_m = [], [], [], [], [], []
    t_se, t_sv = [], []
    for f in keys:
        e = np.stack([emb[fingers[f][i].key] for i in ENROL])
        c = e.mean(0) / np.linalg.norm(e.mean(0))
        t = time.perf_counter()
        data, info = embedding_sketch.enrol(e, k_message=SKETCH_K)
        t_se.append(time.perf_counter() - t)
        for probe, genuine in pairs(f):
            (gen_d if genuine else imp_d).append(float(np.linalg.norm(emb[probe.key] - c)))
            (gen_e if genuine else imp_e).append(float(embedding_sketch.symbol_errors(info, data, emb[probe.key])))
            t = time.perf_counter()
            (gen_m if genuine else imp_m).append(embedding_sketch.verify(data, {"k_message": SKETCH_K},
                                                                         emb[probe.key])["match"])
            t_sv.append(time.perf_counter() - t)
    out["schemes"]["deep (unprotected)"] = _scored(gen_d, imp_d, False)
    out["schemes"]["sketch (errors)"] = _scored(gen_e, imp_e, False)
    out["schemes"]["sketch"] = {**_rates(gen_m, imp_m), "enrol_s": float(np.mean(t_se)),
                                "verify_s": float(np.mean(t_sv))}
    out["scores"] = {"minutiae": [gen_s, imp_s], "deep": [gen_d, imp_d], "sketch_errors": [gen_e, imp_e]}
    # attacks
    out["attacks"] = {}
    for sname in schemes:
        mated = [link_score(*templates[(sname, f, 1)][:2], *templates[(sname, f, 2)][:2]) for f in keys]
        non = [link_score(*templates[(sname, f, 1)][:2], *templates[(sname, g, 2)][:2])
               for f in keys for g in keys if g != f]
        corr = [correlation_attack(*templates[(sname, f, 1)][:2], *templates[(sname, f, 2)][:2],
                                   genuine1=templates[(sname, f, 1)][2]["codes"]) for f in keys]
        out["attacks"][sname] = {"linkage": linkage_success(mated, non), "mated_scores": mated,
                                 "non_mated_scores": non,
                                 "correlation_recovered": float(np.mean([c["recovered"] for c in corr])),
                                 "intersection": float(np.mean([c["intersection"] for c in corr])),
                                 "genuine_in_intersection": float(np.mean([c["genuine_in_intersection"]
                                                                           for c in corr]))}
    return out


def bounds(vault_p: VaultParams, results: dict) -> dict:
    pts = {s: np.mean([r["schemes"][s]["points"] for r in results.values()]) for s in ("vault", "weighted vault")}
    on = {s: np.mean([r["schemes"][s]["on_polynomial"] for r in results.values()]) for s in ("vault",
                                                                                          "weighted vault")}
    return {
        "bruteforce_bits": {s: entropy.vault_bruteforce_bits(int(round(pts[s])), int(round(on[s])), vault_p.degree)
                            for s in pts},
        "interval_sketch_loss_per_coord": entropy.interval_sketch_loss(embedding_sketch.Q),
        "sketch_total_loss": 128 * entropy.interval_sketch_loss(embedding_sketch.Q)
        + entropy.code_offset_loss(128, SKETCH_K),
        "sketch_key_bits": 8 * SKETCH_K,
        "pin_bits": entropy.mixing_gain(10**len(PIN)),
        "weighted_vault_loss_thesis_example": {
            "corrected": entropy.weighted_vault_loss(10007, 2, 35, 3),
            "printed": entropy.weighted_vault_loss_printed(10007, 2, 35, 3)},
    }


def figure(results: dict, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from fedprint.models.metrics import roc_curve

    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 2, 1)
    pooled = {k: ([], []) for k in ("minutiae", "deep", "sketch_errors")}
    for r in results.values():
        for k in pooled:
            pooled[k][0].extend(r["scores"][k][0])
            pooled[k][1].extend(r["scores"][k][1])
    for k, higher in (("minutiae", True), ("deep", False), ("sketch_errors", False)):
        g, i = pooled[k]
        roc = roc_curve(np.array(g + i), np.array([1] * len(g) + [0] * len(i)), higher)
        ax.plot(np.maximum(roc.fmr, 1e-4), 1 - roc.fnmr, label={"minutiae": "minutiae matcher (unprotected)",
                                                                 "deep": "deep verifier (unprotected)",
                                                                 "sketch_errors": "embedding sketch (vs K)"}[k])
    for s, mk in (("vault", "o"), ("weighted vault", "s"), ("hardened vault", "^"), ("sketch", "D")):
        g = [r["schemes"][s]["GAR"] * r["schemes"][s]["genuine"] for r in results.values()]
        n = [r["schemes"][s]["genuine"] for r in results.values()]
        fa = [r["schemes"][s]["FAR"] * r["schemes"][s]["impostor"] for r in results.values()]
        m = [r["schemes"][s]["impostor"] for r in results.values()]
        ax.plot(max(sum(fa) / sum(m), 1e-4), sum(g) / sum(n), mk, ms=9, label=f"{s} (decision)")
    ax.set(xscale="log", xlabel="FAR / FMR (pooled; 1e-4 = none observed)", ylabel="GAR = 1 - FNMR",
           title="Accuracy on the real sets (enrol 1-3, probe 4-8)", ylim=(0, 1.02))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax2 = fig.add_subplot(1, 2, 2)
    for s, c in (("vault", "C0"), ("hardened vault", "C3")):
        mated = sum((r["attacks"][s]["mated_scores"] for r in results.values()), [])
        non = sum((r["attacks"][s]["non_mated_scores"] for r in results.values()), [])
        bins = np.arange(0, max(mated + non + [1]) + 2) - 0.5
        ax2.hist(non, bins=bins, density=True, alpha=0.35, color=c, label=f"{s}: different fingers")
        ax2.hist(mated, bins=bins, density=True, histtype="step", lw=2, color=c, label=f"{s}: same finger")
    ax2.set(xlabel="elements in common after the attacker's alignment", ylabel="density",
            title="Cross-matching two templates")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(results: dict, b: dict, vault_p: VaultParams) -> str:
    lines = [f"Vault: degree {vault_p.degree}, {vault_p.n_chaff} chaff elements, at most {vault_p.max_genuine} "
             f"genuine elements; match tolerance {vault_p.tol_px:g} px / {np.rad2deg(vault_p.tol_angle):.0f} deg; "
             f"<= {vault_p.max_trials} decoding trials. Sketch: 128-d embedding, 256 levels, q = "
             f"{embedding_sketch.Q}, margin {embedding_sketch.MARGIN}, RS K = {SKETCH_K} (corrects 32).", ""]
    lines += ["| set | fingers | median minutiae | scheme | GAR | FAR | genuine / impostor | enrol s | verify s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        for s in ("vault", "weighted vault", "hardened vault", "sketch"):
            x = r["schemes"][s]
            lines.append(f"| {name} | {r['fingers']} | {r['minutiae_median']:.0f} | {s} | {100 * x['GAR']:.1f} % | "
                         f"{100 * x['FAR']:.2f} % | {x['genuine']} / {x['impostor']} | {x['enrol_s']:.2f} | "
                         f"{x['verify_s']:.3f} |")
    lines += ["", "| set | matcher (unprotected or score) | EER | FNMR@FMR1% | FNMR@FMR0.1% | genuine / impostor |",
              "|---|---|---|---|---|---|"]
    for name, r in results.items():
        for s in ("minutiae (unprotected)", "deep (unprotected)", "sketch (errors)"):
            x = r["schemes"][s]
            lines.append(f"| {name} | {s} | {100 * x['EER']:.1f} % | {100 * x['FNMR@FMR1%']:.1f} % | "
                         f"{100 * x['FNMR@FMR0.1%']:.1f} % | {x['genuine']} / {x['impostor']} |")
    lines += ["", "| set | scheme | linkage balanced accuracy | linkage AUC | mated / non-mated | correlation attack "
              "recovers the secret | intersection (genuine in it) |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        for s, a in r["attacks"].items():
            lines.append(f"| {name} | {s} | {a['linkage']['balanced_accuracy']:.2f} | {a['linkage']['auc']:.2f} | "
                         f"{a['linkage']['mated']} / {a['linkage']['non_mated']} | "
                         f"{100 * a['correlation_recovered']:.0f} % | {a['intersection']:.1f} "
                         f"({a['genuine_in_intersection']:.1f}) |")
    lines += ["", f"Bounds: random-subset brute force {b['bruteforce_bits']['vault']:.1f} bits (vault), "
              f"{b['bruteforce_bits']['weighted vault']:.1f} bits (weighted vault); interval sketch loss <= "
              f"{b['interval_sketch_loss_per_coord']:.0f} bits per coordinate, embedding sketch total loss <= "
              f"{b['sketch_total_loss']:.0f} bits for a {b['sketch_key_bits']}-bit key; PIN adds <= "
              f"{b['pin_bits']:.1f} bits. Weighted-vault loss, thesis example (p = 10007, q = 2, g = 35, t' = 3): "
              f"corrected {b['weighted_vault_loss_thesis_example']['corrected']:.1f} bits, as printed "
              f"{b['weighted_vault_loss_thesis_example']['printed']:.1f} bits."]
    return "\n".join(lines) + "\n"


def study_arguments(description: str) -> argparse.ArgumentParser:
    """The options every template study takes: ``--out``, ``--sets``, ``--real``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--real", default=str(REAL), help="folder of the real sets (default: ../shared/data/real)")
    return ap


def main() -> None:
    ap = study_arguments(__doc__.splitlines()[0])
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--chaff", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    vault_p = VaultParams(degree=args.degree, n_chaff=args.chaff)
    model = load_model(pretrained_path())
    results = {name: run_set(name, model, vault_p, Path(args.real)) for name in args.sets.split(",")}
    b = bounds(vault_p, results)
    (out / "study.json").write_text(json.dumps({"results": results, "bounds": b}, indent=1, default=float))
    (out / "study.md").write_text(markdown(results, b, vault_p))
    figure(results, out / "template_protection.png")
    print((out / "study.md").read_text())


if __name__ == "__main__":
    main()
