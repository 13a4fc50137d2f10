"""What a server under secure aggregation can still invert by optimisation: DLG / IG on the unmasked sum.

Under ``[federation] secure_aggregation`` the server unmasks Σ_i α_i Δ_i over the cohort
(:mod:`fedprint.server.secure_strategy`), never one Δ_i. Under FedSGD every client sends Δ_i = −lr·g_i, with g_i
the gradient of the MEAN contrastive loss (Yan et al. 2025 Eq. 1) over its B_i pairs
(:func:`fedprint.attacks.inversion.pair_gradients`). With α_i = B_i / Σ_j B_j (FedAvg's example counts; 1/n for
equal batches)

    −(1/lr) Σ_i α_i Δ_i = Σ_i (B_i / Σ_j B_j) · (1/B_i) Σ_{pairs of i} ∇ℓ = ∇ (mean loss over the union batch),

so the sum is exactly the gradient of ONE batch of Σ_i B_i pairs (:func:`summed_gradient`,
:func:`union_weights`). An honest-but-curious server can therefore run the same optimisation attacks as on one
client (:func:`fedprint.attacks.inversion.dlg_attack`, :func:`~fedprint.attacks.inversion.
inverting_gradients_attack`: known labels, as in Table 5) with n·B dummy pairs. What the sum changes is the
problem size: n times more unknown images behind one gradient of the same dimension. With other weights (AFFR's
α) the sum is the gradient of a weighted union loss; the server knows α and could weight its dummy pairs alike —
not modelled here: the audit draws equal batches and uses α_i = B_i / Σ B_j.

:func:`secure_inversion_audit` measures it. For every number of clients n (default 3 and 5) it draws n clients'
batches of B pairs (disjoint images, client i from institution i mod P:
:func:`fedprint.attacks.secure_audit._draw_batches`), computes every client's gradient of the run's global model
and attacks

* ``plain`` — each client's update on its own (what the server of a plain run holds), 2B dummy images per
  attack, every reconstruction paired within that client's prints; ``plain_clients`` bounds how many of the n
  clients are attacked alone (the quick audit attacks one);
* ``secure`` — the sum that the real SecAgg+ protocol unmasks (:func:`fedprint.attacks.secure_audit.secagg_sum`:
  the clients' stage handlers and the server's stages 1–3, the run's clipping and quantisation range, masks and
  stochastic rounding), divided by −lr, with 2·n·B dummy images; ``sum_cosine`` is its cosine with the float64
  sum (how much the ring's quantisation perturbed the gradient the attack matches);
* ``secure, unquantised`` (optional) — the same weighted sum in float64;
* ``baseline: another client's print`` — no attack: each print "reconstructed" by the most similar print of
  ANOTHER client. Its scores are the chance level of the metrics on these prints; a reconstruction that does not
  beat it shows nothing of the print.

Each true print is paired with its best candidate (smallest MSE on the network-input scale, as in
:mod:`fedprint.attacks.secure_audit`) and scored against the RAW print (:func:`fedprint.attacks.recon_metrics.
compare`: exact, PSNR, SSIM, LPIPS) and by ``rho_median``, the median Pearson correlation (network-input scale)
of a print with its candidate. Mixtures: a candidate counts as a cross-client mixture when it resembles prints of
two different clients more than they resemble each other (:func:`mixtures`); ``print_cross_rho``, the highest
correlation between two true prints of different clients, shows how far distinct prints correlate on their own.
PSNR with the oracle affine favours flat, low-contrast images (a noise-like reconstruction outscores another
print), so "above chance" is read on SSIM and ρ. The rows of the prints the plain attack covered also carry the secure
condition's scores on those same prints (``psnr_median_plain_prints``, ``ssim_plain_prints``), the like-for-like
comparison.

Deterministic given ``seed`` (batches, dummy initialisation), except the protocol's masks and stochastic rounding,
which use OS entropy as the product does: the ``secure`` rows can differ slightly between audits of one run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from fedprint.attacks import imprint as im
from fedprint.attacks import recon_metrics as rm
from fedprint.attacks.inversion import dlg_attack, inverting_gradients_attack, pair_gradients
from fedprint.attacks.secure_audit import _draw_batches, secagg_sum
from fedprint.privacy.secure_sum import quantization_step

#: Numbers of clients in the sum the audit attacks (issue 58 §3: 3, and 5 where the budget allows).
CLIENT_COUNTS = (3, 5)
CONDITIONS = ("plain", "secure", "secure, unquantised", "baseline: another client's print")
#: Pearson correlation with a print from which a candidate counts as showing that print (mixture test).
MIXTURE_RHO = 0.3
#: How much more a mixture must resemble each of two prints than they resemble each other (see :func:`mixtures`).
MIXTURE_MARGIN = 0.1


def union_weights(batch_pairs: Sequence[int]) -> np.ndarray:
    """α_i = B_i / Σ_j B_j: the weights under which Σ α_i g_i is the gradient of the union batch (module doc)."""
    b = np.asarray(batch_pairs, dtype=np.float64)
    if b.ndim != 1 or b.size == 0 or np.any(b < 1):
        raise ValueError(f"batch_pairs: expected one count >= 1 per client, got {list(batch_pairs)}")
    return b / b.sum()


def summed_gradient(grads: Sequence[Sequence[torch.Tensor]], weights: Sequence[float]) -> list[torch.Tensor]:
    """Σ_i α_i g_i, parameter by parameter (``grads[i]`` = client i's :func:`pair_gradients`)."""
    if not grads or len(grads) != len(weights):
        raise ValueError(f"grads and weights: one weight per client expected, got {len(grads)} and {len(weights)}")
    return [sum(float(w) * g[j] for g, w in zip(grads, weights, strict=True)) for j in range(len(grads[0]))]


def flatten(grads: Sequence[torch.Tensor]) -> np.ndarray:
    """One float64 vector of a gradient (the layout an update travels in)."""
    return torch.cat([g.detach().double().ravel() for g in grads]).numpy()


def unflatten(vec: np.ndarray, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Inverse of :func:`flatten`, in the dtype and shapes of ``like``."""
    size = sum(t.numel() for t in like)
    if len(vec) != size:
        raise ValueError(f"vec: expected {size} values, got {len(vec)}")
    out, i = [], 0
    for t in like:
        out.append(torch.from_numpy(np.asarray(vec[i:i + t.numel()])).reshape(t.shape).to(t.dtype))
        i += t.numel()
    return out


def _z(x: torch.Tensor) -> np.ndarray:
    """Rows z-normalised (for Pearson correlations as dot products / d)."""
    v = x.detach().double().reshape(len(x), -1).numpy()
    v = v - v.mean(axis=1, keepdims=True)
    return v / np.maximum(v.std(axis=1, keepdims=True), 1e-12)


def correlations(cands: torch.Tensor, prints: torch.Tensor) -> np.ndarray:
    """Pearson correlation of every candidate (rows) with every print (columns), network-input scale."""
    a, b = _z(cands), _z(prints)
    return a @ b.T / a.shape[1]


def mixtures(rho: np.ndarray, rho_prints: np.ndarray, owner: np.ndarray, used: np.ndarray) -> int:
    """How many of the candidates ``used`` are cross-client mixtures.

    Candidate c mixes prints j and l of two different clients when ρ(c, x_j) and ρ(c, x_l) both reach
    max(:data:`MIXTURE_RHO`, ρ(x_j, x_l) + :data:`MIXTURE_MARGIN`): prints share their blob-on-background layout
    (ρ(x_j, x_l) is often above 0.3), so a candidate counts only where it resembles both prints more than they
    resemble each other (a 50/50 mixture of two z-normalised prints has ρ = √((1 + ρ_jl)/2) with each; a
    reconstruction of x_j alone has about ρ_jl with x_l).
    """
    out = 0
    cross = owner[:, None] != owner[None, :]
    need = np.maximum(MIXTURE_RHO, rho_prints + MIXTURE_MARGIN)
    for c in np.unique(used):
        both = (rho[c][:, None] >= need) & (rho[c][None, :] >= need) & cross
        out += bool(both.any())
    return out


def _attack(name: str, model: nn.Module, target: list[torch.Tensor], y: np.ndarray, shape, *, normalization: str,
            margin: float, budget: dict, seed: int):
    if name == "dlg":
        return dlg_attack(model, target, len(y), shape, labels=y.astype(int), margin=margin,
                          normalization=normalization, iterations=budget["dlg_iterations"], seed=seed)
    return inverting_gradients_attack(model, target, len(y), shape, labels=y.astype(int), margin=margin,
                                      normalization=normalization, iterations=budget["ig_iterations"],
                                      restarts=budget["ig_restarts"], seed=seed)


def _score(xs: Sequence[torch.Tensor], refs: Sequence[np.ndarray], normalization: str, with_lpips: bool) -> list:
    return [rm.compare(x.reshape(x.shape[-2:]), ref, normalization, with_lpips=with_lpips)
            for x, ref in zip(xs, refs, strict=True)]


def _summary(scores: list[dict]) -> dict:
    lp = [s["lpips"] for s in scores]
    out = {"images": len(scores), "exact": int(sum(s["exact"] for s in scores)),
           "exact_fraction": float(np.mean([s["exact"] for s in scores])),
           "psnr_median": float(np.median([s["psnr"] for s in scores])),
           "ssim": float(np.mean([s["ssim"] for s in scores])),
           "lpips": float(np.mean(lp)) if all(v is not None for v in lp) else None}
    if out["lpips"] is None:
        out["lpips_note"] = next((s.get("lpips_note") for s in scores if s.get("lpips_note")), "unavailable")
    return out


def secure_inversion_audit(encoder: nn.Module, images: Sequence[torch.Tensor], train_pairs: Sequence,
                           raw_gray: Sequence[np.ndarray], *, normalization: str, lr: float, clipping_range: float,
                           quantization_range: int, num_shares: int = 0, threshold: int = 0,
                           client_counts: Sequence[int] = CLIENT_COUNTS, batch_pairs: int = 1,
                           attacks: Sequence[str] = ("ig",), plain_clients: int | None = None,
                           unquantised: bool = False, dlg_iterations: int = 50, ig_iterations: int = 300,
                           ig_restarts: int = 1, margin: float = 1.0, seed: int = 0, with_lpips: bool = True,
                           grid_dir: str | Path | None = None) -> dict:
    """DLG / IG on one client's gradient (plain) vs on the SecAgg+ sum of n clients' (module docstring).

    Parameters
    ----------
    encoder : nn.Module
        The global model the clients differentiate (the run's checkpoint); never modified.
    images, train_pairs, raw_gray
        Per institution: network inputs (raw prints), training pairs, raw prints in gray levels at network
        resolution — as :func:`fedprint.attacks.secure_audit.secure_imprint_audit` takes them.
    normalization : str
        The run's input normalisation.
    lr : float
        The clients' learning rate (the run's ``train.lr``): Δ_i = −lr·g_i (FedSGD).
    clipping_range, quantization_range, num_shares, threshold
        The run's ``[federation] secagg_*`` values.
    client_counts : sequence of int
        Clients n in the sum (each >= 3).
    batch_pairs : int
        Pairs B per client batch (the sum is attacked with n·B dummy pairs).
    attacks : sequence of {"dlg", "ig"}
        Optimisation attacks to run.
    plain_clients : int, optional
        How many of the n clients the plain condition attacks alone (default: all n).
    unquantised : bool
        Also attack the float64 sum (``secure, unquantised``).
    dlg_iterations, ig_iterations, ig_restarts
        Attack budgets (the same for every condition).

    Returns
    -------
    dict
        ``rows`` (one per n, attack and condition: images, exact, exact_fraction, psnr_median, ssim, lpips,
        rho_median, candidates, mixtures, print_cross_rho, match_loss, seconds; ``secure``: in_sum,
        sum_cosine, psnr_median_plain_prints, ssim_plain_prints), ``grids``, ``notes``.
    """
    bad = [a for a in attacks if a not in ("dlg", "ig")]
    if bad or not attacks:
        raise ValueError(f"attacks: expected some of 'dlg', 'ig', got {list(attacks)}")
    if any(int(n) < 3 for n in client_counts):
        raise ValueError(f"client_counts: secure aggregation needs at least 3 clients, got {list(client_counts)}")
    if not images or len(images) != len(train_pairs) or len(images) != len(raw_gray):
        raise ValueError("images, train_pairs and raw_gray: one entry per institution expected")
    budget = {"dlg_iterations": int(dlg_iterations), "ig_iterations": int(ig_iterations),
              "ig_restarts": int(ig_restarts)}
    shape = tuple(int(v) for v in images[0].shape[1:])
    model, was_training = encoder, encoder.training
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    grids: list[str] = []
    skipped: list[str] = []
    try:
        for n in (int(v) for v in client_counts):
            try:
                batches = _draw_batches(train_pairs, n, int(batch_pairs), rng)
            except ValueError as exc:
                skipped.append(f"{n} clients x B = {batch_pairs}: not measured ({exc})")
                continue
            rows += _one_count(model, images, raw_gray, batches, shape, normalization=normalization, lr=lr,
                               ring={"clipping_range": clipping_range, "quantization_range": quantization_range,
                                     "num_shares": num_shares, "threshold": threshold},
                               attacks=attacks, plain_clients=plain_clients, unquantised=unquantised,
                               budget=budget, margin=margin, seed=seed, with_lpips=with_lpips,
                               grid_dir=grid_dir, grids=grids)
    finally:
        model.train(was_training)
    notes = [
        "FedSGD: each client sends −lr·g_i for one batch of B pairs; with α_i = B_i / Σ B_j the unmasked sum "
        "divided by −lr is the gradient of the union batch, attacked with n·B dummy pairs (known labels)",
        "plain: each client's update on its own, reconstructions paired within that client's prints; secure: the "
        "sum the real SecAgg+ protocol unmasks (the run's clipping and quantisation range; sum_cosine = its cosine "
        "with the float64 sum); every print is scored with its best-matching candidate (MSE, network inputs)",
        "baseline: each print 'reconstructed' by the most similar print of another client — the chance level of "
        "the metrics; psnr_median_plain_prints / ssim_plain_prints: the secure condition on the prints the plain "
        "condition covered (like for like)",
        f"mixtures: candidates whose Pearson correlation with prints of two different clients reaches max("
        f"{MIXTURE_RHO}, their own correlation + {MIXTURE_MARGIN}); print_cross_rho: the highest correlation "
        "between two true prints of different clients; PSNR (oracle affine) favours flat images, so read 'above "
        "chance' on SSIM and rho_median",
        "the protocol's masks and stochastic rounding use OS entropy: secure rows can vary slightly between audits",
    ]
    return {"rows": rows, "grids": grids, "notes": notes + skipped}


def _one_count(model, images, raw_gray, batches, shape, *, normalization, lr, ring, attacks, plain_clients,
               unquantised, budget, margin, seed, with_lpips, grid_dir, grids) -> list[dict]:
    """Rows of one number of clients n = len(batches)."""
    n = len(batches)
    model.eval()
    true_x, refs, owner = [], [], []
    grads, ys = [], []
    for i, (p, a, b, y) in enumerate(batches):
        ks = np.unique(np.concatenate([a, b]))
        true_x.append(images[p][torch.from_numpy(ks)])
        refs += [raw_gray[p][int(k)] for k in ks]
        owner += [i] * len(ks)
        grads.append(pair_gradients(model, images[p][torch.from_numpy(a)], images[p][torch.from_numpy(b)],
                                    torch.from_numpy(y), margin))
        ys.append(y)
    xt, owner = torch.cat(true_x), np.array(owner)
    weights = union_weights([len(y) for y in ys])
    deltas = [-lr * flatten(g) for g in grads]
    float_sum = -lr * flatten(summed_gradient([[t.double() for t in g] for g in grads], weights))  # float64
    t0 = time.perf_counter()
    total, stats = secagg_sum(deltas, list(weights), **ring)
    t_protocol = time.perf_counter() - t0
    cos = float(total @ float_sum / max(np.linalg.norm(total) * np.linalg.norm(float_sum), 1e-300))
    targets = {"secure": unflatten(-total / lr, grads[0])}
    if unquantised:
        targets["secure, unquantised"] = unflatten(-float_sum / lr, grads[0])
    y_all = np.concatenate(ys)
    rho_true = correlations(xt, xt)
    cross = owner[:, None] != owner[None, :]
    base = {"clients": n, "batch_pairs": len(ys[0]), "print_cross_rho": float(rho_true[cross].max())}
    m = n if plain_clients is None else max(1, min(int(plain_clients), n))
    plain_idx = np.flatnonzero(owner < m)
    rows = [_baseline_row(xt, refs, owner, normalization, with_lpips, base)]
    for name in attacks:
        iters = budget["dlg_iterations" if name == "dlg" else "ig_iterations"]
        # plain: every attacked client's gradient alone, its prints paired with its own candidates
        t0 = time.perf_counter()
        xs, used, loss, cands_all = [None] * len(xt), [], [], []
        for i in range(m):
            res = _attack(name, model, grads[i], ys[i], shape, normalization=normalization, margin=margin,
                          budget=budget, seed=seed)
            cands = torch.cat([res.x1, res.x2])
            mine = np.flatnonzero(owner == i)
            j, _ = im.match_candidates(xt[mine], cands)
            for k, jj in zip(mine, j, strict=True):
                xs[k] = cands[jj]
            used += (j + sum(len(c) for c in cands_all)).tolist()  # indices into the concatenated candidates
            cands_all.append(cands)
            loss.append(res.loss)
        cands = torch.cat(cands_all)
        scores = _score([xs[k] for k in plain_idx], [refs[k] for k in plain_idx], normalization, with_lpips)
        rho = correlations(cands, xt)
        rows.append({**base, "attack": name, "condition": "plain", "iterations": iters, "clients_attacked": m,
                     "dummy_pairs": len(ys[0]), **_summary(scores),
                     "rho_median": float(np.median(rho[np.array(used), plain_idx])),
                     "candidates": len(cands), "mixtures": mixtures(rho, rho_true, owner, np.array(used)),
                     "match_loss": float(np.median(loss)), "seconds": time.perf_counter() - t0})
        plain_scores = scores
        for cond, target in targets.items():
            t0 = time.perf_counter()
            res = _attack(name, model, target, y_all, shape, normalization=normalization, margin=margin,
                          budget=budget, seed=seed)
            cands = torch.cat([res.x1, res.x2])
            j, _ = im.match_candidates(xt, cands)
            scores = _score([cands[jj] for jj in j], refs, normalization, with_lpips)
            rho = correlations(cands, xt)
            on_plain = _summary([scores[k] for k in plain_idx])
            row = {**base, "attack": name, "condition": cond, "iterations": iters, "dummy_pairs": len(y_all),
                   **_summary(scores), "rho_median": float(np.median(rho[j, np.arange(len(xt))])),
                   "candidates": len(cands), "mixtures": mixtures(rho, rho_true, owner, j), "match_loss": res.loss,
                   "psnr_median_plain_prints": on_plain["psnr_median"], "ssim_plain_prints": on_plain["ssim"],
                   "seconds": time.perf_counter() - t0}
            if cond == "secure":
                row.update(in_sum=stats["in_sum"], sum_cosine=cos, protocol_seconds=t_protocol,
                           quant_step=quantization_step(ring["clipping_range"], ring["quantization_range"]))
            rows.append(row)
            if grid_dir is not None and cond == "secure" and name == attacks[0]:
                from fedprint.attacks.inversion_audit import save_grid

                k = min(10, len(scores))
                titles = [f"c{owner[i] + 1} {scores[i]['psnr']:.1f} dB" for i in range(k)]
                grids.append(str(save_grid(refs[:k], [s["recon_gray"] for s in scores[:k]],
                                           Path(grid_dir) / f"secure_inversion_{name}_n{n:02d}.png",
                                           titles=titles)))
                if plain_scores:
                    k = min(10, len(plain_scores))
                    grids.append(str(save_grid([refs[i] for i in plain_idx[:k]],
                                               [s["recon_gray"] for s in plain_scores[:k]],
                                               Path(grid_dir) / f"plain_inversion_{name}_n{n:02d}.png",
                                               titles=[f"c{owner[i] + 1} {s['psnr']:.1f} dB"
                                                       for i, s in zip(plain_idx[:k], plain_scores[:k],
                                                                       strict=True)])))
    return rows


def _baseline_row(xt, refs, owner, normalization, with_lpips, base) -> dict:
    """Chance level: every print scored with the most similar print (MSE) of another client."""
    idx = []
    for k in range(len(xt)):
        others = np.flatnonzero(owner != owner[k])
        j, _ = im.match_candidates(xt[k:k + 1], xt[torch.from_numpy(others)])
        idx.append(int(others[j[0]]))
    rho = correlations(xt, xt)[idx, np.arange(len(xt))]
    return {**base, "attack": "-", "condition": CONDITIONS[-1], "candidates": len(xt),
            **_summary(_score([xt[i] for i in idx], refs, normalization, with_lpips)),
            "rho_median": float(np.median(rho))}
