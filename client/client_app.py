"""FedPrint Flower ClientApp: AFFR local step (Yan et al. 2025 Alg. 1, client side) and test-pair evaluation.

``train`` (one AFFR / FedAvg / FedProx round on this node):

1. load the global arrays θ_g^t into a fresh encoder;
2. generalization gap on the node's validation pairs (Eq. 5, see *gap sign* below);
3. E local epochs (``train.epochs``) of contrastive training on the node's FP-DFSN-processed training pairs
   (plus FedProx's proximal term when the server sends ``proximal-mu`` > 0);
4. reply: one ArrayRecord ``arrays`` (θ_i^t), one MetricRecord ``metrics`` with ``num-examples`` (training
   images), ``gap``, ``gap-se`` (its standard error on the validation pairs), ``val-acc-before``
   (Acc(θ_g^t)), ``val-acc-after`` (Acc(θ_i^t)), ``train-loss`` (last epoch), ``fpdfsn-without-minutiae``,
   ``fpdfsn-mean-minutiae``; and one ConfigRecord ``client`` naming the
   node (``name``, ``domain``, ``client-id``) so the server's reports can say which institution did what.

Personalised methods (the server's config names ``method`` = ``fedala`` / ``feddbe`` / ``fedas``) replace
step 3 by their own local round (:mod:`fedprint.client.personalized`), add their reply metrics (FedDBE ``dbe-mean``,
FedAS ``fim-trace``) and evaluate the node's personalised model instead of the global one.

``evaluate``: verification metrics of the received global model on the node's test pairs, threshold chosen on
its validation pairs (``accuracy``, ``eer``, ``roc-auc``, ``fmr100``, ``num-examples`` = test pairs).

Gap sign (deviation from the printed Eq. 5). Yan et al. 2025 prints G_i = Acc(θ_g^t) − Acc(θ_i^{t−1}); its text
(Sec. 3.2: "a larger generalization gap ... the global model generalizes less effectively on client i's
data") and the method it follows (FedDG-GA: loss(global) − loss(local)) mean the opposite orientation, which
is also what the AFFR weight rule needs to favour poorly served clients. This client reports

    G_i = Acc(θ_i^{t−1}) − Acc(θ_g^t)      on its validation pairs,

positive when the global model does worse here than this client's own previous model. In a node's first round
there is no θ_i^{t−1}: G_i = 0. Acc(θ_i^{t−1}) is deterministic (eval mode, fixed validation pairs), so it is
exactly the ``val-acc-after`` of the node's previous round: the node keeps that value, with the round and a
fingerprint of its validation data, in its persistent ``context.state`` instead of re-evaluating a stored copy
of the model (identical number, one forward pass less per round).

Configuration comes from the flat Flower run config (``experiment``, ``base-dir``, ``client-threads``,
``device``) and the node config (see :mod:`fedprint.training.node_data`; ``device = "auto" | "cpu" | "cuda"`` there is
the
SuperNode's own choice of device and overrides the run config's). :func:`make_client_app` takes explicit
defaults for in-process use (``fedprint simulate``, tests), where Flower's ``run_simulation`` has no run config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fedprint.client.personalized import personal_model, personal_train
from fedprint.client.proximal import ProximalAdam
from fedprint.client.publish_handler import ACTION as PUBLISH_ACTION
from fedprint.client.publish_handler import publish_handler
from fedprint.client.secagg_client import (
    advertise,
    mask_handler,
    released_metrics,
    share_handler,
    unmask_handler,
)
from fedprint.config import PERSONALIZED
from fedprint.config.app import client_settings, experiment
from fedprint.models.device import DEVICES, use_device
from fedprint.models.siamese import new_encoder
from fedprint.privacy.secure_sum import ACTION_MASK, ACTION_SHARE, ACTION_UNMASK, ROUND_KEY, flat_delta
from fedprint.training.evaluation import evaluate_on_pairs, validation_accuracy
from fedprint.training.local_data import ClientData
from fedprint.training.node_data import node_client_data
from fedprint.training.trainer import train_siamese

#: Key of the persistent state record holding the previous local model's validation accuracy.
STATE_KEY = "affr-local"


def _data_fingerprint(data: ClientData) -> float:
    """A cheap identifier of the validation data, so a stored accuracy is only reused on the same pairs."""
    return float(len(data.val_pairs) * 1_000_003 + int(data.val_pairs.a.sum()) + 7 * int(data.val_pairs.b.sum()))


def previous_local_accuracy(state: RecordDict, data: ClientData, server_round: int) -> float | None:
    """Acc(θ_i^{t−1}) kept from this node's last round, or None (first round, or the data changed)."""
    if STATE_KEY not in state.metric_records:
        return None
    rec = state.metric_records[STATE_KEY]
    if rec["fingerprint"] != _data_fingerprint(data) or int(rec["round"]) >= server_round:
        return None
    return float(rec["val-acc"])


