"""``fedprint audit``: privacy attacks against a finished run directory, without modifying it.

What an audit does
------------------
1. Hashes every file of the run directory (SHA-256), reads ``config.json`` and the checkpoint(s) — never writes
   there — and rebuilds the clients' data deterministically from the run's configuration (same sources,
   partitions, splits and seeds; FP-DFSN images are recomputed in memory, no cache is written).
2. Writes into a NEW sibling directory ``<run>-audit-<UTC timestamp>/`` (or ``--out``, which must lie outside
   the run directory): a sibling rather than a subfolder, because a new subfolder would itself change the run
   directory's listing. At the end the hashes are recomputed and must be identical (else the audit fails).
3. **Membership inference** (:mod:`attacks.membership`, unit = finger identity):

   * against the run's own checkpoint(s): the shadow-free attacks (Yeom distance / loss, compactness), members =
     the training fingers of the clients the model trained on, non-members = their held-out (val + test)
     fingers; queries use the RAW images (the attacker holds a print, not the client's FP-DFSN noise);
   * a controlled comparison (Yan et al. 2025 Table 6 shape) that the audit trains itself on the SAME clients, splits
     and seeds: no defence, FP-DFSN at β = 0.5, DP-SGD at ε ≈ 8 and ε ≈ 1 (Opacus, record = pair, σ calibrated
     to the target ε), each attacked with every attack including LiRA (online / offline) whose shadow models
     mimic that condition's training (same encoder, epochs, defence) on disjoint synthetic populations.
4. **Gradient inversion / imprint** (Yan et al. 2025 Table 5 shape) through
   :func:`attacks.inversion_audit.run_inversion_audit`, against the run's first checkpoint on its first
   client's data, without FP-DFSN and with FP-DFSN at β = 0.5.

Synthetic shadow populations come from :func:`synthetic_population` (Yan et al. 2025-style master prints of
:func:`data.synth.master.make_master` with per-impression rotation, shift, contrast and noise); they never share
a finger with the run's data (own seeds and identity names).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch import nn

from attacks import membership as mia
from client.evaluation import evaluate_on_pairs
from client.experiment_data import build_clients, client_data, fpdfsn_params, union
from client.local_data import ClientData, apply_fpdfsn
from client.trainer import train_siamese
from data.atomic_io import write_csv, write_json, write_text
from data.pairs import PairSet, make_pairs
from data.record import FingerprintRecord
from fedprint_config import ExperimentConfig, TrainConfig, parse_config
from models.preprocess import InputSpec, to_tensor_batch
from models.siamese import new_encoder
from privacy.fpdfsn import FPDFSNParams

#: Attack families ``fedprint audit --attacks`` accepts.
from server.rundir import markdown_table, new_run_dir

#: Attack families ``fedprint audit --attacks`` accepts.
AUDIT_ATTACKS = ("imprint", "inversion", "mia")
#: Natural fingerprint class frequencies (arch, tented arch, left loop, right loop, whorl).
NATURAL_PATTERNS = {"arch": 3.7, "tented_arch": 2.9, "left_loop": 33.8, "right_loop": 31.7, "whorl": 27.9}


@dataclass(frozen=True)
class AuditSettings:
    """Sizes of the models an audit trains itself (comparison targets and LiRA shadows).

    Attributes
    ----------
    shadow_models : int
        LiRA shadow models per condition (even; each candidate finger is IN for half of them). Default 4.
    epochs : int or None
        Epochs of every model the audit trains; None = the run's ``train.epochs`` (times the rounds of a
        federated run: the passes a client makes).
    input_size : int or None
        Input side of the comparison study in pixels; None = the run's ``model.input_size``.
    fpdfsn_beta : float
        β of the FP-DFSN condition (default 0.5, Yan et al. 2025's value).
    dp_epsilons : tuple of float
        Target ε of the DP-SGD conditions (δ = Opacus default of client.dp_sgd: largest power of ten < 1/pairs);
        empty = no DP-SGD condition.
    max_pairs_per_epoch : int or None
        Cap on training pairs per epoch of the audit's own models (the smaller of this and the run's cap).
    shadow_fingers : int or None
        Synthetic fingers per shadow population; None = enough to give each shadow as many training fingers as
        the target (at least a quarter of the candidates).
    seed : int
        Seeds shadow populations, inclusion design and cross-fitting (default 0).
    comparison : bool
        Train and attack the controlled comparison (Table 6 conditions); False = attack only the run's own
        checkpoint(s) (fast).
    """

    shadow_models: int = 4
    epochs: int | None = None
    input_size: int | None = None
    fpdfsn_beta: float = 0.5
    dp_epsilons: tuple[float, ...] = (8.0, 1.0)
    max_pairs_per_epoch: int | None = None
    shadow_fingers: int | None = None
    seed: int = 0
    comparison: bool = True

    def __post_init__(self) -> None:
        if self.shadow_models < 2 or self.shadow_models % 2:
            raise ValueError(f"shadow_models: expected an even integer >= 2, got {self.shadow_models}")
        if self.epochs is not None and self.epochs < 1:
            raise ValueError(f"epochs: expected >= 1 or None, got {self.epochs}")
        if self.input_size is not None and self.input_size < 8:
            raise ValueError(f"input_size: expected >= 8 px or None, got {self.input_size}")
        if not 0.0 < self.fpdfsn_beta < 1.0:
            raise ValueError(f"fpdfsn_beta: expected a number in (0, 1), got {self.fpdfsn_beta}")
        if any(not e > 0 for e in self.dp_epsilons):
            raise ValueError(f"dp_epsilons: expected positive numbers, got {self.dp_epsilons}")


#: ``--quick``: 2 shadows, 32-px inputs, 8 epochs, 2,000 pairs per epoch.
QUICK = AuditSettings(shadow_models=2, epochs=8, input_size=32, max_pairs_per_epoch=2000)


# ------------------------------------------------------------------------------------------- run loading


@dataclass
class RunInfo:
    """What an audit reads from a run directory."""

    run_dir: Path
    kind: str  # "train" (fedprint train) or "simulate" (fedprint simulate)
    cfg: ExperimentConfig
    epochs_per_client: int  # passes over its data a client made (epochs x rounds for federated runs)
    models: dict[str, tuple[nn.Module, list[str] | None]] = field(default_factory=dict)  # name -> (net, clients)


def hash_tree(root: str | Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (relative POSIX path -> hex digest)."""
    root = Path(root)
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h = hashlib.sha256()
            with p.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[p.relative_to(root).as_posix()] = h.hexdigest()
    return out


