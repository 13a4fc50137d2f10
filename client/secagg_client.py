"""The client side of SecAgg+ (Bell et al., CCS 2020): what a node does in each stage of a secure round.

Stage 0 runs inside the train handler (:mod:`fedprint.client.client_app`): after local training the node keeps its
update Δ_i = θ_i − θ_g (floating-point arrays, flattened) and two fresh X25519 key pairs in its ``context.state`` and
replies its public keys with its metrics, never its arrays (:func:`advertise`). Stages 1–3 are the query handlers
:func:`share_handler`, :func:`mask_handler`, :func:`unmask_handler` (server side: :mod:`fedprint.server.
secagg_protocol`). What the node checks before it answers (a curious or faulty server is refused, the round fails):

* the stages come in order, for the round id the train message announced, each answered once;
* stage 1: it is in its own neighbourhood, there are k >= 3 neighbours with distinct keys, and the threshold t
  satisfies k/2 < t <= k (a smaller t would let the server collect shares of both of a node's secrets);
* stage 2: every ciphertext authenticates (AES-GCM with round, source and destination bound) and at least t − 1
  neighbours completed stage 1; its weight is finite and in [0, 1];
* stage 3: the alive and dead lists are disjoint neighbours it holds shares of, with at least t alive; it returns
  shares of b_j for the alive and of s_j for the dead, never both for one j, and then forgets its secrets.

Distributed DP (:mod:`fedprint.privacy.distributed_dp`): when the stage-2 config carries ``dp-clip`` and ``dp-std``
the node clips Δ_i to L2 norm C and adds its own Gaussian share N(0, dp-std²) before quantising.
"""

from __future__ import annotations

import math
import os
import secrets
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict

from fedprint.privacy.distributed_dp import clip_and_noise, noisy_gap
from fedprint.privacy.secure_sum import (
    SHARE_BYTES,
    agree,
    mask,
    new_key_pair,
    public_of,
    quantize,
    seal,
    share,
    share_point,
    unseal,
)

STATE = "secagg-state"
UPDATE = "secagg-update"


def _share_key(own_c: bytes, peer_c: bytes, round_id: str) -> bytes:
    return agree(own_c, peer_c, b"fedprint-secagg-share|" + round_id.encode())


def _state(context: Context, round_id: str, stage: str) -> ConfigRecord:
    st = context.state.config_records.get(STATE)
    if not isinstance(st, ConfigRecord) or st.get("round-id") != round_id:
        raise ValueError(f"secure aggregation: no round {round_id!r} in progress on this node")
    if st["stage"] != stage:
        raise ValueError(f"secure aggregation: round {round_id!r} is at stage {st['stage']!r}, not {stage!r}")
    return st


def advertise(context: Context, round_id: str, clipping_range: float, quantization_range: int,
              delta: np.ndarray) -> ConfigRecord:
    """Stage 0: keep the update and fresh key pairs in ``context.state``; the reply record with the public keys."""
    if not (math.isfinite(clipping_range) and clipping_range > 0 and 2 <= quantization_range < 2 ** 32):
        raise ValueError(f"secure aggregation: bad ring parameters c = {clipping_range!r}, R = {quantization_range!r}")
    sk_c, pk_c = new_key_pair()
    sk_s, pk_s = new_key_pair()
    context.state[STATE] = ConfigRecord({"round-id": round_id, "stage": "keys", "sk-c": sk_c, "sk-s": sk_s,
                                         "c": float(clipping_range), "r": int(quantization_range)})
    context.state[UPDATE] = ArrayRecord({"delta": Array(np.asarray(delta, np.float64))})
    return ConfigRecord({"pk-c": pk_c, "pk-s": pk_s})


def released_metrics(config: ConfigRecord, metrics: dict[str, Any],
                     rng: np.random.Generator | None = None) -> dict[str, Any]:
    """The stage-0 metrics: under distributed DP (``dp-gap-std`` in the train config) the gap is clipped and noised
    here, so the server never sees the raw gap (:func:`fedprint.privacy.distributed_dp.noisy_gap`)."""
    if "dp-gap-std" not in config:
        return dict(metrics)
    rng = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    return {**metrics, "gap": noisy_gap(float(metrics["gap"]), float(config["dp-gap-std"]), rng)}


