"""Tests for models.siamese and models.loss: shapes, unit norm, no BatchNorm, shared weights, Eq. 1."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from fedprint.models.loss import ContrastiveLoss, contrastive_loss, contrastive_loss_from_distance, match
from fedprint.models.siamese import CompactEncoder, SiameseNet, build_encoder, distance, resnet18_encoder


@pytest.fixture(scope="module")
def encoders() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {"compact": CompactEncoder(embedding_dim=32, width=8),
            "resnet18": resnet18_encoder(embedding_dim=32)}


@pytest.mark.parametrize("name", ["compact", "resnet18"])
def test_shapes_and_unit_norm(encoders, name):
    enc = encoders[name]
    x = torch.randn(3, 1, 64, 64)
    with torch.no_grad():
        e = enc(x)
    assert e.shape == (3, 32)
    assert torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)


@pytest.mark.parametrize("name", ["compact", "resnet18"])
def test_no_batchnorm_anywhere(encoders, name):
    mods = list(encoders[name].modules())
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in mods)
    assert any(isinstance(m, nn.GroupNorm) for m in mods)
    # GroupNorm is per sample: one image's embedding must not depend on the rest of the batch.
    x = torch.randn(4, 1, 64, 64)
    with torch.no_grad():
        assert torch.allclose(encoders[name](x)[:1], encoders[name](x[:1]), atol=1e-5)


def test_channels_last_is_only_a_layout():
    torch.manual_seed(0)
    fast = CompactEncoder(16, width=8, channels_last=True)
    plain = CompactEncoder(16, width=8, channels_last=False)
    plain.load_state_dict(fast.state_dict())
    x = torch.randn(2, 1, 64, 64)
    with torch.no_grad():
        assert torch.allclose(fast(x), plain(x), atol=1e-5)


def test_resnet18_stem_is_single_channel(encoders):
    conv1 = encoders["resnet18"].backbone.conv1
    assert conv1.in_channels == 1 and conv1.out_channels == 64


def test_build_encoder_and_unknown_name():
    assert isinstance(build_encoder("compact", 16, width=8), CompactEncoder)
    assert build_encoder("resnet18", 16).embedding_dim == 16
    with pytest.raises(ValueError, match="unknown encoder name 'vgg'"):
        build_encoder("vgg", 16)
    with pytest.raises(ValueError, match="width"):
        CompactEncoder(width=0)


@pytest.mark.parametrize("name", ["compact", "resnet18"])
def test_deterministic_init(name):
    torch.manual_seed(123)
    a = build_encoder(name, 16).state_dict()
    torch.manual_seed(123)
    b = build_encoder(name, 16).state_dict()
    torch.manual_seed(124)
    c = build_encoder(name, 16).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_siamese_shares_weights():
    torch.manual_seed(0)
    enc = CompactEncoder(16, width=8)
    net = SiameseNet(enc)
    # One parameter set: the Siamese net has exactly the encoder's parameters, no copies.
    assert [id(p) for p in net.parameters()] == [id(p) for p in enc.parameters()]
    x = torch.randn(2, 1, 32, 32)
    e1, e2 = net(x, x.clone())
    assert torch.allclose(e1, e2)
    # Both branches contribute to the single gradient: it equals the sum of the per-branch gradients.
    x1, x2 = torch.randn(2, 1, 32, 32), torch.randn(2, 1, 32, 32)
    w = enc.fc.weight
    g1 = torch.autograd.grad(enc(x1).sum(), w)[0]
    g2 = torch.autograd.grad(enc(x2).sum(), w)[0]
    e1, e2 = net(x1, x2)
    g = torch.autograd.grad(e1.sum() + e2.sum(), w)[0]
    assert torch.allclose(g, g1 + g2, atol=1e-6)
    with pytest.raises(ValueError, match="same number"):
        net(x1, x2[:1])


def test_distance_is_euclidean():
    e1 = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    e2 = torch.tensor([[3.0, 4.0], [0.0, 1.0]])
    assert torch.allclose(distance(e1, e2), torch.tensor([5.0, math.sqrt(2)]))
    with pytest.raises(ValueError, match="equal shape"):
        distance(e1, e2[:1])


def test_loss_matches_hand_computation_of_eq1():
    # Pairs: genuine at d=0.5, impostor inside the margin at d=0.3, impostor beyond the margin at d=1.5,
    # impostor exactly at the margin d=1.0 (hinge: contributes 0), genuine at d=0.
    d = torch.tensor([0.5, 0.3, 1.5, 1.0, 0.0])
    y = torch.tensor([1, 0, 0, 0, 1])
    expected = (0.5**2 + (1.0 - 0.3) ** 2 + 0.0 + 0.0 + 0.0) / 5
    assert contrastive_loss_from_distance(d, y, margin=1.0).item() == pytest.approx(expected)
    # Margin 2: the d=1.5 impostor is now inside the margin.
    expected2 = (0.5**2 + 1.7**2 + 0.5**2 + 1.0**2 + 0.0) / 5
    assert contrastive_loss_from_distance(d, y.float(), margin=2.0).item() == pytest.approx(expected2)


def test_loss_on_embeddings_and_module():
    e1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    e2 = torch.tensor([[0.6, 0.8], [0.6, 0.8]])  # d^2 = 0.16 + 0.64 = 0.8
    y = torch.tensor([1.0, 0.0])
    d = math.sqrt(0.8)
    expected = (0.8 + (1.0 - d) ** 2) / 2
    assert contrastive_loss(e1, e2, y).item() == pytest.approx(expected, rel=1e-6)
    assert ContrastiveLoss(1.0)(e1, e2, y).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("kwargs, msg", [
    ({"y": torch.tensor([1, 2])}, "only 0"),
    ({"y": torch.tensor([1])}, "shape"),
    ({"margin": 0.0}, "margin"),
])
def test_loss_bad_inputs(kwargs, msg):
    args = {"d": torch.tensor([0.1, 0.2]), "y": torch.tensor([1, 0]), "margin": 1.0} | kwargs
    with pytest.raises(ValueError, match=msg):
        contrastive_loss_from_distance(**args)


def test_per_sample_gradients_with_torch_func():
    """DP-SGD needs per-pair gradients; vmap(grad) over the loss must equal a per-pair loop."""
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    enc = CompactEncoder(8, width=4)
    params = {k: v.detach() for k, v in enc.named_parameters()}

    def pair_loss(p, a, b, y):
        e1, e2 = functional_call(enc, p, (a[None],)), functional_call(enc, p, (b[None],))
        return contrastive_loss(e1, e2, y[None], check_labels=False)

    a, b, y = torch.randn(3, 1, 32, 32), torch.randn(3, 1, 32, 32), torch.tensor([1.0, 0.0, 1.0])
    per_sample = vmap(grad(pair_loss), in_dims=(None, 0, 0, 0))(params, a, b, y)
    for i in range(3):
        enc.zero_grad()
        contrastive_loss(enc(a[i : i + 1]), enc(b[i : i + 1]), y[i : i + 1]).backward()
        for k, p in enc.named_parameters():
            assert torch.allclose(p.grad, per_sample[k][i], atol=1e-5), k


def test_gradient_flows_to_every_parameter():
    torch.manual_seed(0)
    enc = CompactEncoder(16, width=8)
    x1, x2 = torch.randn(4, 1, 32, 32), torch.randn(4, 1, 32, 32)
    loss = contrastive_loss(enc(x1), enc(x2), torch.tensor([1, 0, 1, 0]), margin=2.0)
    loss.backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_match_rule_eq2():
    d = torch.tensor([0.2, 0.5, 0.7])
    assert match(d, 0.5).tolist() == [True, True, False]
    assert match(np.array([0.2, 0.5, 0.7]), 0.4).tolist() == [True, False, False]
    with pytest.raises(ValueError, match="finite"):
        match(d, float("nan"))


def _stripes(rng: np.random.Generator, angle: float, period: float, n: int, size: int = 32) -> torch.Tensor:
    """n noisy, randomly shifted impressions of one oriented sinusoidal stripe pattern (a toy 'finger')."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    u = xx * np.cos(angle) + yy * np.sin(angle)
    phase = rng.uniform(0, 2 * np.pi, (n, 1, 1))
    img = np.sin(2 * np.pi * u[None] / period + phase) + 0.3 * rng.standard_normal((n, size, size))
    return torch.from_numpy(img[:, None].astype(np.float32))


