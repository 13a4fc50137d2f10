"""``fedprint audit``: privacy attacks against a finished run directory, without modifying it.

What an audit does
------------------
1. Hashes every file of the run directory (SHA-256), reads ``config.json`` and the model files / checkpoints —
   never writes there — and rebuilds the clients' data deterministically from the run's configuration (same
   sources, partitions, splits and seeds). FP-DFSN images come from the experiment's FP-DFSN cache under
   ``run.out`` (outside the run directory), so what the run already computed is reused.
2. Writes into a NEW sibling directory ``<run>-audit-<UTC timestamp>/`` (or ``--out``, which must lie outside
   the run directory): a sibling rather than a subfolder, because a new subfolder would itself change the run
   directory's listing. At the end the hashes are recomputed and must be identical (else the audit fails).
3. Works part by part — membership inference on the run's models, each condition of the controlled comparison,
   each inversion condition — and saves every part (its results, figures and the regenerated ``audit.md``)
   atomically as soon as it finishes (:class:`fedprint.attacks.audit_store.AuditStore`). Stopping an audit loses only
   the
   part in progress; the same command with the same ``--out`` resumes and skips the finished parts.
4. **Membership inference** (:mod:`fedprint.attacks.membership_study`, unit = finger identity): the shadow-free attacks
   against the run's own checkpoint(s), and a controlled comparison (Yan et al. 2025 Table 6 shape) that the
   audit trains itself on the SAME clients, splits and seeds — no defence, FP-DFSN at β = 0.5, DP-SGD at ε ≈ 8
   and ε ≈ 1 — each target trained once and attacked by every attack, LiRA shadows shared by its online /
   offline variants.
5. **Gradient inversion / imprint** (Yan et al. 2025 Table 5 shape) through
   :func:`fedprint.attacks.inversion_audit.run_inversion_audit`, against the run's first checkpoint on its first
   client's data, without FP-DFSN and with FP-DFSN at β = 0.5.
6. **Secure aggregation**: on a run whose ``<method>/final.json`` carries the secure-aggregation statement,
   ``imprint`` also attacks what that server unmasks — the SecAgg+ sum of 3, 5 and 10 clients' updates of the
   tampered model, through the real protocol stages, against every update on its own (the plain run)
   (:mod:`fedprint.attacks.secure_audit`); ``inversion`` also runs DLG / IG on the SecAgg+ sum of n clients'
   FedSGD updates — the gradient of their union batch — against one client's update alone
   (:mod:`fedprint.attacks.secure_inversion`).

Before it starts, the audit prints its expected duration (:func:`estimate_seconds`, from the run's size and a
two-step timing of the encoder on this machine); with progress on, every model it trains shows a bar; with
``--quiet``, one line per finished part.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from fedprint.attacks import membership as mia
from fedprint.attacks import membership_study as ms
from fedprint.attacks.audit_report import (
    MIA_DEFINITIONS,
    client_dp_section,
    comparison_section,
    fmt,
    inversion_section,
    mia_rows,
    run_models_section,
    secure_inversion_section,
    secure_inversion_summary_line,
    secure_mia_paragraph,
    secure_section,
    secure_summary_line,
    summary_section,
    timing_section,
)
from fedprint.attacks.audit_store import AuditStore
from fedprint.attacks.run_loading import RunInfo, hash_tree, load_run
from fedprint.attacks.shadow_population import NATURAL_PATTERNS, synthetic_population
from fedprint.config import FEDERATED
from fedprint.config.rundir import new_run_dir, report_provenance
from fedprint.data.atomic_io import write_csv, write_json, write_text
from fedprint.models.preprocess import InputSpec, prepare
from fedprint.models.siamese import new_encoder
from fedprint.training.experiment_data import client_data, fpdfsn_params
from fedprint.training.local_data import apply_fpdfsn

__all__ = ["AUDIT_ATTACKS", "AuditSettings", "QUICK", "NATURAL_PATTERNS", "RunInfo", "estimate_seconds",
           "hash_tree", "load_run", "mia", "run_audit", "synthetic_population"]

#: Attack families ``fedprint audit --attacks`` accepts.
AUDIT_ATTACKS = ("imprint", "inversion", "mia", "client-dp")

#: Seconds of one inversion condition (without or with FP-DFSN) measured on the demo run, 2 cores:
#: (imprint, inversion) x (quick, default). Used only for the printed estimate.
INVERSION_SECONDS = {("imprint", True): 15.0, ("inversion", True): 30.0,
                     ("imprint", False): 60.0, ("inversion", False): 400.0}


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
        Target ε of the DP-SGD conditions (δ = Opacus default of fedprint.training.dp_sgd: largest power of ten <
        1/pairs);
        empty = no DP-SGD condition.
    max_pairs_per_epoch : int or None
        Cap on training pairs per epoch of the audit's own models (the smaller of this and the run's cap);
        default 1000. It bounds the pair-by-pair DP-SGD comparison models, which dominate the audit's time
        (the P x K trainer's epochs cover every training finger regardless).
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
    max_pairs_per_epoch: int | None = 1000
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


#: ``--quick``: the run's own input pipeline and initial model, 2 epochs, 2 shadows, 300 DP pairs per epoch and one
#: DP-SGD condition (ε ≈ 8). Sized so the quick audit of ``fedprint demo`` finishes in about 5 minutes on 2 cores.
QUICK = AuditSettings(shadow_models=2, epochs=2, input_size=None, max_pairs_per_epoch=300, dp_epsilons=(8.0,))


# --------------------------------------------------------------------------------------------- planning


#: Name of the audit part that attacks what a secure-aggregation server unmasks.
SECURE_PART = "imprint: secure aggregate"
#: Name of the part that runs the optimisation attacks (DLG / IG) on that sum.
SECURE_INVERSION_PART = "inversion: secure aggregate"


def _plan(attacks: Sequence[str], settings: AuditSettings, secure: bool = False) -> list[str]:
    parts = []
    if "mia" in attacks:
        parts.append("mia: run models")
        if settings.comparison:
            parts += [f"mia: {label}" for label, _, _ in ms.conditions(settings.fpdfsn_beta, settings.dp_epsilons)]
    if {"imprint", "inversion"} & set(attacks):
        parts += ["inversion: without FP-DFSN", f"inversion: with FP-DFSN β = {settings.fpdfsn_beta:g}"]
    if "imprint" in attacks and secure:
        parts.append(SECURE_PART)
    if "inversion" in attacks and secure:
        parts.append(SECURE_INVERSION_PART)
    if "client-dp" in attacks:
        parts.append("client-dp: canaries")
    return parts


#: Most releases one canary of the client-DP audit takes part in (the audit runs the aggregator trials x rounds
#: times, ~0.4 ms each: 20,000 x 10 is about 90 s).
CANARY_MAX_ROUNDS = 10


def _client_dp_finals(run_dir: Path) -> list[Path]:
    """``<method>/final.json`` of every method of a run that used client-level DP."""
    return [f for f in sorted(Path(run_dir).glob("*/final.json"))
            if (json.loads(f.read_text()).get("privacy") or {}).get("level") == "client"]


def secure_methods(run_dir: Path) -> dict[str, dict]:
    """Method -> the secure-aggregation statement of its ``final.json``, for every method of a simulate / ``flwr run``
    run that ran under ``[federation] secure_aggregation``."""
    out = {}
    for f in sorted(Path(run_dir).glob("*/final.json")):
        try:
            statement = json.loads(f.read_text()).get("secure_aggregation")
        except (OSError, ValueError):
            continue
        if isinstance(statement, dict):
            out[f.parent.name] = statement
    return out


def check_attacks_apply(run_dir: Path, attacks: Sequence[str]) -> None:
    """Refuse an attack that does not apply to the run (``client-dp`` on a run without client-level DP)."""
    if "client-dp" in attacks and not _client_dp_finals(run_dir):
        raise ValueError(f"--attacks client-dp: no method of {Path(run_dir).name} used client-level DP ([dp] level "
                         "= \"client\"), so there is nothing to audit; leave client-dp out")


def _client_dp_part(info: RunInfo) -> dict:
    """Replace-one canary audit (:func:`fedprint.attacks.one_run_audit.audit_client_dp_release`) of every client-level
    DP
    method of a simulate run: the real DP-AFFR aggregator with the run's own z, C and the cohort weights of its
    most concentrated release (``checkpoint/dp_releases.json``; older runs: the weights in ``rounds.json``); each
    canary takes part in k releases (:func:`fedprint.attacks.audit_power.choose_rounds`, at most the run's rounds
    and :data:`CANARY_MAX_ROUNDS`) and the claimed ε it is compared with is that of k releases. Every row carries
    the audit's power at the run's z: the smallest noise shortfall it catches with probability >= 0.9."""
    from fedprint.attacks.audit_power import choose_rounds
    from fedprint.attacks.one_run_audit import audit_client_dp_release
    from fedprint.privacy.client_dp import client_epsilon
    from fedprint.server.checkpoint import load_releases

    rows = []
    for final_path in _client_dp_finals(info.run_dir):
        p = json.loads(final_path.read_text()).get("privacy") or {}
        releases = load_releases(final_path.parent)
        cohorts = [r["weights"] for r in releases if r.get("weights")]
        if not cohorts:
            rounds = json.loads((final_path.parent / "rounds.json").read_text())
            cohorts = [{str(i): c["alpha"] for i, c in enumerate(r["clients"]) if isinstance(c.get("alpha"), float)
                        and c["alpha"] == c["alpha"]} for r in rounds]
            cohorts = [c for c in cohorts if c] or [{"only": 1.0}]
        weights = max(cohorts, key=lambda w: max(w.values()))
        z = p["noise_multiplier"]
        k = choose_rounds(z, available=max(int(p.get("rounds") or 1), 1), max_rounds=CANARY_MAX_ROUNDS)
        res = audit_client_dp_release(
            noise_multiplier=z, clip=p["clip"], weights=weights,
            claimed_epsilon=client_epsilon(z, None, k, p["delta"]), delta=p["delta"],
            rng=np.random.default_rng(), rounds=k)
        power = res["power"]
        shortfall = power["detectable_shortfall"]
        rows.append({"method": final_path.parent.name, "claimed ε (run)": p["epsilon"], "z": z,
                     "rounds / canary": k, "claimed ε (audited releases)": res["claimed_epsilon"],
                     "ε_lb (audited releases)": res["epsilon_lb"],
                     "ε_lb cap (resolution)": res["max_bound"], "canary weight": res["canary_weight"],
                     "correct / guesses": f"{res['correct']}/{res['guesses']}", "canaries": res["canaries"],
                     "confidence": res["confidence"],
                     "power: shortfall caught (p ≥ 0.9)": "none" if shortfall is None else f"≥ {shortfall:.0%}",
                     "power: half noise caught (p)": power["half_noise_detection"],
                     "verdict": "ok" if res["ok"] else "VIOLATION"})
    return {"rows": rows}


def _images_per_second(info: RunInfo, size: int) -> float:
    """Training throughput of the run's encoder at ``size`` px on this machine (two timed steps of 32 images)."""
    cfg = info.cfg
    net = new_encoder(cfg.model.encoder, cfg.model.embedding_dim, 0, **cfg.model.encoder_kwargs())
    x = torch.randn(32, 1, size, size)
    net(x).sum().backward()  # warm-up
    t0 = time.perf_counter()
    for _ in range(2):
        net(x).sum().backward()
    return 64 / max(time.perf_counter() - t0, 1e-6)


