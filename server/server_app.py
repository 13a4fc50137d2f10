"""FedPrint Flower ServerApp: AFFR or a Flower baseline strategy, per-round checkpoints, logs and resume.

The strategy is chosen by name (run config ``strategy``): ``"affr"`` (:class:`fedprint.server.affr.AFFR`), ``"fedavg"``
and ``"fedprox"`` (Flower's own ``FedAvg`` / ``FedProx``; μ from ``proximal-mu``), and the personalised
baselines ``"fedala"``, ``"feddbe"``, ``"fedas"`` (:mod:`fedprint.server.personalized`; their clients evaluate their own
personalised models, the exported ``model.pt`` is the global one). Every strategy is wrapped
by :class:`RoundRecorder`, which records each node's train / evaluate reply (metrics, identity, errors,
missing replies) without changing what the strategy aggregates.

After every round (Flower's ``evaluate_fn`` hook, called once the round's client evaluation is done) the app
writes atomically into its run directory:

* ``checkpoint/`` — global arrays + strategy state (AFFR ``state_dict``) + the round log
  (:mod:`fedprint.server.checkpoint`);
* ``clients.csv`` — one row per (round, node): gap, α_i, val accuracies, loss, test metrics, status;
* ``rounds.csv`` / ``rounds.json`` — one row per round: mean test accuracy / EER, replies, timings;
* ``final.json`` (at the end) — the final global model's per-client test metrics and failed / dropped nodes.

A run directory that already holds a checkpoint is resumed (run config ``resume = true``, the default): the
global model and the AFFR state are restored and only the remaining rounds run (numbered on from the
checkpoint). Run config keys (flat, all optional): see :class:`fedprint.config.app.ServerSettings`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from logging import INFO, WARNING
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg, FedProx

from fedprint.config import PERSONALIZED, FederationConfig
from fedprint.config.app import ServerSettings, experiment, server_settings
from fedprint.config.experiment import DPSection
from fedprint.config.provenance import provenance
from fedprint.config.rundir import new_run_dir
from fedprint.data.atomic_io import atomic_write_bytes, write_csv, write_json
from fedprint.models.model_file import model_bytes, weighted_threshold
from fedprint.privacy.client_dp import calibrate
from fedprint.server.affr import AFFR
from fedprint.server.checkpoint import append_release, load_checkpoint, load_releases, save_checkpoint
from fedprint.server.dp_affr import DPAFFR, refuse_client_dp_method
from fedprint.server.personalized import FedALA, FedAS, FedDBE
from fedprint.server.secagg_protocol import SecAggParams
from fedprint.server.secure_strategy import DistributedDP, SecureAggregation

STRATEGIES = ("affr", "fedavg", "fedprox", "fedala", "feddbe", "fedas")


class RoundRecorder:
    """Mixin recording every node's replies per round (put it before the strategy class in the bases).

    ``rec_offset`` is added to Flower's 1-based ``server_round`` to give the round of the schedule (resume);
    ``cfg_offset`` is added to the round sent to clients (``server-round``) for strategies that do not do
    that themselves (AFFR already adds its ``round_offset``).
    """

    rec_offset: int = 0
    cfg_offset: int = 0

    def _log_entry(self, t: int) -> dict[str, Any]:
        log_ = self.__dict__.setdefault("round_log", {})
        return log_.setdefault(t, {"round": t, "sent_train": [], "sent_evaluate": [], "train": {},
                                   "evaluate": {}, "started": time.perf_counter()})

    @property
    def identities(self) -> dict[int, dict[str, Any]]:
        return self.__dict__.setdefault("_identities", {})

    def _record(self, t: int, stage: str, replies: list[Message]) -> None:
        entry = self._log_entry(t)
        # Errors the SuperLink makes up for a node (e.g. "Node Unavailable") come from the SuperLink's own node
        # id; the message they reply to names the node they are about. Ids are set when the grid pushes.
        sent = {m.metadata.message_id: int(m.metadata.dst_node_id) for m in entry.pop(f"_msgs_{stage}", [])}
        for msg in replies:
            node = sent.get(msg.metadata.reply_to_message_id, int(msg.metadata.src_node_id))
            if msg.has_error():
                entry[stage][node] = {"status": f"error: {msg.error.reason}"}
                continue
            if not msg.has_content():
                entry[stage][node] = {"status": "empty reply"}
                continue
            who = msg.content.config_records.get("client")
            if isinstance(who, ConfigRecord):
                self.identities[node] = {k: who[k] for k in who}
            metrics = next(iter(msg.content.metric_records.values()), MetricRecord())
            entry[stage][node] = {"status": "ok", **{k: metrics[k] for k in metrics}}

    def _with_method(self, config: ConfigRecord) -> ConfigRecord:
        """``config`` plus what a personalised strategy tells its clients (``client_config()``, if any)."""
        extra = self.client_config() if hasattr(self, "client_config") else {}
        return ConfigRecord({**{k: config[k] for k in config}, **extra}) if extra else config

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        t = server_round + self.rec_offset
        entry = self._log_entry(t)
        entry["started"] = time.perf_counter()
        msgs = list(super().configure_train(server_round + self.cfg_offset, arrays, self._with_method(config), grid))
        entry["sent_train"] = [int(m.metadata.dst_node_id) for m in msgs]
        entry["_msgs_train"] = msgs
        return msgs

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        msgs = list(super().configure_evaluate(server_round + self.cfg_offset, arrays, self._with_method(config),
                                               grid))
        entry = self._log_entry(server_round + self.rec_offset)
        entry["sent_evaluate"] = [int(m.metadata.dst_node_id) for m in msgs]
        entry["_msgs_evaluate"] = msgs
        return msgs

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        replies = list(replies)
        t = server_round + self.rec_offset
        self._record(t, "train", replies)
        t0 = time.perf_counter()
        out = super().aggregate_train(server_round, replies)
        self._log_entry(t)["aggregate_seconds"] = time.perf_counter() - t0
        return out

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]):
        replies = list(replies)
        self._record(server_round + self.rec_offset, "evaluate", replies)
        return super().aggregate_evaluate(server_round, replies)


class RecordedAFFR(RoundRecorder, AFFR):
    """AFFR with per-round reply records."""


class RecordedFedAvg(RoundRecorder, FedAvg):
    """Flower FedAvg with per-round reply records."""


class RecordedFedProx(RoundRecorder, FedProx):
    """Flower FedProx with per-round reply records."""


class RecordedDPAFFR(RoundRecorder, DPAFFR):
    """Client-level DP AFFR / DP-FedAvg (``step = 0``) with per-round reply records."""


class RecordedFedALA(RoundRecorder, FedALA):
    """FedALA (server: FedAvg; clients: adaptive local aggregation) with per-round reply records."""


class RecordedFedDBE(RoundRecorder, FedDBE):
    """FedDBE (FedAvg + global representation mean) with per-round reply records."""


class RecordedFedAS(RoundRecorder, FedAS):
    """FedAS (Fisher-weighted FedAvg; clients: parameter alignment) with per-round reply records."""


class SecureRecordedAFFR(RoundRecorder, SecureAggregation, AFFR):
    """AFFR under secure aggregation (:mod:`fedprint.server.secure_strategy`) with per-round reply records."""


class SecureRecordedFedAvg(RoundRecorder, SecureAggregation, FedAvg):
    """Flower FedAvg under secure aggregation with per-round reply records."""


class SecureRecordedFedProx(RoundRecorder, SecureAggregation, FedProx):
    """Flower FedProx under secure aggregation with per-round reply records."""


def _dp_multipliers(dp: DPSection, num_rounds: int, affr_step: float) -> tuple[float, float | None, float]:
    """(z, z_g, δ) of a client-level DP run: calibrated to ``target_epsilon`` or as given (z defaults to 1)."""
    delta = dp.delta or 1e-5
    if dp.target_epsilon is not None:
        z, zg = calibrate(dp.target_epsilon, delta, num_rounds, None if affr_step == 0 else dp.gap_noise_ratio)
    else:
        z = dp.noise_multiplier if dp.noise_multiplier is not None else 1.0
        zg = None if affr_step == 0 else dp.gap_noise_ratio * z
    return z, zg, delta


def build_secure_strategy(name: str, *, num_rounds: int, step: float, proximal_mu: float, fed: FederationConfig,
                          common: dict[str, Any], dp: DPSection | None, timeout: float) -> RoundRecorder:
    """fedavg / fedprox / affr under SecAgg+; ``[dp] level = "client"`` becomes distributed DP (fedavg, affr)."""
    if name in PERSONALIZED:
        raise ValueError(f"[federation] secure_aggregation: {name} needs every client's own arrays on the server "
                         "(personalised aggregation), which secure aggregation hides; use fedavg, fedprox or affr")
    params = SecAggParams(num_shares=fed.secagg_num_shares, threshold=fed.secagg_reconstruction_threshold,
                          clipping_range=fed.secagg_clipping_range,
                          quantization_range=fed.secagg_quantization_range, timeout=timeout)
    ddp = None
    if dp is not None and dp.enabled and dp.level == "client":
        if name == "fedprox":
            raise ValueError("[dp] level = \"client\": distributed DP is implemented for fedavg and affr, not fedprox")
        affr_step = step if name == "affr" else 0.0
        z, zg, delta = _dp_multipliers(dp, num_rounds, affr_step)
        ddp = DistributedDP(noise_multiplier=z, gap_noise_multiplier=zg, clip=dp.client_clip,
                            alpha_cap=dp.alpha_cap, delta=delta)
        if name == "fedavg":
            return SecureRecordedAFFR(num_rounds=num_rounds, step=0.0, secagg=params, dp=ddp, **common)
    if name == "affr":
        return SecureRecordedAFFR(num_rounds=num_rounds, step=step, noise_floor=fed.gap_noise_floor, secagg=params,
                                  dp=ddp, **common)
    if name == "fedavg":
        return SecureRecordedFedAvg(secagg=params, **common)
    if name == "fedprox":
        return SecureRecordedFedProx(proximal_mu=proximal_mu, secagg=params, **common)
    raise ValueError(f"strategy: expected one of {STRATEGIES}, got {name!r}")


def build_strategy(name: str, *, num_rounds: int, step: float, proximal_mu: float, fed: FederationConfig,
                   min_nodes: int, dp: DPSection | None = None, secure: bool | None = None,
                   timeout: float | None = None) -> RoundRecorder:
    """The named strategy (see module docstring), recording its rounds. With ``[dp] level = "client"`` FedAvg and
    AFFR become :class:`fedprint.server.dp_affr.DPAFFR` (FedAvg = uniform weights, no gap release); every other
    method is refused (:func:`fedprint.server.dp_affr.refuse_client_dp_method`). With secure aggregation
    (``secure``, default ``fed.secure_aggregation``) see :func:`build_secure_strategy`."""
    common = {"fraction_train": fed.fraction_train, "fraction_evaluate": fed.fraction_evaluate,
              "min_train_nodes": min_nodes, "min_evaluate_nodes": min_nodes, "min_available_nodes": min_nodes}
    if dp is not None and dp.enabled and dp.level == "client":
        refuse_client_dp_method(name)  # fedprox, fedala, feddbe, fedas would run as DP-FedAvg under their names
    if fed.secure_aggregation if secure is None else secure:
        return build_secure_strategy(name, num_rounds=num_rounds, step=step, proximal_mu=proximal_mu, fed=fed,
                                     common=common, dp=dp, timeout=timeout or fed.timeout)
    if dp is not None and dp.enabled and dp.level == "client":
        affr_step = step if name == "affr" else 0.0
        z, zg, delta = _dp_multipliers(dp, num_rounds, affr_step)
        return RecordedDPAFFR(num_rounds=num_rounds, step=affr_step, noise_multiplier=z, gap_noise_multiplier=zg,
                              clip=dp.client_clip, alpha_cap=dp.alpha_cap, delta=delta, **common)
    if name == "affr":
        return RecordedAFFR(num_rounds=num_rounds, step=step, noise_floor=fed.gap_noise_floor, **common)
    if name == "fedavg":
        return RecordedFedAvg(**common)
    if name == "fedprox":
        return RecordedFedProx(proximal_mu=proximal_mu, **common)
    personalised = {"fedala": RecordedFedALA, "feddbe": RecordedFedDBE, "fedas": RecordedFedAS}
    if name in personalised:
        return personalised[name](**common)
    raise ValueError(f"strategy: expected one of {STRATEGIES}, got {name!r}")


def _client_name(identities: Mapping[int, Mapping[str, Any]], node: int) -> str:
    return str(identities.get(node, {}).get("name", f"node-{node}"))


def round_rows(strategy: RoundRecorder, t: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Summary row and per-node rows of round ``t`` (AFFR weights and gaps included when present)."""
    entry = strategy.round_log[t]
    hist = {}
    if isinstance(strategy, AFFR) and strategy.history and strategy.history[-1]["round"] == t:
        hist = strategy.history[-1]
    nodes = sorted(set(entry["sent_train"]) | set(entry["train"]) | set(entry["sent_evaluate"])
                   | set(entry["evaluate"]))
    rows = []
    for node in nodes:
        tr, ev = entry["train"].get(node), entry["evaluate"].get(node)
        row: dict[str, Any] = {"round": t, "node": node, "client": _client_name(strategy.identities, node),
                               "train_status": tr["status"] if tr else "no reply",
                               "eval_status": ev["status"] if ev else "no reply"}
        if hist:  # AFFR keys its history by client identity (the name, else node-<id>), as row["client"]
            who = row["client"]
            if who in hist["rejected"]:
                row["train_status"] = f"rejected: {hist['rejected'][who]}"
            row["alpha"] = hist["round_weights"].get(who, float("nan"))
            row["gap_used"] = hist["gaps"].get(who, float("nan"))
        for src in (tr, ev):
            row.update({k: v for k, v in (src or {}).items() if k != "status"})
        rows.append(row)
    evaluated = [r for r in rows if r["eval_status"] == "ok"]
    summary = {
        "round": t,
        "accuracy": float(np.mean([r["accuracy"] for r in evaluated])) if evaluated else float("nan"),
        "eer": float(np.mean([r["eer"] for r in evaluated])) if evaluated else float("nan"),
        "train_ok": sum(r["train_status"] == "ok" for r in rows),
        "eval_ok": len(evaluated),
        "nodes": len(rows),
        "round_seconds": time.perf_counter() - entry["started"],
        "aggregate_seconds": entry.get("aggregate_seconds", float("nan")),
        "step": hist.get("step", float("nan")) if hist else float("nan"),
        "gap_spread": hist.get("max_centred_gap", float("nan")) if hist else float("nan"),
        "gap_se": hist.get("gap_se", float("nan")) if hist else float("nan"),
        "within_noise": hist.get("within_noise") if hist else None,
    }
    sa = getattr(strategy, "secagg_log", {}).get(t)
    if sa is not None:  # secure aggregation: who was in the sum and what the protocol cost
        summary.update(secagg_summary(sa))
    return summary, rows


