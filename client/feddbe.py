"""FedDBE's client side: a personal representation bias (PRBM) and mean regularisation (MR).

FedDBE (Zhang et al. 2023 [1]_) splits the model into a feature extractor ("base") and a head. Each client keeps a
personal vector b̄_i, never shared, added to its representation before the head (PRBM, Eq. 5)::

    f_i(x) = head(base(x) + b̄_i)

and regularises the running mean of its local representations towards a global mean ḡ that the server forms
once, before training, as the sample-weighted average of the clients' means (MR, Eq. 6-7)::

    L_i = L(f_i(x), y) + κ · mean( ½ (r̄_i − ḡ)² ),   r̄_i ← (1 − m) · r̄_i.detach() + m · mean_batch(base(x))

The whole model (base and head) is averaged by the server as in FedAvg; b̄_i stays on the client and is part of
its personalised model (what it evaluates). Defaults: momentum m = 0.1 (reference code [2]_); κ is the reference
code's ``kl_weight`` (default 0 there, per-dataset in the paper's scripts); FedPrint's default 0.1 is stated in
``[federation] dbe_kappa``.

Adaptations (documented): the loss L is FedPrint's contrastive loss on P x K batches, not cross-entropy; the
reference code runs one extra local training pass before round 1 only to collect the clients' means, while here
round 1 is a plain FedAvg round whose replies carry the means (no training is thrown away); b̄_i is trained by
the same Adam optimiser as the model (SGD at the same learning rate in the reference code).

References
----------
.. [1] J. Zhang, Y. Hua, J. Cao, H. Wang, T. Song, Z. Xue, R. Ma, H. Guan, "Eliminating Domain Bias for
   Federated Learning in Representation Space", NeurIPS 2023.
.. [2] J. Zhang et al., PFLlib, ``system/flcore/clients/clientdbe.py`` (reference implementation).
"""

from __future__ import annotations

import torch
from torch import nn


class DBEEncoder(nn.Module):
    """``encoder`` with FedDBE's personal representation bias and running representation mean.

    Parameters
    ----------
    encoder : nn.Module
        An encoder with ``representation`` / ``project`` (see :mod:`fedprint.models.siamese`); shared with the server.
    bias : Tensor, optional
        The client's b̄_i from earlier rounds (default zeros).
    use_bias : bool
        False for the round before the global mean exists (plain model, as the reference code's first pass).
    momentum : float
        m of the running mean (default 0.1).
    """

    def __init__(self, encoder: nn.Module, bias: torch.Tensor | None = None, *, use_bias: bool = True,
                 momentum: float = 0.1) -> None:
        super().__init__()
        if not 0 < momentum <= 1:
            raise ValueError(f"FedDBE momentum: expected a value in (0, 1], got {momentum}")
        self.encoder = encoder
        dim = encoder.head_layer.in_features
        start = torch.zeros(dim) if bias is None else bias.detach().clone().reshape(dim)
        self.bias = nn.Parameter(start, requires_grad=use_bias)
        self.use_bias = use_bias
        self.momentum = float(momentum)
        self.running_mean: torch.Tensor = torch.zeros(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rep = self.encoder.representation(x)
        if self.training:  # the graph of this batch's mean is kept until the next batch (MR's gradient)
            before = self.running_mean.detach().to(rep.device)  # follows the encoder's device (models.device)
            self.running_mean = (1 - self.momentum) * before + self.momentum * rep.mean(0)
        return self.encoder.project(rep + self.bias if self.use_bias else rep)

    def mean_regulariser(self, global_mean: torch.Tensor, kappa: float):
        """The MR term as a zero-argument callable for :func:`fedprint.training.trainer.train_siamese`."""
        target = global_mean.detach().reshape(self.running_mean.shape)

        def term() -> torch.Tensor:
            return kappa * torch.mean(0.5 * (self.running_mean - target.to(self.running_mean.device)) ** 2)

        return term
