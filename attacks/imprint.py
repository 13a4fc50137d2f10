"""Malicious-server imprint attack: "Robbing the Fed" (Fowl, Geiping, Czaja, Goldblum, Goldstein, ICLR 2022).

The server inserts an :class:`ImprintBlock` in front of the encoder it sends (:func:`tamper`)::

    h = ReLU(W0 x + b0),   W0[i] = w (the same measurement direction in every row),  b0[i] = -q_i,
    out = x + W1 h,        W1[:, i] = (gain / k) u  (the same unit direction u in every column; a fixed
                                                    buffer of the architecture, not a trainable parameter),

with thresholds q_0 < q_1 < ... < q_{k-1} at quantiles of the measurement m = <w, x> (estimated on public /
synthetic data). The residual form keeps the encoder's input an image (perturbed by a small multiple of u),
so the tampered model still trains. Row i is active for exactly the samples with m > q_i, and because every
column of W1 is the same, dL/dh_i = <u, dL/dout_n> gain / k =: c_n is the same for all active rows of a sample.
Hence (Fowl et al. 2022, Sec. 3)

    dL/dW0[i] = sum_{n: m_n > q_i} c_n x_n,   dL/db0[i] = sum_{n: m_n > q_i} c_n,

and for a bin holding one sample n (q_i < m_n <= q_{i+1}) the differences of consecutive rows give
x_n = (dW0[i] - dW0[i+1]) / (db0[i] - db0[i+1]) **exactly** (:func:`recover_from_gradients`). A bin holding
two or more samples yields their c-weighted average; samples below q_0 are lost. Several uses of one image in
a batch (an image in two pairs) fall in one bin and still recover it exactly.

Measurement: under FedPrint's per-image standardisation the mean brightness of every input is 0, so the
paper's "mean pixel" measurement separates nothing; the default is a random Gaussian direction w ~ N(0, I/D),
for which m ~ N(0, 1) approximately on standardised inputs (||x||^2 = D). Both are offered.

FedAvg (several local steps): the server divides the parameter difference by the learning rate. For plain
SGD that is the sum of the per-step gradients, and recovery still works while every bin holds one image over
all steps, up to the drift of W0 and b0 during local training (:func:`fedavg_pseudo_gradient`). With Adam
(FedPrint's default local optimiser) the update is an element-wise rescaled average and the ratio identity
breaks; the audit measures how much survives.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from scipy.stats import norm
from torch import nn

MEASUREMENTS = ("gaussian", "mean")


class ImprintBlock(nn.Module):
    """Imprint block of Robbing the Fed with a residual connection (see module docstring).

    Parameters
    ----------
    input_shape : (C, H, W)
        Shape of one network input.
    num_bins : int
        k, number of bins (rows of W0), >= 2.
    measurement : {"gaussian", "mean"}
        Measurement direction w: a random Gaussian direction (default) or the mean pixel value.
    public_inputs : Tensor, shape (n, C, H, W), optional
        Public / synthetic network inputs whose measurements set the thresholds (empirical quantiles).
        None: thresholds at quantiles of N(0, 1), the approximate distribution of the Gaussian measurement
        on standardised inputs.
    gain : float
        Scale of W1 (default 1.0): the encoder sees x + gain * mean_i(ReLU(m - q_i)) * u with ||u|| = 1.
    seed : int
        Seeds w and u.
    """

    def __init__(self, input_shape: Sequence[int], num_bins: int, *, measurement: str = "gaussian",
                 public_inputs: torch.Tensor | None = None, gain: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        shape = tuple(int(v) for v in input_shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"input_shape: expected (C, H, W) with positive sizes, got {input_shape!r}")
        if not isinstance(num_bins, int) or num_bins < 2:
            raise ValueError(f"num_bins: expected an integer >= 2, got {num_bins!r}")
        if measurement not in MEASUREMENTS:
            raise ValueError(f"measurement: expected one of {MEASUREMENTS}, got {measurement!r}")
        if not (np.isfinite(gain) and gain > 0):
            raise ValueError(f"gain: expected a finite number > 0, got {gain!r}")
        self.input_shape = shape
        self.num_bins = num_bins
        self.measurement = measurement
        d = int(np.prod(shape))
        rng = np.random.default_rng(seed)
        if measurement == "gaussian":
            w = rng.standard_normal(d) / np.sqrt(d)
        else:
            w = np.full(d, 1.0 / d)
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        self.linear0 = nn.Linear(d, num_bins)
        with torch.no_grad():
            self.linear0.weight.copy_(torch.from_numpy(np.tile(w, (num_bins, 1))).float())
        # W1 = (gain / k) u 1^T is a fixed buffer, not a parameter: local training cannot make its columns
        # differ, so c_n stays the same for every row through all local steps (FedAvg).
        self.register_buffer("back_projection", torch.from_numpy(u * (gain / num_bins)).float())
        self.register_buffer("direction", torch.from_numpy(w).float())
        self.calibrate(public_inputs)

    def measure(self, x: torch.Tensor) -> torch.Tensor:
        """Measurement m = <w, x> per sample, shape (N,)."""
        return x.flatten(1) @ self.direction

    @torch.no_grad()
    def calibrate(self, public_inputs: torch.Tensor | None) -> np.ndarray:
        """Set thresholds q_0..q_{k-1} (b0 = -q) and return them.

        With data: q_j = empirical quantile j/k of the public measurements for j >= 1, so the k bins are
        equally likely; q_0 = min - (max - min) sits well below every public value (a catch-all first bin).
        Without data: the same construction on N(0, 1) (q_0 = -8).
        """
        k = self.num_bins
        levels = np.arange(1, k) / k
        if public_inputs is None:
            q = np.concatenate([[-8.0], norm.ppf(levels)])
        else:
            if public_inputs.ndim != 4 or tuple(public_inputs.shape[1:]) != self.input_shape:
                raise ValueError(f"public_inputs: expected (n, {', '.join(map(str, self.input_shape))}), "
                                 f"got {tuple(public_inputs.shape)}")
            m = self.measure(public_inputs.float()).double().numpy()
            if m.size < 2 or np.ptp(m) <= 0:
                raise ValueError("public_inputs: need at least 2 inputs with distinct measurements")
            q = np.concatenate([[m.min() - np.ptp(m)], np.quantile(m, levels)])
        q = np.maximum.accumulate(q)  # ties (e.g. few public samples) must not reorder the rows
        self.linear0.bias.copy_(torch.from_numpy(-q).float())
        return q

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.linear0(x.flatten(1)))
        return x + (h.sum(dim=1, keepdim=True) * self.back_projection).view_as(x)


def tamper(encoder: nn.Module, input_shape: Sequence[int], num_bins: int, *,
           public_inputs: torch.Tensor | None = None, measurement: str = "gaussian", gain: float = 1.0,
           seed: int = 0) -> nn.Sequential:
    """The model a malicious server sends: ``Sequential(ImprintBlock, copy of encoder)``.

    The given encoder is deep-copied, never modified. Parameters as in :class:`ImprintBlock`. The client
    calls the returned module exactly like its encoder (N, C, H, W) -> embeddings.
    """
    block = ImprintBlock(input_shape, num_bins, measurement=measurement, public_inputs=public_inputs,
                         gain=gain, seed=seed)
    return nn.Sequential(block, copy.deepcopy(encoder))


def imprint_block_of(model: nn.Module) -> ImprintBlock:
    """The :class:`ImprintBlock` of a model built by :func:`tamper`."""
    if isinstance(model, nn.Sequential) and len(model) and isinstance(model[0], ImprintBlock):
        return model[0]
    raise ValueError("model: expected the Sequential(ImprintBlock, encoder) returned by tamper()")


def recover_from_gradients(
    grad_weight: torch.Tensor,
    grad_bias: torch.Tensor,
    *,
    input_shape: Sequence[int] | None = None,
    rel_tol: float = 1e-6,
) -> torch.Tensor:
    """Recover inputs from the imprint layer's gradients (Fowl et al. 2022, Eq. 3).

    Parameters
    ----------
    grad_weight : Tensor, shape (k, D)
        Gradient (or pseudo-gradient) of W0, rows in threshold order.
    grad_bias : Tensor, shape (k,)
        Gradient of b0.
    input_shape : (C, H, W), optional
        Reshape the recovered rows; default: flat (n, D).
    rel_tol : float
        A bin is non-empty when ``|db| > rel_tol * max |db|`` (empty bins give 0/0).

    Returns
    -------
    Tensor, float64, shape (n, C, H, W) or (n, D)
        One candidate per non-empty bin, in bin order: exact for bins holding one sample, the weighted
        average of the samples otherwise.
    """
    gw = grad_weight.detach().double()
    gb = grad_bias.detach().double().reshape(-1)
    if gw.ndim != 2 or gb.shape[0] != gw.shape[0]:
        raise ValueError(f"grad_weight (k, D) and grad_bias (k,) do not fit: {tuple(gw.shape)}, "
                         f"{tuple(grad_bias.shape)}")
    dw = gw - torch.cat([gw[1:], torch.zeros_like(gw[:1])])
    db = gb - torch.cat([gb[1:], torch.zeros_like(gb[:1])])
    scale = float(db.abs().max())
    if scale == 0.0:
        out = gw[:0]
    else:
        keep = db.abs() > rel_tol * scale
        out = dw[keep] / db[keep, None]
    if input_shape is not None:
        out = out.reshape(-1, *(int(v) for v in input_shape))
    return out


def imprint_gradients(model: nn.Module, grads: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick (dW0, db0) out of a full gradient list ordered like ``model.parameters()``."""
    block = imprint_block_of(model)
    params = [p for p in model.parameters() if p.requires_grad]
    ids = [id(p) for p in params]
    if len(grads) != len(params):
        raise ValueError(f"grads: expected {len(params)} tensors (one per trainable parameter), got {len(grads)}")
    return grads[ids.index(id(block.linear0.weight))], grads[ids.index(id(block.linear0.bias))]