def secagg_summary(sa: Mapping[str, Any]) -> dict[str, Any]:
    """Round-log columns of a secure round: clients in the sum, status, protocol seconds and payload bytes per
    client (up / down, stages 1–3 plus the key advertisement) beside a plain round's upload."""
    n = max(int(sa["cohort"]), 1)
    up = sum(sa["bytes_up"].values()) + sa["bytes_up_train"]
    down = sum(sa["bytes_down"].values())
    return {"secagg_status": sa["status"], "secagg_cohort": sa["cohort"], "secagg_in_sum": sa["in_sum"],
            "secagg_shares": sa["shares"], "secagg_threshold": sa["threshold"],
            "secagg_dropped": sum(len(v) for v in sa["dropped"].values()),
            "secagg_seconds": float(sum(sa["seconds"].values())),
            "secagg_bytes_up_per_client": up / n, "secagg_bytes_down_per_client": down / n,
            "plain_bytes_up_per_client": sa["plain_bytes_up_per_client"]}


def make_server_app(defaults: Mapping[str, Any] | None = None,
                    on_round: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None) -> ServerApp:
    """A ServerApp whose settings default to ``defaults`` (over the Flower run config).

    Parameters
    ----------
    defaults : mapping, optional
        Run-config keys (see :class:`fedprint.config.app.ServerSettings`) taking precedence over the Flower
        run config; both are converted and validated once, into a ``ServerSettings``, when the app starts.
    on_round : callable, optional
        Called after each round's checkpoint with the round summary and the per-node rows (progress display).
    """
    defaults = dict(defaults or {})
    sapp = ServerApp()

    @sapp.main()
    def main(grid: Grid, context: Context) -> None:
        run_federation(grid, server_settings(context.run_config, defaults), on_round=on_round)

    return sapp