def node_device(node_config: Mapping[str, Any], conf) -> str | None:
    """The device this node trains and embeds on: node config ``device`` (a SuperNode's own setting), else the
    run config's ``device`` (``fedprint simulate --device``), else None (the process default, the CPU)."""
    if "device" in node_config:
        value = node_config["device"]
        if not isinstance(value, str) or value.strip().lower() not in DEVICES:
            raise ValueError(f"node config 'device': expected one of {', '.join(DEVICES)}, got {value!r}")
        return value
    return conf.device or None


def train_handler(msg: Message, context: Context, *, defaults: Mapping[str, Any] | None = None,
                  gap_offset: Mapping[int, float] | None = None) -> Message:
    """The ``@app.train`` handler (see module docstring), on the node's device (:func:`node_device`).
    ``gap_offset`` (client id -> value) is a test hook that adds a fixed amount to a client's reported gap after
    the first round."""
    conf = client_settings(context.run_config, defaults)
    with use_device(node_device(context.node_config, conf)):
        return _train_round(msg, context, conf, gap_offset)


def _train_round(msg: Message, context: Context, conf, gap_offset: Mapping[int, float] | None) -> Message:
    torch.set_num_threads(conf.client_threads)
    cfg, fed, key, base_dir = experiment(conf)
    data, client_id = node_client_data(cfg, context.node_config, experiment_key=key, base_dir=base_dir)
    server_round = int(msg.content["config"].get("server-round", 1))
    mu = float(msg.content["config"].get("proximal-mu", 0.0))

    method = str(msg.content["config"].get("method", ""))
    secure = ROUND_KEY in msg.content["config"]
    if fed.secure_aggregation and not secure:
        raise ValueError(f"client {client_id}: [federation] secure_aggregation = true here, but the server asked for "
                         "the update in the clear; refused")
    if secure and method in PERSONALIZED:
        raise ValueError(f"client {client_id}: {method} is not run under secure aggregation (it needs per-client "
                         "arrays on the server)")

    net = received_model(cfg, msg)
    acc_global = validation_accuracy(net, data)
    acc_prev = previous_local_accuracy(context.state, data, server_round)
    gap = 0.0 if acc_prev is None else acc_prev - acc_global
    if acc_prev is not None and gap_offset:
        gap += float(gap_offset.get(client_id, 0.0))

    # A different sampling seed every round and client, reproducible from (run seed, round, client).
    tcfg = _round_train_config(cfg, server_round, client_id)
    extra: dict[str, Any] = {}
    if method in PERSONALIZED:
        net, history, extra = personal_train(method, net, data, context.state, fed, tcfg, msg.content["config"])
        acc_local = validation_accuracy(personal_model(method, net, data, context.state, fed, tcfg)
                                        if method == "feddbe" else net, data)
    else:
        anchor = [p.detach().clone() for p in net.parameters()]
        opt = ProximalAdam(net.parameters(), anchor, mu=mu, lr=tcfg.lr, weight_decay=tcfg.weight_decay)
        history = train_siamese(net, data.images, data.train_pairs, tcfg, optimizer=opt, progress=False,
                                desc=data.name)
        acc_local = validation_accuracy(net, data)
    context.state[STATE_KEY] = MetricRecord({"val-acc": acc_local, "round": server_round,
                                             "fingerprint": _data_fingerprint(data)})

    stats = data.fpdfsn_stats
    n_val = max(len(data.val_pairs), 1)
    # Standard error of the gap (two accuracies on the same n_val validation pairs; treated as independent, so
    # conservative): AFFR can tell a real gap difference from validation noise.
    gap_se = 0.0 if acc_prev is None else math.sqrt(
        (acc_prev * (1 - acc_prev) + acc_global * (1 - acc_global)) / n_val)
    metrics = {
        "num-examples": data.num_train_examples,
        "gap": float(gap),
        "gap-se": float(gap_se),
        "val-acc-before": float(acc_global),
        "val-acc-after": float(acc_local),
        "train-loss": float(history[-1]["loss"]),
        "fpdfsn-without-minutiae": int(stats.get("without_minutiae", 0)),
        "fpdfsn-mean-minutiae": float(stats.get("mean_minutiae", 0.0)),
        **extra,
    }
    if secure:  # stage 0 of SecAgg+: keep the update here, reply keys and metrics, never the arrays
        return Message(content=secure_reply(msg, context, net, metrics, _identity(data, client_id)), reply_to=msg)
    content = RecordDict({"arrays": ArrayRecord(net.state_dict()), "metrics": MetricRecord(metrics),
                          "client": _identity(data, client_id)})
    return Message(content=content, reply_to=msg)