def fedavg_pseudo_gradient(before: nn.Module, after: nn.Module, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(W0_before - W0_after) / lr and the same for b0: what a FedAvg server sees of the imprint layer.

    Equals the sum of the local gradients for plain SGD with learning rate ``lr``.
    """
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"lr: expected a finite number > 0, got {lr!r}")
    b0, b1 = imprint_block_of(before), imprint_block_of(after)
    dw = (b0.linear0.weight.detach().double() - b1.linear0.weight.detach().double()) / lr
    db = (b0.linear0.bias.detach().double() - b1.linear0.bias.detach().double()) / lr
    return dw, db


def match_candidates(true_x: torch.Tensor, candidates: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """For each true input, the candidate with the smallest MSE: (indices, mse), -1 / inf when none exist."""
    t = true_x.detach().double().flatten(1)
    if candidates.shape[0] == 0:
        return np.full(len(t), -1), np.full(len(t), np.inf)
    c = candidates.detach().double().reshape(candidates.shape[0], -1)
    if c.shape[1] != t.shape[1]:
        raise ValueError(f"candidates: expected {t.shape[1]} values per input, got {c.shape[1]}")
    d = torch.cdist(t, c, compute_mode="donot_use_mm_for_euclid_dist").pow(2) / t.shape[1]
    best = d.argmin(dim=1)
    return best.numpy(), d.gather(1, best[:, None]).squeeze(1).numpy()


def recover_from_aggregate(per_client: Sequence[tuple[torch.Tensor, torch.Tensor]], weights: Sequence[float], *,
                           input_shape: Sequence[int] | None = None, rel_tol: float = 1e-6) -> torch.Tensor:
    """The imprint attack on what a server sees under secure aggregation: Σ_i α_i (dW0_i, db0_i), the weighted sum
    of the clients' imprint-layer (pseudo-)gradients (:mod:`fedprint.server.secure_strategy` unmasks exactly that
    for the whole model).

    The imprint gradient is linear in the batch: the sum is the gradient of the union of the clients' batches with
    each sample's c_n scaled by its client's α_i. A bin still holding a single sample of the union gives that
    sample **exactly** (α_i cancels in the ratio, Fowl et al. 2022 Eq. 3); bins with samples of several clients
    give mixtures. So secure aggregation does not stop the imprint attack — it only raises the number of samples
    competing for the k bins (n clients × batch), which is what an audit of a secure run measures.
    """
    if len(per_client) != len(weights) or not per_client:
        raise ValueError(f"per_client and weights: one weight per client expected, got {len(per_client)} and "
                         f"{len(weights)}")
    gw = sum(float(a) * g[0].detach().double() for g, a in zip(per_client, weights, strict=True))
    gb = sum(float(a) * g[1].detach().double() for g, a in zip(per_client, weights, strict=True))
    return recover_from_gradients(gw, gb, input_shape=input_shape, rel_tol=rel_tol)
