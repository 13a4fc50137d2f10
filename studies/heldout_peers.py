"""The real-sensor federation's models beside NBIS and LEADER on each sensor's held-out fingers (verifier issue,
target 1): deep-only, the peers, and the deep score fused with each peer.

    python -m studies.heldout_peers runs/rs_fed3/seed-* [--methods fedavg,affr] [--matchers nbis,leader]
                                    [--out docs/studies/heldout_peers.md]

For each seed folder of ``fedprint simulate --config real_sensors --seeds N``, the run's own partition is rebuilt
from its ``experiment.toml`` (same seed, same held-out fingers). On EVERY test pair of each institution the
models (``<method>/model.pt``) and the matchers are scored; the fusion is the weighted z-score sum of
:mod:`fedprint.recognition.minutiae_fusion` whose means, spreads and Fisher weights are fitted on that
institution's VALIDATION pairs (never its test pairs), as ``fedprint calibrate --score minutiae`` on a held-out
set would. EER and FNMR @ FMR 1 % per institution, mean over seeds, genuine / impostor pairs summed over seeds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from fedprint.config.app import with_base_dir
from fedprint.config.experiment import load_experiment
from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_text
from fedprint.data.minutiae_matchers import DESCRIPTIONS, pair_scores, resolve_matcher, templates
from fedprint.models.metrics import eer, fnmr_at_fmr
from fedprint.models.model_file import load_model
from fedprint.recognition.minutiae_fusion import calibration, fused_scores
from fedprint.training.evaluation import evaluate_on_pairs
from fedprint.training.experiment_data import experiment_partitions, partition_data

ROOT = Path(__file__).resolve().parents[1]


def _rates(s: np.ndarray, lab: np.ndarray) -> tuple[float, float]:
    return eer(s, lab, True), (fnmr_at_fmr(s, lab, 0.01, True) if (lab == 0).sum() >= 100 else float("nan"))


def run_seed(run: Path, methods: list[str], matchers: list[str]) -> list[dict]:
    """One row per institution and scorer of one seed's run."""
    cfg, _ = load_experiment(run / "experiment.toml")
    cfg = with_base_dir(cfg, Path.cwd())
    records, parts = experiment_partitions(cfg, progress=False)
    clients = [partition_data(cfg, records, p, progress=False) for p in parts]
    nets = {m: load_model(run / m / "model.pt").encoder for m in methods if (run / m / "model.pt").is_file()}
    rows = []
    for c in clients:
        test, val = c.test_pairs, c.val_pairs
        used = np.unique(np.r_[test.a, test.b, val.a, val.b]).tolist()
        peer = {}
        for m in matchers:
            tpl = dict(zip(used, templates([c.records[i] for i in used], m, progress=False), strict=True))
            peer[m] = {k: pair_scores(tpl, np.stack([p.a, p.b], 1), m, progress=False)
                       for k, p in (("test", test), ("val", val))}
        base = {"seed": cfg.run.seed, "institution": c.name, "genuine": int(test.n_genuine),
                "impostor": int(len(test) - test.n_genuine)}
        for m in matchers:
            rows.append({**base, "scorer": DESCRIPTIONS[m], **dict(zip(("eer", "fnmr1"),
                                                                        _rates(peer[m]["test"], test.label),
                                                                        strict=True))})
        for name, net in nets.items():
            cos = {k: 1 - evaluate_on_pairs(net, c, p)[1] ** 2 / 2 for k, p in (("test", test), ("val", val))}
            rows.append({**base, "scorer": f"{name} (deep only)",
                         **dict(zip(("eer", "fnmr1"), _rates(cos["test"], test.label), strict=True))})
            for m in matchers:
                cal = calibration(cos["val"], peer[m]["val"], m, labels=val.label)
                fused = fused_scores(cal, cos["test"], peer[m]["test"])
                rows.append({**base, "scorer": f"{name} + {m} (weights {cal['weights'][0]:.2f} / "
                                               f"{cal['weights'][1]:.2f} on validation pairs)",
                             **dict(zip(("eer", "fnmr1"), _rates(fused, test.label), strict=True))})
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Mean over seeds per institution and scorer (the fusion's weights differ by seed: named by method)."""
    def key(r):
        return r["institution"], r["scorer"].split(" (weights")[0]
    out = []
    for inst, scorer in dict.fromkeys(map(key, rows)):
        sub = [r for r in rows if key(r) == (inst, scorer)]
        out.append({"institution": inst, "scorer": scorer, "seeds": len(sub),
                    "genuine / impostor pairs": f"{sum(r['genuine'] for r in sub)} / {sum(r['impostor'] for r in sub)}",
                    "EER %": f"{100 * np.mean([r['eer'] for r in sub]):.1f}",
                    "FNMR @ FMR 1 % %": f"{100 * np.nanmean([r['fnmr1'] for r in sub]):.1f}"
                    if any(np.isfinite(r["fnmr1"]) for r in sub) else "– (< 100 impostor pairs)"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.heldout_peers", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="seed folders of a real_sensors simulate run")
    ap.add_argument("--methods", default="fedavg,affr")
    ap.add_argument("--matchers", default="nbis,leader")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "studies" / "heldout_peers.md")
    args = ap.parse_args(argv)
    for run in args.runs:
        if not (run / "experiment.toml").is_file():
            ap.error(f"{run}: expected a simulate run folder with experiment.toml (a seed-<s> folder)")
    matchers = [resolve_matcher(m.strip(), "--matchers") for m in args.matchers.split(",") if m.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    rows = [r for run in args.runs for r in run_seed(run, methods, matchers)]
    text = ("# The real-sensor federation beside the peers, on each sensor's held-out fingers\n\n"
            f"Generated by `python -m studies.heldout_peers {' '.join(map(str, args.runs))}"
            + (f" --methods {args.methods}" if args.methods != "fedavg,affr" else "")
            + (f" --matchers {args.matchers}" if args.matchers != "nbis,leader" else "")
            + "`. Every test pair of each institution (fingers never trained on); fusion weights and statistics "
            "fitted on the institution's validation pairs only. Mean over seeds; pairs summed over seeds. With a "
            "few held-out fingers per FVC sensor (2 fingers: 56 genuine / 64 impostor pairs a seed) a difference of a "
            "few points is inside the noise.\n\n" + markdown_table(summary(rows)) + "\n## Per seed\n\n"
            + markdown_table([{**r, "eer": f"{100 * r['eer']:.1f}", "fnmr1": f"{100 * r['fnmr1']:.1f}"}
                              for r in rows]))
    write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
