"""``fedprint train``: a centralized or local-only training run from an experiment TOML, into a run directory.

Run directory contents: ``config.json`` (resolved config + input pipeline), ``clients.csv`` (data per client),
``history.csv`` (loss per epoch and model), ``metrics.csv`` / ``metrics.json`` (test metrics per client),
``roc_<model>.csv`` and ``roc.png``, ``checkpoint_<model>.pt`` and ``report.md``. With ``[dp] enabled = true``
every model trains with DP-SGD (``fedprint.training.dp_sgd``); ``metrics.json`` and the report then carry each model's
privacy accounting (ε at δ, σ, C, sampling rate, steps) and the group-privacy caveat of record = pair. The
guarantee covers the weights only: each model file's ``privacy`` entry (:func:`fedprint.training.dp_sgd.
release_scope`), ``released.json`` and the report list what is released outside it (threshold and score fusion
fitted on raw validation pairs, test metrics, exact counts, every file of the run directory but the weights).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from fedprint.config import ExperimentConfig
from fedprint.config.provenance import provenance
from fedprint.config.rundir import make_out_dir, markdown_table, report_provenance
from fedprint.data.atomic_io import write_csv, write_json, write_text
from fedprint.lab.baselines import evaluate_clients, train_centralized, train_local
from fedprint.lab.common_test import common_test_rows
from fedprint.lab.model_export import export_model
from fedprint.lab.report import COMMON_COLUMN, pair_pivot, real_sample_heading, real_sample_section
from fedprint.models.metrics import plot_roc, write_roc_csv
from fedprint.models.preprocess import describe
from fedprint.recognition.peers import resolve_peers
from fedprint.recognition.real_samples import real_sample_rows
from fedprint.training.evaluation import evaluate_on_pairs
from fedprint.training.experiment_data import build_clients
from fedprint.training.local_data import ClientData

MODES = ("centralized", "local")
DP_COLUMNS = ["model", "epsilon", "delta", "noise_multiplier", "max_grad_norm", "sample_rate", "steps", "accountant",
              "pairs", "pairs_per_finger", "finger_epsilon", "finger_delta"]
METRIC_COLUMNS = ["client", "domain", "accuracy", "precision", "recall", "f1", "roc_auc", "eer", "fmr100",
                  "fmr1000", "n_genuine", "n_impostor", "threshold"]


def classical_subset(labels: np.ndarray, n_per_class: int, rng: np.random.Generator,
                     n_impostor: int | None = None) -> np.ndarray:
    """Indices of ``n_per_class`` genuine then ``n_per_class`` (or ``n_impostor``) impostor pairs (all of a class
    that has fewer), drawn without replacement: the subset :func:`classical_comparison` scores (one call per client,
    in client order)."""
    sizes = {1: n_per_class, 0: n_per_class if n_impostor is None else n_impostor}
    return np.concatenate([rng.choice(np.flatnonzero(labels == v), size=min(sizes[v], int((labels == v).sum())),
                                      replace=False) for v in (1, 0)])


def fused_eers(distances: np.ndarray, scores: np.ndarray, labels: np.ndarray, prefix: str = "") -> dict:
    """``<prefix>fused_eer`` (:func:`fedprint.models.metrics.rank_fusion`) and ``<prefix>fused_z_eer``
    (:func:`fedprint.models.metrics.zscore_fusion`, each score standardised on these pairs) of a deep verifier's
    ``distances`` and a classical matcher's similarity ``scores``; the z-score EER is NaN where either score is
    constant over the pairs (no spread to standardise by: that matcher tells no pair from another)."""
    from fedprint.models.metrics import eer, rank_fusion
    from fedprint.recognition.peers import fused_with_peer

    z = fused_with_peer(distances, scores)  # NaN where either score is constant
    return {f"{prefix}fused_eer": eer(rank_fusion(-np.asarray(distances, float), np.asarray(scores, float)), labels,
                                      higher_is_genuine=True),
            f"{prefix}fused_z_eer": float("nan") if np.isnan(z).any() else eer(z, labels)}


def _matcher_name(matcher: str) -> str:
    from fedprint.data.minutiae_matchers import DESCRIPTIONS

    return DESCRIPTIONS[matcher]


def classical_comparison(net, clients: list[ClientData], *, n_per_class: int, seed: int,
                         progress: bool = True, others: Mapping[str, Any] | None = None,
                         matcher: str = "auto") -> list[dict]:
    """EER / ROC AUC of the trained verifier and of an independent classical matcher
    (:mod:`fedprint.data.minutiae_matchers`; ``"auto"``: NBIS MINDTCT + Bozorth3 where nbis-py is installed) on the
    SAME random subset of each client's test pairs (``n_per_class`` genuine + ``n_per_class`` impostor pairs).

    The classical matcher sees the raw records; the verifier sees its own inputs (FP-DFSN images if enabled).
    ``others`` (name -> encoder): further verifiers scored on the same subset (``<name>_eer`` columns), so the
    slow classical scores are computed once. ``*fused_eer``: deep and classical scores fused by
    :func:`fedprint.models.metrics.rank_fusion`; ``*fused_z_eer``: by the z-score sum rule
    (:func:`fedprint.models.metrics.zscore_fusion`, each score standardised on the subset). Both label-free, reported
    beside
    the pure deep score, never instead of it.
    """
    from fedprint.data import minutiae_matchers
    from fedprint.models.metrics import eer, roc_auc

    matcher = minutiae_matchers.resolve_matcher(matcher, "--matcher")

    rows = []
    rng = np.random.default_rng(seed)
    for c in clients:
        lab = c.test_pairs.label
        pick = classical_subset(lab, n_per_class, rng)
        sub = c.test_pairs.take(pick)
        _, deep_d = evaluate_on_pairs(net, c, sub)
        scores = minutiae_matchers.scores(c.records, np.stack([sub.a, sub.b], axis=1).astype(np.int64), matcher,
                                          progress=progress)
        rows.append({"client": c.name, "matcher": matcher, "pairs": len(sub), "genuine": int(sub.n_genuine),
                     "deep_eer": eer(deep_d, sub.label), "deep_roc_auc": roc_auc(deep_d, sub.label),
                     "classical_eer": eer(scores, sub.label, higher_is_genuine=True),
                     "classical_roc_auc": roc_auc(scores, sub.label, higher_is_genuine=True)}
                    | fused_eers(deep_d, scores, sub.label))
        for name, other in (others or {}).items():
            other_d = evaluate_on_pairs(other, c, sub)[1]
            rows[-1] |= {f"{name}_eer": eer(other_d, sub.label)} | fused_eers(other_d, scores, sub.label, f"{name}_")
    return rows


def run_training(cfg: ExperimentConfig, mode: str, *, progress: bool = True, out: Path | None = None,
                 classical_pairs: int = 0) -> Path:
    """Train and evaluate in ``mode`` ("centralized" or "local"); returns the run directory.

    ``classical_pairs`` > 0 also compares each model with the classical matcher on that many genuine and
    impostor test pairs per client (:func:`classical_comparison`)."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    if cfg.dp.enabled and cfg.dp.level != "sample":
        raise ValueError(f"[dp] level = {cfg.dp.level!r}: `fedprint train` honours only sample-level DP-SGD "
                         "(level = \"sample\"); client-level DP is for federated runs (`fedprint simulate`)")
    if cfg.dp.enabled:  # DP-SGD trains pair by pair (one record = one pair): these keys would be silently ignored
        ignored = [f"{k} = {v!r}" for k, v, ok in (("sampler", cfg.train.sampler, "pairs"),
                                                   ("augment", cfg.train.augment, False),
                                                   ("schedule", cfg.train.schedule, "constant"))
                   if v != ok]
        if ignored:
            raise ValueError(f"[train] {', '.join(ignored)}: DP-SGD (training.dp_sgd) does not honour them — it "
                             "samples pairs (one record = one pair) at a constant learning rate without "
                             "augmentation; set sampler = \"pairs\", augment = false, schedule = \"constant\"")
    run_dir = make_out_dir(out, cfg.run.out, f"{cfg.run.name}-{mode}")
    spec = cfg.model.input_spec()
    write_json(run_dir / "config.json", {"mode": mode, **cfg.to_dict(), "input_pipeline": describe(spec)})
    t0 = time.perf_counter()
    clients = build_clients(cfg, progress=progress)
    write_csv(run_dir / "clients.csv", [c.summary() for c in clients])
    train_cfg = replace(cfg.train, seed=cfg.run.seed)
    kw = {"encoder": cfg.model.encoder, "embedding_dim": cfg.model.embedding_dim, "cfg": train_cfg,
          "encoder_kwargs": cfg.model.encoder_kwargs(), "init_state": cfg.model.init_state(),
          "progress": progress, "dp": cfg.dp.trainer_kwargs() if cfg.dp.enabled else None}
    if mode == "centralized":
        net, hist = train_centralized(clients, **kw)
        models = {"centralized": (net, clients, hist)}
    else:
        models = {}
        for c in clients:
            net, hist = train_local(c, **kw)
            models[f"local-{c.name}"] = (net, [c], hist)
    t_train = time.perf_counter() - t0

    rows, history, curves, model_files = [], [], {}, {}
    for name, (net, evaluated, hist) in models.items():
        history += [{"model": name, **h} for h in hist]
        for row, c in zip(evaluate_clients(net, evaluated), evaluated, strict=True):
            if c.fpdfsn_images is not None:  # second column: probes FP-DFSN-processed like the training prints
                row["eer_fpdfsn_probes"] = evaluate_on_pairs(net, c, probes="fpdfsn")[0]["eer"]
            rows.append({"model": name, **row})
            _, test_d = evaluate_on_pairs(net, c)
            label = f"{name} on {c.name}" if len(evaluated) > 1 else name
            curves[label] = (test_d, c.test_pairs.label)
            write_roc_csv(run_dir / f"roc_{name}_{c.name}.csv".replace(":", "_"), test_d, c.test_pairs.label)
        model_files[name] = export_model(run_dir / f"model_{name}.pt".replace(":", "_"), net, cfg, spec,
                                         method=name, clients=evaluated, provenance=provenance(),
                                         metrics={"test": [r for r in rows if r["model"] == name]},
                                         privacy=_release_scope(cfg, hist, evaluated))
    peers = resolve_peers()  # --peers / $FEDPRINT_PEERS: the matchers scored beside every model
    real = real_sample_rows(model_files, peers=peers)
    beside = common_test_rows(_by_client(models), clients, peers) if peers else []
    comparison = []
    if classical_pairs > 0:
        for name, (net, evaluated, _) in models.items():
            comparison += [{"model": name, **r} for r in classical_comparison(
                net, evaluated, n_per_class=classical_pairs, seed=cfg.run.seed, progress=progress)]
        write_csv(run_dir / "classical_comparison.csv", comparison)
    write_csv(run_dir / "history.csv", history)
    write_csv(run_dir / "metrics.csv", rows)
    avg = {k: float(np.mean([r[k] for r in rows])) for k in ("accuracy", "eer", "roc_auc", "fmr100")}
    dp = dp_summary(cfg, {name: hist for name, (_, _, hist) in models.items()})
    write_json(run_dir / "metrics.json", {"per_client": rows, "average": avg, "train_seconds": t_train, "dp": dp})
    if dp["enabled"]:
        write_json(run_dir / "released.json", dp_release_manifest(dp, list(model_files)))
    plot_roc(run_dir / "roc.png", curves, title=f"{cfg.run.name} ({mode}) — test pairs")
    report = _report(cfg, mode, clients, rows, avg, history, t_train, dp, real)
    if beside:
        write_csv(run_dir / "peers.csv", beside)
        report += ("\n## Beside the peers: the same test pairs\n\n" + pair_pivot(beside, COMMON_COLUMN)
                   + "\nEach client's test pairs scored by the model, by each free minutiae matcher a user would "
                   "pick instead (on the raw prints), and by their z-score sum standardised on these pairs "
                   "(label-free, but not a deployable score: `fedprint calibrate --score minutiae` stores one). "
                   "Column headers give the genuine (g) / impostor (i) pairs.\n")
    if comparison:
        report += ("\n## Deep verifier vs an independent classical matcher (same test pairs)\n\n"
                   f"{comparison[0]['matcher']} ({_matcher_name(comparison[0]['matcher'])}) on a random subset of "
                   "each client's test pairs; lower EER is better. fused_eer: label-free rank fusion of the two "
                   "scores; fused_z_eer: their z-score sum, each standardised on these pairs (label-free); both "
                   "beside the pure deep score (never instead of it).\n\n"
                   + markdown_table(comparison, ["model", "client", "matcher", "pairs", "genuine", "deep_eer",
                                                 "classical_eer", "fused_eer", "fused_z_eer", "deep_roc_auc",
                                                 "classical_roc_auc"]))
    write_text(run_dir / "report.md", report + "\n" + report_provenance(run_dir))
    return run_dir


