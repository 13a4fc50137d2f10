"""The server side of SecAgg+ (Bell et al., CCS 2020) on Flower's Message API: stages 1–3 of one round.

Why our own: Flower 1.41's ``SecAggPlusWorkflow`` runs only inside ``DefaultWorkflow`` with a ``LegacyContext`` and a
legacy ``flwr.server.strategy.Strategy`` (``configure_fit`` / ``aggregate_fit`` over a ``ClientManager``); it raises
``TypeError`` for any other context, so the Message-API strategies (``flwr.serverapp.strategy`` FedAvg / FedProx and
FedPrint's AFFR) cannot use it, and its ``secaggplus_mod`` expects legacy ``FitRes`` replies and weights every update
by the client's own ``num_examples``, so a server-chosen AFFR weight α_i has no place in it. Its PRG also folds the
32-byte seeds into 32-bit ``RandomState`` seeds. This module follows the same four stages (Flower's reference
implementation and Bell et al. Fig. 1/Alg. 2) on top of ``Grid.send_and_receive``:

0. *advertise keys* — piggy-backed on the train message: each client trains, keeps its update, and replies its two
   X25519 public keys (c: share encryption, s: masks) with its metrics, **no arrays** (:mod:`fedprint.client.
   secagg_client`). The strategy then chooses every client's weight (:mod:`fedprint.server.secure_strategy`).
1. *share keys* (``query.secagg_share``): each client gets its neighbours' public keys, Shamir-shares (t of k) its
   self-mask seed b_i and its mask private key s_i, and returns one AES-GCM ciphertext per neighbour.
2. *masked input* (``query.secagg_mask``): each client gets its weight α_i and the ciphertexts addressed to it and
   returns y_i = Q(α_i·Δ_i) + PRG(b_i) ± Σ_j PRG(s_ij) in Z_{2^32} (j: the neighbours that completed stage 1).
3. *unmask* (``query.secagg_unmask``): each client that sent y_i is told which neighbours are in the sum (U2) and
   which dropped after stage 1; it returns its shares of b_j for the first and of s_j for the second (never both for
   one j). The server reconstructs the self masks of U2 and the pairwise masks between dropped clients and U2, and
   is left with Σ_{i ∈ U2} Q(α_i Δ_i).

Drop-outs: a client lost in stage 2 is outside the sum (its pairwise masks are cancelled from its neighbours'
shares of s_j); one lost in stage 3 is still in the sum (its b_i is rebuilt from t shares). A round aborts (returns
no sum, logged) when fewer than t clients sent masked vectors, when any client has fewer than t live neighbours, or
when a needed secret has fewer than t shares. The neighbour graph is a random ring of k = ``|N(i)|`` (SecAgg+'s
"Harary" graph with k−1 neighbours), drawn from OS entropy; k = the cohort gives SecAgg's complete graph.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from logging import ERROR, INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedprint.privacy.secure_sum import (
    ACTION_MASK,
    ACTION_SHARE,
    ACTION_UNMASK,
    check_ring,
    combine,
    dequantize_sum,
    pair_seed,
    pair_sign,
    prg,
    share_point,
)


@dataclass(frozen=True)
class SecAggParams:
    """One round's protocol parameters: k shares (= neighbourhood size incl. the client), threshold t, clipping
    range c, quantisation range R, per-stage time-out."""

    num_shares: int
    threshold: int
    clipping_range: float
    quantization_range: int
    timeout: float


def resolve_shares(cohort: int, num_shares: int, threshold: int) -> tuple[int, int]:
    """(k, t) of a round with ``cohort`` clients: ``num_shares`` 0 = the whole cohort, else capped at it (an odd
    k < cohort is a ring of k); ``threshold`` 0 = a majority ⌊k/2⌋ + 1. Refused (ValueError) when t cannot hold."""
    k = cohort if num_shares == 0 else min(num_shares, cohort)
    t = k // 2 + 1 if threshold == 0 else threshold
    if cohort < 3:
        raise ValueError(f"secure aggregation: {cohort} clients in the round; at least 3 are needed (with 2, each "
                         "client could subtract its own update from the sum and learn the other's)")
    if not (2 * t > k and t <= k):
        raise ValueError(f"[federation] secagg_reconstruction_threshold = {threshold}: with {k} shares per client "
                         f"(cohort {cohort}) the threshold must be > {k}/2 and <= {k}")
    return k, t


def ring_graph(nodes: Iterable[int], k: int, rand: secrets.SystemRandom | None = None) -> dict[int, set[int]]:
    """Node -> its neighbourhood (itself included, size k): a ring over a random order (OS entropy)."""
    order = sorted(nodes)
    (rand or secrets.SystemRandom()).shuffle(order)
    n = len(order)
    if k >= n:
        return {v: set(order) for v in order}
    half = k // 2
    return {v: {order[(i + d) % n] for d in range(-half, half + 1)} for i, v in enumerate(order)}


def payload_bytes(content: RecordDict) -> int:
    """Bytes of a message's payload: array buffers plus record values (bytes, strings, 8 per number); Flower's
    protobuf / gRPC framing is not counted."""
    total = 0
    for rec in content.array_records.values():
        total += sum(len(a.data) for a in rec.values())
    for records in (content.config_records, content.metric_records):
        for rec in records.values():
            for key, v in rec.items():
                total += len(key)
                for x in (v if isinstance(v, list) else [v]):
                    total += len(x) if isinstance(x, bytes | str) else 8
    return total


@dataclass
class RoundStats:
    """What one secure round cost and who was in it (one entry of the round log)."""

    cohort: int = 0
    shares: int = 0
    threshold: int = 0
    in_sum: list[int] = field(default_factory=list)
    dropped: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    bytes_down: dict[str, int] = field(default_factory=dict)
    bytes_up: dict[str, int] = field(default_factory=dict)
    status: str = "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"cohort": self.cohort, "shares": self.shares, "threshold": self.threshold,
                "in_sum": len(self.in_sum), "in_sum_nodes": sorted(self.in_sum), "dropped": self.dropped,
                "seconds": dict(self.seconds), "bytes_down": dict(self.bytes_down), "bytes_up": dict(self.bytes_up),
                "status": self.status}


def _exchange(grid: Grid, stage: str, contents: Mapping[int, RecordDict], round_id: str, timeout: float,
              stats: RoundStats) -> dict[int, RecordDict]:
    """Send one stage's messages and keep the good replies (node -> content); errors and silence are drop-outs."""
    t0 = time.perf_counter()
    msgs = [Message(content=c, dst_node_id=n, message_type=f"query.{stage}", group_id=round_id)
            for n, c in contents.items()]
    stats.bytes_down[stage] = sum(payload_bytes(c) for c in contents.values())
    replies: dict[int, RecordDict] = {}
    answers = list(grid.send_and_receive(msgs, timeout=timeout))
    # Message ids are set when the grid pushes; an error the SuperLink makes up names the message it answers.
    sent = {m.metadata.message_id: int(m.metadata.dst_node_id) for m in msgs if m.metadata.message_id}
    for r in answers:
        node = sent.get(r.metadata.reply_to_message_id, int(r.metadata.src_node_id))
        if r.has_error():
            log(WARNING, "secure aggregation %s: node %d failed: %s", stage, node, r.error.reason)
        elif node in contents and node not in replies and r.has_content():
            replies[node] = r.content
    stats.bytes_up[stage] = sum(payload_bytes(c) for c in replies.values())
    stats.seconds[stage] = time.perf_counter() - t0
    lost = sorted(set(contents) - set(replies))
    if lost:
        stats.dropped[stage] = lost
    return replies


