"""fedprint.models.model_file: one format, safe loading, clear errors; lab.model_export thresholds."""

from __future__ import annotations

import pytest
import torch

from fedprint.models.model_file import FORMAT, load_model, model_bytes, weighted_threshold, with_input_size_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder


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


def test_with_input_size_changes_only_the_input_size(tmp_path):
    torch.manual_seed(0)
    net = build_encoder("compact", 16, width=8)
    spec = InputSpec(size=64, crop="print", dpi=300.0, normalization="ridge")
    path = tmp_path / "m.pt"
    path.write_bytes(model_bytes(net, encoder_name="compact", embedding_dim=16, encoder_kwargs={"width": 8},
                                 spec=spec, threshold=0.7, provenance={"git": {"commit": "abc"}}))
    (tmp_path / "r.pt").write_bytes(with_input_size_bytes(path, 96))
    m = load_model(tmp_path / "r.pt")
    assert m.spec == InputSpec(size=96, crop="print", dpi=300.0, normalization="ridge") and m.threshold == 0.7
    assert m.meta["provenance"] == {"git": {"commit": "abc"}, "input_size_from": 64}
    x = torch.randn(2, 1, 96, 96)
    assert m.encoder(x).shape == (2, 16) and torch.allclose(m.encoder(x), net.eval()(x))
    with pytest.raises(ValueError, match="InputSpec.size"):
        with_input_size_bytes(path, 4)


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


def test_shipped_model_reaches_apps_imported_from_a_fab(tmp_path):
    """Deployment: Flower installs the app bundle (FAB) and imports the ServerApp / ClientApp from its folder,
    first on sys.path. A FAB carries only *.py, *.toml, *.md, *.yaml, *.json and LICENSE, so the shipped model
    must come from the installed FedPrint (the SuperExec image has it), as ``init = "pretrained"`` needs."""
    import importlib.metadata
    import subprocess
    import sys
    from pathlib import Path

    from flwr.cli.build import build_fab_from_disk
    from flwr.cli.install import install_from_fab

    try:
        importlib.metadata.distribution("fedprint")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("FedPrint is not installed (pip install -e .): no installed copy of the shipped model")
    root = Path(__file__).resolve().parents[2]
    app_dir = install_from_fab(build_fab_from_disk(root), tmp_path / "flwr-home", skip_prompt=True)
    assert (app_dir / "models" / "model_file.py").is_file() and not list(app_dir.rglob("*.pt"))
    code = ("import sys; import fedprint.models.model_file as m; "
            "assert m.__file__.startswith(sys.argv[1]), m.__file__; p = m.pretrained_path(); "
            "assert not str(p).startswith(sys.argv[1]); m.load_model(p); print(p)")
    out = subprocess.run([sys.executable, "-c", code, str(app_dir)], cwd=app_dir, capture_output=True, text=True,
                         timeout=600)  # seconds on a quiet machine; importing torch under heavy load is slow
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()).name == "fedprint-synthetic.pt"