def _strip_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_strip_none(v) for v in obj]
    return obj


def _encoder_from_state(state: dict, encoder: str, embedding_dim: int, where: Path, **kwargs) -> nn.Module:
    net = new_encoder(encoder, embedding_dim, 0, **kwargs)
    try:
        net.load_state_dict(state)
    except RuntimeError as exc:
        raise ValueError(f"{where}: checkpoint does not fit encoder {encoder!r} (d = {embedding_dim}): {exc}") \
            from None
    return net.eval()


def load_run(run_dir: str | Path) -> RunInfo:
    """Read a ``fedprint train`` or ``fedprint simulate`` run directory (config and checkpoints), read-only.

    Train runs: model files ``model_centralized.pt`` (all clients) or ``model_local-<client>.pt`` (that
    client); ``checkpoint_*.pt`` of older runs are read too.
    Simulate runs: the global model of every federated method, ``<method>/checkpoint/state.json`` + arrays.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"--run: run directory not found: {run_dir}")
    cfg_path = run_dir / "config.json"
    if not cfg_path.is_file():
        raise ValueError(f"--run: {run_dir} is not a FedPrint run directory (no config.json)")
    try:
        raw = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cfg_path}: not valid JSON ({exc})") from None
    if "experiment" in raw:
        kind, table = "simulate", raw["experiment"]
    elif "mode" in raw:
        kind, table = "train", {k: v for k, v in raw.items() if k not in ("mode", "input_pipeline")}
    else:
        raise ValueError(f"{cfg_path}: neither a 'fedprint train' nor a 'fedprint simulate' config")
    cfg = parse_config(_strip_none(table), source=str(cfg_path))
    info = RunInfo(run_dir=run_dir, kind=kind, cfg=cfg, epochs_per_client=cfg.train.epochs)
    if kind == "train":
        for path in sorted([*run_dir.glob("model_*.pt"), *run_dir.glob("checkpoint_*.pt")]):
            try:
                ck = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:  # torch raises many types for corrupt / foreign files
                raise ValueError(f"{path}: not a readable model file ({type(exc).__name__})") from None
            name = path.stem.split("_", 1)[1]
            net = _encoder_from_state(ck["state_dict"], ck["encoder"], int(ck["embedding_dim"]), path,
                                      **dict(ck.get("encoder_kwargs") or {}))
            info.models[name] = (net, None if name == "centralized" else [name[len("local-"):]])
    else:
        info.epochs_per_client = cfg.train.epochs * int(raw.get("rounds", 1))
        for state_path in sorted(run_dir.glob("*/checkpoint/state.json")):
            state = json.loads(state_path.read_text())
            with np.load(state_path.parent / state["arrays"]) as npz:
                sd = {k: torch.from_numpy(np.array(npz[f"a{i:04d}"])) for i, k in enumerate(state["keys"])}
            net = _encoder_from_state(sd, cfg.model.encoder, cfg.model.embedding_dim, state_path,
                                      **cfg.model.encoder_kwargs())
            info.models[f"{state_path.parent.parent.name} (round {state['round']})"] = (net, None)
    if not info.models:
        raise ValueError(f"--run: {run_dir} holds no model (model_*.pt, checkpoint_*.pt or */checkpoint/)")
    return info


# ------------------------------------------------------------------------------------ synthetic populations


def synthetic_population(n_fingers: int, n_impressions: int, *, seed: int, size: int = 160,
                         domain: str = "shadow", jitter_deg: float = 12.0, jitter_px: float = 8.0,
                         noise_sd: float = 12.0) -> list[FingerprintRecord]:
    """A population of synthetic fingers: Yan et al. 2025-style master prints with jittered impressions.

    Parameters
    ----------
    n_fingers, n_impressions : int
        Fingers (>= 2) and impressions per finger (>= 2).
    seed : int
        Population seed (>= 0); different seeds give disjoint fingers.
    size : int
        Side of the square 500-dpi master canvas in pixels (default 160, >= 64).
    domain : str
        Domain tag and identity prefix (identities are ``"<domain>-s<seed>-<i>"``).
    jitter_deg, jitter_px, noise_sd : float
        Per-impression rotation range ±deg, shift range ±px, Gaussian noise sd in gray levels.

    Returns
    -------
    list of FingerprintRecord
        Gray uint8 images (dark ridges on light background), ordered by finger then impression.
    """
    from data.synth.master import make_master

    if n_fingers < 2 or n_impressions < 2:
        raise ValueError(f"n_fingers and n_impressions: expected >= 2, got {n_fingers} and {n_impressions}")
    out = []
    centre = ((size - 1) / 2.0, (size - 1) / 2.0)
    for f in range(n_fingers):
        m = make_master(f, seed=seed, size=(size, size), pattern_prior=NATURAL_PATTERNS)
        base = np.where(m.mask, 128.0 - 100.0 * m.ridges, 230.0).astype(np.float32)
        for i in range(n_impressions):
            rng = np.random.default_rng([seed, f, i, 7])
            rot = cv2.getRotationMatrix2D(centre, float(rng.uniform(-jitter_deg, jitter_deg)), 1.0)
            rot[:, 2] += rng.uniform(-jitter_px, jitter_px, size=2)
            img = cv2.warpAffine(base, rot, (size, size), flags=cv2.INTER_LINEAR, borderValue=230.0)
            img = 128.0 + rng.uniform(0.8, 1.1) * (img - 128.0) + rng.normal(0.0, noise_sd, img.shape)
            out.append(FingerprintRecord(identity=f"{domain}-s{seed}-{f:04d}", impression=i,
                                         image=np.clip(img, 0, 255).astype(np.uint8), domain=domain))
    return out


# ------------------------------------------------------------------------------------------ model training


def train_model(images: torch.Tensor, pairs: PairSet, *, encoder: str, embedding_dim: int, cfg: TrainConfig,
                dp_epsilon: float | None = None, progress: bool = False) -> tuple[nn.Module, dict | None]:
    """A fresh encoder (init seeded by ``cfg.seed``) trained on ``pairs``; DP-SGD at target ε if given.

    Returns the encoder (eval mode) and the DP accounting (None without DP).
    """
    net = new_encoder(encoder, embedding_dim, cfg.seed)
    if dp_epsilon is None:
        train_siamese(net, images, pairs, cfg, progress=progress)
        return net.eval(), None
    from client.dp_sgd import train_siamese_dp

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
                  inclusion: np.ndarray, *, spec: InputSpec, fp: FPDFSNParams | None, model_kw: dict,
                  cfg: TrainConfig, max_impostors: int, dp_epsilon: float | None, seed: int,
                  progress: bool) -> np.ndarray:
    """LiRA statistic of every candidate on every shadow model, shape (K, n_candidates)."""
    rows = []
    for k, pop in enumerate(populations):
        recs = list(pop) + [r for i in np.flatnonzero(inclusion[k]) for r in cand.records[i]]
        images = [r.image for r in recs]
        if fp is not None:  # the attacker mimics the client's defence with its own noise
            images, _ = apply_fpdfsn(images, fp, seed=seed + 1000 + k, cache_dir=None, progress=False)
        pairs = make_pairs(recs, max_impostors=max_impostors, seed=seed + 2000 + k)
        net, _ = train_model(to_tensor_batch(images, spec), pairs, cfg=replace(cfg, seed=cfg.seed + 101 + k),
                             dp_epsilon=dp_epsilon, progress=progress, **model_kw)
        rows.append(mia.lira_statistic(mia.model_statistics(net, query, cand.groups, margin=cfg.margin)))
    return np.stack(rows)


def membership_study(cfg: ExperimentConfig, settings: AuditSettings, *, epochs: int,
                     records: list[FingerprintRecord] | None = None, progress: bool = False) -> dict:
    """Yan et al. 2025 Table 6 as a controlled experiment: train the target under each condition on the run's clients
    (union of their training pairs, same seeds) and attack it with every membership attack.

    Returns ``{"conditions": [row, ...], "curves": {condition: {attack: (scores, is_member)}}, "setup": {...}}``
    where each row holds the condition, its DP accounting, its test EER, and ``mia.mia_metrics`` per attack.
    """
    from data.sources import load_records

    records = load_records(cfg.data.sources, progress=progress) if records is None else records
    size = int(settings.input_size or cfg.model.input_size)
    spec = InputSpec(size=size)
    caps = [c for c in (settings.max_pairs_per_epoch, cfg.train.max_pairs_per_epoch) if c is not None]
    train_cfg = replace(cfg.train, seed=cfg.run.seed, epochs=int(epochs), max_pairs_per_epoch=min(caps, default=None))
    model_kw = {"encoder": cfg.model.encoder, "embedding_dim": cfg.model.embedding_dim}
    raw = build_clients(cfg, cache=False, input_size=size, beta=0.0, records=records, progress=progress)
    cand = candidates(raw)
    query = torch.cat([c.images for c in raw])
    n_mem, n_cand = int(cand.is_member.sum()), len(cand.names)
    imps = int(np.median([len(g) for g in cand.groups]))
    n_syn = settings.shadow_fingers or max(n_mem - n_cand // 2, n_cand // 4, 2)
    rng = np.random.default_rng(settings.seed)
    inclusion = mia.balanced_inclusion(n_cand, settings.shadow_models, rng)
    populations = [synthetic_population(n_syn, imps, seed=10_000 + settings.seed * 100 + k, domain="shadow")
                   for k in range(settings.shadow_models)]
    conditions: list[tuple[str, float, float | None]] = [("no defence", 0.0, None),
                                                         (f"FP-DFSN β = {settings.fpdfsn_beta:g}",
                                                          settings.fpdfsn_beta, None)]
    conditions += [(f"DP-SGD ε ≈ {e:g}", 0.0, e) for e in settings.dp_epsilons]
    rows, curves = [], {}
    for label, beta, eps in conditions:
        t0 = time.perf_counter()
        clients = raw if beta == 0 else build_clients(cfg, cache=False, input_size=size, beta=beta, records=records,
                                                        progress=progress)
        images, pairs = union(clients)
        net, acc = train_model(images, pairs, cfg=train_cfg, dp_epsilon=eps, progress=progress, **model_kw)
        eer = float(np.mean([evaluate_on_pairs(net, c)[0]["eer"] for c in clients]))
        stats = mia.model_statistics(net, query, cand.groups, margin=train_cfg.margin)
        scores = mia.attack_scores(stats)
        shadow = _shadow_stats(cand, query, populations, inclusion, spec=spec, fp=fpdfsn_params(cfg, beta),
                               model_kw=model_kw, cfg=train_cfg, max_impostors=cfg.data.max_impostors,
                               dp_epsilon=eps, seed=settings.seed, progress=progress)
        scores.update(mia.lira_scores(mia.lira_statistic(stats), shadow, inclusion))
        metrics = {a: mia.mia_metrics(s, cand.is_member, seed=settings.seed) for a, s in scores.items()}
        rows.append({"condition": label, "beta": beta, "target_epsilon": eps,
                     "epsilon": None if acc is None else acc["epsilon"],
                     "delta": None if acc is None else acc["delta"],
                     "noise_multiplier": None if acc is None else acc["noise_multiplier"],
                     "test_eer": eer, "seconds": time.perf_counter() - t0, "attacks": metrics})
        curves[label] = {a: (s, cand.is_member) for a, s in scores.items()}
    setup = {"input_size": size, "epochs": int(epochs), "encoder": cfg.model.encoder,
             "max_pairs_per_epoch": train_cfg.max_pairs_per_epoch, "members": n_mem,
             "nonmembers": n_cand - n_mem, "shadow_models": settings.shadow_models,
             "shadow_synthetic_fingers": n_syn, "shadow_impressions": imps,
             "shadow_candidates_in": int(inclusion.sum(0)[0])}
    return {"conditions": rows, "curves": curves, "setup": setup}


def attack_run_models(info: RunInfo, *, records: list[FingerprintRecord] | None = None, progress: bool = False
                      ) -> tuple[list[dict], dict]:
    """Shadow-free attacks (Yeom distance / loss, compactness) on the run's own checkpoint(s), raw queries."""
    clients = build_clients(info.cfg, cache=False, beta=0.0, records=records, progress=progress)
    # checkpoint file names spell ':' as '_' (server.train_run), so accept both spellings
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


