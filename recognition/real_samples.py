"""Real prints every trained model is scored on, and the per-model score rows of reports.

Every set under the real-set root (:mod:`fedprint.data.real_sets`: ``$FEDPRINT_REAL_SAMPLES``, else
``<project>/../shared/data/real``; one sub-folder per sensor) is scored under the FVC protocol, one row per
(model, set), plus one **pooled** row per model: the distances of all sets' genuine and impostor pairs together
(pairs stay within a set: no cross-sensor impostor pair, which would be trivially easy). Every row says how many
genuine and impostor pairs stand behind its numbers. Beside the models, the peers a user would pick instead and each
model fused with them, on the same pairs (:mod:`fedprint.recognition.peers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from fedprint.data.real_sets import REAL_ENV, real_root, real_set_dirs
from fedprint.data.record import FingerprintRecord
from fedprint.models.metrics import eer, fnmr_at_fmr, roc_auc
from fedprint.recognition.matching import evaluate

__all__ = ["POOLED", "REAL_ENV", "dataset_rows", "load_real_sets", "pooled_label", "rate_row", "real_sample_rows",
           "real_samples_dir"]

#: Label of the pooled row (all sets' pairs together).
POOLED = "pooled"


def real_samples_dir() -> Path | None:
    """The real-set root when it holds at least one set, else None."""
    root = real_root()
    return root if real_set_dirs(root) else None


def load_real_sets(root: str | Path | None = None) -> dict[str, list[FingerprintRecord]]:
    """The records of every real set under ``root`` (default :func:`fedprint.data.real_sets.real_root`), by folder
    name."""
    from fedprint.data.datasets import load_dataset

    return {d.name: load_dataset(layout, d) for d, layout in real_set_dirs(root)}


def rate_row(distances: np.ndarray, labels: np.ndarray) -> dict:
    """Threshold-free metrics of pair distances: pair counts, EER, FNMR at FMR 1 % (None below 100 impostor
    pairs: an FMR of 1 % cannot be resolved with fewer) and ROC AUC."""
    lab = np.asarray(labels)
    n_imp = int((lab == 0).sum())
    return {"genuine": int((lab == 1).sum()), "impostor": n_imp, "EER": eer(distances, lab),
            "FNMR@FMR1%": fnmr_at_fmr(distances, lab, 0.01) if n_imp >= 100 else None,
            "ROC AUC": roc_auc(distances, lab)}


def pooled_label(n: int, what: str = "sets") -> str:
    """Name of a pooled row: ``"pooled (5 sets)"``."""
    return f"{POOLED} ({n} {what})"


def dataset_rows(models: Mapping[str, Path], records: Sequence[FingerprintRecord], data_name: str, protocol: str,
                 *, column: str = "data", peers: Sequence[str] = (), cache: str | Path | None = None) -> list[dict]:
    """One row per model file: EER, FNMR at FMR 1 % (None below 100 impostor pairs) and ROC AUC on ``records``
    under ``protocol`` — threshold-free metrics, so no threshold is fitted on the evaluated data — then a row per
    peer and per (model, peer) fusion on the same pairs (:mod:`fedprint.recognition.peers`)."""
    return _score(models, {data_name: records}, protocol, column=column, pooled=False, peers=peers, cache=cache)


def real_sample_rows(models: Mapping[str, Path], root: str | Path | None = None, *, peers: Sequence[str] = (),
                     cache: str | Path | None = None) -> list[dict]:
    """Every model on every real set (FVC protocol) and pooled over the sets, with the ``peers``' rows
    (:func:`dataset_rows`); [] when there is no set."""
    if not models:
        return []
    sets = load_real_sets(root)
    return _score(models, sets, "fvc", column="real set", pooled=len(sets) > 1, peers=peers,
                  cache=cache) if sets else []


def _score(models: Mapping[str, Path], sets: Mapping[str, Sequence[FingerprintRecord]], protocol: str, *,
           column: str, pooled: bool, peers: Sequence[str] = (), cache: str | Path | None = None) -> list[dict]:
    from fedprint.models.model_file import load_model
    from fedprint.recognition.minutiae_fusion import KEY, matcher_of
    from fedprint.recognition.peers import fused_name, fused_with_peer, peer_name, peer_scores

    scored: dict[str, list] = {}  # row name -> [(distances, labels) per set]
    images: dict[str, int] = {}
    peer_s: dict[tuple[str, str], np.ndarray] = {}  # (matcher, set) -> scores: the same for every model
    for name, path in models.items():
        model = load_model(path)
        stored = model.meta.get(KEY)
        for set_name, records in sets.items():
            metrics, d, pairs = evaluate(model, records, protocol)
            images[set_name] = metrics["images"]
            scored.setdefault(name, []).append((set_name, d, pairs.label))
            for m in peers:
                if (m, set_name) not in peer_s:
                    peer_s[m, set_name] = peer_scores(records, pairs, m, cache=cache)
                    scored.setdefault(peer_name(m), []).append((set_name, -peer_s[m, set_name], pairs.label))
                calibrated = bool(stored) and matcher_of(stored) == m
                if calibrated:  # the fusion the model file decides on (--score auto); scores come from the cache
                    fd = evaluate(model, records, protocol, score="minutiae", minutiae_cache=cache)[1]
                else:
                    fd = fused_with_peer(d, peer_s[m, set_name])
                scored.setdefault(fused_name(name, m, calibrated), []).append((set_name, fd, pairs.label))
    rows = []
    last = {peer_name(m) for m in peers}  # models, then fusions, then the peers
    for row_name in sorted(scored, key=lambda n: n in last):
        per_set = [(s, d, lab) for s, d, lab in scored[row_name] if not np.isnan(d).any()]
        for set_name, d, lab in per_set:
            rows.append({"model": row_name, column: set_name, "images": images[set_name], **rate_row(d, lab)})
        if pooled and len(per_set) > 1:
            rows.append({"model": row_name, column: pooled_label(len(per_set)),
                         "images": sum(images[s] for s, _, _ in per_set),
                         **rate_row(np.concatenate([d for _, d, _ in per_set]),
                                    np.concatenate([lab for _, _, lab in per_set]))})
    return rows
