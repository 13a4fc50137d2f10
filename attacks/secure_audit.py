"""What a server under secure aggregation can still reconstruct: the imprint attack on the unmasked sum.

Under ``[federation] secure_aggregation`` the server never holds one client's update; it unmasks
Σ_{i ∈ U} α_i Δ_i over at least t clients (:mod:`fedprint.server.secure_strategy`). A malicious server can still
send every client the imprint-tampered model (:mod:`fedprint.attacks.imprint`): the imprint gradient is linear in
the batch, so the sum is the imprint gradient of the union of the clients' batches, and a bin that still holds a
single image of that union gives the image exactly (:func:`fedprint.attacks.imprint.recover_from_aggregate`).
What secure aggregation changes is how many images compete for the k bins (n clients × their batch) and the
quantisation of the ring.

:func:`secure_imprint_audit` measures it. For every number of clients n (default 3, 5, 10), batch size B (pairs
per client) and bin count k, it draws n clients' batches (disjoint images; client i from the run's institution
i mod P, so more clients than the run had are drawn from the same institutions' training prints), computes every
client's update of the tampered model's imprint layer (FedSGD: one SGD step at the run's learning rate,
Δ_i = −lr·g_i; or T local steps), and attacks three things:

* ``plain`` — every update on its own, as the server of the plain run receives them (the union of the
  per-client reconstructions);
* ``secure`` — the sum that the real SecAgg+ protocol unmasks: the clients' stage handlers
  (:mod:`fedprint.client.secagg_client`) and the server's stages 1–3 (:func:`fedprint.server.secagg_protocol.
  secure_round`) over an in-process grid (messages straight to the handlers), with the run's clipping range,
  quantisation range, shares and threshold — masks, stochastic rounding and all;
* ``secure, server's c`` — the same protocol with the clipping range the malicious server sends instead of the
  configured one (:func:`server_clipping_range`; the clients take ``secagg-c`` from the train config): a server
  that tampers the model also sets the ring's resolution;
* ``secure, unquantised`` — the same weighted sum in float64, to separate what the sum hides from what the
  ring's quantisation hides.

Each true image of the n batches is paired with its best candidate (smallest MSE on the network-input scale, the
evaluator's choice) and scored against the RAW print (:func:`fedprint.attacks.recon_metrics.compare`: exact =
every pixel within half a gray level, PSNR, SSIM, LPIPS). ``alone_in_bin`` counts the images that are the only
image of the union in their bin (the images the identity can give exactly); the others come out as mixtures of
several images, of one client or of several.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from fedprint.attacks import imprint as im
from fedprint.attacks import recon_metrics as rm
from fedprint.attacks.inversion import pair_gradients

#: Numbers of clients in the sum that the audit measures (issue 58: 3, 5 and 10).
CLIENT_COUNTS = (3, 5, 10)
CONDITIONS = ("plain", "secure", "secure, server's c", "secure, unquantised")


def server_clipping_range(deltas: Sequence[np.ndarray], weights: Sequence[float]) -> float:
    """The clipping range a malicious server sends instead of the configured one (the clients take ``secagg-c``
    from the train config): the next power of ten above twice the largest weighted coordinate, so nothing is
    clipped and the quantisation step 2c/(R−1) shrinks with the update. The audit reads the largest coordinate off
    the updates; a server estimates it from public prints through the same tampered model."""
    top = max(float(np.max(np.abs(w * d))) for w, d in zip(weights, deltas, strict=True))
    return float(10.0 ** np.ceil(np.log10(2 * top))) if top > 0 else 1.0


def _draw_batches(pairs_per_client: Sequence, n: int, batch_pairs: int, rng: np.random.Generator
                  ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """n batches of ``batch_pairs`` training pairs, client i from institution i mod P, no image in two batches.

    Returns (institution, a, b, y) per client; at least one genuine pair per batch where the institution has one.
    """
    used: dict[int, set[int]] = {}
    out = []
    for i in range(n):
        p = i % len(pairs_per_client)
        pairs, taken = pairs_per_client[p], used.setdefault(p, set())
        order = rng.permutation(len(pairs.label))
        gen = [j for j in order if pairs.label[j] == 1]
        imp = [j for j in order if pairs.label[j] == 0]
        chosen: list[int] = []
        for pool, want in ((gen, max(1, batch_pairs // 2)), (imp, batch_pairs), (gen, batch_pairs)):
            for j in pool:
                if len(chosen) >= want:
                    break
                a, b = int(pairs.a[j]), int(pairs.b[j])
                if j in chosen or a in taken or b in taken:
                    continue
                chosen.append(j)
                taken.update((a, b))
        if not chosen:
            raise ValueError(f"institution {p}: no training pair left with unused images for client {i + 1} of {n}; "
                             "fewer clients or a smaller batch")
        sel = np.array(chosen)
        out.append((p, pairs.a[sel], pairs.b[sel], pairs.label[sel].astype(np.float32)))
    return out


class _StageGrid:
    """``send_and_receive`` of stages 1–3 straight to the clients' handlers, one persistent ``Context`` per node
    (as a SuperNode keeps one per run); the test / benchmark grid with training is :mod:`fedprint.lab.
    secagg_grid`."""

    def __init__(self, nodes: Sequence[int]) -> None:
        from flwr.app import Context, RecordDict

        self.contexts = {n: Context(run_id=1, node_id=n, node_config={}, state=RecordDict(), run_config={})
                         for n in nodes}
        self._ids = 0

    def send_and_receive(self, messages, *, timeout: float | None = None) -> list:
        from flwr.app import Error, Message

        from fedprint.client.secagg_client import mask_handler, share_handler, unmask_handler
        from fedprint.privacy.secure_sum import ACTION_MASK, ACTION_SHARE, ACTION_UNMASK

        handlers = {ACTION_SHARE: share_handler, ACTION_MASK: mask_handler, ACTION_UNMASK: unmask_handler}
        replies = []
        for msg in messages:
            self._ids += 1
            msg.metadata.__dict__["_message_id"] = f"audit-{self._ids}"  # what the grid does on push
            node = int(msg.metadata.dst_node_id)
            try:
                replies.append(handlers[msg.metadata.message_type.split(".", 1)[1]](msg, self.contexts[node]))
            except Exception as exc:  # noqa: BLE001  (a ClientApp exception reaches the server as an error reply)
                replies.append(Message(Error(code=0, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg))
        return replies


def secagg_sum(deltas: Sequence[np.ndarray], weights: Sequence[float], *, clipping_range: float,
               quantization_range: int, num_shares: int = 0, threshold: int = 0) -> tuple[np.ndarray, dict]:
    """Σ α_i Δ_i as the server unmasks it: the real client stage handlers and server stages 1–3 of SecAgg+ over
    the in-process grid (node i + 1 holds Δ_i). Returns (float64 sum, the round's stats dict)."""
    from flwr.supercore.task_identity import TaskIdentity

    from fedprint.client.secagg_client import advertise
    from fedprint.server.secagg_protocol import SecAggParams, secure_round

    if getattr(TaskIdentity, "_run_id", None) is None:  # outside a Flower process Messages need one
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    nodes = list(range(1, len(deltas) + 1))
    grid = _StageGrid(nodes)
    round_id = f"audit-{secrets.token_hex(8)}"
    keys = {}
    for node, d in zip(nodes, deltas, strict=True):
        rec = advertise(grid.contexts[node], round_id, clipping_range, quantization_range, d)
        keys[node] = (rec["pk-c"], rec["pk-s"])
    params = SecAggParams(num_shares=num_shares, threshold=threshold, clipping_range=clipping_range,
                          quantization_range=quantization_range, timeout=600.0)
    total, stats = secure_round(grid, round_id, keys, dict(zip(nodes, map(float, weights), strict=True)),
                                int(deltas[0].size), params)
    if total is None:
        raise RuntimeError(f"secure aggregation round of the audit aborted: {stats.status}")
    return total, stats.to_dict()


def _imprint_update(model: nn.Module, x: torch.Tensor, a, b, y, lr: float, steps: int, optimizer: str,
                    margin: float) -> np.ndarray:
    """The client's update of the imprint layer (W0, b0), flattened float64: −lr·g for one SGD step (FedSGD),
    else the parameter difference after ``steps`` local steps on the same batch."""
    block = im.imprint_block_of(model)
    if steps == 1 and optimizer == "sgd":
        g = pair_gradients(model, x[torch.from_numpy(a)], x[torch.from_numpy(b)], torch.from_numpy(y), margin)
        dw, db = im.imprint_gradients(model, g)
        return -lr * torch.cat([dw.double().ravel(), db.double().ravel()]).numpy()
    from fedprint.attacks.inversion_audit import local_steps

    after = im.imprint_block_of(local_steps(model, x, [a] * steps, [b] * steps, [y] * steps, optimizer, lr, margin))
    w0, b0 = block.linear0.weight.detach().double(), block.linear0.bias.detach().double()
    w1, b1 = after.linear0.weight.detach().double(), after.linear0.bias.detach().double()
    return torch.cat([(w1 - w0).ravel(), (b1 - b0).ravel()]).numpy()


def _recover(update: np.ndarray, k: int, shape: tuple[int, ...], lr: float) -> torch.Tensor:
    """Candidates from an update (or a sum of updates) of the imprint layer: pseudo-gradient −update / lr."""
    d = int(np.prod(shape))
    g = torch.from_numpy(-np.asarray(update, np.float64) / lr)
    return im.recover_from_gradients(g[:k * d].reshape(k, d), g[k * d:], input_shape=shape)


def _alone(block: im.ImprintBlock, x: torch.Tensor) -> np.ndarray:
    """Per image of ``x``: True when no other image of ``x`` falls in its imprint bin."""
    q = -block.linear0.bias.detach().double().numpy()
    m = block.measure(x.float()).double().numpy()
    bins = np.searchsorted(q, m, side="left") - 1  # bin i: q_i < m <= q_{i+1}; -1 below q_0 (lost)
    counts = np.bincount(bins + 1, minlength=len(q) + 1)
    return (bins >= 0) & (counts[bins + 1] == 1)


def secure_imprint_audit(encoder: nn.Module, images: Sequence[torch.Tensor], train_pairs: Sequence,
                         raw_gray: Sequence[np.ndarray], *, normalization: str, lr: float,
                         clipping_range: float, quantization_range: int, num_shares: int = 0, threshold: int = 0,
                         client_counts: Sequence[int] = CLIENT_COUNTS, batch_sizes: Sequence[int] = (4,),
                         bins: Sequence[int] = (64,), local: Sequence[tuple[str, int]] = (("sgd", 1),),
                         margin: float = 1.0, seed: int = 0, with_lpips: bool = True,
                         grid_dir: str | Path | None = None) -> dict:
    """Imprint attack on one client's update (plain) vs on the SecAgg+ sum of n clients' (module docstring).

    Parameters
    ----------
    encoder : nn.Module
        The global model the malicious server tampers (the run's checkpoint); never modified.
    images : sequence of Tensor (N_p, 1, S, S)
        Per institution p, the network inputs of its records (raw prints, no FP-DFSN).
    train_pairs : sequence of PairSet
        Per institution, its training pairs (indices into its images).
    raw_gray : sequence of ndarray (N_p, S, S)
        Per institution, the raw prints in gray levels at network resolution (the references of the scores).
    normalization : str
        The run's input normalisation.
    lr : float
        The clients' learning rate (the run's ``train.lr``).
    clipping_range, quantization_range, num_shares, threshold
        The run's ``[federation] secagg_*`` values.
    client_counts, batch_sizes, bins
        Clients in the sum, pairs per client batch, imprint bins k.
    local : sequence of (optimizer, steps)
        The clients' local training: ("sgd", 1) = FedSGD; e.g. ("adam", 4) = 4 Adam steps (FedAvg).

    Returns
    -------
    dict
        ``rows`` (one per n, B, k, local training, condition: images, alone_in_bin, candidates, exact,
        exact_fraction, psnr_median, ssim, lpips, clipped coordinates, seconds), ``grids``, ``notes``.
    """
    if not images or len(images) != len(train_pairs) or len(images) != len(raw_gray):
        raise ValueError("images, train_pairs and raw_gray: one entry per institution expected")
    if any(int(n) < 3 for n in client_counts):
        raise ValueError(f"client_counts: secure aggregation needs at least 3 clients, got {list(client_counts)}")
    shape = tuple(images[0].shape[1:])
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    grids: list[str] = []
    skipped: list[str] = []
    for n in (int(v) for v in client_counts):
        for bsz in (int(v) for v in batch_sizes):
            try:
                batches = _draw_batches(train_pairs, n, bsz, rng)
            except ValueError as exc:
                skipped.append(f"{n} clients x B = {bsz}: not measured ({exc})")
                continue
            true_x, refs = [], []
            for p, a, b, _ in batches:
                ks = np.unique(np.concatenate([a, b]))
                true_x.append(images[p][torch.from_numpy(ks)])
                refs += [raw_gray[p][int(k)] for k in ks]
            xt = torch.cat(true_x)
            owner = np.concatenate([np.full(len(t), i) for i, t in enumerate(true_x)])
            for k in (int(v) for v in bins):
                model = im.tamper(encoder, shape, k, seed=seed)
                block = im.imprint_block_of(model)
                alone = _alone(block, xt)
                for opt, steps in local:
                    t0 = time.perf_counter()
                    deltas = [_imprint_update(model, images[p], a, b, y, lr, int(steps), opt, margin)
                              for p, a, b, y in batches]
                    weights = [1.0 / n] * n
                    t_updates = time.perf_counter() - t0
                    per_client = [_recover(d, k, shape, lr) for d in deltas]
                    cands = {"plain": None, "secure, unquantised": _recover(
                        np.sum([w * d for w, d in zip(weights, deltas, strict=True)], axis=0), k, shape, lr)}
                    t1 = time.perf_counter()
                    total, stats = secagg_sum(deltas, weights, clipping_range=clipping_range,
                                              quantization_range=quantization_range, num_shares=num_shares,
                                              threshold=threshold)
                    t_protocol = time.perf_counter() - t1
                    cands["secure"] = _recover(total, k, shape, lr)
                    c_server = server_clipping_range(deltas, weights)
                    total_s, _ = secagg_sum(deltas, weights, clipping_range=c_server,
                                            quantization_range=quantization_range, num_shares=num_shares,
                                            threshold=threshold)
                    cands["secure, server's c"] = _recover(total_s, k, shape, lr)
                    clipped = int(sum(np.count_nonzero(np.abs(w * d) > clipping_range)
                                      for w, d in zip(weights, deltas, strict=True)))
                    for cond in CONDITIONS:
                        if cond == "plain":  # the plain server attacks each update on its own
                            xs = []  # owner is one contiguous block per client, in client order
                            for i in range(n):
                                j, _ = im.match_candidates(xt[owner == i], per_client[i])
                                xs += [per_client[i][jj].float() if jj >= 0 else torch.zeros(shape) for jj in j]
                            n_cands = sum(len(c) for c in per_client)
                        else:
                            j, _ = im.match_candidates(xt, cands[cond])
                            xs = [cands[cond][jj].float() if jj >= 0 else torch.zeros(shape) for jj in j]
                            n_cands = len(cands[cond])
                        scores = [rm.compare(x[0], ref, normalization, with_lpips=with_lpips)
                                  for x, ref in zip(xs, refs, strict=True)]
                        lp = [s["lpips"] for s in scores]
                        psnrs = np.array([s["psnr"] for s in scores])
                        row = {"clients": n, "batch_pairs": bsz, "bins": k, "local": f"{opt} x{steps}",
                               "condition": cond, "images": len(scores),
                               "alone_in_bin": int(alone.sum()) if cond != "plain" else None,
                               "candidates": n_cands,
                               "exact": int(sum(s["exact"] for s in scores)),
                               "exact_fraction": float(np.mean([s["exact"] for s in scores])),
                               "psnr_median": float(np.median(psnrs)),
                               "ssim": float(np.mean([s["ssim"] for s in scores])),
                               "lpips": float(np.mean(lp)) if all(v is not None for v in lp) else None,
                               "seconds": t_updates + (t_protocol if cond == "secure" else 0.0)}
                        if cond == "secure":
                            row["clipped"] = clipped
                            row["protocol_seconds"] = t_protocol
                            row["in_sum"] = stats["in_sum"]
                        ring_c = {"secure": clipping_range, "secure, server's c": c_server}.get(cond)
                        row["clipping_range"] = ring_c
                        row["quant_step"] = 2 * ring_c / (quantization_range - 1) if ring_c else None
                        if row["lpips"] is None:
                            row["lpips_note"] = next((s.get("lpips_note") for s in scores if s.get("lpips_note")),
                                                     "unavailable")
                        rows.append(row)
                        if grid_dir is not None and cond == "secure" and k == bins[0] and opt == local[0][0]:
                            from fedprint.attacks.inversion_audit import save_grid

                            m = min(10, len(scores))
                            name = f"secure_sum_n{n:02d}_B{bsz}_k{k}.png"
                            grids.append(str(save_grid([refs[i] for i in range(m)],
                                                       [scores[i]["recon_gray"] for i in range(m)],
                                                       Path(grid_dir) / name,
                                                       titles=[f"{scores[i]['psnr']:.1f} dB" for i in range(m)])))
    notes = [
        "plain: the server attacks every client's update on its own (what a plain FedAvg / FedProx / AFFR server "
        "receives); secure: the sum SecAgg+ unmasks (real protocol, the run's clipping and quantisation range); "
        "secure, server's c: the same protocol with the clipping range a malicious server sends instead (the "
        "clients take it from the train config; the next power of ten above the updates' range, so the "
        "quantisation step shrinks with the update); secure, unquantised: the same sum in float64",
        "quantisation is no defence: where the run's ring hides a small update (a quantisation step above the "
        "imprint signal), the server that tampers the model also picks the ring's range, and gets the "
        "unquantised rows back",
        "clients beyond the run's institutions are drawn from the same institutions' training prints, no image in "
        "two clients' batches; weights 1/n (a single-image bin gives the image whatever the weights)",
        "exact = every pixel within half a gray level of the RAW print (standardised inputs: the reconstruction "
        "is mapped onto the print's mean / std, the evaluator's oracle affine); each print is scored with its "
        "best-matching candidate",
        "alone_in_bin: images that are the only image of the n batches in their bin; the other images can only "
        "come out as mixtures",
    ]
    return {"rows": rows, "grids": grids, "notes": notes + skipped}