# -------------------------------------------------------------------------------------------- reporting


def _fmt(v: Any) -> Any:
    if v is None:
        return "–"
    if isinstance(v, float | np.floating):
        return f"{v:.3f}"
    return v


def _mia_rows(rows: list[dict], key: str) -> list[dict]:
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


def _table6(rows: list[dict]) -> list[dict]:
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


def _report(info: RunInfo, out: Path, settings: AuditSettings, run_rows, study, inversion_md: str,
            n_files: int, seconds: float, quick: bool) -> str:
    s = study["setup"] if study else {}
    lines = [f"# Privacy audit of `{info.run_dir.name}`\n",
             f"- run: `{info.run_dir}` ({info.kind} run), read-only: {n_files} files hashed (SHA-256) before "
             "and after the audit — **identical**. This audit directory is a sibling of the run directory, so "
             "the run's own listing is unchanged too.",
             f"- data rebuilt from the run's config (sources, partitions, splits, seeds); wall time {seconds:.0f} s"
             + (" (`--quick`)" if quick else ""), ""]
    if run_rows is not None:
        lines += ["## Membership inference against the run's checkpoint(s)\n",
                  "Members = training fingers of the clients the model trained on; non-members = their held-out "
                  "(val + test) fingers; queries with raw images. Shadow-free attacks only (LiRA needs shadows "
                  "trained like the target: see the controlled comparison below).\n",
                  markdown_table([{k: _fmt(v) for k, v in r.items()} for r in _mia_rows(run_rows, "model")]),
                  "![MIA ROC, run models](mia_roc_run.png)\n"]
    if study:
        lines += ["## Table 6 — membership inference with vs without FP-DFSN, and with DP-SGD\n",
                  f"Controlled comparison trained **by this audit** on the run's clients (union of their training "
                  f"pairs), same splits and seeds: encoder `{s['encoder']}`, {s['input_size']} px inputs, "
                  f"{s['epochs']} epochs, ≤ {s['max_pairs_per_epoch']} pairs/epoch; {s['members']} member and "
                  f"{s['nonmembers']} non-member fingers. LiRA: {s['shadow_models']} shadow models per "
                  f"condition, each trained like that condition's target (same encoder, epochs, defence; DP "
                  f"shadows at the same ε) on a disjoint synthetic population of {s['shadow_synthetic_fingers']} "
                  f"fingers × {s['shadow_impressions']} impressions plus a balanced half of the candidate fingers "
                  f"({s['shadow_candidates_in']} IN shadows per candidate); pooled variance. FP-DFSN condition: "
                  "target trained on FP-DFSN images, queried with raw prints.\n",
                  "### AUC per condition\n",
                  markdown_table([{k: _fmt(v) for k, v in r.items()} for r in _table6(study["conditions"])]),
                  "### Conditions\n",
                  markdown_table([{k: _fmt(r[k]) for k in ("condition", "target_epsilon", "epsilon", "delta",
                                                           "noise_multiplier", "test_eer", "seconds")}
                                  for r in study["conditions"]]),
                  "DP-SGD: record = pair (client.dp_sgd); a finger spans many pairs, so its own guarantee is "
                  "only group privacy. ε from Opacus's RDP accountant at δ.\n",
                  "### All metrics\n",
                  markdown_table([{k: _fmt(v) for k, v in r.items()} for r in _mia_rows(study["conditions"],
                                                                                           "condition")]),
                  *[f"![MIA ROC {r['condition']}](mia_roc_{i}.png)\n" for i, r in enumerate(study["conditions"])]]
    if run_rows is not None or study:
        lines.append(MIA_DEFINITIONS)
    if inversion_md:
        lines.append(inversion_md)
    return "\n".join(lines) + "\n"


