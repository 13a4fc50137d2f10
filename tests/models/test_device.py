"""models.device and the --device plumbing: CPU results unchanged, CUDA refused clearly where there is none."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fedprint.cli.main as fedprint_cli
from fedprint.config import TrainConfig
from fedprint.data.stripes import stripe_records
from fedprint.models.device import (
    DEVICE_ENV,
    autocast,
    current_device,
    grad_scaler,
    resolve_device,
    set_device,
    use_device,
)
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import new_encoder
from fedprint.training.local_data import build_client_data
from fedprint.training.trainer import embed, train_siamese

NO_CUDA = not torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _restore_device(monkeypatch):
    import fedprint.models.device as md

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    monkeypatch.setattr(md, "_current", None)
    yield


def test_resolve_names():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(None) == resolve_device("auto")
    with pytest.raises(ValueError, match="--device: expected one of auto, cpu, cuda, got 'tpu'"):
        resolve_device("tpu")


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_clear_error():
    with pytest.raises(ValueError, match=r"--device cuda: CUDA is not available \("):
        resolve_device("cuda")


def test_default_is_cpu_and_choices_propagate(monkeypatch):
    assert current_device() == torch.device("cpu")  # a library call that never chose a device: as before
    with use_device("cpu") as dev:
        assert dev == current_device() == torch.device("cpu")
    set_device("cpu")
    import os

    assert os.environ[DEVICE_ENV] == "cpu"  # processes started later (simulation workers) inherit it
    monkeypatch.setattr("fedprint.models.device._current", None)
    assert current_device() == torch.device("cpu")


def test_no_mixed_precision_on_cpu():
    cpu = torch.device("cpu")
    assert grad_scaler(cpu) is None
    with autocast(cpu):
        x = torch.ones(2, 2) @ torch.ones(2, 2)
    assert x.dtype == torch.float32


def _data():
    records = stripe_records(n_fingers=6, n_impressions=4, size=32)
    return build_client_data(records, name="toy", spec=InputSpec(size=32, crop="full"), seed=0, progress=False)


def test_cpu_training_identical_whatever_the_device_option():
    data = _data()
    cfg = TrainConfig(epochs=2, seed=1)
    nets = []
    for kwargs in ({}, {"device": torch.device("cpu")}, {"device": torch.device("cpu"), "amp": False}):
        net = new_encoder("compact", 8, 0, width=4)
        hist = train_siamese(net, data.images, data.train_pairs, cfg, progress=False, **kwargs)
        nets.append((net, [h["loss"] for h in hist]))
    for net, losses in nets[1:]:
        assert losses == nets[0][1]
        for a, b in zip(net.parameters(), nets[0][0].parameters(), strict=True):
            assert torch.equal(a, b)
    e = embed(nets[0][0], data.images)
    assert e.device.type == "cpu" and e.dtype == torch.float32
    assert np.allclose(e.norm(dim=1).numpy(), 1.0, atol=1e-5)


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cli_device_cuda_without_cuda_exits_2(tmp_path, capsys):
    img = tmp_path / "a.png"
    import cv2

    cv2.imwrite(str(img), np.full((64, 64), 128, np.uint8))
    assert fedprint_cli.main(["verify", str(img), str(img), "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fedprint verify: error: --device cuda: CUDA is not available")


def test_cli_device_option_on_every_network_command():
    for argv in (["train", "--mode", "local", "--config", "demo"], ["simulate", "--config", "demo"],
                 ["demo"], ["verify", "a", "b"], ["evaluate", "--data", "d"], ["identify", "--gallery", "g",
                                                                                   "--probe", "p"],
                 ["audit", "--run", "r"], ["sweep", "--config", "demo"]):
        assert fedprint_cli.parse([*argv, "--device", "cpu"]).device == "cpu"
        assert fedprint_cli.parse(argv).device == "auto"


def test_node_config_device_is_validated():
    pytest.importorskip("flwr", reason="the ClientApp needs Flower (a GPU machine may have PyTorch only)")
    from fedprint.client.client_app import node_device
    from fedprint.config.app import client_settings

    conf = client_settings({}, {"device": "cpu"})
    assert node_device({}, conf) == "cpu"
    assert node_device({"device": "auto"}, conf) == "auto"  # the SuperNode's own setting wins
    with pytest.raises(ValueError, match="node config 'device': expected one of auto, cpu, cuda"):
        node_device({"device": "gpu0"}, conf)
    with pytest.raises(ValueError, match="run config 'device': expected auto, cpu or cuda"):
        client_settings({"device": "gpu"})


def test_simulation_asks_ray_for_a_gpu_share_only_on_cuda():
    from fedprint.lab.simulate import backend_config

    assert backend_config(2)["client_resources"] == {"num_cpus": 1, "num_gpus": 0.0}
    cuda = backend_config(2, device="cuda")
    assert cuda["client_resources"]["num_gpus"] == 0.5 and cuda["init_args"]["num_gpus"] == 1


# --- on a CUDA machine only (skipped elsewhere, with the reason) ---------------------------------------------------

NEEDS_CUDA = pytest.mark.skipif(NO_CUDA, reason="needs a CUDA GPU (this machine has none)")


@NEEDS_CUDA
def test_cuda_embedding_matches_cpu():
    """Embedding runs in float32 on the device: the same network gives the CPU's embeddings up to rounding."""
    data = _data()
    net = new_encoder("compact", 8, 0, width=4)
    cpu = embed(net, data.images, device=torch.device("cpu"))
    gpu = embed(net, data.images, device=torch.device("cuda"))
    assert gpu.device.type == "cpu" and gpu.dtype == torch.float32
    assert float((gpu - cpu).norm() / cpu.norm()) < 1e-3
    assert all(p.device.type == "cpu" for p in net.parameters())  # moved back after the call


