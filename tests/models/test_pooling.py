"""fedprint.models.pooling: GeM pooling, and [model] pooling = "gem"."""

import numpy as np
import pytest
import torch

from fedprint.config.experiment import ModelSection, parse_config
from fedprint.config.train import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.models.model_file import load_model, model_bytes, pretrained_path
from fedprint.models.pooling import GEM_P0, GeM
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import CompactEncoder
from fedprint.training.trainer import train_siamese


def _maps(seed=0, shape=(2, 3, 6, 6)):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed))


def test_gem_with_p_1_is_average_pooling_and_grows_towards_the_maximum():
    x = _maps()
    one = GeM(p=1.0)
    torch.testing.assert_close(one(x), torch.nn.functional.adaptive_avg_pool2d(x, 1))
    means = [GeM(p=p)(x) for p in (1.0, 3.0, 50.0)]
    assert torch.all(means[0] < means[1]) and torch.all(means[1] < means[2])
    top = x.amax(dim=(2, 3), keepdim=True)
    assert torch.all(means[2] <= top + 1e-6) and torch.all(means[2] > 0.9 * top)


def test_gem_grid_matches_the_average_pool_grid_and_learns_its_exponent():
    x = _maps(shape=(2, 3, 9, 9)).requires_grad_()
    g = GeM(grid=3, p=1.0)
    torch.testing.assert_close(g(x), torch.nn.functional.adaptive_avg_pool2d(x, 3))
    gem = GeM()
    gem(x).sum().backward()
    assert gem.p.grad is not None and torch.isfinite(gem.p.grad) and gem.p.grad != 0
    with pytest.raises(ValueError, match="p must be >= 1"):
        GeM(p=0.5)


def test_pooling_option_is_validated_and_only_stored_when_set():
    assert ModelSection().encoder_kwargs() == {"width": 16}  # model files from before the option still match
    assert ModelSection(pooling="gem").encoder_kwargs() == {"width": 16, "pooling": "gem"}
    with pytest.raises(ValueError, match="model.pooling: expected one of"):
        ModelSection(pooling="max")
    with pytest.raises(ValueError, match="only the 'compact' encoder"):
        ModelSection(encoder="resnet18", pooling="gem")
    with pytest.raises(ValueError, match="pooling must be one of"):
        CompactEncoder(width=4, pooling="median")


def test_gem_starts_from_an_averaging_model():
    """init = a model with average pooling: the GeM encoder keeps its weights and adds p at its initial value."""
    cfg = parse_config({"model": {"init": "pretrained", "pooling": "gem"}})
    net = cfg.model.new_encoder(seed=0).eval()
    assert isinstance(net.pool, GeM) and float(net.pool.p.detach()) == GEM_P0
    shipped = load_model(pretrained_path()).encoder
    for name, v in shipped.state_dict().items():
        assert torch.equal(net.state_dict()[name], v)


def test_gem_encoder_trains_and_round_trips_through_a_model_file(tmp_path):
    torch.manual_seed(0)
    enc = CompactEncoder(width=4, embedding_dim=8, pooling="gem")
    x = torch.randn((8, 1, 64, 64), generator=torch.Generator().manual_seed(1))
    ids = np.repeat(np.arange(4), 2)
    a, b = np.triu_indices(8, 1)
    pairs = PairSet(a, b, (ids[a] == ids[b]).astype(np.int8))
    hist = train_siamese(enc, x, pairs, TrainConfig(epochs=2, p=4, k=2, seed=0), progress=False)
    assert all(np.isfinite(h["loss"]) for h in hist)
    assert float(enc.pool.p.detach()) != GEM_P0  # the exponent is learned
    path = tmp_path / "m.pt"
    path.write_bytes(model_bytes(enc, encoder_name="compact", embedding_dim=8, spec=InputSpec(size=64),
                                 threshold=None, encoder_kwargs={"width": 4, "pooling": "gem"}))
    back = load_model(path).encoder.eval()
    with torch.no_grad():
        torch.testing.assert_close(back(x), enc.eval()(x))
