"""Membership inference studies of an audit: the run's own models (shadow-free attacks) and the controlled
comparison (Yan et al. 2025 Table 6 shape) trained condition by condition, so an audit can save each condition as
soon as it is done.

Every model the study trains is trained once and attacked by every membership attack (threshold, Yeom, LiRA
online / offline share the same target and shadows).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from fedprint.attacks import membership as mia
from fedprint.attacks.run_loading import RunInfo
from fedprint.attacks.shadow_population import synthetic_population
from fedprint.config import ExperimentConfig, TrainConfig
from fedprint.config.experiment import ModelSection
from fedprint.data.pairs import PairSet, make_pairs
from fedprint.data.record import FingerprintRecord
from fedprint.models.preprocess import normalize, prepare
from fedprint.privacy.fpdfsn import FPDFSNParams
from fedprint.training.evaluation import evaluate_on_pairs
from fedprint.training.experiment_data import build_clients, fpdfsn_params, union
from fedprint.training.local_data import ClientData, apply_fpdfsn
from fedprint.training.trainer import train_siamese

#: What audit.md says instead of Opacus's per-model "Secure RNG turned off" warning.
DP_RNG_NOTE = ("DP-SGD noise of the comparison models: Opacus without `secure_mode` (torchcsprng is not "
               "installable here); the generators are seeded from OS entropy and never stored.")


def train_model(images: torch.Tensor, pairs: PairSet, *, model: ModelSection, cfg: TrainConfig,
                dp_epsilon: float | None = None, progress: bool = False, desc: str = "train"
                ) -> tuple[nn.Module, dict | None]:
    """A fresh encoder of ``model`` (its ``init``: random weights seeded by ``cfg.seed``, or the run's initial
    model) trained on ``pairs``; DP-SGD at target ε if given. Returns the encoder (eval mode) and the DP
    accounting (None without DP)."""
    net = model.new_encoder(cfg.seed)
    if dp_epsilon is None:
        train_siamese(net, images, pairs, cfg, progress=progress, desc=desc)
        return net.eval(), None
    from fedprint.training.dp_sgd import train_siamese_dp

    with warnings.catch_warnings():  # stated once in audit.md instead of once per model (see DP_RNG_NOTE)
        warnings.filterwarnings("ignore", message=".*Secure RNG turned off.*")
        _, acc = train_siamese_dp(net, images, pairs, cfg, noise_multiplier=None, target_epsilon=float(dp_epsilon),
                                  progress=progress)
    return net.eval(), acc


@dataclass
class Candidates:
    """The candidate fingers of a membership test, indexed into the concatenation of some clients' images."""

    names: list[str]
    groups: list[np.ndarray]  # image rows per finger
    is_member: np.ndarray  # bool per finger
    records: list[list[FingerprintRecord]]  # raw records per finger (shadow models train on them)


def candidates(clients: Sequence[ClientData]) -> Candidates:
    """Members = fingers of the clients' training splits; non-members = their val + test fingers."""
    names, groups, member, recs = [], [], [], []
    offset = 0
    for c in clients:
        ident = [r.identity for r in c.records]
        for part, is_mem in (("train", True), ("val", False), ("test", False)):
            for name, rows in mia.identity_groups(ident, getattr(c.split, part)).items():
                names.append(f"{c.name}/{name}")
                groups.append(rows + offset)
                member.append(is_mem)
                recs.append([c.records[k] for k in rows])
        offset += len(c.records)
    return Candidates(names, groups, np.asarray(member, dtype=bool), recs)


# --------------------------------------------------------------------------------------- membership study


