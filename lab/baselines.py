"""The two reference points federated strategies are judged against (Yan et al. 2025 Table 4).

* **local-only**: every client trains its own model on its own training pairs and is tested on its own test
  pairs (no collaboration at all);
* **centralized**: one model trained on the union of all clients' training pairs (what pooling the raw prints
  would give), tested on every client's own test pairs.

Both use exactly the clients' splits and pairs, so their numbers line up with the federated methods'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from fedprint.config import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.models.siamese import new_encoder
from fedprint.training.evaluation import evaluate_on_pairs
from fedprint.training.experiment_data import union, union_groups
from fedprint.training.local_data import ClientData
from fedprint.training.trainer import train_siamese


def _fit(net: nn.Module, images: torch.Tensor, pairs: PairSet, cfg: TrainConfig, dp: Mapping[str, Any] | None,
         progress: bool, desc: str, groups: np.ndarray | None = None) -> list[dict]:
    if dp is None:
        return train_siamese(net, images, pairs, cfg, progress=progress, desc=desc, groups=groups)
    from fedprint.training.dp_sgd import train_siamese_dp  # imports Opacus only when DP is asked for

    history, _ = train_siamese_dp(net, images, pairs, cfg, progress=progress, desc=desc, **dp)
    return history


def _initial(encoder: str, embedding_dim: int, seed: int, encoder_kwargs: Mapping[str, Any] | None,
             init_state: Mapping[str, Any] | None) -> nn.Module:
    """A fresh encoder: random weights fixed by ``seed``, or ``init_state`` (e.g. the shipped pretrained model)."""
    net = new_encoder(encoder, embedding_dim, seed, **(encoder_kwargs or {}))
    if init_state is not None:
        net.load_state_dict(dict(init_state))
    return net


def train_local(data: ClientData, *, encoder: str, embedding_dim: int, cfg: TrainConfig,
                progress: bool = True, dp: Mapping[str, Any] | None = None,
                encoder_kwargs: Mapping[str, Any] | None = None, init_state: Mapping[str, Any] | None = None,
                ) -> tuple[nn.Module, list[dict]]:
    """Train a fresh encoder on one client's training pairs; returns it and the per-epoch history.

    ``dp``: None for plain training, or keyword arguments of :func:`fedprint.training.dp_sgd.train_siamese_dp`
    (``DPSection.trainer_kwargs()``) to train with DP-SGD; history rows then carry the cumulative accounting.
    """
    net = _initial(encoder, embedding_dim, cfg.seed, encoder_kwargs, init_state)
    return net, _fit(net, data.images, data.train_pairs, cfg, dp, progress, data.name)


def train_centralized(clients: Sequence[ClientData], *, encoder: str, embedding_dim: int, cfg: TrainConfig,
                      progress: bool = True, dp: Mapping[str, Any] | None = None,
                      encoder_kwargs: Mapping[str, Any] | None = None, init_state: Mapping[str, Any] | None = None,
                ) -> tuple[nn.Module, list[dict]]:
    """Train one encoder on the union of all clients' training pairs (``dp`` as in :func:`train_local`)."""
    images, pairs = union(clients)
    net = _initial(encoder, embedding_dim, cfg.seed, encoder_kwargs, init_state)
    return net, _fit(net, images, pairs, cfg, dp, progress, "centralized", groups=union_groups(clients))


def evaluate_clients(net: nn.Module, clients: Sequence[ClientData]) -> list[dict]:
    """Per-client test metrics of one model (threshold from each client's own validation pairs)."""
    return [{"client": c.name, "domain": c.domain, **evaluate_on_pairs(net, c)[0]} for c in clients]