def _inversion_section(info: RunInfo, out: Path, attacks: Sequence[str], records, settings: AuditSettings,
                       quick: bool, progress: bool) -> tuple[str, dict]:
    """Yan et al. 2025 Table 5: gradient inversion / imprint against the run's first checkpoint, on its first client's
    data without FP-DFSN and with FP-DFSN at ``settings.fpdfsn_beta`` (metrics against the RAW images and the
    images trained on), through :func:`attacks.inversion_audit.run_inversion_audit`."""
    if importlib.util.find_spec("attacks.inversion_audit") is None:
        raise ValueError("--attacks imprint/inversion: attacks.inversion_audit is not available")
    from attacks import inversion_audit as inv
    from data.sources import make_partitions

    name, (net, used) = next(iter(info.models.items()))
    cfg = info.cfg
    parts = make_partitions(records, cfg.partition, seed=cfg.run.seed, default_beta=cfg.fpdfsn.beta)
    part = parts[0] if used is None else next(p for p in parts if used[0] in (p.name, p.name.replace(":", "_")))
    kinds = (["imprint", "imprint_fedavg"] if "imprint" in attacks else []) + \
        (["inversion"] if "inversion" in attacks else [])
    budget = ({"batch_sizes": (1, 4), "bins": (64,), "dlg_iterations": 30, "ig_iterations": 100, "ig_restarts": 1}
              if quick else {"batch_sizes": (1, 4, 16), "bins": (64, 256)})
    table, results = [], {}
    for beta in (0.0, settings.fpdfsn_beta):
        fp = fpdfsn_params(cfg, beta)
        client = client_data(cfg, [records[i] for i in part.indices], name=part.name, beta=beta,
                             client_id=part.client_id, cache=False, progress=progress)
        label = "without FP-DFSN" if beta == 0 else f"with FP-DFSN β = {beta:g}"
        res = inv.run_inversion_audit(net, client, [r.image for r in client.records], attacks=kinds,
                                      seed=cfg.run.seed, fpdfsn_params=fp,
                                      fpdfsn_seed=cfg.run.seed + part.client_id, margin=cfg.train.margin,
                                      grid_dir=out / ("grids_raw" if beta == 0 else "grids_fpdfsn"), **budget)
        results[label] = {k: v for k, v in res.items() if k != "examples"}
        table += [{"condition": label, **row} for row in res.get("table", [])]
    write_json(out / "inversion.json", results)
    write_csv(out / "inversion.csv", [{"condition": c, **r} for c, res in results.items() for r in res["rows"]])
    md = ["## Table 5 — gradient inversion / imprint with vs without FP-DFSN\n",
          f"Attacked model: `{name}` (the run's checkpoint), client `{part.name}`; FP-DFSN condition recomputed "
          f"with the run's FP-DFSN parameters at β = {settings.fpdfsn_beta:g} and the client's seed. Metrics "
          "against the RAW image and the image trained on; full rows in inversion.csv.\n",
          markdown_table([{k: _fmt(v) for k, v in r.items()} for r in table])]
    for label, res in results.items():
        md += [f"![{label}]({Path(png).relative_to(out).as_posix()})\n" for png in res.get("grids", [])]
        notes = res.get("notes") if isinstance(res.get("notes"), list) else [res.get("notes")]
        md += [f"- {label}: {note}" for note in notes if note] + [""]
    return "\n".join(md) + "\n", results


