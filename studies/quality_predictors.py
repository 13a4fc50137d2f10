"""Which quality measure better predicts a genuine pair's failure: NFIQ 2 or FedPrint's own (issue 57, section 1).

    python -m studies.quality_predictors [--real ROOT] [--model M] [--out docs/studies/quality_predictors.md]
                                         [--cache runs/quality_predictors]
                                         [--max-fingers 40] [--max-impostors 5000]

For every genuine pair of the five shared real sets a pair *fails* when its score is below the set's threshold
at FMR 1 %, set on that set's impostor pairs (every cross-finger pair, at most ``--max-impostors`` drawn with seed
0: the FVC protocol's first-impression impostors, 45 on a B set, cannot resolve an FMR of 1 %). Two verifiers are
judged: NBIS (MINDTCT + Bozorth3) and the shipped model's default decision score (the embedding fused with NBIS,
``--score auto``). Each image gets three qualities: FedPrint's gate measure (:func:`fedprint.recognition.quality.
print_quality`), NFIQ 2 (nbis-py's NIST implementation, 0-100) and MINDTCT's minutiae count. A pair's quality is
the lower of its two images' (the usual convention of ISO/IEC 29794-1's error-versus-discard curves).

Reported per measure: the ROC AUC of the pair quality as a predictor of failure (low quality = predicted failure;
0.5 is chance), and the error-versus-discard figures: FNMR at the fixed threshold after discarding the 5, 10 and
20 % lowest-quality genuine pairs. Pooled over the five sets and per set.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fedprint.data.atomic_io import write_json, write_text
from fedprint.models.metrics import roc_auc
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.recognition.matching import capped_impostors, evaluate, protocol_pairs
from fedprint.recognition.minutiae_fusion import image_key
from fedprint.recognition.peers import default_cache, peer_scores
from fedprint.recognition.quality import minutiae_count, print_quality
from fedprint.recognition.real_samples import load_real_sets
from studies.peers import SETS

ROOT = Path(__file__).resolve().parents[1]
DISCARDS = (0.05, 0.10, 0.20)
MEASURES = {"ours": "FedPrint print_quality", "nfiq2": "NFIQ 2 (nbis-py)", "minutiae": "MINDTCT minutiae count"}


def _nfiq2_and_count(image: np.ndarray, dpi: float) -> tuple[float, int]:
    """NFIQ 2 (NaN where it cannot be computed) and the gate's MINDTCT minutiae count of one print."""
    import cv2
    import nbis

    png = cv2.imencode(".png", image)[1].tobytes()
    ex = nbis.new_nbis_extractor(nbis.NbisExtractorSettings(
        min_quality=0.0, get_center=False, check_fingerprint=False, compute_nfiq2=True, ppi=float(dpi)))
    try:
        score = float(ex.extract_minutiae(png).quality().score)
    except Exception:  # noqa: BLE001 - nbis raises its own error types where NFIQ 2 has no answer
        score = float("nan")
    return score, int(minutiae_count(image, dpi))


def qualities(records, cache: Path) -> dict[str, np.ndarray]:
    """The three qualities of every record, NFIQ 2 and the count kept in ``cache`` by image content."""
    store = cache / "qualities.json"
    known = json.loads(store.read_text()) if store.is_file() else {}
    out = {k: np.empty(len(records)) for k in MEASURES}
    for i, r in enumerate(tqdm(records, desc="qualities", leave=False)):
        key = image_key(r)
        if key not in known:
            known[key] = _nfiq2_and_count(r.image, r.dpi or 500.0)
            if len(known) % 50 == 0:
                write_json(store, known)
        out["nfiq2"][i], out["minutiae"][i] = known[key]
        out["ours"][i] = print_quality(r.image, r.dpi)
    write_json(store, known)
    return out


