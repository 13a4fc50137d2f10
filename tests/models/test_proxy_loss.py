"""fedprint.models.proxy_loss: CosFace against learned finger proxies, and the proxies' start at class means."""

import math

import pytest
import torch
import torch.nn.functional as F

from fedprint.models.proxy_loss import class_mean_proxies, proxy_cosface_loss


def test_cosface_matches_its_equation_on_a_two_finger_case():
    # z = e0 with proxies e0 (true) and e1: cosines 1 and 0, so L = log(1 + exp(-s (1 - m))).
    emb = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    proxies = torch.tensor([[2.0, 0.0], [0.0, 3.0]], dtype=torch.float64)  # norms do not matter
    for s, m in ((10.0, 0.0), (10.0, 0.2), (4.0, 0.5)):
        got = proxy_cosface_loss(emb, torch.tensor([0]), proxies, scale=s, margin=m)
        assert float(got) == pytest.approx(math.log1p(math.exp(-s * (1 - m))), rel=1e-5)


def test_cosface_is_the_batch_mean_of_a_softmax_cross_entropy():
    gen = torch.Generator().manual_seed(0)
    emb = F.normalize(torch.randn(6, 5, generator=gen), dim=1)
    proxies, labels = torch.randn(4, 5, generator=gen), torch.tensor([0, 1, 2, 3, 0, 1])
    cos = emb @ F.normalize(proxies, dim=1).T
    cos[torch.arange(6), labels] -= 0.3
    want = -torch.log_softmax(20 * cos, dim=1)[torch.arange(6), labels].mean()
    assert float(proxy_cosface_loss(emb, labels, proxies, scale=20, margin=0.3)) == pytest.approx(float(want))


def test_cosface_gradient_pulls_an_embedding_towards_its_proxy():
    z = torch.tensor([[0.6, 0.8]], requires_grad=True)
    proxy_cosface_loss(z, torch.tensor([0]), torch.tensor([[1.0, 0.0], [0.0, 1.0]]), scale=10, margin=0.2).backward()
    assert z.grad[0, 0] < 0 < z.grad[0, 1]  # descent moves z towards e0, away from e1


def test_class_mean_proxies_are_unit_means():
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [0.0, -3.0]])
    got = class_mean_proxies(emb, torch.tensor([0, 0, 1, 1]), 3)
    assert torch.allclose(got[0], torch.tensor([0.5, 0.5]) / math.sqrt(0.5))
    assert torch.allclose(got[1], torch.tensor([0.0, -1.0]))
    assert torch.equal(got[2], torch.zeros(2))  # no image: a zero row
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        class_mean_proxies(emb, torch.tensor([0, 1, 2, 0]), 2)


@pytest.mark.parametrize(("kw", "match"), [({"scale": 0.0}, "scale must be > 0"),
                                           ({"scale": 1.0, "margin": 1.0}, "margin must be in"),
                                           ({"scale": 1.0, "proxies": torch.ones(2, 3)}, "proxies")])
def test_cosface_refuses_bad_arguments(kw, match):
    kw = {"proxies": torch.ones(2, 2)} | kw
    with pytest.raises(ValueError, match=match):
        proxy_cosface_loss(torch.ones(1, 2), torch.tensor([0]), **kw)