#: Seconds of the secure-aggregate imprint part (quick, default), measured on a 64 px run on 2 shared cores.
SECURE_SECONDS = {True: 30.0, False: 300.0}
#: Seconds of the secure-aggregate inversion part (quick, default). Quick: 56 s measured on the 128 px demo model
#: (affr, 1 round) on 2 cores under a load that made the Table 5 parts 2.5x slower than INVERSION_SECONDS, so
#: ~25 s unloaded; default: extrapolated from those timings per attack iteration (not measured).
SECURE_INVERSION_SECONDS = {True: 25.0, False: 1200.0}


def estimate_seconds(info: RunInfo, settings: AuditSettings, attacks: Sequence[str], n_images: int,
                     quick: bool, secure: bool = False) -> float:
    """Expected wall time of an audit, in seconds, from the run's size.

    Models to train = conditions x (1 target + shadows); each sees about the run's training images per epoch
    (DP-SGD conditions: 2 x the pair cap, at ~4x the cost per image for per-sample gradients), at the encoder's
    measured throughput; plus the measured cost of each inversion condition (:data:`INVERSION_SECONDS`).
    """
    total = 0.0
    if "mia" in attacks and settings.comparison:
        size = int(settings.input_size or info.cfg.model.input_size)
        rate = _images_per_second(info, size)
        epochs = int(settings.epochs or info.epochs_per_client)
        train_images = 0.7 * n_images  # the default val / test fractions leave ~70 % for training
        per_model = epochs * train_images / rate
        cap = min([c for c in (settings.max_pairs_per_epoch, info.cfg.train.max_pairs_per_epoch) if c] or [5000])
        dp_model = epochs * 2 * cap * 4 / rate
        models = 1 + settings.shadow_models
        total += 2 * models * per_model + len(settings.dp_epsilons) * models * dp_model
    for kind in ("imprint", "inversion"):
        if kind in attacks:
            total += 2 * INVERSION_SECONDS[(kind, quick)]
    if secure and "imprint" in attacks:
        total += SECURE_SECONDS[quick]
    if secure and "inversion" in attacks:
        total += SECURE_INVERSION_SECONDS[quick]
    return total


