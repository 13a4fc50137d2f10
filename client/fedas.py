"""FedAS's client side: parameter alignment to local prototypes and the Fisher information of the local model.

FedAS (Yang et al. 2024 [1]_) keeps a personalised model per client (shared base + personal head) and adds two
steps to FedAvg:

* **federated parameter alignment** (client, on receiving θ_g): the client computes, with its own previous
  model, the mean representation of every class it holds (prototypes), trains the global base for one epoch
  so its representations of the local samples move to those prototypes (MSE, SGD lr 0.01, batches of 16), and
  takes that aligned base with its own head as the start of local training;
* **client synchronisation** (server): local models are averaged with weights proportional to the trace of
  each client's Fisher information matrix, estimated after local training as Σ_batches ‖∇_θ L‖² (the
  reference code's estimate); :class:`fedprint.server.personalized.FedAS`.

The personalised model (aligned base + own head, after local training) is what the client evaluates.

Adaptations (documented): classes are fingers (connected components of the genuine training pairs); the
Fisher estimate uses the client's training loss (:func:`fedprint.training.trainer.embedding_loss`) on P x K batches (the
reference code uses the negative log-likelihood of a classifier, which a verifier does not have). Defaults follow PFLlib
``clientas.py`` [2]_ (one alignment epoch, SGD lr 0.01, batch 16).

References
----------
.. [1] X. Yang, W. Huang, M. Ye, "FedAS: Bridging Inconsistency in Personalized Federated Learning", CVPR 2024.
.. [2] J. Zhang et al., PFLlib, ``system/flcore/clients/clientas.py`` (reference implementation).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from fedprint.config import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.models.siamese import head_parameter_names
from fedprint.training.trainer import embedding_loss, identities_from_pairs, pk_batches


@torch.no_grad()
def finger_prototypes(net: nn.Module, images: torch.Tensor, train_pairs: PairSet,
                      batch_size: int = 256) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """Mean representation (base output) of each training finger under ``net``.

    Returns ``(image_indices, labels, prototypes)``: the training images, their finger label, and one
    prototype row per label (shape (n_fingers, feature_dim)).
    """
    used, labels = identities_from_pairs(train_pairs)
    net.eval()
    x = images[torch.from_numpy(used)]
    reps = torch.cat([net.representation(x[s:s + batch_size]) for s in range(0, len(x), batch_size)])
    lab = torch.from_numpy(labels)
    n = int(labels.max()) + 1
    sums = torch.zeros(n, reps.shape[1]).index_add_(0, lab, reps)
    return used, labels, sums / torch.bincount(lab, minlength=n).clamp_min(1).unsqueeze(1).float()


def align_to_prototypes(global_net: nn.Module, images: torch.Tensor, used: np.ndarray, labels: np.ndarray,
                        prototypes: torch.Tensor, *, rng: np.random.Generator, lr: float = 0.01,
                        batch_size: int = 16, epochs: int = 1) -> float:
    """Train ``global_net``'s base (in place) so representations of the local images approach their finger's
    prototype; returns the last batch's loss.

    Loss per batch: Σ over the fingers in the batch of MSE(base(x_f), prototype_f) (the reference code's sum of
    per-class mean squared errors). Only base parameters change (the head gets no gradient from this loss).
    """
    head = set(head_parameter_names(global_net))
    params = [p for n, p in global_net.named_parameters() if n not in head]
    opt = torch.optim.SGD(params, lr=lr)
    global_net.train()
    last = math.nan
    for _ in range(epochs):
        order = rng.permutation(len(used))
        for s in range(0, len(order), batch_size):
            b = order[s:s + batch_size]
            reps = global_net.representation(images[torch.from_numpy(used[b])])
            lab = torch.from_numpy(labels[b])
            loss = sum(torch.nn.functional.mse_loss(reps[lab == f], prototypes[f].expand_as(reps[lab == f]))
                       for f in lab.unique())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            last = float(loss.detach())
    return last


def with_own_head(base_net: nn.Module, own: nn.Module) -> nn.Module:
    """A copy of ``base_net`` whose head parameters are ``own``'s (aligned global base + personal head)."""
    net = copy.deepcopy(base_net)
    own_params, head = dict(own.named_parameters()), set(head_parameter_names(net))
    with torch.no_grad():
        for n, p in net.named_parameters():
            if n in head:
                p.copy_(own_params[n])
    return net


def fisher_trace(net: nn.Module, images: torch.Tensor, train_pairs: PairSet, *, cfg: TrainConfig,
                 rng: np.random.Generator) -> float:
    """Σ over one pass of P x K batches of ‖∇_θ L(batch)‖² (eval mode): FedAS's Fisher-trace estimate."""
    used, labels = identities_from_pairs(train_pairs)
    net.eval()
    params = [q for q in net.parameters() if q.requires_grad]
    total = 0.0
    for b in pk_batches(labels, cfg.p, cfg.k, max(1, math.ceil(len(used) / (cfg.p * cfg.k))), rng):
        loss = embedding_loss(net(images[torch.from_numpy(used[b])]), torch.from_numpy(labels[b]), cfg)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        total += float(sum((g.detach() ** 2).sum() for g in grads if g is not None))
    return total
