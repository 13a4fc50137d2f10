"""The common test set of a run: every institution's held-out test fingers, pooled.

Each model is scored on each institution's test pairs (open set: fingers no method trained on; genuine pairs and
the sampled impostor pairs of that institution — no cross-institution pair, which would be trivially easy) and on
all of them pooled: one threshold-free EER / FNMR at FMR 1 % over every institution's pairs at once, the number a
deployment serving all the institutions' sensors would see. Local-only training has no single model: its pooled
row pools each institution's own model on its own pairs (``local (own models)``). Every row carries its genuine /
impostor pair counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from torch import nn

from fedprint.lab.report import COMMON_COLUMN as COLUMN
from fedprint.recognition.real_samples import pooled_label, rate_row
from fedprint.training.local_data import ClientData
from fedprint.training.trainer import pair_distances


def common_test_rows(models: Mapping[str, nn.Module | Mapping[str, nn.Module]],
                     clients: Sequence[ClientData]) -> list[dict]:
    """Rows (model, test set, genuine, impostor, EER, FNMR@FMR1%, ROC AUC) per institution and pooled.

    ``models``: name -> one encoder (scored on every institution), or name -> {client name: encoder} (each
    institution scored with its own model, e.g. local-only training; institutions without one are skipped).
    """
    rows = []
    for name, model in models.items():
        ds, labels = [], []
        for c in clients:
            net = model.get(c.name) if isinstance(model, Mapping) else model
            if net is None or len(c.test_pairs) == 0:
                continue
            d = pair_distances(net, c.images, c.test_pairs)
            ds.append(d)
            labels.append(c.test_pairs.label)
            rows.append({"model": name, COLUMN: c.name, "images": len(c.split.test),
                         **rate_row(d, c.test_pairs.label)})
        if len(ds) > 1:
            rows.append({"model": name, COLUMN: pooled_label(len(ds), "institutions"),
                         "images": sum(r["images"] for r in rows if r["model"] == name),
                         **rate_row(np.concatenate(ds), np.concatenate(labels))})
    return rows
