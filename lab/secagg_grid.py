"""An in-process Flower grid for secure-aggregation tests and benchmarks: messages go straight to the handlers.

Each node has its own persistent ``Context`` (as a SuperNode keeps one per run); a node can be killed before a
given stage (it then never answers, like a crashed SuperNode). The train handler is a stand-in that reports
a fixed update per (node, round), so a plain and a secure run see exactly the same client updates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MetricRecord, RecordDict

from fedprint.client.secagg_client import advertise, mask_handler, released_metrics, share_handler, unmask_handler
from fedprint.privacy.secure_sum import ACTION_MASK, ACTION_SHARE, ACTION_UNMASK, ROUND_KEY, flat_delta

_ids = itertools.count(1)


class SecAggGrid:
    """``grid.send_and_receive`` / ``get_node_ids`` over in-process nodes.

    ``update(node, round, global_arrays) -> new arrays`` and ``gap(node, round) -> float`` define the clients;
    ``kill[stage] = {nodes}`` silences nodes from that stage on ("train", ACTION_SHARE, ACTION_MASK,
    ACTION_UNMASK). ``rng`` feeds the clients' stochastic rounding (tests only)."""

    def __init__(self, nodes: Iterable[int], update: Callable, gap: Callable | None = None,
                 rng: np.random.Generator | None = None) -> None:
        self.nodes = list(nodes)
        self.update, self.gap = update, gap or (lambda node, rnd: 0.0)
        self.contexts = {n: Context(run_id=1, node_id=n, node_config={}, state=RecordDict(), run_config={})
                         for n in self.nodes}
        self.kill: dict[str, set[int]] = {}
        self.dead: set[int] = set()
        self.rng = rng
        self.masked: dict[int, np.ndarray] = {}  # last masked vector of each node (what the server received)

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def _handle(self, msg: Message) -> Message:
        node, kind = int(msg.metadata.dst_node_id), msg.metadata.message_type
        ctx = self.contexts[node]
        if kind == "train":
            cfg = msg.content["config"]
            rnd = int(cfg["server-round"])
            glob = {k: v.numpy() for k, v in msg.content["arrays"].items()}
            new = self.update(node, rnd, glob)
            metrics = MetricRecord({"num-examples": 10 + node, "gap": float(self.gap(node, rnd)), "gap-se": 0.0})
            ident = ConfigRecord({"name": f"client-{node}"})
            if ROUND_KEY in cfg:
                metrics = MetricRecord(released_metrics(cfg, {k: metrics[k] for k in metrics}, self.rng))
                keys = advertise(ctx, str(cfg[ROUND_KEY]), float(cfg["secagg-c"]), int(cfg["secagg-r"]),
                                 flat_delta(new, glob))
                return Message(RecordDict({"metrics": metrics, "client": ident, "secagg": keys}), reply_to=msg)
            return Message(RecordDict({"arrays": ArrayRecord({k: Array(np.asarray(v)) for k, v in new.items()}),
                                       "metrics": metrics, "client": ident}), reply_to=msg)
        action = kind.split(".", 1)[1]
        if action == ACTION_SHARE:
            return share_handler(msg, ctx)
        if action == ACTION_MASK:
            out = mask_handler(msg, ctx, rng=self.rng)
            self.masked[node] = out.content["masked"]["masked"].numpy()
            return out
        if action == ACTION_UNMASK:
            return unmask_handler(msg, ctx)
        raise ValueError(f"unexpected message type {kind}")

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        replies = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = f"m{next(_ids)}"  # what the grid does on push
            node, kind = int(msg.metadata.dst_node_id), msg.metadata.message_type
            stage = kind.split(".", 1)[1] if "." in kind else kind
            if node in self.kill.get(stage, set()):
                self.dead.add(node)
            if node in self.dead:
                continue  # a crashed node never answers (the round's time-out)
            try:
                replies.append(self._handle(msg))
            except Exception as exc:  # noqa: BLE001  (a ClientApp exception reaches the server as an error reply)
                replies.append(Message(Error(code=0, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg))
        return replies
