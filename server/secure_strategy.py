"""Secure aggregation for the Message-API strategies: FedAvg, FedProx and AFFR see only the sum of the updates.

:class:`SecureAggregation` is a mixin placed before the strategy class (``class X(SecureAggregation, AFFR)``). It
keeps Flower's round loop (``Strategy.start``: configure_train → send_and_receive → aggregate_train → evaluate) and
turns each train round into the SecAgg+ protocol of :mod:`fedprint.server.secagg_protocol`:

* ``configure_train`` adds the round id and the ring parameters to the train config (stage 0);
* the clients train and reply metrics + public keys, no arrays;
* ``aggregate_train`` fixes every client's weight from values the server already sees — FedAvg / FedProx:
  n_i / Σ n (the ``num-examples`` each reports); AFFR: its α_i from the reported gaps (Yan et al. 2025 Eq. 7, the
  same rule and state as :class:`fedprint.server.affr.AFFR`) — runs stages 1–3 (each client scales *its own* update
  by its weight before masking), and gets Σ_{i∈U2} α_i Δ_i over the clients whose masked vectors arrived;
* the new global model is θ_g + Σ_{U2} α_i Δ_i / Σ_{U2} α_i: the strategy's own aggregate, renormalised over the
  clients in the sum, as the plain strategies renormalise over the accepted replies. Integer buffers keep the
  global model's value (averaging them would need them in the clear).

What the server still sees (the trust statement of the report): the cohort, every client's scalar metrics — AFFR's
generalisation gaps and their standard errors (they set α; under distributed DP they arrive noised by the client),
example counts, losses, validation accuracies, test metrics — the number of clipped coordinates, and the unmasked
weighted sum of at least t clients' updates. Not: any single client's update (honest-but-curious server, fewer than
t colluding clients per neighbourhood; Bell et al. 2020 Thm. 1).

With ``dp`` (:class:`DistributedDP`) the round is distributed client-level DP (:mod:`fedprint.privacy.
distributed_dp`): weights over the planned cohort (members without a usable reply count as zero updates at their
weight, no renormalisation), capped at c/m, each client clips, weights and noises its own update, AFFR's gaps are
noised by the clients. Every round that reached the clients is logged as a release before the model leaves.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from logging import WARNING
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedprint.privacy.client_dp import cap_weights
from fedprint.privacy.distributed_dp import accounting, client_noise_std
from fedprint.privacy.secure_sum import ROUND_KEY, float_keys
from fedprint.server.affr import AFFR, step_size
from fedprint.server.reply_checks import check_reply
from fedprint.server.secagg_protocol import SecAggParams, payload_bytes, resolve_shares, secure_round


@dataclass(frozen=True)
class DistributedDP:
    """Distributed DP settings: noise multiplier z, gap noise multiplier z_g (AFFR; None with step 0), L2 clip C,
    weight cap c (weights <= c/m), δ."""

    noise_multiplier: float
    gap_noise_multiplier: float | None
    clip: float
    alpha_cap: float
    delta: float


class SecureAggregation:
    """Mixin: the train rounds of the strategy after it in the MRO run under SecAgg+ (module docstring).

    Parameters
    ----------
    secagg : SecAggParams
        Shares, threshold, clipping and quantisation range, per-stage time-out.
    dp : DistributedDP, optional
        Distributed client-level DP (:mod:`fedprint.privacy.distributed_dp`).
    **kwargs
        Forwarded to the strategy.

    Attributes
    ----------
    secagg_log : dict[int, dict]
        Per round (schedule numbering): cohort, k, t, clients in the sum, drop-outs per stage, seconds and payload
        bytes per stage, weights, status (``ok`` / ``aborted: …``).
    releases : list[dict]
        Distributed DP only: one record per round that reached the clients.
    """

    def __init__(self, *args: Any, secagg: SecAggParams, dp: DistributedDP | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.secagg, self.dp = secagg, dp
        self.secagg_log: dict[int, dict[str, Any]] = {}
        self.releases: list[dict[str, Any]] = []
        self.on_release: Callable[[dict[str, Any]], None] | None = None
        self._sa: dict[str, Any] = {}

    # ------------------------------------------------------------------ stage 0
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """The strategy's train messages, with the round id, ring and (DP) gap-noise parameters in the config."""
        round_id = f"{server_round}-{secrets.token_hex(8)}"
        extra: dict[str, Any] = {ROUND_KEY: round_id, "secagg-c": float(self.secagg.clipping_range),
                                 "secagg-r": int(self.secagg.quantization_range)}
        if self.dp is not None and self.dp.gap_noise_multiplier is not None:
            extra["dp-gap-std"] = 2.0 * self.dp.gap_noise_multiplier
        cfg = ConfigRecord({**{k: config[k] for k in config}, **extra})
        msgs = list(super().configure_train(server_round, arrays, cfg, grid))
        self._sa = {"grid": grid, "reference": arrays, "round_id": round_id,
                    "plan": sorted(int(m.metadata.dst_node_id) for m in msgs),
                    "down0": sum(payload_bytes(m.content) for m in msgs)}
        return msgs

    def _schedule_round(self, server_round: int) -> int:
        return self._round(server_round) if isinstance(self, AFFR) else server_round + getattr(self, "cfg_offset", 0)

    # ------------------------------------------------------------------ weights
    def _keyed(self, replies: list[Message]) -> tuple[list[Message], dict[int, tuple[bytes, bytes]], dict[int, str]]:
        """Replies whose ``secagg`` record holds two 32-byte public keys and no arrays; node -> keys; rejections."""
        good, keys, bad = [], {}, {}
        for msg in replies:
            node = int(msg.metadata.src_node_id)
            if msg.has_error() or not msg.has_content():  # the strategy's screening records it; say why here
                log(WARNING, "secure aggregation: node %d sent no usable train reply: %s", node,
                    msg.error.reason if msg.has_error() else "no content")
                continue
            rec = msg.content.config_records.get("secagg")
            pk = (rec.get("pk-c"), rec.get("pk-s")) if isinstance(rec, ConfigRecord) else (None, None)
            if msg.content.array_records:
                bad[node] = "sent arrays in the clear in a secure round (discarded unread)"
            elif not all(isinstance(k, bytes) and len(k) == 32 for k in pk):
                bad[node] = "no valid secure-aggregation public keys"
            else:
                good.append(msg)
                keys[node] = pk  # type: ignore[assignment]
        for node, why in bad.items():
            log(WARNING, "secure aggregation: node %d rejected: %s", node, why)
        return good, keys, bad

    def _plain_weights(self, replies: list[Message]) -> tuple[dict[int, float], dict[int, RecordDict]]:
        """FedAvg / FedProx: n_i / Σ n over the usable replies (num-examples finite and > 0, one reply per node)."""
        wkey = self.weighted_by_key
        by_node: dict[int, list[Message]] = {}
        for m in replies:
            by_node.setdefault(int(m.metadata.src_node_id), []).append(m)
        ok: dict[int, RecordDict] = {}
        for node, msgs in sorted(by_node.items()):
            reason = ("several replies" if len(msgs) > 1 else
                      check_reply(msgs[0].content, None, [wkey], [wkey], expect_arrays=False))
            if reason is None:
                ok[node] = msgs[0].content
            else:
                log(WARNING, "aggregate_train: rejected reply from node %d: %s", node, reason)
        if self.dp is not None:  # uniform over the planned cohort, fixed before any reply
            m = len(self._sa["plan"])
            self._max_weight = 1.0 / m
            return {n: 1.0 / m for n in ok}, ok
        n = {node: float(next(iter(c.metric_records.values()))[wkey]) for node, c in ok.items()}
        total = math.fsum(n.values())
        return {node: v / total for node, v in n.items()}, ok

    def _affr_weights(self, server_round: int, replies: list[Message]
                      ) -> tuple[dict[int, float], dict[int, RecordDict]]:
        """AFFR's α over the accepted replies (as :meth:`AFFR.aggregate_train`, before the arrays); with DP over the
        planned cohort (a member without a usable reply: gap 0, zero update), capped at c/m."""
        t = self._round(server_round)
        d_t = step_size(t, self.num_rounds, self.step)
        accepted, rejected = self._screen(replies, False, [self.gap_key], "aggregate_train")
        node_of = dict(self._node_of)
        reported = {w: float(next(iter(c.metric_records.values()))[self.gap_key]) for w, c in accepted.items()}
        if self.dp is not None:
            labels = {node_of[w]: w for w in accepted}
            for node in self._sa["plan"]:
                labels.setdefault(node, f"node-{node}")
            present = sorted(labels.values())
        else:
            present = sorted(accepted)
        entry: dict[str, Any] = {"round": t, "step": d_t, "participating": sorted(accepted), "rejected": rejected,
                                 "reported_gaps": reported}
        gaps = {w: self._gap_used(w, reported[w], w not in self.alpha) if w in accepted else 0.0 for w in present}
        entry["gaps"] = gaps
        if not present:
            entry["round_weights"], entry["alpha"] = {}, dict(self.alpha)
            self.history.append(entry)
            return {}, {}
        newcomers = [w for w in present if w not in self.alpha]
        se = {w: self._gap_se(accepted[w]) if w in accepted else 0.0 for w in present}
        weights = self._round_weights(t, d_t, present, newcomers, gaps, se, entry)
        self._max_weight = max(weights.values())  # over the whole cohort: σ's sensitivity (DP)
        return ({node_of[w]: weights[w] for w in accepted}, {node_of[w]: c for w, c in accepted.items()})

    def _constrain(self, weights: dict[str, float]) -> dict[str, float]:
        """AFFR hook: under distributed DP the weights are capped at c/m (m = the planned cohort)."""
        if self.dp is None:
            return super()._constrain(weights)  # type: ignore[misc]
        return cap_weights(weights, min(1.0, self.dp.alpha_cap / len(weights)))

    # ------------------------------------------------------------------ stages 1–3 and the model
    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Weights, then stages 1–3, then θ_g + the unmasked weighted update (module docstring)."""
        if not self._sa:
            raise RuntimeError("aggregate_train called before configure_train")
        sa = self._sa
        try:
            return self._secure_aggregate(server_round, list(replies), sa)
        finally:
            self._sa = {}

    def _secure_aggregate(self, server_round: int, replies: list[Message], sa: dict[str, Any]
                          ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        t = self._schedule_round(server_round)
        good, keys, bad = self._keyed(replies)
        if isinstance(self, AFFR):
            weights, contents = self._affr_weights(server_round, good)
        else:
            weights, contents = self._plain_weights(good)
        ref = {k: v.numpy() for k, v in sa["reference"].items()}
        fkeys = float_keys(ref)
        size = int(sum(ref[k].size for k in fkeys))
        extra: dict[str, Any] = {}
        release = None
        if self.dp is not None and weights:
            _, thr = resolve_shares(max(len(weights), 3), self.secagg.num_shares, self.secagg.threshold)
            std = client_noise_std(self.dp.noise_multiplier, self.dp.clip, self._max_weight, thr)
            extra = {"dp-clip": float(self.dp.clip), "dp-std": std}
            release = {"round": t, "noise_multiplier": self.dp.noise_multiplier,
                       "gap_noise_multiplier": self.dp.gap_noise_multiplier, "clip": self.dp.clip,
                       "alpha_cap": self.dp.alpha_cap, "delta": self.dp.delta, "cohort_size": len(sa["plan"]),
                       "n_min": thr, "client_std": std, "level": "distributed"}
        total, stats = secure_round(sa["grid"], sa["round_id"], {n: keys[n] for n in weights}, weights, size,
                                    self.secagg, extra)
        in_sum = stats.in_sum
        entry = {**stats.to_dict(), "round": t, "rejected": bad,
                 "weights": {str(n): w for n, w in weights.items()},
                 "bytes_down_train": sa["down0"], "plain_bytes_up_per_client": 4 * size,
                 "bytes_up_train": sum(payload_bytes(c) for c in contents.values())}
        if release is not None:  # gaps (and possibly masked inputs) reached the server: count it, before anything
            release["in_sum"] = len(in_sum)
            self.releases.append(release)
            if self.on_release is not None:
                self.on_release(release)
        self.secagg_log[t] = entry
        metrics = self._secure_metrics([contents[n] for n in sorted(contents)]) if contents else None
        if total is None:
            return None, metrics
        mass = 1.0 if self.dp is not None else math.fsum(weights[n] for n in in_sum)
        update = total / mass
        out, pos = {}, 0
        for k, a in ref.items():
            if k in fkeys:
                n = a.size
                out[k] = Array((a.astype(np.float64) + update[pos:pos + n].reshape(a.shape)).astype(a.dtype))
                pos += n
            else:
                out[k] = Array(np.asarray(a))
        entry["effective_weights"] = {str(n): weights[n] / mass for n in in_sum}
        return ArrayRecord(out), metrics

    def _secure_metrics(self, contents: list[RecordDict]) -> MetricRecord | None:
        only = [RecordDict({"metrics": next(iter(c.metric_records.values()))}) for c in contents]
        if isinstance(self, AFFR):
            return self._aggregate_metrics(only, self.train_metrics_aggr_fn, "aggregate_train")
        return self.train_metrics_aggr_fn(only, self.weighted_by_key)

    # ------------------------------------------------------------------ DP accounting
    def restore_releases(self, releases: list[dict[str, Any]]) -> None:
        """Take over the releases a run directory logged; refused when they were made with other DP settings."""
        if self.dp is None:
            return
        for r in releases:
            if r.get("level") != "distributed" or r.get("noise_multiplier") != self.dp.noise_multiplier \
                    or r.get("clip") != self.dp.clip:
                raise ValueError(f"dp_releases: round {r.get('round')} was released with other DP settings; "
                                 "restore them or start a new run directory")
        self.releases = [dict(r) for r in releases]

    def accounting(self) -> dict[str, Any]:
        """The distributed guarantee of the releases so far (:func:`fedprint.privacy.distributed_dp.accounting`)."""
        assert self.dp is not None
        return {**accounting(self.releases, self.dp.delta), "settings": asdict(self.dp)}
