"""Verification evaluation of an encoder on one client's pairs (threshold from validation, metrics on test)."""

from __future__ import annotations

import numpy as np
from torch import nn

from fedprint.data.pairs import PairSet
from fedprint.models.metrics import choose_threshold, verification_metrics
from fedprint.training.local_data import ClientData
from fedprint.training.trainer import pair_distances


def best_accuracy(distances: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy at the accuracy-maximising threshold on these same pairs (AFFR's Acc of Eq. 5)."""
    t = choose_threshold(distances, labels, criterion="accuracy")
    return float(np.mean((distances <= t) == (labels == 1)))


def validation_accuracy(encoder: nn.Module, data: ClientData) -> float:
    """Acc(θ) on the client's validation pairs, used for the generalization gap (Yan et al. 2025 Eq. 5)."""
    if len(data.val_pairs) == 0 or data.val_pairs.n_genuine == 0 or data.val_pairs.n_impostor == 0:
        raise ValueError(f"client {data.name!r}: validation pairs need both genuine and impostor pairs")
    return best_accuracy(pair_distances(encoder, data.images, data.val_pairs), data.val_pairs.label)


def evaluate_on_pairs(encoder: nn.Module, data: ClientData, test_pairs: PairSet | None = None,
                      probes: str = "raw") -> tuple[dict, np.ndarray]:
    """Threshold chosen on ``data.val_pairs`` (never on test), metrics on ``test_pairs`` (default: own test).

    ``probes``: ``"raw"`` (default; what a deployed verifier is asked to verify) or ``"fpdfsn"`` (validation and
    test images FP-DFSN-processed like the training images; needs FP-DFSN enabled for this client).
    Returns the metrics dict (see :func:`fedprint.models.metrics.verification_metrics`) and the test distances.
    """
    if probes not in ("raw", "fpdfsn"):
        raise ValueError(f"probes: expected 'raw' or 'fpdfsn', got {probes!r}")
    images = data.images if probes == "raw" else data.fpdfsn_images
    if images is None:
        raise ValueError(f"client {data.name!r}: FP-DFSN probes asked for, but FP-DFSN is off for this client")
    test_pairs = data.test_pairs if test_pairs is None else test_pairs
    val_d = pair_distances(encoder, images, data.val_pairs)
    threshold = choose_threshold(val_d, data.val_pairs.label, criterion="accuracy")
    test_d = pair_distances(encoder, images, test_pairs)
    return verification_metrics(test_d, test_pairs.label, threshold), test_d
