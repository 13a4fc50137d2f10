"""models.model_file: one format, safe loading, clear errors; lab.model_export thresholds."""

from __future__ import annotations

import pytest
import torch

from models.model_file import FORMAT, load_model, model_bytes, weighted_threshold
from models.preprocess import InputSpec
from models.siamese import build_encoder


def test_round_trip_keeps_weights_pipeline_threshold_and_provenance(tmp_path):
    torch.manual_seed(0)
    net = build_encoder("compact", 16, width=8)
    spec = InputSpec(size=64, crop="print", dpi=250.0)
    path = tmp_path / "m.pt"
    path.write_bytes(model_bytes(net, encoder_name="compact", embedding_dim=16, encoder_kwargs={"width": 8},
                                 spec=spec, threshold=0.7, threshold_source="val", method="centralized",
                                 provenance={"git": {"commit": "abc"}}))
    m = load_model(path)
    assert m.spec == spec and m.threshold == 0.7 and m.meta["format"] == FORMAT and m.name == "centralized"
    assert m.meta["provenance"]["git"]["commit"] == "abc"
    x = torch.randn(2, 1, 64, 64)
    assert torch.allclose(m.encoder(x), net.eval()(x))


def test_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="model file not found"):
        load_model(tmp_path / "nope.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="bad.pt: not a readable FedPrint model file"):
        load_model(bad)
    other = tmp_path / "other.pt"
    torch.save({"state_dict": {}}, other)
    with pytest.raises(ValueError, match="other.pt: expected a FedPrint model file"):
        load_model(other)
    with pytest.raises(ValueError, match="threshold"):
        model_bytes(build_encoder("compact", 8, width=4), encoder_name="compact", embedding_dim=8,
                    spec=InputSpec(), threshold=float("nan"))


def test_weighted_threshold():
    assert weighted_threshold([0.5, 1.0], [100, 300]) == pytest.approx(0.875)
    assert weighted_threshold([float("nan"), 0.4], [10, 10]) == pytest.approx(0.4)
    assert weighted_threshold([], []) is None