def _by_client(models: Mapping[str, tuple]) -> dict:
    """The trained encoders as :func:`fedprint.lab.common_test.common_test_rows` takes them: a centralized model
    scored on every client, local-only models each on its own client."""
    if "centralized" in models:
        return {"centralized": models["centralized"][0]}
    return {"local (own models)": {evaluated[0].name: net for net, evaluated, _ in models.values()}}


def dp_summary(cfg: ExperimentConfig, histories: dict[str, list[dict]]) -> dict:
    """``metrics.json["dp"]``: ``{"enabled": False}``, or the final accounting of every model (the last history
    row of :func:`fedprint.training.dp_sgd.train_siamese_dp`), the record unit and the group-privacy statement."""
    if not cfg.dp.enabled:
        return {"enabled": False}
    from fedprint.training.dp_sgd import GROUP_PRIVACY_NOTE

    per_model = [{"model": name, **{k: hist[-1][k] for k in DP_COLUMNS[1:]}} for name, hist in histories.items()]
    return {"enabled": True, "record": "pair", "target_epsilon": cfg.dp.target_epsilon, "per_model": per_model,
            "max_epsilon": max(r["epsilon"] for r in per_model), "group_privacy": GROUP_PRIVACY_NOTE}


def _release_scope(cfg: ExperimentConfig, hist: list[dict], clients: list[ClientData]) -> dict | None:
    """A DP-SGD model file's ``privacy`` entry (None without DP): the final accounting, the split rule of the
    clients trained on (``finger-hash`` under DP, :mod:`fedprint.data.hash_split`) and what it does not cover."""
    if not cfg.dp.enabled:
        return None
    from fedprint.training.dp_sgd import release_scope

    rules = sorted({c.split_rule for c in clients})
    return release_scope({**{k: hist[-1][k] for k in DP_COLUMNS[1:]}, "split": "+".join(rules)})