def _identity(run_dir: Path, before: dict[str, str], attacks: Sequence[str], settings: AuditSettings,
              quick: bool) -> dict:
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    return {"run": str(run_dir), "run_sha256": digest, "attacks": sorted(attacks), "quick": quick,
            "settings": json.loads(json.dumps(asdict(settings)))}


# ------------------------------------------------------------------------------------------------ parts


def _inversion_part(info: RunInfo, out: Path, attacks: Sequence[str], records, beta: float, quick: bool,
                    progress: bool) -> dict:
    """Yan et al. 2025 Table 5, one condition: gradient inversion / imprint against the run's first checkpoint,
    on its first client's data at FP-DFSN β (0 = raw)."""
    if importlib.util.find_spec("fedprint.attacks.inversion_audit") is None:
        raise ValueError("--attacks imprint/inversion: attacks.inversion_audit is not available")
    from fedprint.attacks import inversion_audit as inv
    from fedprint.data.sources import make_partitions

    name, (net, used) = next(iter(info.models.items()))
    cfg = info.cfg
    parts = make_partitions(records, cfg.partition, seed=cfg.run.seed, default_beta=cfg.fpdfsn.beta)
    part = parts[0] if used is None else next(p for p in parts if used[0] in (p.name, p.name.replace(":", "_")))
    kinds = (["imprint", "imprint_fedavg"] if "imprint" in attacks else []) + \
        (["inversion"] if "inversion" in attacks else [])
    budget = ({"batch_sizes": (1, 4), "bins": (64,), "dlg_iterations": 20, "ig_iterations": 60, "ig_restarts": 1}
              if quick else {"batch_sizes": (1, 4, 16), "bins": (64, 256)})
    client = client_data(cfg, [records[i] for i in part.indices], name=part.name, beta=beta,
                         client_id=part.client_id, cache=True, progress=progress)
    # The network sees S x S crops of the print (models.preprocess.prepare); FP-DFSN ran on those crops, for the
    # training split only (fedprint.training.local_data.build_client_data). Compare reconstructions with exactly those.
    spec = cfg.model.input_spec()
    crops = [prepare(r.image, spec, r.dpi) for r in client.records]
    trained = None
    fp = fpdfsn_params(cfg, beta)
    if fp is not None and beta > 0:
        noised, _ = apply_fpdfsn(crops, fp, seed=cfg.run.seed + part.client_id,
                                 cache_dir=Path(cfg.run.out) / ".cache" / "fpdfsn", progress=False)
        train = {int(i) for i in client.split.train}
        trained = [noised[i] if i in train else crops[i] for i in range(len(crops))]
    on_crops = InputSpec(size=spec.size, crop="full", normalization=spec.normalization)  # crops are final
    grid_dir = out / ("grids_raw" if beta == 0 else "grids_fpdfsn")
    res = inv.run_inversion_audit(net, client, crops, attacks=kinds, seed=cfg.run.seed, spec=on_crops,
                                  trained_images=trained, fpdfsn_params=fp, margin=cfg.train.margin,
                                  grid_dir=grid_dir, **budget)
    res = {k: v for k, v in res.items() if k != "examples"}
    res["grids"] = [Path(p).relative_to(out).as_posix() for p in res.get("grids", [])]
    return {"model": name, "client": part.name, "result": res}


