"""The common test set of a run: every institution's held-out test fingers, pooled.

Each model is scored on each institution's test pairs (open set: fingers no method trained on; genuine pairs and
the sampled impostor pairs of that institution — no cross-institution pair, which would be trivially easy) and on
all of them pooled: one threshold-free EER / FNMR at FMR 1 % over every institution's pairs at once, the number a
deployment serving all the institutions' sensors would see. Local-only training has no single model: its pooled
row pools each institution's own model on its own pairs (``local (own models)``). Every row carries its genuine /
impostor pair counts. With ``peers`` (:mod:`fedprint.recognition.peers`), each peer matcher and each model fused
with it are scored on the same pairs, on the raw prints (FP-DFSN is the models' training input, not the peers').
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from torch import nn

from fedprint.lab.report import COMMON_COLUMN as COLUMN
from fedprint.recognition.real_samples import pooled_label, rate_row
from fedprint.training.local_data import ClientData
from fedprint.training.trainer import pair_distances


def common_test_rows(models: Mapping[str, nn.Module | Mapping[str, nn.Module]],
                     clients: Sequence[ClientData], peers: Sequence[str] = (), *,
                     cache: str | Path | None = None) -> list[dict]:
    """Rows (model, test set, genuine, impostor, EER, FNMR@FMR1%, ROC AUC) per institution and pooled.

    ``models``: name -> one encoder (scored on every institution), or name -> {client name: encoder} (each
    institution scored with its own model, e.g. local-only training; institutions without one are skipped).
    ``peers``: matchers scored on the same pairs, then each model fused with each (module docstring; peers last).
    """
    from fedprint.recognition.peers import fused_name, fused_with_peer, peer_name, peer_scores

    scored: dict[str, list] = {}  # row name -> [(client, distances)]
    peer_s: dict[tuple[str, str], np.ndarray] = {}
    for name, model in models.items():
        for c in clients:
            net = model.get(c.name) if isinstance(model, Mapping) else model
            if net is None or len(c.test_pairs) == 0:
                continue
            d = pair_distances(net, c.images, c.test_pairs)
            scored.setdefault(name, []).append((c, d))
            for m in peers:
                if (m, c.name) not in peer_s:
                    peer_s[m, c.name] = peer_scores(c.records, c.test_pairs, m, cache=cache)
                fd = fused_with_peer(d, peer_s[m, c.name])
                if not np.isnan(fd).any():
                    scored.setdefault(fused_name(name, m, calibrated=False), []).append((c, fd))
    done = {cn for _, cn in peer_s}
    for m in peers:
        scored[peer_name(m)] = [(c, -peer_s[m, c.name]) for c in clients if c.name in done]
    rows = []
    for name, per_client in scored.items():
        for c, d in per_client:
            rows.append({"model": name, COLUMN: c.name, "images": len(c.split.test), **rate_row(d, c.test_pairs.label)})
        if len(per_client) > 1:
            rows.append({"model": name, COLUMN: pooled_label(len(per_client), "institutions"),
                         "images": sum(len(c.split.test) for c, _ in per_client),
                         **rate_row(np.concatenate([d for _, d in per_client]),
                                    np.concatenate([c.test_pairs.label for c, _ in per_client]))})
    return rows
