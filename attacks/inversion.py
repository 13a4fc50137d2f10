"""Optimisation-based gradient inversion against the Siamese verifier and its contrastive loss (Yan et al. 2025 Eq. 1).

Threat model: an honest-but-curious server holds the global encoder it sent and observes one client's gradient
on a batch of B verification pairs (FedSGD, or one local step). It searches for 2B dummy images whose gradient
matches the observed one.

* :func:`dlg_attack` - "Deep Leakage from Gradients" (Zhu, Liu, Han, NeurIPS 2019): L-BFGS on the squared
  Euclidean distance between dummy and true gradients.
* :func:`inverting_gradients_attack` - "Inverting Gradients" (Geiping et al., NeurIPS 2020): 1 - cosine
  similarity of the gradients + total-variation prior, Adam with step decay, box constraint, several restarts
  (the best final loss wins).

Dummy parametrisation: the attacker optimises *gray images* u in [0, 1] (u = g / 255) and pushes them through
the client's own normalisation (:mod:`fedprint.models.preprocess`: per-image standardisation, or x = 2u - 1), so the box
constraint is the physical one and the invariance of standardisation to gain/offset is built in. Results are
network inputs x; :mod:`fedprint.attacks.recon_metrics` maps them to gray levels.

Labels: the attacker knows the pairs' labels (``labels=...``) or estimates them by trying every labelling of the
B pairs (2^B runs, B <= 3) and keeping the one whose gradients match best. An impostor pair already beyond the
margin (d >= m) contributes a zero gradient: nothing about it is in the update, and no attack can recover it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from fedprint.attacks.recon_metrics import check_invertible
from fedprint.models.loss import contrastive_loss

_STD_FLOOR = 1e-6


def pair_gradients(
    model: nn.Module,
    x1: torch.Tensor,
    x2: torch.Tensor,
    y: torch.Tensor,
    margin: float = 1.0,
    *,
    create_graph: bool = False,
) -> list[torch.Tensor]:
    """Gradient of the mean contrastive loss (Eq. 1) of pairs (x1[i], x2[i], y[i]) w.r.t. every parameter.

    ``model`` maps (N, 1, S, S) inputs to embeddings (the encoder, or a tampered ``Sequential``). With
    ``create_graph=True`` the result is differentiable w.r.t. ``x1`` / ``x2`` (needed by the attacks).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    loss = contrastive_loss(model(x1), model(x2), y.to(torch.float32), margin=margin, check_labels=False)
    return list(torch.autograd.grad(loss, params, create_graph=create_graph))


def normalise_like_client(u: torch.Tensor, normalization: str) -> torch.Tensor:
    """Differentiable version of the client's input normalisation applied to gray images u in [0, 1]."""
    if normalization == "unit_range":
        return 2.0 * u - 1.0
    check_invertible(normalization)
    mean = u.mean(dim=(1, 2, 3), keepdim=True)
    std = u.std(dim=(1, 2, 3), keepdim=True, unbiased=False)
    return (u - mean) / std.clamp_min(_STD_FLOOR / 255.0)


def total_variation(u: torch.Tensor) -> torch.Tensor:
    """Anisotropic TV: mean absolute difference of horizontally and vertically adjacent pixels."""
    return (u[..., 1:, :] - u[..., :-1, :]).abs().mean() + (u[..., :, 1:] - u[..., :, :-1]).abs().mean()


@dataclass
class InversionResult:
    """Output of one optimisation attack.

    Attributes
    ----------
    x1, x2 : Tensor, shape (B, 1, S, S)
        Reconstructed network inputs of the two sides of the B pairs.
    gray1, gray2 : Tensor, shape (B, 1, S, S)
        The optimised gray images u, u = g / 255 (in [0, 1] for IG's box constraint; DLG is unconstrained;
        their gain/offset is meaningless under standardisation).
    labels : ndarray of int, shape (B,)
        Pair labels used (known or estimated).
    loss : float
        Final gradient-matching loss of the chosen run.
    initial_loss : float
        The same loss at the chosen run's random initialisation.
    seconds : float
        Wall-clock time of the whole attack (all restarts and labellings).
    history : list of float
        Matching loss of the chosen run, recorded every few iterations.
    """

    x1: torch.Tensor
    x2: torch.Tensor
    gray1: torch.Tensor
    gray2: torch.Tensor
    labels: np.ndarray
    loss: float
    initial_loss: float
    seconds: float
    history: list[float] = field(default_factory=list)