def _secure_inputs(info: RunInfo, records, progress: bool) -> dict:
    """What both secure-aggregate parts attack (built once per audit): the secure method's global model and, per
    institution of the run, the raw training prints (β = 0: what secure aggregation alone leaves to the attacker)
    as network inputs, their training pairs and gray references at network resolution."""
    from fedprint.attacks.recon_metrics import gray_at_input_size
    from fedprint.training.experiment_data import build_clients

    cfg, fed = info.cfg, info.cfg.federation
    method = next(iter(secure_methods(info.run_dir)))
    name, (net, _) = next(((k, v) for k, v in info.models.items() if k.split(" (round ", 1)[0] == method),
                          next(iter(info.models.items())))
    spec = cfg.model.input_spec()
    on_crops = InputSpec(size=spec.size, crop="full", normalization=spec.normalization)
    clients = build_clients(cfg, records=records, beta=0.0, cache=True, progress=progress)
    ring = {"clipping_range": fed.secagg_clipping_range, "quantization_range": fed.secagg_quantization_range,
            "num_shares": fed.secagg_num_shares, "threshold": fed.secagg_reconstruction_threshold}
    return {"net": net, "images": [c.images for c in clients], "pairs": [c.train_pairs for c in clients],
            "grays": [gray_at_input_size([prepare(r.image, spec, r.dpi) for r in c.records], on_crops)
                      for c in clients],
            "normalization": spec.normalization, "ring": ring,
            "header": {"model": name, "method": method, "institutions": [c.name for c in clients],
                       "lr": cfg.train.lr,
                       "secagg": {"clipping_range": ring["clipping_range"],
                                  "quantization_range": ring["quantization_range"],
                                  "num_shares": ring["num_shares"] or "whole cohort",
                                  "reconstruction_threshold": ring["threshold"] or "majority"}}}


