"""FedProx's client side: the proximal term (μ/2)·‖w − w_g‖² added to the local objective.

Flower's ``FedProx`` strategy only sends ``proximal-mu``; every client must add the term itself. Its gradient
is μ·(w − w_g), so instead of changing the loss we add that to each parameter's gradient just before the Adam
step — the optimizer then minimises loss + (μ/2)·‖w − w_g‖² exactly, and ``fedprint.training.trainer.train_siamese``
stays unchanged (it accepts any optimizer). The reported training loss excludes the proximal term.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


class ProximalAdam(torch.optim.Adam):
    """Adam on loss + (μ/2)·Σ‖w − w_g‖² where w_g are the global weights received this round.

    Parameters
    ----------
    params : iterable of Parameter
        The encoder's parameters (in the same order as ``global_params``).
    global_params : iterable of Tensor
        Copies of the global model's parameters (not updated).
    mu : float
        Proximal weight μ >= 0 (0 gives plain Adam).
    lr : float
        Adam learning rate.
    weight_decay : float
        Decoupled weight decay (AdamW; default 0), as ``[train] weight_decay``.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], global_params: Iterable[torch.Tensor], *,
                 mu: float, lr: float, weight_decay: float = 0.0) -> None:
        params = list(params)
        self._anchor = [g.detach().clone() for g in global_params]
        if len(self._anchor) != len(params):
            raise ValueError(f"global_params: expected {len(params)} tensors, got {len(self._anchor)}")
        if not mu >= 0:
            raise ValueError(f"mu: expected >= 0, got {mu}")
        self.mu = float(mu)
        self._params = params
        super().__init__(params, lr=lr, weight_decay=weight_decay, decoupled_weight_decay=True)

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102 - same contract as Adam.step
        if self.mu > 0:
            for k, (p, g) in enumerate(zip(self._params, self._anchor, strict=True)):
                if p.grad is not None:
                    if g.device != p.device:  # the encoder trains on another device (models.device)
                        g = self._anchor[k] = g.to(p.device)
                    p.grad.add_(p.detach() - g, alpha=self.mu)
        return super().step(closure)
