"""models.device and the --device plumbing: CPU results unchanged, CUDA refused clearly where there is none."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fedprint_cli
from client.local_data import build_client_data
from client.trainer import embed, train_siamese
from data.stripes import stripe_records
from fedprint_config import TrainConfig
from models.device import DEVICE_ENV, autocast, current_device, grad_scaler, resolve_device, set_device, use_device
from models.preprocess import InputSpec
from models.siamese import new_encoder

NO_CUDA = not torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _restore_device(monkeypatch):
    import models.device as md

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
    monkeypatch.setattr("models.device._current", None)
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
    from client.client_app import node_device
    from fedprint_config.app import client_settings

    conf = client_settings({}, {"device": "cpu"})
    assert node_device({}, conf) == "cpu"
    assert node_device({"device": "auto"}, conf) == "auto"  # the SuperNode's own setting wins
    with pytest.raises(ValueError, match="node config 'device': expected one of auto, cpu, cuda"):
        node_device({"device": "gpu0"}, conf)
    with pytest.raises(ValueError, match="run config 'device': expected auto, cpu or cuda"):
        client_settings({"device": "gpu"})


def test_simulation_asks_ray_for_a_gpu_share_only_on_cuda():
    from lab.simulate import backend_config

    assert backend_config(2)["client_resources"] == {"num_cpus": 1, "num_gpus": 0.0}
    cuda = backend_config(2, device="cuda")
    assert cuda["client_resources"]["num_gpus"] == 0.5 and cuda["init_args"]["num_gpus"] == 1