def _secure_imprint_part(info: RunInfo, out: Path, inp: dict, quick: bool) -> dict:
    """The imprint attack on what the server of a secure run unmasks (:mod:`fedprint.attacks.secure_audit`): the
    SecAgg+ sum of 3, 5 and 10 clients' updates of the tampered global model, against every update on its own
    (the plain run), scored against the raw prints of the run's institutions (``inp``: :func:`_secure_inputs`)."""
    from fedprint.attacks import secure_audit as sa

    cfg = info.cfg
    budget = ({"batch_sizes": (4,), "bins": (64,), "local": (("sgd", 1),)} if quick else
              {"batch_sizes": (4, 16), "bins": (64, 256), "local": (("sgd", 1), ("adam", 4))})
    res = sa.secure_imprint_audit(inp["net"], inp["images"], inp["pairs"], inp["grays"],
                                  normalization=inp["normalization"], lr=cfg.train.lr, **inp["ring"],
                                  margin=cfg.train.margin, seed=cfg.run.seed, grid_dir=out / "grids_secure",
                                  **budget)
    res["grids"] = [Path(p).relative_to(out).as_posix() for p in res["grids"]]
    return {**inp["header"], "result": res}


#: Budgets of the secure-aggregate inversion part: ``--quick`` attacks the sum of 3 clients' single-pair batches
#: with Inverting Gradients only and one client's gradient alone; the full audit adds 5 clients, DLG, every client
#: alone and the float64 sum, at Table 5's IG budget (300 iterations) and its quick DLG budget (20 L-BFGS
#: iterations; DLG's line searches make it the costlier attack).
SECURE_INVERSION_BUDGET = {
    True: {"client_counts": (3,), "batch_pairs": 1, "attacks": ("ig",), "plain_clients": 1, "unquantised": False,
           "ig_iterations": 60, "ig_restarts": 1},
    False: {"client_counts": (3, 5), "batch_pairs": 1, "attacks": ("dlg", "ig"), "plain_clients": None,
            "unquantised": True, "dlg_iterations": 20, "ig_iterations": 300, "ig_restarts": 1},
}


def _secure_inversion_part(info: RunInfo, out: Path, inp: dict, quick: bool) -> dict:
    """DLG / IG by an honest-but-curious server on what a secure run unmasks (:mod:`fedprint.attacks.
    secure_inversion`): the SecAgg+ sum of n clients' FedSGD updates of the run's global model — the gradient of
    their union batch — against one client's update alone, scored against the raw prints."""
    from fedprint.attacks import secure_inversion as si

    cfg = info.cfg
    res = si.secure_inversion_audit(inp["net"], inp["images"], inp["pairs"], inp["grays"],
                                    normalization=inp["normalization"], lr=cfg.train.lr, **inp["ring"],
                                    margin=cfg.train.margin, seed=cfg.run.seed,
                                    grid_dir=out / "grids_secure_inversion", **SECURE_INVERSION_BUDGET[quick])
    res["grids"] = [Path(p).relative_to(out).as_posix() for p in res["grids"]]
    return {**inp["header"], "result": res}


