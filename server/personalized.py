"""Server side of the personalised baselines of Yan et al. 2025 Table 4: FedALA, FedDBE, FedAS.

The reference implementations are PFLlib's [4]_.

All three are FedAvg on the server, plus what each paper adds there; the client side is in
:mod:`fedprint.client.personalized`. Each strategy names its method in every train / evaluate config (``method``), so
one
ClientApp serves every method. Clients evaluate their *personalised* models; the global model these strategies
hold is what ``model.pt`` exports (and what unseen-domain and real-sample evaluations score).

* :class:`FedALA` — plain FedAvg (Zhang et al., AAAI 2023 [1]_): adaptive local aggregation happens on the clients.
* :class:`FedDBE` — FedAvg whose round-1 replies carry each client's mean representation; their weighted mean
  (weights = training images, as the reference code) is the global mean ḡ sent with every later round
  (Zhang et al., NeurIPS 2023 [2]_). ḡ is fixed after round 1 and kept in the checkpoint.
* :class:`FedAS` — client synchronisation: local models averaged with weights proportional to each client's
  Fisher-information trace (``fim-trace``) instead of its number of examples (Yang et al., CVPR 2024 [3]_).

References
----------
.. [1] J. Zhang et al., "FedALA: Adaptive Local Aggregation for Personalized Federated Learning", AAAI 2023.
.. [2] J. Zhang et al., "Eliminating Domain Bias for Federated Learning in Representation Space", NeurIPS 2023.
.. [3] X. Yang, W. Huang, M. Ye, "FedAS: Bridging Inconsistency in Personalized Federated Learning", CVPR 2024.
.. [4] J. Zhang et al., PFLlib, ``system/flcore/servers/server{ala,dbe,as}.py`` (reference implementations).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flwr.app import Message
from flwr.serverapp.strategy import FedAvg


class FedALA(FedAvg):
    """FedAvg that asks clients for FedALA's adaptive local aggregation."""

    def client_config(self) -> dict[str, Any]:
        return {"method": "fedala"}


class FedDBE(FedAvg):
    """FedAvg plus FedDBE's global representation mean ḡ (formed from round 1's replies, then fixed)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.global_mean: list[float] | None = None

    def client_config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": "feddbe"}
        if self.global_mean is not None:
            out["dbe-global-mean"] = list(self.global_mean)
        return out

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        arrays, metrics = super().aggregate_train(server_round, replies)
        # FedAvg's metric aggregation is the num-examples-weighted mean, elementwise for lists: exactly ḡ.
        if self.global_mean is None and metrics is not None and "dbe-mean" in metrics:
            self.global_mean = [float(v) for v in metrics["dbe-mean"]]
        return arrays, metrics

    def state_dict(self) -> dict[str, Any]:
        return {"global_mean": self.global_mean}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mean = state.get("global_mean")
        self.global_mean = None if mean is None else [float(v) for v in mean]


class FedAS(FedAvg):
    """FedAvg whose train aggregation weights are the clients' Fisher-information traces (``fim-trace``)."""

    def client_config(self) -> dict[str, Any]:
        return {"method": "fedas"}

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        # Only the model average is Fisher-weighted; evaluation metrics stay weighted by test pairs.
        key, self.weighted_by_key = self.weighted_by_key, "fim-trace"
        try:
            return super().aggregate_train(server_round, replies)
        finally:
            self.weighted_by_key = key