def test_compact_encoder_overfits_two_synthetic_fingers():
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    imgs = torch.cat([_stripes(rng, 0.3, 6.0, 6), _stripes(rng, 1.6, 4.0, 6)])
    finger = np.repeat([0, 1], 6)
    ia, ib = np.triu_indices(len(finger), k=1)
    y = torch.from_numpy((finger[ia] == finger[ib]).astype(np.float32))
    enc = CompactEncoder(embedding_dim=16, width=8)
    opt = torch.optim.Adam(enc.parameters(), lr=3e-3)
    for _ in range(40):
        e = enc(imgs)
        loss = contrastive_loss(e[ia], e[ib], y, margin=1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        e = enc(imgs)
        d = distance(e[ia], e[ib])
    genuine, impostor = d[y == 1], d[y == 0]
    assert genuine.max() < impostor.min(), (genuine.max().item(), impostor.min().item())
    assert impostor.min() > 0.5


def test_pooling_grid_keeps_layout_that_global_pooling_discards():
    torch.manual_seed(0)
    glob, grid = CompactEncoder(width=8, grid=1), CompactEncoder(width=8, grid=3)
    assert grid.fc.in_features == 9 * glob.fc.in_features
    # Two inputs that hold the same patch in different places: a global average sees nearly the same features
    # (only border effects differ), a 3 x 3 grid sees them in different cells.
    patch = torch.randn(1, 1, 32, 32)
    a, b = torch.zeros(1, 1, 128, 128), torch.zeros(1, 1, 128, 128)
    a[..., 16:48, 16:48], b[..., 80:112, 80:112] = patch, patch

    def change(net):
        with torch.no_grad():
            za, zb = net.representation(a), net.representation(b)
        return float((za - zb).norm() / za.norm())

    assert change(glob) < 0.3 < 1.0 < change(grid)
    for size in (96, 192):  # any input size still gives one embedding of the configured dimension
        assert grid(torch.randn(2, 1, size, size)).shape == (2, 128)
    with pytest.raises(ValueError, match="grid"):
        CompactEncoder(grid=0)


def test_compact_encoder_gives_its_maps_from_one_pass():
    from fedprint.models.siamese import CompactEncoder

    torch.manual_seed(0)
    net = CompactEncoder(embedding_dim=8, width=4).eval()
    x = torch.randn(2, 1, 64, 64)
    emb, fmap, middle = net.embed_with_maps(x)
    assert torch.allclose(emb, net(x), atol=1e-6) and torch.allclose(fmap, net.feature_map(x), atol=1e-6)
    assert middle.shape == (2, 16, 8, 8) and fmap.shape == (2, 32, 4, 4)