def run_federation(grid: Grid, conf: ServerSettings,
                   on_round: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None) -> Path:
    """Body of the ServerApp: run (or resume) the configured strategy; returns the run directory."""
    cfg, fed, _, _ = experiment(conf)
    name = conf.strategy
    if name not in STRATEGIES:
        raise ValueError(f"strategy: expected one of {STRATEGIES}, got {name!r}")
    total = conf.rounds or fed.rounds
    step = fed.step if conf.step is None else conf.step
    mu = fed.proximal_mu if conf.proximal_mu is None else conf.proximal_mu
    timeout = conf.timeout or fed.timeout
    run_dir = Path(conf.run_dir) if conf.run_dir else new_run_dir(cfg.run.out, f"{cfg.run.name}-{name}")
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "provenance.json").exists():  # a given run-dir (deployment) gets one too
        write_json(run_dir / "provenance.json", provenance())
    secure = fed.secure_aggregation if conf.secure_aggregation is None else conf.secure_aggregation
    strategy = build_strategy(name, num_rounds=total, step=step, proximal_mu=mu, fed=fed,
                              min_nodes=conf.min_nodes, dp=cfg.dp, secure=secure, timeout=timeout)
    distributed = isinstance(strategy, SecureAggregation) and strategy.dp is not None

    if isinstance(strategy, DPAFFR) or distributed:  # every release made in this directory counts, checkpointed or not
        strategy.restore_releases(load_releases(run_dir))
        strategy.on_release = lambda release: append_release(run_dir, release)
    done, past_rounds = 0, []
    ckpt = load_checkpoint(run_dir) if conf.resume else None
    if ckpt is not None:
        state, arrays = ckpt
        if state["strategy"] != name:
            raise ValueError(f"{run_dir}: checkpoint is of strategy {state['strategy']!r}, not {name!r}")
        done, past_rounds = int(state["round"]), list(state["rounds"])
        if hasattr(strategy, "load_state_dict"):
            strategy.load_state_dict(state["strategy_state"])
        if not isinstance(strategy, AFFR):  # AFFR numbers its rounds on itself (round_offset)
            strategy.cfg_offset = done
        strategy.rec_offset = done
        for r in past_rounds:
            strategy.identities.update({int(k): v for k, v in r.get("identities", {}).items()})
        log(INFO, "Resuming %s from %s after round %d of %d", name, run_dir, done, total)
    else:
        arrays = ArrayRecord(cfg.model.new_encoder(cfg.run.seed).state_dict())
    write_json(run_dir / "server_config.json", {"strategy": name, "rounds": total, "step": step,
                                                "proximal_mu": mu, "timeout": timeout, "conf": asdict(conf)})

    rounds = list(past_rounds)

    latest = {"arrays": arrays}

    def after_round(server_round: int, global_arrays: ArrayRecord) -> MetricRecord | None:
        latest["arrays"] = global_arrays
        if server_round == 0:
            return None
        t = server_round + strategy.rec_offset
        summary, rows = round_rows(strategy, t)
        rounds.append({**summary, "clients": rows,
                       "identities": {str(k): v for k, v in strategy.identities.items()}})
        save_checkpoint(run_dir, t, global_arrays, strategy=name,
                        strategy_state=strategy.state_dict() if hasattr(strategy, "state_dict") else None,
                        rounds=rounds)
        _write_logs(run_dir, rounds)
        alpha = {r["client"]: round(r["alpha"], 4) for r in rows if "alpha" in r and math.isfinite(r["alpha"])}
        gaps = {r["client"]: round(r["gap"], 4) for r in rows if "gap" in r}
        log(INFO, "[%s round %d/%d] acc %.4f eer %.4f alpha %s gaps %s", name, t, total,
            summary["accuracy"], summary["eer"], alpha, gaps)
        if on_round is not None:
            on_round({**summary, "method": name, "total": total}, rows)
        return None

    stop = conf.stop_after_round or total
    remaining = min(total, stop) - done
    if remaining > 0:
        strategy.start(grid=grid, initial_arrays=arrays, num_rounds=remaining, timeout=timeout,
                       evaluate_fn=after_round)
    final = write_final(run_dir, name, rounds,
                        privacy=strategy.accounting() if isinstance(strategy, DPAFFR) or distributed else None,
                        secure=secure_statement(strategy) if isinstance(strategy, SecureAggregation) else None)
    if final["rounds"] >= total:
        export_global_model(run_dir / "model.pt", latest["arrays"], cfg, rounds, method=name, final=final)
    if isinstance(strategy, DPAFFR) or distributed:
        write_json(run_dir / "released.json", release_manifest(final["privacy"], exported=final["rounds"] >= total,
                                                               threshold=cfg.dp.threshold))
    return run_dir