# --------------------------------------------------------------------------------------------- reporting


def unaudited_methods(info: RunInfo) -> list[str]:
    """Federated methods the run's ``config.json`` lists whose global model (``<method>/checkpoint/``) is not in the
    run directory: the audit cannot attack them, and says so instead of leaving them out in silence."""
    if info.kind != "simulate":
        return []
    try:
        listed = json.loads((info.run_dir / "config.json").read_text()).get("methods") or []
    except (OSError, ValueError):
        return []
    loaded = {name.split(" (round ", 1)[0] for name in info.models}
    return [m for m in listed if isinstance(m, str) and (m in FEDERATED or m.startswith("affr-d")) and m not in loaded]


def _render(info: RunInfo, store: AuditStore, plan: list[str], settings: AuditSettings, *, n_files: int,
            checked: bool, estimate: float | None, quick: bool) -> None:
    """Rewrite audit.md, mia.json/csv and inversion.json/csv from the finished parts (atomically)."""
    out = store.out
    done = {p: store.result(p) for p in plan if store.done(p)}
    missing = [p for p in plan if p not in done]
    status = ("**identical** before and after the audit" if checked else
              "checked again when the audit finishes")
    lines = [f"# Privacy audit of `{info.run_dir.name}`\n",
             f"- run: `{info.run_dir}` ({info.kind} run), read-only: {n_files} files hashed (SHA-256) — {status}. "
             "This audit directory is a sibling of the run directory, so the run's own listing is unchanged too.",
             "- data rebuilt from the run's config (sources, partitions, splits, seeds)"
             + (" (`--quick`)" if quick else ""),
             f"- parts finished: {len(done)} of {len(plan)}"
             + (f"; **still to run:** {', '.join(missing)} — re-run the same command with `--out {out}` to "
                "resume" if missing else ""), ""]
    header_end = len(lines)
    run_rows = done.get("mia: run models", {}).get("rows")
    labels = [p[len("mia: "):] for p in plan if p.startswith("mia: ") and p != "mia: run models"]
    cond = [done[f"mia: {c}"] for c in labels if f"mia: {c}" in done]
    if run_rows is not None:
        lines.append(run_models_section(run_rows))
    if labels:
        setup = cond[0]["setup"] if cond else None
        if setup:
            lines.append(comparison_section(setup, [c["row"] for c in cond], labels, ms.DP_RNG_NOTE))
        else:
            lines.append("## Table 6 — membership inference with vs without FP-DFSN, and with DP-SGD\n\n"
                         "(no condition finished yet)\n")
    if run_rows is not None or cond:
        lines.append(MIA_DEFINITIONS)
        write_json(out / "mia.json", {"run_models": run_rows, "study": None if not cond else
                                      {"conditions": [c["row"] for c in cond], "setup": cond[0]["setup"]}})
        if cond:
            write_csv(out / "mia.csv", mia_rows([c["row"] for c in cond], "condition"))
    secure_res = done.get(SECURE_PART)
    inv = {p[len("inversion: "):]: done[p] for p in plan
           if p.startswith("inversion: ") and p != SECURE_INVERSION_PART and p in done}
    if inv:
        first = next(iter(inv.values()))
        results = {label: v["result"] for label, v in inv.items()}
        lines.append(inversion_section(first["model"], first["client"], settings.fpdfsn_beta, results))
        if info.cfg.train.loss != "contrastive":
            lines.append(f"The run trained with `[train] loss = \"{info.cfg.train.loss}\"`; the attacks above invert "
                         "gradients of Eq. 1 on pairs, so they bound what a server learns from such gradients, not "
                         "from this run's own updates.\n")
        write_json(out / "inversion.json", results)
        write_csv(out / "inversion.csv", [{"condition": c, **r} for c, res in results.items() for r in res["rows"]])
    if secure_res is not None:
        lines.append(secure_section(secure_res))
        write_json(out / "secure_aggregate.json", secure_res)
        write_csv(out / "secure_aggregate.csv", secure_res["result"]["rows"])
    secure_inv = done.get(SECURE_INVERSION_PART)
    if secure_inv is not None:
        lines.append(secure_inversion_section(secure_inv))
        write_json(out / "secure_inversion.json", secure_inv)
        write_csv(out / "secure_inversion.csv", secure_inv["result"]["rows"])
    secure_parts = [p for p in (secure_res, secure_inv) if p is not None]
    if secure_parts:  # once, whichever secure part ran: what the MIA rows mean for a secure run
        in_sum = [r["in_sum"] for p in secure_parts for r in p["result"]["rows"] if r.get("in_sum")]
        lines.append(secure_mia_paragraph(secure_parts[0]["secagg"], in_sum, run_rows))
    inv_results = {label: v["result"] for label, v in inv.items()}
    client_rows = done["client-dp: canaries"]["rows"] if "client-dp: canaries" in done else None
    summary = summary_section(run_rows, [c["row"] for c in cond], inv_results, client_rows, missing)
    absent = unaudited_methods(info)
    if absent:  # first in the summary: what the verdicts below do not cover
        summary = summary.replace("## Summary\n", f"## Summary\n\n- **not audited: {', '.join(absent)}** — the run "
                                  "lists these methods but holds no model or checkpoint of them "
                                  "(`<method>/checkpoint/`); every verdict below is of the other models only\n", 1)
    if secure_inv is not None:
        summary = summary.replace("## Summary\n", "## Summary\n\n" + secure_inversion_summary_line(secure_inv), 1)
    if secure_res is not None:
        summary = summary.replace("## Summary\n", "## Summary\n\n" + secure_summary_line(secure_res), 1)
    lines.insert(header_end, summary)
    if client_rows is not None:
        lines.append(client_dp_section(client_rows))
    lines.append(timing_section(store.parts, estimate))
    lines.append(report_provenance(out))
    write_text(out / "audit.md", "\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------------- main


def run_audit(run_dir: str | Path, *, attacks: Sequence[str] = ("mia",), out: str | Path | None = None,
              quick: bool = False, settings: AuditSettings | None = None, progress: bool = False,
              echo: Callable[[str], None] = print) -> Path:
    """Audit ``run_dir`` with the listed attack families; returns the audit directory (see module doc).

    Parameters
    ----------
    run_dir : path
        A ``fedprint train`` or ``fedprint simulate`` run directory; never modified.
    attacks : sequence of str
        Subset of :data:`AUDIT_ATTACKS`.
    out : path, optional
        Audit directory: new, empty, or an earlier audit of the same run with the same attacks and settings
        (resumed: its finished parts are kept). Must lie outside ``run_dir``. Default
        ``<run_dir>-audit-<UTC timestamp>`` next to the run.
    quick : bool
        Use :data:`QUICK` settings (unless ``settings`` is given) and a small inversion budget.
    settings : AuditSettings, optional
        Sizes of the models the audit trains.
    progress : bool
        Progress bars for every model trained; without them, ``echo`` still reports each finished part.
    echo : callable
        Where the one-line messages go (start estimate, each finished part).
    """
    attacks = list(dict.fromkeys(attacks))
    bad = [a for a in attacks if a not in AUDIT_ATTACKS]
    if bad or not attacks:
        raise ValueError(f"--attacks: unknown attack(s) {bad}; expected a comma-separated subset of "
                         f"{','.join(AUDIT_ATTACKS)}")
    run_dir = Path(run_dir).resolve()
    info = load_run(run_dir)
    check_attacks_apply(run_dir, attacks)
    if {"imprint", "inversion"} & set(attacks):  # before any work or audit folder
        from fedprint.attacks.recon_metrics import check_invertible

        check_invertible(info.cfg.model.normalization)
    before = hash_tree(run_dir)
    settings = settings or (QUICK if quick else AuditSettings())
    if out is not None:
        out_dir = Path(out).resolve()
        if out_dir == run_dir or run_dir in out_dir.parents:
            raise ValueError(f"--out: {out_dir} lies inside the run directory; an audit must not change the run")
        if out_dir.exists() and not out_dir.is_dir():
            raise ValueError(f"--out {out_dir}: exists and is not a folder")
    else:
        out_dir = new_run_dir(run_dir.parent, f"{run_dir.name}-audit")
    store = AuditStore(out_dir, _identity(run_dir, before, attacks, settings, quick))
    secure = bool(secure_methods(run_dir))
    plan = _plan(attacks, settings, secure=secure)
    from fedprint.data.sources import load_records

    records = load_records(info.cfg.data.sources, progress=progress)
    estimate = estimate_seconds(info, settings, attacks, len(records), quick, secure=secure)
    left = [p for p in plan if not store.done(p)]
    absent = unaudited_methods(info)
    if absent:
        echo(f"audit of {run_dir.name}: NOT audited (listed in config.json, no model or checkpoint in the run): "
             f"{', '.join(absent)}; the summary says so")
    echo(f"audit of {run_dir.name}: {len(plan)} parts ({len(plan) - len(left)} already done); expected "
         f"duration ~{max(estimate, 1) / 60:.0f} min on this machine (estimate from the run's size). "
         f"Interrupted? The same command with --out {out_dir} resumes.")
    study = secure_inputs = None
    for name in plan:
        if store.done(name):
            continue
        t0 = time.perf_counter()
        if name == "mia: run models":
            rows, curves = ms.attack_run_models(info, records=records, progress=progress)
            first = next(iter(curves))  # one plot, of the first checkpoint (the table lists all)
            mia.plot_mia_roc(out_dir / "mia_roc_run.png", curves[first], title=f"MIA on the run's model {first}")
            result: dict = {"rows": rows}
        elif name.startswith("mia: "):
            if study is None:
                study = ms.prepare_study(info.cfg, records=records, epochs=settings.epochs or info.epochs_per_client,
                                         input_size=settings.input_size,
                                         max_pairs_per_epoch=settings.max_pairs_per_epoch,
                                         shadow_models=settings.shadow_models, shadow_fingers=settings.shadow_fingers,
                                         seed=settings.seed, progress=progress)
            conds = ms.conditions(settings.fpdfsn_beta, settings.dp_epsilons)
            i, (label, beta, eps) = next((i, c) for i, c in enumerate(conds) if f"mia: {c[0]}" == name)
            row, curves = ms.run_condition(study, label, beta, eps, progress=progress)
            mia.plot_mia_roc(out_dir / f"mia_roc_{i}.png", curves, title=f"MIA — {label}")
            result = {"row": row, "setup": study.setup}
        elif name == "client-dp: canaries":
            result = _client_dp_part(info)
        elif name in (SECURE_PART, SECURE_INVERSION_PART):
            if secure_inputs is None:  # one build of the institutions' raw prints for both secure parts
                secure_inputs = _secure_inputs(info, records, progress)
            part = _secure_imprint_part if name == SECURE_PART else _secure_inversion_part
            result = part(info, out_dir, secure_inputs, quick)
        else:
            beta = 0.0 if name == "inversion: without FP-DFSN" else settings.fpdfsn_beta
            result = _inversion_part(info, out_dir, attacks, records, beta, quick, progress)
        seconds = time.perf_counter() - t0
        store.save(name, result, seconds)
        _render(info, store, plan, settings, n_files=len(before), checked=False, estimate=estimate, quick=quick)
        echo(f"[audit] {name}: done in {seconds:.0f} s{_headline(result)}")
    after = hash_tree(run_dir)
    if after != before:
        changed = sorted(set(before) ^ set(after) | {k for k in before if before.get(k) != after.get(k)})
        raise RuntimeError(f"audit changed the run directory {run_dir}: {changed[:10]}")
    _render(info, store, plan, settings, n_files=len(before), checked=True, estimate=estimate, quick=quick)
    return out_dir


def _headline(result: dict) -> str:
    """A short summary of a finished part for its one-line message."""
    if "row" in result:
        aucs = [m["auc"] for m in result["row"]["attacks"].values()]
        return f" (test EER {fmt(result['row']['test_eer'])}, best attack AUC {max(aucs):.3f})"
    if "rows" in result and all("verdict" in r for r in result["rows"]):
        return "".join(f" ({r['method']}: ε_lb {r['ε_lb (audited releases)']:.2f} vs claimed "
                       f"{r['claimed ε (audited releases)']:.2f} over {r['rounds / canary']} release(s), "
                       f"{r['verdict']}; power: catches a noise shortfall "
                       f"{r['power: shortfall caught (p ≥ 0.9)']} with p ≥ 0.9)" for r in result["rows"]) or \
            " (no client-level DP method in this run)"
    if "rows" in result:
        aucs = [m["auc"] for r in result["rows"] for m in r["attacks"].values()]
        return f" (best attack AUC {max(aucs):.3f})" if aucs else ""
    return ""