def run_audit(run_dir: str | Path, *, attacks: Sequence[str] = ("mia",), out: str | Path | None = None,
              quick: bool = False, settings: AuditSettings | None = None, progress: bool = False) -> Path:
    """Audit ``run_dir`` with the listed attack families; returns the new audit directory (see module doc).

    Parameters
    ----------
    run_dir : path
        A ``fedprint train`` or ``fedprint simulate`` run directory; never modified.
    attacks : sequence of str
        Subset of :data:`AUDIT_ATTACKS`.
    out : path, optional
        Audit directory to create (must not exist or be empty, and must lie outside ``run_dir``); default
        ``<run_dir>-audit-<UTC timestamp>`` next to the run.
    quick : bool
        Use :data:`QUICK` settings (unless ``settings`` is given).
    settings : AuditSettings, optional
        Sizes of the models the audit trains.
    """
    attacks = list(dict.fromkeys(attacks))
    bad = [a for a in attacks if a not in AUDIT_ATTACKS]
    if bad or not attacks:
        raise ValueError(f"--attacks: unknown attack(s) {bad}; expected a comma-separated subset of "
                         f"{','.join(AUDIT_ATTACKS)}")
    t0 = time.perf_counter()
    run_dir = Path(run_dir).resolve()
    info = load_run(run_dir)
    before = hash_tree(run_dir)
    if out is None:
        out_dir = new_run_dir(run_dir.parent, f"{run_dir.name}-audit")
    else:
        out_dir = Path(out).resolve()
        if out_dir == run_dir or run_dir in out_dir.parents:
            raise ValueError(f"--out: {out_dir} lies inside the run directory; an audit must not change the run")
        if out_dir.exists() and any(out_dir.iterdir()):
            raise ValueError(f"--out: {out_dir} exists and is not empty")
        out_dir.mkdir(parents=True, exist_ok=True)
    settings = settings or (QUICK if quick else AuditSettings())
    from data.sources import load_records

    records = load_records(info.cfg.data.sources, progress=progress)
    run_rows = study = None
    inversion_md = ""
    if "mia" in attacks:
        run_rows, run_curves = attack_run_models(info, records=records, progress=progress)
        first = next(iter(run_curves))  # one plot, of the first checkpoint (the table lists all)
        mia.plot_mia_roc(out_dir / "mia_roc_run.png", run_curves[first], title=f"MIA on the run's model {first}")
        if settings.comparison:
            study = membership_study(info.cfg, settings, epochs=settings.epochs or info.epochs_per_client,
                                     records=records, progress=progress)
            for i, r in enumerate(study["conditions"]):
                mia.plot_mia_roc(out_dir / f"mia_roc_{i}.png", study["curves"][r["condition"]],
                                 title=f"MIA — {r['condition']}")
            write_csv(out_dir / "mia.csv", _mia_rows(study["conditions"], "condition"))
        write_json(out_dir / "mia.json", {"run_models": run_rows, "study": None if study is None else
                                          {k: v for k, v in study.items() if k != "curves"}})
    if {"imprint", "inversion"} & set(attacks):
        inversion_md, _ = _inversion_section(info, out_dir, attacks, records, settings, quick, progress)
    after = hash_tree(run_dir)
    if after != before:
        changed = sorted(set(before) ^ set(after) | {k for k in before if before.get(k) != after.get(k)})
        raise RuntimeError(f"audit changed the run directory {run_dir}: {changed[:10]}")
    write_text(out_dir / "audit.md", _report(info, out_dir, settings, run_rows, study, inversion_md,
                                             len(before), time.perf_counter() - t0, quick))
    return out_dir