def release_manifest(privacy: dict[str, Any], *, exported: bool, threshold: float | None) -> dict[str, Any]:
    """``released.json`` of a client-level DP run: what is released under DP and what is a server-internal record
    that DP does not protect (the split :mod:`fedprint.privacy.client_dp` proves)."""
    thr = (f"the user-set [dp] threshold {threshold:g} (public)" if threshold is not None
           else "none (a threshold fitted on client data would be a release without DP)")
    return {
        "released_under_dp": {
            **({"model.pt": f"final global weights (noisy release of round {privacy['rounds']}); threshold: {thr}; "
                            "no client metrics"} if exported else {}),
            "every global model θ_g^t sent to the clients": "one release per round (dp_releases.json counts them)"},
        "guarantee": privacy,
        "server_internal_unprotected": {
            "rounds.json / rounds.csv / clients.csv": "per-client gaps, gap standard errors, weights, validation "
                                                      "accuracies, losses, test metrics and thresholds as the clients "
                                                      "reported them",
            "final.json": "per-client test metrics of the final model (and the guarantee)",
            "checkpoint/": "server state for resume (weights, history, the release log)"},
    }


def export_global_model(path: Path, arrays: ArrayRecord, cfg: Any, rounds: list[dict[str, Any]], *, method: str,
                        final: dict[str, Any]) -> Path:
    """The final global model as a FedPrint model file (:mod:`fedprint.models.model_file`).

    Its threshold is the mean of the clients' own validation thresholds from the last round's evaluation,
    weighted by their validation pairs (:func:`fedprint.models.model_file.weighted_threshold`): the server holds no
    data.
    Personalised methods export no threshold (their clients validated their own models, not this one). A
    client-level DP run exports only DP-released content: the noisy weights, the user's public ``[dp] threshold``
    (or none) and the guarantee — no client threshold, no per-client metric.
    """
    net = cfg.model.new_encoder(cfg.run.seed)
    net.load_state_dict(arrays.to_torch_state_dict())
    rows = [r for r in (rounds[-1]["clients"] if rounds else []) if r.get("eval_status") == "ok"]
    names = [r["client"] for r in (rounds[-1]["clients"] if rounds else [])]
    if final["privacy"].get("level") in ("client", "distributed"):  # only DP-released content
        threshold, metrics = cfg.dp.threshold, {"privacy": final["privacy"]}
        source = ("set by the user ([dp] threshold), public" if threshold is not None else
                  "none: a client-level DP model carries no threshold fitted on client data; give --threshold, set "
                  "[dp] threshold, or use threshold-free metrics (EER)")
    else:
        metrics = {"test": final["clients"]}
        threshold = weighted_threshold([r.get("threshold", float("nan")) for r in rows],
                                       [r.get("val-pairs", 0) for r in rows])
        source = (f"mean of {len(rows)} clients' validation thresholds weighted by their validation pairs"
                  if threshold is not None else "no client reported one")
        names = [r["client"] for r in rows]
    if method in PERSONALIZED:  # the clients' thresholds fit their personalised models, not this global one
        threshold, source = None, (f"none: {method} clients chose thresholds for their own personalised models; "
                                   "give --threshold, or use threshold-free metrics (EER)")
    data = model_bytes(net, encoder_name=cfg.model.encoder, embedding_dim=cfg.model.embedding_dim,
                       spec=cfg.model.input_spec(), encoder_kwargs=cfg.model.encoder_kwargs(), threshold=threshold,
                       method=method, metrics=metrics, threshold_source=source,
                       data={**cfg.data_summary(), "clients": names}, provenance=provenance())
    return atomic_write_bytes(path, data)