def dp_release_manifest(dp: dict, models: list[str]) -> dict:
    """``released.json`` of a DP-SGD run: the weights are the only DP release; every other output of the run is
    computed from the data without DP (issue 59 §2)."""
    from fedprint.training.dp_sgd import release_scope

    outside = release_scope({})["outside_dp_guarantee"]
    return {
        "released_under_dp": {f"model_{m}.pt": "state_dict (weights) only; see its privacy entry" for m in models},
        "guarantee": dp,
        "outside_dp_guarantee": {
            **{f"model_*.pt {k}": v for k, v in outside.items()},
            "metrics.csv / metrics.json / roc_*.csv / roc.png / report.md": "test metrics and ROC curves on test "
                                                                         "fingers, validation thresholds",
            "clients.csv": "exact finger, image and pair counts per client and part",
            "history.csv": "training loss per epoch (on the DP pairs, without noise)",
        },
    }


def _dp_section(dp: dict) -> str:
    if not dp["enabled"]:
        return ""
    target = f" (σ calibrated for target ε = {dp['target_epsilon']})" if dp["target_epsilon"] else ""
    return ("## Differential privacy (DP-SGD, Opacus)\n\n"
            f"Every model trained with DP-SGD on a fixed pair set drawn once, Poisson-sampled{target}; ε is "
            "Opacus's accountant at the listed δ after all steps.\n\n"
            + markdown_table([{**r, "delta": f"{r['delta']:.3g}"} for r in dp["per_model"]], DP_COLUMNS)
            + f"\n**Unit of privacy.** {dp['group_privacy']}\n\n"
            + "**Outside the guarantee.** DP-SGD protects the weights only. Released without DP: each model "
              "file's decision threshold and score-fusion statistics (fitted on raw validation pairs; validation and "
              "test fingers are not in the DP training set), the test metrics and ROC curves in this report and "
              "the model files, the exact finger / image / pair counts (clients.csv, model file `data`), and the "
              "training loss. Each model file lists them under `privacy.outside_dp_guarantee`; `released.json` "
              "lists every file.\n\n"
            + "".join(f"**{r['model']}: the finger-level guarantee is vacuous** (δ = 1 for a finger in "
                      f"{r['pairs_per_finger']} pairs): DP-SGD here protects pairs, not fingers.\n\n"
                      for r in dp["per_model"] if r["finger_delta"] >= 1.0))


