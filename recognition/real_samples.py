"""Real prints every trained model is scored on, and the per-model score rows of reports.

Every set under the real-set root (:mod:`fedprint.data.real_sets`: ``$FEDPRINT_REAL_SAMPLES``, else
``<project>/../shared/data/real``; one sub-folder per sensor) is scored under the FVC protocol, one row per
(model, set), plus one **pooled** row per model: the distances of all sets' genuine and impostor pairs together
(pairs stay within a set: no cross-sensor impostor pair, which would be trivially easy). Every row says how many
genuine and impostor pairs stand behind its numbers.
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
                 *, column: str = "data") -> list[dict]:
    """One row per model file: EER, FNMR at FMR 1 % (None below 100 impostor pairs) and ROC AUC on ``records``
    under ``protocol`` — threshold-free metrics, so no threshold is fitted on the evaluated data."""
    return _score(models, {data_name: records}, protocol, column=column, pooled=False)


def real_sample_rows(models: Mapping[str, Path], root: str | Path | None = None) -> list[dict]:
    """Every model on every real set (FVC protocol) and pooled over the sets; [] when there is no set."""
    if not models:
        return []
    sets = load_real_sets(root)
    return _score(models, sets, "fvc", column="real set", pooled=len(sets) > 1) if sets else []


def _score(models: Mapping[str, Path], sets: Mapping[str, Sequence[FingerprintRecord]], protocol: str, *,
           column: str, pooled: bool) -> list[dict]:
    from fedprint.models.model_file import load_model

    rows = []
    for name, path in models.items():
        model = load_model(path)
        ds, labels = [], []
        for set_name, records in sets.items():
            metrics, d, pairs = evaluate(model, records, protocol)
            ds.append(d)
            labels.append(pairs.label)
            rows.append({"model": name, column: set_name, "images": metrics["images"],
                         **rate_row(d, pairs.label)})
        if pooled:
            rows.append({"model": name, column: pooled_label(len(sets)),
                         "images": sum(len(r) for r in sets.values()),
                         **rate_row(np.concatenate(ds), np.concatenate(labels))})
    return rows
