"""Real prints every trained model is scored on: where they live and the per-model score rows of reports."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from data.record import FingerprintRecord
from recognition.matching import evaluate

#: Environment variable naming a folder of real FVC-layout prints to score every trained model on.
REAL_ENV = "FEDPRINT_REAL_SAMPLES"
#: Default: the real samples beside a source checkout (``<repo>/../shared/data/real/fvc_300x300_b``).
_REAL_DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "fvc_300x300_b"


def real_samples_dir() -> Path | None:
    """The folder of real prints every run also evaluates on (``$FEDPRINT_REAL_SAMPLES``, else the samples
    beside the checkout); None when there is none."""
    given = os.environ.get(REAL_ENV, "").strip()
    path = Path(given) if given else _REAL_DEFAULT
    return path if path.is_dir() else None


def real_sample_rows(models: dict[str, Path]) -> list[dict]:
    """EER / ROC AUC of each model file on the real samples (FVC protocol); [] when there are none."""
    root = real_samples_dir()
    if root is None:
        return []
    from data.datasets import load_dataset

    return dataset_rows(models, load_dataset("fvc", root), root.name, "fvc", column="real data")


def dataset_rows(models: dict[str, Path], records: Sequence[FingerprintRecord], data_name: str, protocol: str,
                 *, column: str = "data") -> list[dict]:
    """One row per model file: EER, FNMR at FMR 1 % (None below 100 impostor pairs) and ROC AUC on ``records``
    under ``protocol`` — threshold-free metrics, so no threshold is fitted on the evaluated data."""
    from models.model_file import load_model

    rows = []
    for name, path in models.items():
        metrics, _, _ = evaluate(load_model(path), records, protocol)
        rows.append({"model": name, column: data_name, "images": metrics["images"],
                     "genuine": metrics["n_genuine"], "impostor": metrics["n_impostor"], "EER": metrics["eer"],
                     "FNMR@FMR1%": metrics["fnmr_at_fmr_1%"], "ROC AUC": metrics["roc_auc"]})
    return rows