def _write_logs(run_dir: Path, rounds: list[dict[str, Any]]) -> None:
    write_json(run_dir / "rounds.json", rounds)
    write_csv(run_dir / "rounds.csv", [{k: v for k, v in r.items() if k not in ("clients", "identities")}
                                       for r in rounds])
    write_csv(run_dir / "clients.csv", [row for r in rounds for row in r["clients"]])


def secure_statement(strategy: SecureAggregation) -> dict[str, Any]:
    """The trust statement of a secure-aggregation run (``final.json`` ``secure_aggregation``)."""
    p = strategy.secagg
    return {
        "protocol": "SecAgg+ (Bell et al. CCS 2020) on Flower's Message API (fedprint.server.secagg_protocol)",
        "num_shares": p.num_shares or "whole cohort", "reconstruction_threshold": p.threshold or "majority",
        "clipping_range": p.clipping_range, "quantization_range": p.quantization_range,
        "server_sees": "the cohort; every client's scalar metrics (AFFR gaps and their standard errors, which set "
                       "the weights alpha - noised by the clients under distributed DP -, example counts, losses, "
                       "validation accuracies, test metrics, clipped-coordinate counts); who was in each sum; the "
                       "unmasked weighted sum of the updates of at least t clients",
        "server_does_not_see": "any single client's update, against an honest-but-curious server and fewer than t "
                               "colluding clients in any neighbourhood",
        "not_protected_against": "a server that also controls t or more clients; what the sum itself reveals (see "
                                 "fedprint audit --attacks imprint on this run)",
    }