def _check_target(model: nn.Module, target: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    params = [p for p in model.parameters() if p.requires_grad]
    target = [t.detach() for t in target]
    if len(target) != len(params) or any(t.shape != p.shape for t, p in zip(target, params, strict=False)):
        raise ValueError("target_grads: expected one gradient per trainable parameter of model, in "
                         "model.parameters() order, with matching shapes")
    return target


def _labellings(labels, n_pairs: int) -> list[np.ndarray]:
    if labels is not None:
        y = np.asarray(labels).astype(np.int64).reshape(-1)
        if y.shape != (n_pairs,) or not np.all((y == 0) | (y == 1)):
            raise ValueError(f"labels: expected {n_pairs} values in {{0, 1}}, got {labels!r}")
        return [y]
    if n_pairs > 3:
        raise ValueError(f"labels: estimation enumerates 2^B labellings and is limited to B <= 3 pairs, "
                         f"got B = {n_pairs}; pass the labels")
    return [np.array(c, dtype=np.int64) for c in itertools.product((0, 1), repeat=n_pairs)]


def _check_common(n_pairs: int, input_shape, normalization: str) -> tuple[int, int, int]:
    if not isinstance(n_pairs, int) or n_pairs < 1:
        raise ValueError(f"n_pairs: expected an integer >= 1, got {n_pairs!r}")
    if len(tuple(input_shape)) != 3 or min(input_shape) < 1:
        raise ValueError(f"input_shape: expected (C, H, W), got {input_shape!r}")
    check_invertible(normalization)
    return tuple(int(v) for v in input_shape)


def _euclid(g: Sequence[torch.Tensor], t: Sequence[torch.Tensor]) -> torch.Tensor:
    return sum(((a - b) ** 2).sum() for a, b in zip(g, t, strict=True))


def _cosine(g: Sequence[torch.Tensor], t: Sequence[torch.Tensor]) -> torch.Tensor:
    dot = sum((a * b).sum() for a, b in zip(g, t, strict=True))
    ng = torch.sqrt(sum((a * a).sum() for a in g) + 1e-20)
    nt = torch.sqrt(sum((b * b).sum() for b in t) + 1e-20)
    return 1.0 - dot / (ng * nt)


def _matching_loss(model, u, y, target, margin, normalization, kind):
    x = normalise_like_client(u, normalization)
    b = u.shape[0] // 2
    g = pair_gradients(model, x[:b], x[b:], y, margin, create_graph=True)
    return _euclid(g, target) if kind == "euclid" else _cosine(g, target)


def dlg_attack(
    model: nn.Module,
    target_grads: Sequence[torch.Tensor],
    n_pairs: int,
    input_shape: tuple[int, int, int],
    *,
    labels: Sequence[int] | None = None,
    margin: float = 1.0,
    normalization: str = "standardize",
    iterations: int = 100,
    restarts: int = 1,
    seed: int = 0,
) -> InversionResult:
    """DLG: L-BFGS on ||grad(dummy) - grad(true)||^2 over 2B dummy images (Zhu et al. 2019, Alg. 1).

    Parameters
    ----------
    model : nn.Module
        The model the client differentiated (encoder); its parameters are not changed.
    target_grads : sequence of Tensor
        The observed gradient, one tensor per trainable parameter (:func:`pair_gradients`).
    n_pairs : int
        B, number of pairs in the client's batch.
    input_shape : (C, H, W)
        Network input shape.
    labels : sequence of {0, 1}, optional
        Known pair labels; None = estimate by enumeration (B <= 3).
    margin : float
        Contrastive margin m of Eq. 1 used by the client.
    normalization : {"standardize", "unit_range"}
        The client's input normalisation.
    iterations : int
        L-BFGS outer iterations (each up to 20 function evaluations, strong-Wolfe line search).
    restarts : int
        Random initialisations per labelling; the lowest final loss wins.
    seed : int
        Seeds the dummy initialisation (uniform in [0, 1]).
    """
    return _run(model, target_grads, n_pairs, input_shape, labels=labels, margin=margin,
                normalization=normalization, iterations=iterations, restarts=restarts, seed=seed, kind="dlg")


def inverting_gradients_attack(
    model: nn.Module,
    target_grads: Sequence[torch.Tensor],
    n_pairs: int,
    input_shape: tuple[int, int, int],
    *,
    labels: Sequence[int] | None = None,
    margin: float = 1.0,
    normalization: str = "standardize",
    iterations: int = 300,
    lr: float = 0.05,
    tv_weight: float = 1e-2,
    restarts: int = 2,
    seed: int = 0,
) -> InversionResult:
    """Inverting Gradients: Adam on 1 - cos(grad(dummy), grad(true)) + tv_weight * TV(dummy) (Geiping 2020, Eq. 4).

    Box constraint: the gray dummy is projected onto [0, 1] after every step. The learning rate drops by 10x at
    3/8, 5/8 and 7/8 of the iterations (as in the paper). Other parameters as in :func:`dlg_attack`;
    ``lr`` is Adam's initial step on the [0, 1] gray scale, ``tv_weight`` the weight of the TV prior.
    """
    if lr <= 0 or tv_weight < 0:
        raise ValueError(f"lr must be > 0 and tv_weight >= 0, got lr={lr}, tv_weight={tv_weight}")
    return _run(model, target_grads, n_pairs, input_shape, labels=labels, margin=margin,
                normalization=normalization, iterations=iterations, restarts=restarts, seed=seed, kind="ig",
                lr=lr, tv_weight=tv_weight)


def _run(model, target_grads, n_pairs, input_shape, *, labels, margin, normalization, iterations, restarts,
         seed, kind, lr=0.05, tv_weight=0.0) -> InversionResult:
    shape = _check_common(n_pairs, input_shape, normalization)
    if iterations < 1 or restarts < 1:
        raise ValueError(f"iterations and restarts must be >= 1, got {iterations}, {restarts}")
    target = _check_target(model, target_grads)
    was_training = model.training
    model.eval()  # no dropout/BN here (GroupNorm), but keep the forward deterministic
    gen = torch.Generator().manual_seed(int(seed))
    t0 = time.perf_counter()
    best = None
    try:
        for y_np in _labellings(labels, n_pairs):
            y = torch.from_numpy(y_np).float()
            for _ in range(restarts):
                u0 = torch.rand((2 * n_pairs, *shape), generator=gen)
                res = (_dlg_once if kind == "dlg" else _ig_once)(model, u0, y, target, margin, normalization,
                                                                 iterations, lr, tv_weight)
                if best is None or res[1] < best[1]:
                    best = (*res, y_np)
    finally:
        model.train(was_training)
    u, loss, init, hist, y_np = best
    with torch.no_grad():
        x = normalise_like_client(u, normalization)
    return InversionResult(x1=x[:n_pairs], x2=x[n_pairs:], gray1=u[:n_pairs], gray2=u[n_pairs:], labels=y_np,
                           loss=loss, initial_loss=init, seconds=time.perf_counter() - t0, history=hist)


def _dlg_once(model, u0, y, target, margin, normalization, iterations, _lr, _tv):
    u = u0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([u], lr=1.0, max_iter=20, history_size=100, line_search_fn="strong_wolfe")
    hist: list[float] = []

    def closure():
        opt.zero_grad()
        loss = _matching_loss(model, u, y, target, margin, normalization, "euclid")
        loss.backward()
        return loss

    init = float(_matching_loss(model, u, y, target, margin, normalization, "euclid").detach())
    for _ in range(iterations):
        loss = opt.step(closure)
        hist.append(float(loss.detach()))
        if not np.isfinite(hist[-1]):
            break
    # DLG is unconstrained (Zhu et al.): the dummy is returned as optimised, not clipped to the box.
    u_fin = u.detach()
    final = float(_matching_loss(model, u_fin.clone().requires_grad_(True), y, target, margin, normalization,
                                 "euclid").detach())
    return u_fin, final, init, hist


def _ig_once(model, u0, y, target, margin, normalization, iterations, lr, tv_weight):
    u = u0.clone().requires_grad_(True)
    opt = torch.optim.Adam([u], lr=lr)
    steps = [int(iterations * f) for f in (3 / 8, 5 / 8, 7 / 8)]
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=steps, gamma=0.1)
    hist: list[float] = []
    init = None
    for it in range(iterations):
        opt.zero_grad()
        match = _matching_loss(model, u, y, target, margin, normalization, "cosine")
        loss = match + tv_weight * total_variation(u)
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            u.clamp_(0.0, 1.0)
        if init is None:
            init = float(match.detach())
        if it % 10 == 0 or it == iterations - 1:
            hist.append(float(match.detach()))
    u_fin = u.detach()
    final = float(_matching_loss(model, u_fin.clone().requires_grad_(True), y, target, margin, normalization,
                                 "cosine").detach())
    return u_fin, final, float(init), hist