def secure_reply(msg: Message, context: Context, net: torch.nn.Module, metrics: dict[str, Any],
                 identity: ConfigRecord) -> RecordDict:
    """The stage-0 reply of a secure round (:func:`fedprint.client.secagg_client.advertise`): metrics (the gap
    noised here when the server runs distributed DP: ``dp-gap-std``), identity and public keys; no arrays."""
    cfg = msg.content["config"]
    glob = {k: v.numpy() for k, v in msg.content["arrays"].items()}
    new = {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}
    keys = advertise(context, str(cfg[ROUND_KEY]), float(cfg["secagg-c"]), int(cfg["secagg-r"]),
                     flat_delta(new, glob))
    return RecordDict({"metrics": MetricRecord(released_metrics(cfg, metrics)), "client": identity, "secagg": keys})


def evaluate_handler(msg: Message, context: Context, *, defaults: Mapping[str, Any] | None = None) -> Message:
    """The ``@app.evaluate`` handler: metrics of the received model on this node's test pairs (on its device)."""
    conf = client_settings(context.run_config, defaults)
    with use_device(node_device(context.node_config, conf)):
        return _evaluate(msg, context, conf)


def _evaluate(msg: Message, context: Context, conf) -> Message:
    torch.set_num_threads(conf.client_threads)
    cfg, fed, key, base_dir = experiment(conf)
    data, client_id = node_client_data(cfg, context.node_config, experiment_key=key, base_dir=base_dir)
    net = received_model(cfg, msg)
    method = str(msg.content["config"].get("method", ""))
    if method in PERSONALIZED:  # personalised methods evaluate the client's own model (client.personalized)
        server_round = int(msg.content["config"].get("server-round", 1))
        net = personal_model(method, net, data, context.state, fed,
                             _round_train_config(cfg, server_round, client_id))
    m, _ = evaluate_on_pairs(net, data)
    metrics = {"accuracy": m["accuracy"], "eer": m["eer"], "roc-auc": m["roc_auc"], "fmr100": m["fmr100"],
               "num-examples": len(data.test_pairs), "threshold": m["threshold"], "val-pairs": len(data.val_pairs)}
    bad = [k for k, v in metrics.items() if not math.isfinite(float(v))]
    if bad:
        raise ValueError(f"client {data.name!r}: non-finite evaluation metric(s) {bad}")
    content = RecordDict({"metrics": MetricRecord(metrics), "client": _identity(data, client_id)})
    return Message(content=content, reply_to=msg)


def received_model(cfg, msg: Message) -> torch.nn.Module:
    """An encoder of the experiment's architecture holding the arrays the server sent.

    Built bare (:func:`fedprint.models.siamese.new_encoder`), not with ``cfg.model.new_encoder``: that one also
    reads and checks ``[model] init``'s model file (~40 ms on 2 loaded cores, twice a round per node) only to have
    every weight replaced by the received state dict (strict, so the result is the same)."""
    net = new_encoder(cfg.model.encoder, cfg.model.embedding_dim, cfg.run.seed, **cfg.model.encoder_kwargs())
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    return net


def _round_train_config(cfg, server_round: int, client_id: int):
    """The training settings of one (round, client): a seed reproducible from (run seed, round, client)."""
    return replace(cfg.train, seed=cfg.train.seed + 10_007 * server_round + client_id)


def _identity(data: ClientData, client_id: int) -> ConfigRecord:
    return ConfigRecord({"name": data.name, "domain": data.domain, "client-id": int(client_id)})


def make_client_app(defaults: Mapping[str, Any] | None = None,
                    gap_offset: Mapping[int, float] | None = None) -> ClientApp:
    """A ClientApp whose settings default to ``defaults`` (over the Flower run config).

    Parameters
    ----------
    defaults : mapping, optional
        Run-config style settings (``experiment``, ``base-dir``, ``client-threads``) that take precedence
        over the Flower run config (``run_simulation`` passes none).
    gap_offset : mapping client id -> float, optional
        Test hook: added to the reported gap from a node's second round on (plain data, so the app pickles
        into simulation workers).
    """
    defaults = dict(defaults or {})
    offsets = {int(k): float(v) for k, v in (gap_offset or {}).items()}
    capp = ClientApp()

    @capp.train()
    def train(msg: Message, context: Context) -> Message:
        return train_handler(msg, context, defaults=defaults, gap_offset=offsets)

    @capp.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        return evaluate_handler(msg, context, defaults=defaults)

    @capp.query(ACTION_SHARE)
    def secagg_share(msg: Message, context: Context) -> Message:  # SecAgg+ stage 1 (client.secagg_client)
        return share_handler(msg, context)

    @capp.query(ACTION_MASK)
    def secagg_mask(msg: Message, context: Context) -> Message:  # SecAgg+ stage 2
        return mask_handler(msg, context)

    @capp.query(ACTION_UNMASK)
    def secagg_unmask(msg: Message, context: Context) -> Message:  # SecAgg+ stage 3
        return unmask_handler(msg, context)

    @capp.query(PUBLISH_ACTION)
    def publish(msg: Message, context: Context) -> Message:  # DP release of one local image (publish_handler)
        return publish_handler(msg, context, defaults=defaults)

    return capp


#: The app ``flwr run .`` loads (``[tool.flwr.app.components] clientapp = "fedprint.client.client_app:app"``).
app = make_client_app()
