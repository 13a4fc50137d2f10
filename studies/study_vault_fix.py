"""Issue 59 on the real prints: the file-only attacks against the first and the current vault construction, the
unlinkability of the current one (D<->sys beside the AUC), and its accuracy with every cross-finger attempt.

    nice -n 10 .venv/bin/python -m studies.study_vault_fix --part attacks --out runs/templates/issue59
    nice -n 10 .venv/bin/python -m studies.study_vault_fix --part accuracy --out runs/templates/issue59

``attacks``: per finger of the four 8-impression sets, templates of impressions 1-3 (and 4-6 for linkage) in
each construction (1: first, 2: current) and scheme (plain, weighted, PIN-hardened with PIN 2468); each template
is attacked from its file alone (:func:`fedprint.attacks.template_attacks.open_template`: spacing flags, helper-
guided ranking, ranked interpolation within ``--budget`` interpolations; hardened: PIN search first, the true PIN
among ``--candidates`` - 1 random others). Linkage (current construction): cross-matching score and helper score
of mated pairs (templates 1-3 vs 4-6 of one finger) and non-mated ones (1-3 of one finger vs 4-6 of another,
same set); D<->sys (:func:`fedprint.attacks.unlinkability.d_sys`) and AUC.
``accuracy``: :func:`fedprint.recognition.template_eval.evaluate_templates` with ``impostors="all"`` for one- and
three-impression enrolment. Minutiae: ``--backend`` (default auto = NBIS when installed). Writes
``<part>.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fedprint.attacks.template_attacks import helper_link_score, link_score, linkage_success, open_template
from fedprint.attacks.unlinkability import d_sys
from fedprint.data.minutiae_backends import extract, resolve_backend
from fedprint.privacy.templates.vault_template import VaultParams, enrol, template_params
from fedprint.recognition.template_eval import evaluate_templates
from studies.study_templates import ENROL, PIN, SECOND, _fingers

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "real"
SETS = ("fvc2002_db1_b", "fvc2002_db3_b", "fvc_300x300_b", "pyfnprint_16x8")
SCHEMES = {"plain": (False, None), "weighted": (True, None), "hardened": (False, PIN)}


def attacks(real: Path, sets: list[str], backend: str, budget: int, n_candidates: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    rows, link = [], {}
    for name in sets:
        fingers = _fingers(real / name)
        keys = list(fingers)
        mins = {r.key: extract(r.image, backend, dpi=r.dpi)[:, :4]
                for f in keys for r in (fingers[f][i] for i in ENROL + SECOND)}
        templ: dict = {}
        for f in tqdm(keys, desc=f"{name} enrol + attack"):
            for k, imps in ((1, ENROL), (2, SECOND)):
                rs = [fingers[f][i] for i in imps]
                for cons in (1, 2):
                    for scheme, (weighted, pin) in SCHEMES.items():
                        if k == 2 and (cons == 1 or scheme == "weighted"):
                            continue  # the second enrolment serves linkage of the current construction only
                        p = VaultParams(weighted=weighted)
                        data, info = enrol([mins[r.key] for r in rs], [r.image for r in rs], p, pin=pin, rng=rng,
                                           construction=cons)
                        par = template_params(p, len(rs), backend=backend, construction=cons)
                        templ[(f, k, cons, scheme)] = (data, par)
                        if k == 2:
                            continue
                        cands = [PIN, *[f"{int(x):04d}" for x in rng.choice(
                            np.setdiff1d(np.arange(10**4), [int(PIN)]), n_candidates - 1, replace=False)]]
                        cands = [cands[i] for i in rng.permutation(len(cands))]
                        res = open_template(data, par, hardened=pin is not None, pin_candidates=cands,
                                            budget=budget, genuine=info["codes"], on_points=info["on_points"],
                                            rng=rng)
                        rows.append({"set": name, "finger": f, "construction": cons, "scheme": scheme,
                                     "genuine": info["genuine"], "clusters": info["clusters"], **res})
        mated = [(f, f) for f in keys]
        non = [(f, g) for f in keys for g in keys if g != f]
        for scheme in ("plain", "hardened"):
            for kind, pairs in (("mated", mated), ("non_mated", non)):
                for f, g in pairs:
                    a, pa = templ[(f, 1, 2, scheme)]
                    b, pb = templ[(g, 2, 2, scheme)]
                    link.setdefault((scheme, "cross-matching"), {"mated": [], "non_mated": []})[kind].append(
                        link_score(a, pa, b, pb))
                    link.setdefault((scheme, "helper"), {"mated": [], "non_mated": []})[kind].append(
                        helper_link_score(a, b))
    linkage = {f"{s} {score}": {**linkage_success(v["mated"], v["non_mated"]), **d_sys(v["mated"], v["non_mated"])}
               for (s, score), v in link.items()}
    return {"rows": rows, "linkage": linkage, "budget": budget, "candidates": n_candidates, "backend": backend}


def attack_table(res: dict) -> str:
    lines = [f"| construction | scheme | templates | opened within {res['budget']:,} | interpolations (median of "
             "opened) | seconds (max of opened) | spacing flags (genuine) | ranking work, log2 (median, min) |",
             "|---|---|---|---|---|---|---|---|"]
    for cons in (1, 2):
        for scheme in SCHEMES:
            rs = [r for r in res["rows"] if r["construction"] == cons and r["scheme"] == scheme]
            op = [r for r in rs if r["opened"]]
            lw = [r["log2_work"] for r in rs]
            lines.append(
                f"| {cons} | {scheme} | {len(rs)} | {len(op)} | "
                f"{int(np.median([r['interpolations'] for r in op])) if op else '-'} | "
                f"{max(r['seconds'] for r in op) if op else float('nan'):.2f} | "
                f"{sum(r['flagged'] for r in rs)} ({sum(r['flagged_genuine'] for r in rs)}) | "
                f"{np.median(lw):.1f}, {np.min(lw):.1f} |")
    lines += ["", "| linkage score (construction 2) | mated / non-mated | AUC | balanced accuracy | D<->sys |",
              "|---|---|---|---|---|"]
    for k, v in res["linkage"].items():
        lines.append(f"| {k} | {v['mated']} / {v['non_mated']} | {v['auc']:.2f} | {v['balanced_accuracy']:.2f} | "
                     f"{v['d_sys']:.2f} |")
    return "\n".join(lines)


def accuracy(real: Path, sets: list[str], backend: str, configs: list[tuple[str, bool, int]]) -> dict:
    from fedprint.data.datasets import load_dataset

    out = {}
    for label, weighted, n_enrol in configs:
        per = {}
        for name in sets:
            recs = [r for r in load_dataset("auto", real / name)]
            per[name] = evaluate_templates(recs, "vault", weighted=weighted, n_enrol=n_enrol, impostors="all",
                                           backend=backend, progress=False)
            print(label, name, per[name], flush=True)
        ga = sum(m["genuine_accepts"] for m in per.values())
        ng = sum(m["n_genuine"] for m in per.values())
        fa = sum(m["false_accepts"] for m in per.values())
        ni = sum(m["n_impostor"] for m in per.values())
        out[label] = {"sets": per, "GAR": ga / ng, "genuine": ng, "FAR": fa / ni, "false_accepts": fa,
                      "impostor": ni, "n_enrol": n_enrol, "weighted": weighted}
    return out


def accuracy_table(res: dict) -> str:
    lines = ["| vault (construction 2) | enrolment impressions | GAR (accepted / genuine) | FAR (false accepts / "
             "impostor attempts) | per set GAR |", "|---|---|---|---|---|"]
    for label, r in res.items():
        per = ", ".join(f"{n} {100 * m['GAR']:.0f} %" for n, m in r["sets"].items())
        lines.append(f"| {label} | {r['n_enrol']} | {100 * r['GAR']:.1f} % ({round(r['GAR'] * r['genuine'])} / "
                     f"{r['genuine']}) | {100 * r['FAR']:.3f} % ({r['false_accepts']} / {r['impostor']}) | {per} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("attacks", "accuracy"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--real", default=str(REAL))
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--budget", type=int, default=100_000)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--configs", default="plain-3,plain-1,weighted-3")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = resolve_backend(args.backend)
    sets = args.sets.split(",")
    t0 = time.perf_counter()
    if args.part == "attacks":
        res = attacks(Path(args.real), sets, backend, args.budget, args.candidates, args.seed)
        table = attack_table(res)
    else:
        configs = [(c, c.startswith("weighted"), int(c.split("-")[1])) for c in args.configs.split(",")]
        res = accuracy(Path(args.real), sets, backend, configs)
        table = accuracy_table(res)
    res["wall_s"] = time.perf_counter() - t0
    (out / f"{args.part}.json").write_text(json.dumps(res, indent=1, default=lambda o: o.tolist()
                                                      if isinstance(o, np.ndarray) else float(o)))
    (out / f"{args.part}.md").write_text(table + f"\n\nWall {res['wall_s'] / 60:.1f} min, backend {backend}.\n")
    print(table)


if __name__ == "__main__":
    main()