def share_handler(msg: Message, context: Context) -> Message:
    """Stage 1: Shamir-share b_i and s_i among the neighbours, one AES-GCM ciphertext per neighbour."""
    cfg = msg.content["config"]
    round_id, me = str(cfg["round-id"]), int(msg.metadata.dst_node_id)
    st = _state(context, round_id, "keys")
    nb = [int(n) for n in cfg["neighbours"]]
    t, k = int(cfg["threshold"]), len(nb)
    pk_c, pk_s = dict(zip(nb, cfg["pk-c"], strict=True)), dict(zip(nb, cfg["pk-s"], strict=True))
    if me not in nb:
        raise ValueError("secure aggregation: this node is not in the neighbourhood it was sent")
    if k < 3 or not (2 * t > k and t <= k):
        raise ValueError(f"secure aggregation: refused threshold t = {t} for k = {k} shares (need k >= 3, "
                         "k/2 < t <= k)")
    keys = [*pk_c.values(), *pk_s.values()]
    if len(set(keys)) != len(keys) or any(len(x) != 32 for x in keys):
        raise ValueError("secure aggregation: neighbours' public keys are not distinct 32-byte keys")
    if pk_c[me] != public_of(st["sk-c"]) or pk_s[me] != public_of(st["sk-s"]):
        raise ValueError("secure aggregation: the server sent this node keys that are not its own")
    b = os.urandom(32)
    points = {j: share_point(j) for j in nb}
    b_sh = share(b, t, list(points.values()))
    s_sh = share(st["sk-s"], t, list(points.values()))
    dsts, cts = [], []
    held_owner, held_b, held_s = [me], [b_sh[points[me]]], [s_sh[points[me]]]
    for j in nb:
        if j == me:
            continue
        key = _share_key(st["sk-c"], pk_c[j], round_id)
        dsts.append(j)
        cts.append(seal(key, round_id, me, j, b_sh[points[j]] + s_sh[points[j]]))
    context.state[STATE] = ConfigRecord({
        **{k_: st[k_] for k_ in st}, "stage": "shared", "b": b, "threshold": t,
        "nb": nb, "nb-pk-c": [pk_c[j] for j in nb], "nb-pk-s": [pk_s[j] for j in nb],
        "held-owner": held_owner, "held-b": held_b, "held-s": held_s})
    return Message(RecordDict({"secagg": ConfigRecord({"dst": dsts, "ct": cts})}), reply_to=msg)


def mask_handler(msg: Message, context: Context, *, rng: np.random.Generator | None = None) -> Message:
    """Stage 2: decrypt the shares addressed here, then y_i = Q(α_i Δ_i [+ DP noise]) + masks (see module doc)."""
    cfg = msg.content["config"]
    round_id, me = str(cfg["round-id"]), int(msg.metadata.dst_node_id)
    st = _state(context, round_id, "shared")
    t = int(st["threshold"])
    nb = [int(n) for n in st["nb"]]
    pk_c, pk_s = dict(zip(nb, st["nb-pk-c"], strict=True)), dict(zip(nb, st["nb-pk-s"], strict=True))
    srcs = [int(s) for s in cfg["src"]]
    if len(set(srcs)) != len(srcs) or any(s not in pk_c or s == me for s in srcs) or len(srcs) + 1 < t:
        raise ValueError(f"secure aggregation: stage 2 sources {srcs} are not >= t - 1 = {t - 1} distinct neighbours")
    owners, held_b, held_s = list(st["held-owner"]), list(st["held-b"]), list(st["held-s"])
    for src, ct in zip(srcs, cfg["ct"], strict=True):
        payload = unseal(_share_key(st["sk-c"], pk_c[src], round_id), round_id, src, me, ct)
        owners.append(src)
        held_b.append(payload[:SHARE_BYTES])
        held_s.append(payload[SHARE_BYTES:])
    weight = float(cfg["weight"])
    if not (math.isfinite(weight) and 0 <= weight <= 1):
        raise ValueError(f"secure aggregation: weight {weight!r} outside [0, 1]")
    delta = context.state.array_records[UPDATE]["delta"].numpy()
    rng = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    info: dict[str, Any] = {}
    if "dp-clip" in cfg:
        v, info = clip_and_noise(delta, weight, float(cfg["dp-clip"]), float(cfg["dp-std"]), rng)
    else:
        v = weight * delta
    q, clipped = quantize(v, float(st["c"]), int(st["r"]), rng)
    y = mask(q, st["b"], st["sk-s"], me, {j: pk_s[j] for j in srcs}, round_id)
    del context.state.array_records[UPDATE]  # the update is no longer needed; only masked data left the node
    context.state[STATE] = ConfigRecord({**{k_: st[k_] for k_ in st}, "stage": "masked", "held-owner": owners,
                                         "held-b": held_b, "held-s": held_s})
    metrics = MetricRecord({"secagg-clipped": int(clipped), **{f"dp-{k_}": float(v_) for k_, v_ in info.items()}})
    return Message(RecordDict({"masked": ArrayRecord({"masked": Array(y)}), "metrics": metrics}), reply_to=msg)


def unmask_handler(msg: Message, context: Context) -> Message:
    """Stage 3: shares of b_j for the alive neighbours and of s_j for the dropped ones; then forget the round."""
    cfg = msg.content["config"]
    round_id = str(cfg["round-id"])
    st = _state(context, round_id, "masked")
    alive, dead = [int(n) for n in cfg["alive"]], [int(n) for n in cfg["dead"]]
    held = {int(o): (b, s) for o, b, s in zip(st["held-owner"], st["held-b"], st["held-s"], strict=True)}
    t = int(st["threshold"])
    if set(alive) & set(dead) or len(set(alive)) != len(alive) or len(set(dead)) != len(dead):
        raise ValueError("secure aggregation: a neighbour is listed both alive and dropped (refused)")
    if len(alive) < t:
        raise ValueError(f"secure aggregation: {len(alive)} alive neighbours < t = {t} (refused)")
    if any(n not in held for n in alive + dead):
        raise ValueError("secure aggregation: asked for shares this node does not hold")
    del context.state.config_records[STATE]  # answered once: the secrets of this round are gone
    rec = ConfigRecord({"b-owner": alive, "b-share": [held[n][0] for n in alive],
                        "s-owner": dead, "s-share": [held[n][1] for n in dead]})
    return Message(RecordDict({"secagg": rec}), reply_to=msg)