def _config(content: RecordDict) -> ConfigRecord:
    rec = content.config_records.get("secagg")
    if not isinstance(rec, ConfigRecord):
        raise ValueError("reply carries no 'secagg' ConfigRecord")
    return rec


def _abort(stats: RoundStats, reason: str) -> tuple[None, RoundStats]:
    stats.status = f"aborted: {reason}"
    log(ERROR, "secure aggregation aborted: %s (the global model is kept this round)", reason)
    return None, stats


def secure_round(grid: Grid, round_id: str, keys: Mapping[int, tuple[bytes, bytes]], weights: Mapping[int, float],
                 size: int, params: SecAggParams, extra: Mapping[str, Any] | None = None,
                 ) -> tuple[np.ndarray | None, RoundStats]:
    """Stages 1–3 over the clients in ``keys`` (node -> (pk_c, pk_s), from their stage-0 replies).

    Returns (Σ_{i ∈ U2} clip(α_i·Δ_i) as float64 of length ``size`` or None when the round aborted, the stats; the
    nodes of the sum are ``stats.in_sum``). ``extra``: config values every stage-2 message carries (distributed DP).
    """
    stats = RoundStats(cohort=len(keys))
    try:
        k, t = resolve_shares(len(keys), params.num_shares, params.threshold)
    except ValueError as exc:
        return _abort(stats, str(exc))
    stats.shares, stats.threshold = k, t
    graph = ring_graph(keys, k)
    c, R = params.clipping_range, params.quantization_range

    # ---- stage 1: share keys
    def share_msg(n: int) -> RecordDict:
        nb = sorted(graph[n])
        return RecordDict({"config": ConfigRecord({
            "round-id": round_id, "threshold": t, "neighbours": nb,
            "pk-c": [keys[j][0] for j in nb], "pk-s": [keys[j][1] for j in nb]})})

    got = _exchange(grid, ACTION_SHARE, {n: share_msg(n) for n in keys}, round_id, params.timeout, stats)
    forward: dict[int, tuple[list[int], list[bytes]]] = {n: ([], []) for n in got}
    for src, content in got.items():
        rec = _config(content)
        for dst, ct in zip(rec["dst"], rec["ct"], strict=True):
            if int(dst) in forward and int(dst) in graph[src] and int(dst) != src:
                forward[int(dst)][0].append(src)
                forward[int(dst)][1].append(ct)
    u1 = set(got)
    for n in u1:
        if len(graph[n] & u1) < t:
            return _abort(stats, f"node {n} has {len(graph[n] & u1)} live neighbours after stage 1, below t = {t}")

    # ---- stage 2: masked input
    def mask_msg(n: int) -> RecordDict:
        srcs, cts = forward[n]
        return RecordDict({"config": ConfigRecord({
            "round-id": round_id, "weight": float(weights[n]), "src": srcs, "ct": cts, **dict(extra or {})})})

    got2 = _exchange(grid, ACTION_MASK, {n: mask_msg(n) for n in sorted(u1)}, round_id, params.timeout, stats)
    total = np.zeros(size, np.uint32)
    u2: set[int] = set()
    for n, content in sorted(got2.items()):
        arrays = next(iter(content.array_records.values()), None)
        y = None if arrays is None or "masked" not in arrays else arrays["masked"].numpy()
        if y is None or y.dtype != np.uint32 or y.shape != (size,):
            log(WARNING, "secure aggregation: node %d sent no valid masked vector; it counts as dropped", n)
            continue
        total += y
        u2.add(n)
    if len(u2) < t:
        return _abort(stats, f"{len(u2)} masked vectors arrived, below the threshold t = {t}")
    check_ring(len(u2), R)
    dead = u1 - u2

    # ---- stage 3: unmask
    def unmask_msg(n: int) -> RecordDict:
        return RecordDict({"config": ConfigRecord({
            "round-id": round_id, "alive": sorted(graph[n] & u2), "dead": sorted(graph[n] & dead)})})

    got3 = _exchange(grid, ACTION_UNMASK, {n: unmask_msg(n) for n in sorted(u2)}, round_id, params.timeout, stats)
    t0 = time.perf_counter()
    b_shares: dict[int, dict[int, bytes]] = {n: {} for n in u2}
    s_shares: dict[int, dict[int, bytes]] = {n: {} for n in dead}
    for responder, content in got3.items():
        rec = _config(content)
        x = share_point(responder)  # a share's point is its holder's: a responder cannot pose as another
        for owner, v in zip(rec["b-owner"], rec["b-share"], strict=True):
            if int(owner) in b_shares and responder in graph[int(owner)]:
                b_shares[int(owner)][x] = v
        for owner, v in zip(rec["s-owner"], rec["s-share"], strict=True):
            if int(owner) in s_shares and responder in graph[int(owner)]:
                s_shares[int(owner)][x] = v
    try:
        for sh in b_shares.values():
            total -= prg(combine(sh, t), size)
        for j, sh in s_shares.items():
            sk_j = combine(sh, t)
            for i in sorted(graph[j] & u2):  # i masked with j: j completed stage 1 and is i's neighbour
                m = prg(pair_seed(sk_j, keys[i][1], round_id), size)
                total = total - m if pair_sign(i, j) > 0 else total + m
    except ValueError as exc:
        return _abort(stats, f"unmasking failed: {exc}")
    stats.seconds["unmask-compute"] = time.perf_counter() - t0
    stats.in_sum = sorted(u2)
    log(INFO, "secure aggregation: sum of %d clients unmasked (cohort %d, k = %d, t = %d, dropped %s)",
        len(u2), len(keys), k, t, stats.dropped or "none")
    return dequantize_sum(total, len(u2), c, R), stats
