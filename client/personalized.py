"""Personalised federated methods on a FedPrint node: FedALA, FedDBE, FedAS (Yan et al. 2025 Table 4 baselines).

The server names the method in every message's config (``method``); a node keeps its personal part between
rounds in Flower's persistent ``context.state`` (never sent to the server):

========  ==============================================  ===========================================
method    kept on the node                                evaluated (own test pairs)
========  ==============================================  ===========================================
fedala    θ_i (last local model), ALA weights W_i          ALA(θ_g, θ_i): the model training starts from
feddbe    the personal representation bias b̄_i            θ_g with b̄_i (PRBM)
fedas     θ_i (aligned base + own head, after training)   θ_i
========  ==============================================  ===========================================

Each method follows its paper and reference implementation (:mod:`fedprint.client.fedala`,
:mod:`fedprint.client.feddbe`,
:mod:`fedprint.client.fedas`); its server side is in :mod:`fedprint.server.personalized`. A SuperNode that restarts
loses its
``context.state`` and starts again from the global model (its first-round behaviour).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, MetricRecord, RecordDict
from torch import nn

from fedprint.client.fedala import ALASettings, adaptive_local_aggregation
from fedprint.client.fedas import align_to_prototypes, finger_prototypes, fisher_trace, with_own_head
from fedprint.client.feddbe import DBEEncoder
from fedprint.config import PERSONALIZED, FederationConfig, TrainConfig
from fedprint.training.local_data import ClientData
from fedprint.training.trainer import adam, train_siamese

_MODEL, _ALA_W, _ALA_FOR, _DBE_BIAS = "personal-model", "ala-weights", "ala-done-for", "dbe-bias"
_ALA_INFO = "ala-info"


def arrays_digest(net: nn.Module) -> float:
    """A 48-bit fingerprint of a model's weights (exact as a float), to recognise the same global model."""
    h = hashlib.blake2b(digest_size=6)
    for v in net.state_dict().values():
        h.update(v.detach().contiguous().numpy().tobytes())
    return float(int.from_bytes(h.digest(), "big"))


def _stored(state: RecordDict, key: str, like: nn.Module) -> nn.Module | None:
    if key not in state.array_records:
        return None
    net = copy.deepcopy(like)
    net.load_state_dict(state.array_records[key].to_torch_state_dict())
    return net


def _ala(global_net: nn.Module, data: ClientData, state: RecordDict, fed: FederationConfig, tcfg: TrainConfig,
         seed: int) -> nn.Module:
    """θ̂_i for this global model: reused when the evaluation of the same global model already made it.

    Records in ``state`` (``ala-info``) the mean learned weight and the passes of the last ALA, so a reply can
    show whether ALA moved away from the global model at all (mean weight 1 = θ̂_i is the global model)."""
    digest = arrays_digest(global_net)
    local = _stored(state, _MODEL, global_net)
    if local is None:
        state[_ALA_INFO] = MetricRecord({"ala-mean-weight": 1.0, "ala-passes": 0})
        return global_net
    if _ALA_FOR in state.metric_records and state.metric_records[_ALA_FOR]["digest"] == digest:
        return local
    weights = (state.array_records[_ALA_W].to_torch_state_dict() if _ALA_W in state.array_records else None)
    settings = ALASettings(layers=fed.ala_layers, eta=fed.ala_eta, percent=fed.ala_percent)
    net, w, info = adaptive_local_aggregation(global_net, local, data.images, data.train_pairs, weights,
                                              settings=settings, cfg=tcfg, rng=np.random.default_rng(seed))
    state[_ALA_INFO] = MetricRecord({
        "ala-mean-weight": float(sum(t.sum() for t in w.values()) / sum(t.numel() for t in w.values())),
        "ala-passes": int(info["passes"])})
    state[_ALA_W] = ArrayRecord({n: t.contiguous() for n, t in w.items()})
    state[_MODEL] = ArrayRecord(net.state_dict())
    state[_ALA_FOR] = MetricRecord({"digest": digest})
    return net


def personal_train(method: str, global_net: nn.Module, data: ClientData, state: RecordDict,
                   fed: FederationConfig, tcfg: TrainConfig, server_config: Mapping[str, Any]
                   ) -> tuple[nn.Module, list[dict], dict[str, Any]]:
    """One local round of ``method``: returns (model to send, training history, extra reply metrics).

    Extra metrics: FedALA ``ala-mean-weight`` (mean of W_i over the adapted tensors; 1 = started from the global
    model) and ``ala-passes``; FedDBE ``dbe-mean`` (this round's running representation mean); FedAS
    ``fim-trace``."""
    extra: dict[str, Any] = {}
    if method == "fedala":
        net = _ala(global_net, data, state, fed, tcfg, tcfg.seed + 1)
        history = train_siamese(net, data.images, data.train_pairs, tcfg, progress=False, desc=data.name)
        state[_MODEL] = ArrayRecord(net.state_dict())
        if _ALA_FOR in state.metric_records:
            del state[_ALA_FOR]
        extra.update({k: v for k, v in state.metric_records[_ALA_INFO].items()})
        return net, history, extra
    if method == "feddbe":
        mean = server_config.get("dbe-global-mean")
        bias = state.array_records[_DBE_BIAS].to_torch_state_dict()["bias"] if _DBE_BIAS in state.array_records \
            else None
        wrapper = DBEEncoder(global_net, bias, use_bias=mean is not None, momentum=fed.dbe_momentum)
        reg = None if mean is None else wrapper.mean_regulariser(torch.tensor(list(mean)), fed.dbe_kappa)
        opt = adam([q for q in wrapper.parameters() if q.requires_grad], tcfg)
        history = train_siamese(wrapper, data.images, data.train_pairs, tcfg, optimizer=opt, progress=False,
                                desc=data.name, regularizer=reg)
        if mean is not None:
            state[_DBE_BIAS] = ArrayRecord({"bias": wrapper.bias.detach().clone()})
        extra["dbe-mean"] = [float(v) for v in wrapper.running_mean.detach()]
        return global_net, history, extra
    if method == "fedas":
        local = _stored(state, _MODEL, global_net)
        local = global_net if local is None else local
        rng = np.random.default_rng(tcfg.seed + 2)
        used, labels, protos = finger_prototypes(local, data.images, data.train_pairs)
        align_to_prototypes(global_net, data.images, used, labels, protos, rng=rng, lr=fed.as_align_lr)
        net = with_own_head(global_net, local)
        history = train_siamese(net, data.images, data.train_pairs, tcfg, progress=False, desc=data.name)
        extra["fim-trace"] = fisher_trace(net, data.images, data.train_pairs, cfg=tcfg, rng=rng)
        state[_MODEL] = ArrayRecord(net.state_dict())
        return net, history, extra
    raise ValueError(f"method: expected one of {PERSONALIZED}, got {method!r}")


def personal_model(method: str, global_net: nn.Module, data: ClientData, state: RecordDict,
                   fed: FederationConfig, tcfg: TrainConfig) -> nn.Module:
    """The model ``method`` evaluates on this node's test pairs (see the module table)."""
    if method == "fedala":
        return _ala(global_net, data, state, fed, tcfg, tcfg.seed + 3)
    if method == "feddbe":
        if _DBE_BIAS not in state.array_records:
            return global_net
        wrapper = DBEEncoder(global_net, state.array_records[_DBE_BIAS].to_torch_state_dict()["bias"])
        return wrapper.eval()
    if method == "fedas":
        local = _stored(state, _MODEL, global_net)
        return global_net if local is None else local
    raise ValueError(f"method: expected one of {PERSONALIZED}, got {method!r}")
