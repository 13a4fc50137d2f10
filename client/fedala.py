"""FedALA's client side: Adaptive Local Aggregation (ALA) of the received global model into the local one.

Before local training, a FedALA client does not overwrite its model with the global one. It keeps the lower
layers of the global model and, for the top ``layers`` parameter tensors, learns element-wise weights
W ∈ [0, 1] (Zhang et al. 2023 [1]_, Eq. 4-6)::

    θ̂_i = θ_i + (θ_g − θ_i) ⊙ W_i          (top layers; lower layers: θ̂_i = θ_g)
    W_i ← clip(W_i − η · ∇_θ̂ L(θ̂_i; D_i^s) ⊙ (θ_g − θ_i), 0, 1)

on a random ``percent`` % sample D_i^s of its training data. In the client's first ALA ("start phase") W is
trained until the standard deviation of the last ``window`` pass losses drops below ``threshold``; after that,
one pass per round. W starts at ones (= take the global model) and is kept between rounds. θ̂_i is the
personalised model: it is what the client evaluates and where its local training starts. The server is plain
FedAvg.

Adaptations to verification (documented, not in the paper): the loss L is the client's training loss
(:func:`fedprint.training.trainer.embedding_loss`: Yan et al. 2025 Eq. 1 by default) over P x K batches of the sample
(identities = connected components of the genuine training pairs), not cross-entropy; the start phase stops
after ``max_passes`` passes at the latest (the reference code has no cap). Defaults follow the reference
implementation (PFLlib ``utils/ALA.py`` [2]_): η = 1, s = 80 %, the top 2 parameter tensors (the head's weight and
bias), threshold 0.1 over 10 losses.

References
----------
.. [1] J. Zhang, Y. Hua, H. Wang, T. Song, Z. Xue, R. Ma, H. Guan, "FedALA: Adaptive Local Aggregation for
   Personalized Federated Learning", AAAI 2023.
.. [2] J. Zhang et al., PFLlib, ``system/utils/ALA.py`` (reference implementation).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from fedprint.config import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.training.trainer import embedding_loss, identities_from_pairs, pk_batches


@dataclass(frozen=True)
class ALASettings:
    """ALA hyper-parameters (defaults: the reference implementation's). A run reads them from ``[federation]``
    (``ala_layers``, ``ala_eta``, ``ala_percent``), whose reader validates them."""

    layers: int = 2
    eta: float = 1.0
    percent: float = 80.0
    threshold: float = 0.1
    window: int = 10
    max_passes: int = 50


def adaptive_local_aggregation(global_net: nn.Module, local_net: nn.Module, images: torch.Tensor,
                               train_pairs: PairSet, weights: dict[str, torch.Tensor] | None, *,
                               settings: ALASettings, cfg: TrainConfig,
                               rng: np.random.Generator) -> tuple[nn.Module, dict[str, torch.Tensor], dict]:
    """θ̂_i from the global and the local model (module docstring); returns (θ̂_i, W_i, info).

    Parameters
    ----------
    global_net, local_net : nn.Module
        θ_g (received) and θ_i (this client's model after its last local training); not modified.
    images, train_pairs
        The client's preprocessed images and training pairs (the sample D_i^s is drawn from their images).
    weights : dict name -> Tensor, optional
        W_i from the previous round (None: the start phase, W = 1).
    settings : ALASettings
    cfg : TrainConfig
        The client's training recipe: its P x K batch shape (``p``, ``k``) and its loss
        (:func:`fedprint.training.trainer.embedding_loss`).
    rng : numpy Generator
        Draws the sample and the batches.

    Returns
    -------
    net : nn.Module
        θ̂_i, a new module.
    weights : dict name -> Tensor
        Updated W_i for the top layers.
    info : dict
        ``passes`` (weight-learning passes), ``loss`` (last pass), ``start_phase`` (bool), ``skipped`` (True
        when θ_i = θ_g: nothing to aggregate).
    """
    g_params = dict(global_net.named_parameters())
    l_params = dict(local_net.named_parameters())
    names = list(g_params)
    top = names[-settings.layers:]
    net = copy.deepcopy(local_net)
    with torch.no_grad():
        for n in names[:-settings.layers]:  # lower layers: the global model's
            dict(net.named_parameters())[n].copy_(g_params[n])
        for n, b in global_net.named_buffers():
            dict(net.named_buffers())[n].copy_(b)
    start = weights is None
    w = {n: torch.ones_like(g_params[n]) for n in top} if start else {n: weights[n].clone() for n in top}
    if all(torch.equal(g_params[n], l_params[n]) for n in names):  # first round: θ_i = θ_g
        with torch.no_grad():
            for n in top:
                dict(net.named_parameters())[n].copy_(g_params[n])
        return net, w, {"passes": 0, "loss": math.nan, "start_phase": start, "skipped": True}

    theta = {n: l_params[n].detach() for n in top}
    diff = {n: g_params[n].detach() - theta[n] for n in top}
    fixed = {n: v.detach() for n, v in net.named_parameters() if n not in top}
    fixed.update({n: b for n, b in net.named_buffers()})
    used, labels = identities_from_pairs(train_pairs)
    size = max(2, int(round(len(used) * settings.percent / 100.0)))
    pick = np.sort(rng.choice(len(used), size=min(size, len(used)), replace=False))
    s_used, s_labels = used[pick], labels[pick]
    per_pass = max(1, math.ceil(len(s_used) / (cfg.p * cfg.k)))

    net.train()
    losses: list[float] = []
    while True:
        for b in pk_batches(s_labels, cfg.p, cfg.k, per_pass, rng):
            top_t = {n: (theta[n] + diff[n] * w[n]).requires_grad_(True) for n in top}
            emb = functional_call(net, {**fixed, **top_t}, (images[torch.from_numpy(s_used[b])],))
            loss = embedding_loss(emb, torch.from_numpy(s_labels[b]), cfg)
            grads = torch.autograd.grad(loss, [top_t[n] for n in top])
            with torch.no_grad():
                for n, g in zip(top, grads, strict=True):
                    w[n] = torch.clamp(w[n] - settings.eta * g * diff[n], 0.0, 1.0)
        losses.append(float(loss.detach()))
        if not start:
            break
        if len(losses) > settings.window and np.std(losses[-settings.window:]) < settings.threshold:
            break
        if len(losses) >= settings.max_passes:
            break
    with torch.no_grad():
        for n in top:
            dict(net.named_parameters())[n].copy_(theta[n] + diff[n] * w[n])
    return net, w, {"passes": len(losses), "loss": losses[-1], "start_phase": start, "skipped": False}