def write_final(run_dir: Path, name: str, rounds: list[dict[str, Any]],
                privacy: dict[str, Any] | None = None, secure: dict[str, Any] | None = None) -> dict[str, Any]:
    """``final.json``: last round's per-client test metrics, every client that failed or dropped out, the
    client-level DP guarantee when the run had one and the secure-aggregation trust statement."""
    problems = []
    for r in rounds:
        for row in r["clients"]:
            for stage in ("train_status", "eval_status"):
                if row[stage] != "ok":
                    problems.append({"round": r["round"], "client": row["client"], "stage": stage[:-7],
                                     "status": row[stage]})
    if problems:
        log(WARNING, "%s: %d failed / missing replies (see final.json)", name, len(problems))
    last = rounds[-1] if rounds else {"round": 0, "clients": []}
    clients = [{"client": row["client"], **{k: row[k] for k in ("accuracy", "eer", "roc-auc", "fmr100")}}
               for row in last["clients"] if row["eval_status"] == "ok"]
    final = {"strategy": name, "rounds": last["round"], "clients": clients, "problems": problems,
             "privacy": privacy or {"level": "none", "statement": "no differential privacy in this run"}}
    if secure is not None:
        final["secure_aggregation"] = secure
    if privacy and privacy.get("level") == "distributed":
        log(INFO, "%s: distributed client-level (%.3g, %.0e)-DP (central variant, same noise: %.3g; own-noise floor: "
            "%.3g) after %d releases", name, privacy["epsilon"], privacy["delta"],
            privacy["epsilon_central_same_noise"], privacy["epsilon_own_noise_floor"], privacy["releases"])
    elif privacy:
        log(INFO, "%s: client-level (%.3g, %.0e)-DP after %d releases of %d rounds; %s; sampling: %s", name,
            privacy["epsilon"], privacy["delta"], privacy["releases"], privacy["rounds"], privacy["delta_rule"],
            privacy["sampling"])
    write_json(run_dir / "final.json", final)
    return final


#: The app ``flwr run .`` loads (``[tool.flwr.app.components] serverapp = "fedprint.server.server_app:app"``).
app = make_server_app()
