"""fedprint.models.alignment: the learned rotation-and-shift aligner, and [model] align = true."""

import math

import numpy as np
import pytest
import torch

from fedprint.config.experiment import parse_config
from fedprint.config.train import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.models.alignment import RigidAligner
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.models.siamese import CompactEncoder
from fedprint.training.trainer import train_siamese


def _images(n=4, size=32, seed=0):
    return torch.randn((n, 1, size, size), generator=torch.Generator().manual_seed(seed))


def test_fresh_aligner_is_the_identity():
    x = _images()
    torch.testing.assert_close(RigidAligner()(x), x, atol=1e-5, rtol=0)


def test_pose_rotates_and_shifts_as_stated():
    al = RigidAligner(max_angle=180.0)
    with torch.no_grad():
        al.pose.bias[0] = math.atanh(0.5)  # 90 degrees
    x = _images()
    assert torch.allclose(al.poses(x)[:, 0], torch.full((4,), 90.0))
    # A quarter turn maps pixel centres onto pixel centres: the output is the input turned by 90 degrees.
    torch.testing.assert_close(al(x), torch.rot90(x, k=1, dims=(2, 3)), atol=1e-4, rtol=0)
    sh = RigidAligner(max_shift=1.0)
    with torch.no_grad():
        sh.pose.bias[1] = math.atanh(0.25)  # x shift of a quarter half-side = 4 px of 32
    out = sh(x)
    torch.testing.assert_close(out[..., :-4], x[..., 4:], atol=1e-4, rtol=0)


def test_aligner_learns_from_the_loss():
    al = RigidAligner()
    x = _images(size=64)
    target = torch.rot90(x, k=1, dims=(2, 3))
    ((al(x) - target) ** 2).mean().backward()
    assert al.pose.weight.grad is not None and al.pose.weight.grad.abs().sum() > 0


def test_bad_settings_and_inputs_are_named():
    with pytest.raises(ValueError, match="max_angle"):
        RigidAligner(max_angle=0)
    with pytest.raises(ValueError, match="max_shift"):
        RigidAligner(max_shift=2)
    with pytest.raises(ValueError, match="grayscale"):
        RigidAligner()(torch.zeros(2, 3, 16, 16))
    with pytest.raises(ValueError, match="align"):
        CompactEncoder(align=1)
    with pytest.raises(ValueError, match="model.align"):
        parse_config({"model": {"encoder": "resnet18", "align": True}})


def test_align_starts_from_a_model_without_one():
    """init = a model without an aligner: the aligned encoder starts with the same embeddings."""
    cfg = parse_config({"model": {"init": "pretrained", "align": True}})
    assert cfg.model.encoder_kwargs()["align"] is True
    net = cfg.model.new_encoder(seed=0).eval()
    assert net.align is not None
    shipped = load_model(pretrained_path()).encoder.eval()
    x = _images(n=3, size=128)
    with torch.no_grad():
        torch.testing.assert_close(net(x), shipped(x), atol=1e-5, rtol=0)
    # ... and the aligner added is the same whoever asks (not drawn from the caller's RNG).
    torch.manual_seed(123)
    other = cfg.model.new_encoder(seed=0)
    for a, b in zip(net.align.parameters(), other.align.parameters(), strict=True):
        assert torch.equal(a, b)


def test_minutiae_loss_refuses_an_aligned_encoder():
    enc = CompactEncoder(width=4, align=True)
    pairs = PairSet(np.array([0, 0]), np.array([1, 2]), np.array([1, 0]))
    with pytest.raises(ValueError, match="align"):
        train_siamese(enc, _images(n=3), pairs, TrainConfig(epochs=1, minutiae_weight=1.0), progress=False)


def test_aligned_encoder_trains_and_round_trips_through_a_model_file(tmp_path):
    from fedprint.models.model_file import model_bytes
    from fedprint.models.preprocess import InputSpec

    torch.manual_seed(0)
    enc = CompactEncoder(width=4, embedding_dim=8, align=True)
    x = _images(n=8, size=64)
    ids = np.repeat(np.arange(4), 2)
    a, b = np.triu_indices(8, 1)
    pairs = PairSet(a, b, (ids[a] == ids[b]).astype(np.int8))
    before = [p.detach().clone() for p in enc.align.parameters()]
    hist = train_siamese(enc, x, pairs, TrainConfig(epochs=2, p=4, k=2, seed=0), progress=False)
    assert all(np.isfinite(h["loss"]) for h in hist)
    assert any(not torch.equal(p0, p) for p0, p in zip(before, enc.align.parameters(), strict=True))
    path = tmp_path / "m.pt"
    path.write_bytes(model_bytes(enc, encoder_name="compact", embedding_dim=8, spec=InputSpec(size=64),
                                 threshold=None, encoder_kwargs={"width": 4, "align": True}))
    back = load_model(path).encoder.eval()
    with torch.no_grad():
        torch.testing.assert_close(back(x), enc.eval()(x))