def _shadow_stats(cand: Candidates, query: torch.Tensor, populations: list[list[FingerprintRecord]],
                  inclusion: np.ndarray, *, model: ModelSection, fp: FPDFSNParams | None, cfg: TrainConfig,
                  max_impostors: int, dp_epsilon: float | None, seed: int, progress: bool) -> np.ndarray:
    """LiRA statistic of every candidate on every shadow model, shape (K, n_candidates).

    Each shadow sees its data exactly as the target saw its own: the network-input crop of every record
    (:func:`fedprint.models.preprocess.prepare`), FP-DFSN on those crops when the condition uses it, then normalisation.
    """
    spec = model.input_spec()
    rows = []
    for k, pop in enumerate(populations):
        recs = list(pop) + [r for i in np.flatnonzero(inclusion[k]) for r in cand.records[i]]
        crops = [prepare(r.image, spec, r.dpi) for r in recs]
        if fp is not None:  # the attacker mimics the client's defence with its own noise
            crops, _ = apply_fpdfsn(crops, fp, seed=seed + 1000 + k, cache_dir=None, progress=False)
        pairs = make_pairs(recs, max_impostors=max_impostors, seed=seed + 2000 + k)
        net, _ = train_model(normalize(np.stack(crops), spec), pairs, model=model,
                             cfg=replace(cfg, seed=cfg.seed + 101 + k), dp_epsilon=dp_epsilon, progress=progress,
                             desc=f"shadow {k + 1}/{len(populations)}")
        rows.append(mia.lira_statistic(mia.model_statistics(net, query, cand.groups, margin=cfg.margin)))
    return np.stack(rows)


@dataclass
class Study:
    """Everything the conditions of one comparison study share (built once by `prepare_study`)."""

    cfg: ExperimentConfig
    records: list[FingerprintRecord]
    raw: list[ClientData]
    cand: Candidates
    query: torch.Tensor
    inclusion: np.ndarray
    populations: list[list[FingerprintRecord]]
    train_cfg: TrainConfig
    model: ModelSection
    seed: int
    setup: dict


def conditions(fpdfsn_beta: float, dp_epsilons: Sequence[float]) -> list[tuple[str, float, float | None]]:
    """(label, β, target ε) of each condition: no defence, FP-DFSN at β, DP-SGD at each ε."""
    out: list[tuple[str, float, float | None]] = [("no defence", 0.0, None),
                                                  (f"FP-DFSN β = {fpdfsn_beta:g}", fpdfsn_beta, None)]
    return out + [(f"DP-SGD ε ≈ {e:g}", 0.0, float(e)) for e in dp_epsilons]


