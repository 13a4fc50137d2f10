"""Write a trained encoder as a FedPrint model file, with its threshold chosen on validation pairs.

Every way FedPrint trains ends here (``fedprint train``, the baselines and federated methods of ``simulate`` /
``demo``), so there is one model format (:mod:`fedprint.models.model_file`). The decision threshold is the
accuracy-optimal distance on the POOLED validation pairs of the clients the model is meant for (never on test
pairs); the federated ServerApp, which holds no data, stores the clients' own validation thresholds averaged
with their validation-pair counts as weights (:func:`fedprint.models.model_file.weighted_threshold`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from fedprint.config import ExperimentConfig
from fedprint.data.atomic_io import atomic_write_bytes
from fedprint.models.dense_match import MIN_OVERLAP, fusion_calibration, pair_similarities, print_features
from fedprint.models.metrics import choose_threshold
from fedprint.models.model_file import model_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.training.local_data import ClientData
from fedprint.training.trainer import pair_distances


def pooled_threshold(net: nn.Module, clients: Sequence[ClientData]) -> tuple[float | None, str]:
    """Accuracy-optimal distance threshold on the clients' validation pairs pooled; (None, reason) if none."""
    dist, lab = [], []
    for c in clients:
        if len(c.val_pairs):
            dist.append(pair_distances(net, c.images, c.val_pairs))
            lab.append(c.val_pairs.label)
    if not dist:
        return None, "no validation pairs"
    d, y = np.concatenate(dist), np.concatenate(lab)
    if y.min() == y.max():
        return None, "validation pairs of one class only"
    names = ", ".join(c.name for c in clients)
    return choose_threshold(d, y, "accuracy"), f"accuracy-optimal on {len(y)} validation pairs of {names}"


def pooled_fusion(net: nn.Module, clients: Sequence[ClientData]) -> dict | None:
    """Calibration of the ``global + dense`` score on the clients' validation pairs pooled
    (:func:`fedprint.models.dense_match.fusion_calibration`); None when the encoder has no feature map to match densely
    (ResNet-18), the map has fewer cells than :data:`fedprint.models.dense_match.MIN_OVERLAP` (inputs under ~40 px), the
    validation pairs do not hold both classes, or a score does not vary over them."""
    if not hasattr(net, "feature_map") or not clients:
        return None
    g, d, y = [], [], []
    for c in clients:
        if not len(c.val_pairs):
            continue
        used = np.unique(np.concatenate([c.val_pairs.a, c.val_pairs.b]))
        features = print_features(net, c.images[used])
        if features.grid[0] * features.grid[1] < MIN_OVERLAP:
            return None
        pos = np.searchsorted(used, c.val_pairs.a), np.searchsorted(used, c.val_pairs.b)
        g_c, d_c = pair_similarities(features, *pos)
        g.append(g_c)
        d.append(d_c)
        y.append(c.val_pairs.label)
    if not y:
        return None
    g, d, y = np.concatenate(g), np.concatenate(d), np.concatenate(y)
    if y.min() == y.max() or g.std() == 0 or d.std() == 0:
        return None
    return fusion_calibration(g, d, y)


def data_description(cfg: ExperimentConfig, clients: Sequence[ClientData] = ()) -> dict[str, Any]:
    """What a model was trained on: the experiment's sources and the clients' sizes."""
    return {**cfg.data_summary(),
            "clients": [{"name": c.name, "domain": c.domain, "train_images": len(c.split.train),
                         "fingers": len({r.identity for r in c.records})} for c in clients]}


def export_model(path: str | Path, net: nn.Module, cfg: ExperimentConfig, spec: InputSpec, *, method: str,
                 clients: Sequence[ClientData] = (), threshold: float | None = None, threshold_source: str = "",
                 metrics: Mapping[str, Any] | None = None, provenance: Mapping[str, Any] | None = None,
                 privacy: Mapping[str, Any] | None = None) -> Path:
    """Write ``net`` as a model file; the threshold is pooled over ``clients``' validation pairs unless given.

    ``privacy``: a DP-SGD model's release scope (:func:`fedprint.training.dp_sgd.release_scope`), stored as the
    file's ``privacy`` entry; its ``outside_dp_guarantee`` names the threshold, score fusion, test metrics and counts
    this function writes from data without DP."""
    if threshold is None and clients:
        threshold, threshold_source = pooled_threshold(net, clients)
    fusion = pooled_fusion(net, clients) if clients else None
    data = model_bytes(net, encoder_name=cfg.model.encoder, embedding_dim=cfg.model.embedding_dim, spec=spec,
                       encoder_kwargs=cfg.model.encoder_kwargs(),
                       threshold=threshold, threshold_source=threshold_source, method=method,
                       metrics=dict(metrics or {}), data=data_description(cfg, clients),
                       provenance=dict(provenance or {}), score_fusion=fusion,
                       privacy=None if privacy is None else dict(privacy))
    return atomic_write_bytes(path, data)