@NEEDS_CUDA
@pytest.mark.parametrize("amp", [False, True])
def test_cuda_training_learns_and_returns_a_cpu_model(amp):
    """Training on CUDA (float32, or mixed precision) lowers the loss like the CPU does and leaves every weight
    on the CPU, finite, so model files and Flower messages never hold device tensors."""
    data = _data()
    cfg = TrainConfig(epochs=6, seed=1)
    net = new_encoder("compact", 8, 0, width=4)
    hist = train_siamese(net, data.images, data.train_pairs, cfg, progress=False, device=torch.device("cuda"),
                         amp=amp)
    losses = [h["loss"] for h in hist]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert all(p.device.type == "cpu" and torch.isfinite(p).all() for p in net.parameters())
    cpu_net = new_encoder("compact", 8, 0, width=4)
    cpu_hist = train_siamese(cpu_net, data.images, data.train_pairs, cfg, progress=False,
                             device=torch.device("cpu"))
    # Same batches and augmentations (drawn on the CPU from the same generators): the first epoch's loss agrees
    # up to the device's arithmetic (TF32 / bfloat16 matmuls), later ones drift apart only as rounding compounds.
    assert abs(losses[0] - cpu_hist[0]["loss"]) < (0.05 if amp else 0.01) * abs(cpu_hist[0]["loss"])


@NEEDS_CUDA
def test_cuda_cli_train_writes_a_model_that_loads_on_cpu(tmp_path):
    from fedprint.models.model_file import load_model

    cfg = tmp_path / "tiny.toml"
    cfg.write_text('[run]\nname = "tiny"\nseed = 0\n[[data.sources]]\nkind = "synth"\nprofile = "casia"\n'
                   'fingers = 6\nimpressions = 4\nseed = 5\n[data]\nprotocol = "open"\n[partition]\nmode = "domain"\n'
                   '[model]\nencoder = "compact"\nwidth = 8\ninput_size = 96\n[train]\np = 4\nk = 2\nepochs = 2\n')
    out = tmp_path / "run"
    assert fedprint_cli.main(["train", "--mode", "centralized", "--config", str(cfg), "--out", str(out), "--quiet",
                              "--device", "cuda"]) == 0
    model = load_model(out / "model_centralized.pt")
    assert all(p.device.type == "cpu" for p in model.encoder.parameters())