def failure_rows(fail: np.ndarray, pair_q: dict[str, np.ndarray]) -> list[dict]:
    """AUC of each pair quality as a failure predictor and FNMR after discarding the lowest-quality pairs."""
    rows = []
    for name, q in pair_q.items():
        ok = ~np.isnan(q)
        row = {"measure": MEASURES[name], "pairs": int(ok.sum()), "failures": int(fail[ok].sum()),
               # low quality predicts failure: AUC of -quality as a "score" of the failing class
               "AUC": roc_auc(q[ok], fail[ok].astype(int)) if 0 < fail[ok].sum() < ok.sum() else float("nan"),
               "FNMR": float(fail[ok].mean())}
        order = np.argsort(q[ok], kind="stable")
        for f in DISCARDS:
            kept = order[int(round(f * ok.sum())):]
            row[f"FNMR, {int(100 * f)} % discarded"] = float(fail[ok][kept].mean())
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", default=None, help="real-set root (default: the project's)")
    ap.add_argument("--model", default=str(pretrained_path()))
    ap.add_argument("--out", default=str(ROOT / "docs/studies/quality_predictors.md"))
    ap.add_argument("--cache", default=str(ROOT / "runs/quality_predictors"))
    ap.add_argument("--max-impostors", type=int, default=5000)
    ap.add_argument("--max-fingers", type=int, default=40,
                    help="the first N fingers of each set (NFIQ 2 takes ~0.5 s a print on an idle core; FCJ2020 "
                         "holds 160 fingers); default 40")
    args = ap.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    model = load_model(args.model)
    t0 = time.perf_counter()
    fails: dict[str, dict[str, np.ndarray]] = {"NBIS": {}, "shipped model + NBIS (--score auto)": {}}
    pair_qs: dict[str, dict[str, np.ndarray]] = {}
    for name, records in load_real_sets(args.real).items():
        if name not in SETS:
            continue
        fingers = list(dict.fromkeys(r.identity for r in records))[: args.max_fingers]
        records = [r for r in records if r.identity in set(fingers)]
        pairs = capped_impostors(protocol_pairs(records, "all"), args.max_impostors, 0)
        lab = pairs.label
        q = qualities(records, cache)
        pair_qs[name] = {k: np.minimum(v[pairs.a], v[pairs.b])[lab == 1] for k, v in q.items()}
        nbis_s = peer_scores(records, pairs, "nbis", cache=default_cache())
        fused_d = evaluate(model, records, "all", score="minutiae", minutiae_cache=default_cache(),
                           max_impostors=args.max_impostors, seed=0)[1]
        for verifier, sim in (("NBIS", nbis_s), ("shipped model + NBIS (--score auto)", -fused_d)):
            t = np.quantile(sim[lab == 0], 0.99)  # FMR 1 % on this set's impostor pairs
            fails[verifier][name] = sim[lab == 1] <= t
        print(f"{name}: {len(records)} images, {int(lab.sum())} genuine / {int((lab == 0).sum())} impostor pairs",
              flush=True)
    lines = [f"# {__doc__.splitlines()[0]}\n", "\n".join(__doc__.split("\n\n")[1:]).strip() + "\n",
             f"Command: `python -m studies.quality_predictors` ({time.perf_counter() - t0:.0f} s here, NFIQ 2 cached "
             f"in `{Path(args.cache).relative_to(ROOT) if Path(args.cache).is_relative_to(ROOT) else args.cache}`). "
             f"Model: `{Path(args.model).name}`; at most {args.max_fingers} fingers a set (`--max-fingers`).\n"]
    from fedprint.config.rundir import markdown_table

    cols = ["measure", "pairs", "failures", "AUC", "FNMR", *[f"FNMR, {int(100 * f)} % discarded" for f in DISCARDS]]
    summary = {}
    for verifier, per_set in fails.items():
        fail = np.concatenate(list(per_set.values()))
        pq = {k: np.concatenate([pair_qs[s][k] for s in per_set]) for k in MEASURES}
        rows = failure_rows(fail, pq)
        summary[verifier] = rows
        ranked = sorted(rows, key=lambda r: -r["AUC"])
        lines.append(f"## {verifier}: the five sets pooled\n\n" + markdown_table(rows, cols)
                     + "\nBest predictor of this verifier's failures, pooled: " + " > ".join(
                         f"{r['measure']} (AUC {r['AUC']:.2f})" for r in ranked) + ".\n")
        per = []
        for s in per_set:
            for r in failure_rows(per_set[s], pair_qs[s]):
                per.append({"set": s, **r})
        lines.append(f"### {verifier}: per set\n\n" + markdown_table(per, ["set", *cols]))
    write_json(cache / "summary.json", summary)
    write_text(Path(args.out), "\n".join(lines))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