def prepare_study(cfg: ExperimentConfig, *, records: list[FingerprintRecord], epochs: int, input_size: int | None,
                  max_pairs_per_epoch: int | None, shadow_models: int, shadow_fingers: int | None, seed: int,
                  progress: bool = False) -> Study:
    """Candidates (members = training fingers, non-members = held-out fingers), queries, LiRA inclusion design and
    shadow populations — shared by every condition."""
    size = int(input_size or cfg.model.input_size)
    model = cfg.model if size == cfg.model.input_size else replace(cfg.model, input_size=size, init="random")
    caps = [c for c in (max_pairs_per_epoch, cfg.train.max_pairs_per_epoch) if c is not None]
    train_cfg = replace(cfg.train, seed=cfg.run.seed, epochs=int(epochs), max_pairs_per_epoch=min(caps, default=None))
    raw = build_clients(cfg, cache=False, input_size=size, beta=0.0, records=records, progress=progress)
    cand = candidates(raw)
    query = torch.cat([c.images for c in raw])
    n_mem, n_cand = int(cand.is_member.sum()), len(cand.names)
    imps = int(np.median([len(g) for g in cand.groups]))
    n_syn = shadow_fingers or max(n_mem - n_cand // 2, n_cand // 4, 2)
    inclusion = mia.balanced_inclusion(n_cand, shadow_models, np.random.default_rng(seed))
    populations = [synthetic_population(n_syn, imps, seed=10_000 + seed * 100 + k, domain="shadow")
                   for k in range(shadow_models)]
    setup = {"input_size": size, "epochs": int(epochs), "encoder": cfg.model.encoder,
             "max_pairs_per_epoch": train_cfg.max_pairs_per_epoch, "members": n_mem,
             "nonmembers": n_cand - n_mem, "shadow_models": shadow_models,
             "shadow_synthetic_fingers": n_syn, "shadow_impressions": imps,
             "shadow_candidates_in": int(inclusion.sum(0)[0]),
             "init": model.init if model.init in ("random", "pretrained") else Path(model.init).name}
    return Study(cfg, records, raw, cand, query, inclusion, populations, train_cfg, model, seed, setup)


def run_condition(study: Study, label: str, beta: float, eps: float | None, *, progress: bool = False
                  ) -> tuple[dict, dict]:
    """Train the target of one condition on the union of the clients' training pairs, train its shadows, and
    attack it with every membership attack. Returns (row, curves {attack: (scores, is_member)})."""
    t0 = time.perf_counter()
    cfg, size = study.cfg, study.setup["input_size"]
    clients = study.raw if beta == 0 else build_clients(cfg, cache=True, input_size=size, beta=beta,
                                                        records=study.records, progress=progress)
    images, pairs = union(clients)
    net, acc = train_model(images, pairs, model=study.model, cfg=study.train_cfg, dp_epsilon=eps,
                           progress=progress, desc=f"target: {label}")
    eer = float(np.mean([evaluate_on_pairs(net, c)[0]["eer"] for c in clients]))
    stats = mia.model_statistics(net, study.query, study.cand.groups, margin=study.train_cfg.margin)
    scores = mia.attack_scores(stats)
    shadow = _shadow_stats(study.cand, study.query, study.populations, study.inclusion, model=study.model,
                           fp=fpdfsn_params(cfg, beta), cfg=study.train_cfg,
                           max_impostors=cfg.data.max_impostors, dp_epsilon=eps, seed=study.seed,
                           progress=progress)
    scores.update(mia.lira_scores(mia.lira_statistic(stats), shadow, study.inclusion))
    metrics = {a: mia.mia_metrics(s, study.cand.is_member, seed=study.seed) for a, s in scores.items()}
    row = {"condition": label, "beta": beta, "target_epsilon": eps,
           "epsilon": None if acc is None else acc["epsilon"],
           "delta": None if acc is None else acc["delta"],
           "noise_multiplier": None if acc is None else acc["noise_multiplier"],
           "test_eer": eer, "seconds": time.perf_counter() - t0, "attacks": metrics}
    return row, {a: (s, study.cand.is_member) for a, s in scores.items()}


def attack_run_models(info: RunInfo, *, records: list[FingerprintRecord] | None = None, progress: bool = False
                      ) -> tuple[list[dict], dict]:
    """Shadow-free attacks (Yeom distance / loss, compactness) on the run's own checkpoint(s), raw queries."""
    clients = build_clients(info.cfg, cache=False, beta=0.0, records=records, progress=progress)
    # checkpoint file names spell ':' as '_' (lab.train_run), so accept both spellings
    by_name = {**{c.name: c for c in clients}, **{c.name.replace(":", "_"): c for c in clients}}
    rows, curves = [], {}
    for name, (net, used) in info.models.items():
        if used is not None and any(u not in by_name for u in used):
            raise ValueError(f"checkpoint {name!r}: client(s) {used} not among the rebuilt clients "
                             f"{sorted(by_name)}")
        cl = clients if used is None else [by_name[u] for u in used]
        cand = candidates(cl)
        stats = mia.model_statistics(net, torch.cat([c.images for c in cl]), cand.groups,
                                     margin=info.cfg.train.margin)
        scores = mia.attack_scores(stats)
        rows.append({"model": name, "attacks": {a: mia.mia_metrics(s, cand.is_member) for a, s in scores.items()}})
        curves[name] = {a: (s, cand.is_member) for a, s in scores.items()}
    return rows, curves