def _flip_label(flips: int) -> str:
    """The mirrored twins of ``[train] flip_identities`` for the run report ("" without)."""
    what = {1: "its left-right mirror", 3: "its three flips (left-right, upside-down, both)"}
    return f"; every training finger plus {what[flips]} as new fingers" if flips else ""


def _augment_label(train) -> str:
    """``on`` / ``off`` plus the non-default strengths (scale jitter, shift, sensor texture) for the run report."""
    if not train.augment:
        return "off"
    extra = [f"scale ±{train.scale_jitter:g}"] if train.scale_jitter != 0.05 else []
    extra += [f"shift ±{train.translation:g}"] if train.translation != 0.1 else []
    extra += [f"sensor texture {train.texture:g}"] if train.texture > 0 else []
    return "on" + (f" ({', '.join(extra)})" if extra else "")


def _report(cfg, mode, clients, rows, avg, history, seconds, dp, real) -> str:
    fp = "FP-DFSN on (perturbation, not differential privacy)" if cfg.fpdfsn.enabled else "FP-DFSN off"
    dp_line = (f"; **DP-SGD on** (max ε = {dp['max_epsilon']:.3g}, see below)" if dp["enabled"]
               else "; DP-SGD off")
    loss_cols = ["model", "epoch", "loss", "pairs"] + (["epsilon"] if dp["enabled"] else [])
    return (
        f"# {cfg.run.name}: {mode} training\n\n"
        f"- encoder `{cfg.model.encoder}` (d = {cfg.model.embedding_dim}, width {cfg.model.width}, pooling grid "
        f"{cfg.model.pool_grid}{', GeM pooling' if cfg.model.pooling == 'gem' else ''}"
        f"{', learned alignment' if cfg.model.align else ''}), input "
        f"{cfg.model.input_size} px at {cfg.model.input_dpi:g} dpi ({cfg.model.crop} crop), initial weights "
        f"{cfg.model.init}; {cfg.train.epochs} epochs, sampler {cfg.train.sampler} (P {cfg.train.p} x K "
        f"{cfg.train.k}{_flip_label(cfg.train.flip_identities)}), augmentation {_augment_label(cfg.train)}, "
        f"Adam lr {cfg.train.lr} "
        f"({cfg.train.schedule}{f', weight decay {cfg.train.weight_decay:g}' if cfg.train.weight_decay else ''}), "
        + (f"supervised contrastive loss (temperature {cfg.train.temperature:g}"
           f"{f', cosine margin {cfg.train.supcon_margin:g}' if cfg.train.supcon_margin else ''})"
           if cfg.train.loss == "supcon"
           else f"contrastive loss, margin {cfg.train.margin}")
        + (f", dense-match loss weight {cfg.train.dense_weight:g}" if cfg.train.dense_weight > 0 else "")
        + (f", minutiae-map loss weight {cfg.train.minutiae_weight:g} (targets from the extractor on the inputs)"
           if cfg.train.minutiae_weight > 0 else "")
        + (f", proxy loss weight {cfg.train.proxy_weight:g} (CosFace, margin {cfg.train.proxy_margin:g})"
           if cfg.train.proxy_weight > 0 else "")
        + (f", weights averaged (EMA decay {cfg.train.ema:g})" if cfg.train.ema > 0 else "")
        + (f", L2-SP toward the initial weights (μ {cfg.train.l2sp:g})" if cfg.train.l2sp > 0 else "")
        + (f", first {cfg.train.freeze_blocks} conv blocks frozen" if cfg.train.freeze_blocks else "")
        + f"; {fp}{dp_line}\n"
        "- evaluation on raw probes (what a deployed verifier sees)"
        + ("; `eer_fpdfsn_probes`: the same test pairs with FP-DFSN-processed probes\n" if cfg.fpdfsn.enabled
           else "\n")
        + f"- split protocol: **{cfg.data.protocol}-set** (open-set: test fingers never seen in training); "
        + ("split by a keyed hash per finger (removing a finger moves no other finger); " if dp["enabled"] else "")
        + "decision threshold chosen on each client's validation pairs, never on test pairs\n"
        f"- wall time (data + training): {seconds:.0f} s\n\n"
        "## Data per client\n\n"
        + markdown_table([c.summary() for c in clients],
                         ["client", "domain", "beta", "fingers", "images", "train_pairs", "val_pairs",
                          "test_pairs"])
        + "\n## Test metrics\n\n"
        + markdown_table(rows, ["model", *METRIC_COLUMNS, *(["eer_fpdfsn_probes"] if cfg.fpdfsn.enabled else [])])
        + f"\nAverage over clients: accuracy {avg['accuracy']:.4f}, EER {avg['eer']:.4f}, "
          f"ROC AUC {avg['roc_auc']:.4f}, FNMR@FMR1% {avg['fmr100']:.4f}\n\n"
        + real_sample_heading(cfg.data.sources, cfg.partition.unseen) + "\n"
        + real_sample_section(real) + "\n"
        + "## Training loss\n\n"
        + markdown_table(history, loss_cols)
        + "\n" + _dp_section(dp)
        + "![ROC](roc.png)\n"
    )
