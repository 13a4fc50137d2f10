"""fedprint.training.dp_sgd: per-pair gradients, clipping, accounting, config and `fedprint train`."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch
from opacus import GradSampleModule

from fedprint.cli.main import main
from fedprint.config import DPSection, TrainConfig, parse_config
from fedprint.data.stripes import stripe_records
from fedprint.models.loss import contrastive_loss_from_distance
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import CompactEncoder
from fedprint.training.dp_sgd import (
    ACCOUNTANTS,
    GRAD_SAMPLE_MODE,
    GROUP_PRIVACY_NOTE,
    PairDistance,
    default_delta,
    dp_pair_set,
    make_dp_trainer,
    train_siamese_dp,
)
from fedprint.training.local_data import build_client_data
from tests.lab.test_train_run import dataset_config  # noqa: F401  (fixture)

pytestmark = [pytest.mark.filterwarnings("ignore:.*Full backward hook:UserWarning"),
              pytest.mark.filterwarnings("ignore:Secure RNG turned off:UserWarning")]


@pytest.fixture(scope="module")
def client():
    return build_client_data(stripe_records(n_fingers=6, n_impressions=4, size=32), name="c0",
                             spec=InputSpec(size=32), seed=0, progress=False)


def _encoder(seed: int = 0, pooling: str = "avg") -> CompactEncoder:
    torch.manual_seed(seed)
    return CompactEncoder(embedding_dim=8, width=8, pooling=pooling)


def _train(client, epochs=2, **dp):
    cfg = TrainConfig(epochs=epochs, batch_size=8, seed=0)
    return train_siamese_dp(_encoder(), client.images, client.train_pairs, cfg, progress=False, **dp)


@pytest.mark.parametrize("pooling", ["avg", "gem"])
def test_per_sample_gradients_are_per_pair(pooling):
    """Opacus's per-sample gradient of the pair loss equals a per-pair autograd loop (two encoder calls); GeM's
    exponent, a bare parameter no Opacus layer covers, included."""
    enc = _encoder(pooling=pooling)
    for m in enc.modules():  # as make_dp_trainer does
        if hasattr(m, "inplace"):
            m.inplace = False
    gsm = GradSampleModule(PairDistance(enc), batch_first=True, loss_reduction="mean",
                           force_functorch=GRAD_SAMPLE_MODE == "functorch")
    g = torch.Generator().manual_seed(1)
    x1, x2 = torch.randn(6, 1, 32, 32, generator=g), torch.randn(6, 1, 32, 32, generator=g)
    y = torch.tensor([1.0, 0, 1, 0, 0, 1])
    contrastive_loss_from_distance(gsm(x1, x2), y).backward()
    params = dict(enc.named_parameters())
    samples = {n: p.grad_sample.clone() for n, p in params.items()}
    ref = PairDistance(enc)
    for i in range(6):
        loss = contrastive_loss_from_distance(ref(x1[i:i + 1], x2[i:i + 1]), y[i:i + 1])
        grads = torch.autograd.grad(loss, list(params.values()))
        for (n, _), gi in zip(params.items(), grads, strict=True):
            torch.testing.assert_close(samples[n][i], gi, atol=1e-4, rtol=1e-3)
    # Stacked (N, 2, C, S, S) input gives the same distances.
    torch.testing.assert_close(ref(torch.stack([x1, x2], dim=1)), ref(x1, x2))


def test_fixed_pair_set_is_built_finger_by_finger_and_seeded(client):
    cfg = TrainConfig(seed=4)
    a, b = (dp_pair_set(client.train_pairs, client.images, cfg, 0.3) for _ in range(2))
    assert a.n_genuine == client.train_pairs.n_genuine and 0 < a.n_impostor
    assert np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    other = dp_pair_set(client.train_pairs, client.images, TrainConfig(seed=5), 0.3)
    assert not (np.array_equal(a.a, other.a) and np.array_equal(a.b, other.b))  # the seed salts the hash
    everything = dp_pair_set(client.train_pairs, client.images, cfg, 1.0)
    assert everything.n_impostor > a.n_impostor


def test_default_delta_keeps_n_delta_at_most_a_tenth():
    assert default_delta(3000) == pytest.approx(1e-5)
    assert default_delta(1000) == pytest.approx(1e-4)
    assert default_delta(24) == pytest.approx(1e-3)
    assert all(n * default_delta(n) <= 0.1 + 1e-12 for n in (1, 7, 10, 99, 101, 9999, 10_000, 123_456))
    with pytest.raises(ValueError, match="n_records"):
        default_delta(0)


def test_epsilon_is_finite_positive_and_grows_with_epochs(client):
    history, acc = _train(client, epochs=3, noise_multiplier=1.0)
    eps = [h["epsilon"] for h in history]
    assert all(np.isfinite(eps)) and eps[0] > 0
    assert eps[0] < eps[1] < eps[2] == pytest.approx(acc["epsilon"])
    assert acc["record"] == "pair" and acc["unit"] == "finger" and acc["delta"] == default_delta(acc["pairs"])
    assert f"n = {acc['pairs']} pairs" in acc["delta_rule"]
    assert acc["steps"] == history[-1]["steps"] == 3 * round(1 / acc["sample_rate"])
    assert acc["sample_rate"] == pytest.approx(1 / np.ceil(acc["pairs"] / 8))


def test_more_noise_gives_smaller_epsilon(client):
    _, low = _train(client, epochs=1, noise_multiplier=0.8)
    _, high = _train(client, epochs=1, noise_multiplier=2.0)
    assert high["epsilon"] < low["epsilon"]


def test_target_epsilon_calibrates_noise(client):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, acc = _train(client, epochs=2, noise_multiplier=None, target_epsilon=5.0, delta=1e-3)
    assert acc["epsilon"] == pytest.approx(5.0, rel=0.05)
    assert acc["noise_multiplier"] > 0
    # the ε reported after training is computed unfiltered: its best RDP order lies inside Opacus's range
    assert not [w for w in caught if "Optimal order is the largest alpha" in str(w.message)]


def test_calibration_trial_points_do_not_warn(client):
    """Opacus's bisection tries large σ whose best RDP order is its largest: noise about the search, not ε."""
    cfg = TrainConfig(epochs=2, batch_size=1, seed=0)  # q = 1 / n: the search starts far above the answer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = make_dp_trainer(_encoder(), client.images, client.train_pairs, cfg, noise_multiplier=None,
                                  target_epsilon=1.0, delta=1e-5)
    assert trainer.noise_multiplier > 0
    assert not [w for w in caught if "Optimal order is the largest alpha" in str(w.message)]


def test_per_pair_gradients_are_clipped(client):
    """σ = 0 and a tiny C: every per-pair gradient exceeds C, and the summed update is at most |batch| · C."""
    clip = 1e-3
    trainer = make_dp_trainer(_encoder(), client.images, client.train_pairs, TrainConfig(batch_size=8, seed=0, lr=3e-4),
                              noise_multiplier=0.0, max_grad_norm=clip)
    seen = []
    inner = trainer.optimizer.original_optimizer
    step = inner.step

    def spy(*args, **kwargs):
        params = [p for p in trainer.module.parameters() if p.grad is not None]
        n = len(params[0].grad_sample)
        raw = torch.stack([p.grad_sample.reshape(n, -1).norm(dim=1) for p in params], 1).norm(dim=1)
        # p.grad = clipped sum / expected batch size (σ = 0: no noise)
        summed = torch.cat([p.grad.reshape(-1) for p in params]).norm() * trainer.optimizer.expected_batch_size
        # an impostor pair beyond the margin has loss 0 and no gradient; every other pair must exceed C
        live = raw[raw > 0]
        seen.append((n, float(live.min()) if len(live) else math.inf, float(summed)))
        return step(*args, **kwargs)

    inner.step = spy
    for a, b, y in trainer.loader:
        if len(y):
            trainer.step(a, b, y)
    trainer.close()
    assert seen
    assert any(raw_min < math.inf for _, raw_min, _ in seen)
    for n, raw_min, summed in seen:
        assert raw_min > clip  # clipping was active for every pair with a gradient
        assert summed <= n * clip * (1 + 1e-4)
    assert not hasattr(next(trainer.encoder.parameters()), "grad_sample")  # hooks and buffers removed


def test_empty_poisson_batch_is_a_noise_only_step(client):
    trainer = make_dp_trainer(_encoder(), client.images, client.train_pairs, TrainConfig(batch_size=8, seed=0, lr=3e-4),
                              noise_multiplier=1.0, max_grad_norm=1.0)
    before = [p.detach().clone() for p in trainer.encoder.parameters()]
    empty = torch.zeros(0, dtype=torch.int64)
    assert trainer.step(empty, empty, torch.zeros(0)) is None
    assert trainer.steps == 1 and trainer.epsilon() > 0  # the accountant counted the step
    assert any(not torch.equal(b, p) for b, p in zip(before, trainer.encoder.parameters(), strict=True))
    trainer.close()


@pytest.mark.parametrize(("table", "key"), [
    ({"max_grad_norm": 0.0}, "dp.max_grad_norm"),
    ({"noise_multiplier": -1.0}, "dp.noise_multiplier"),
    ({"delta": 1.5}, "dp.delta"),
    ({"target_epsilon": 0}, "dp.target_epsilon"),
    ({"accountant": "gdp"}, "dp.accountant"),
    ({"noise_multiplier": 1.0, "target_epsilon": 3.0}, "dp.noise_multiplier / dp.target_epsilon"),
])
def test_bad_dp_config_names_the_key(table, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        parse_config({"dp": {"enabled": True, **table}}, source="exp.toml")


def test_dp_config_defaults_and_kwargs():
    assert DPSection().trainer_kwargs()["noise_multiplier"] == 1.0
    kw = DPSection(target_epsilon=4.0).trainer_kwargs()
    assert kw["noise_multiplier"] is None and kw["target_epsilon"] == 4.0
    assert DPSection.__dataclass_fields__["accountant"].default in ACCOUNTANTS
    with pytest.raises(ValueError, match="noise_multiplier"):
        make_dp_trainer(_encoder(), torch.zeros(2, 1, 32, 32), None, TrainConfig(), noise_multiplier=None)


def test_fedprint_train_with_dp(dataset_config, tmp_path):  # noqa: F811
    cfg = dataset_config
    import cv2

    # 40 fingers (20 a client): the per-finger hash split gives every part fingers (6 a client could leave one empty)
    for r in stripe_records(n_fingers=40, n_impressions=3, size=40):
        (tmp_path / "prints" / r.identity).mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(tmp_path / "prints" / r.identity / f"{r.impression}.png"), r.image)
    # seed 2: each client's hash split has two test and two val fingers (with 20 fingers about one key in five
    # leaves a part short, and the split is refused rather than rebalanced)
    text = (cfg.read_text().replace("[run]\n", "[run]\nseed = 2\n")
            + "[dp]\nenabled = true\nnoise_multiplier = 1.1\nmax_grad_norm = 0.5\n")
    cfg.write_text(text)  # the P x K recipe keys DP-SGD would ignore: refused, naming them
    assert main(["train", "--mode", "local", "--config", str(cfg), "--quiet"]) == 2
    assert not (tmp_path / "runs").exists()
    cfg.write_text(text.replace("[train]\n", '[train]\nsampler = "pairs"\naugment = false\nschedule = "constant"\n'))
    assert main(["train", "--mode", "local", "--config", str(cfg), "--quiet"]) == 0
    (run_dir,) = (tmp_path / "runs").glob("toy-local-*")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    dp = metrics["dp"]
    assert dp["enabled"] and dp["record"] == "pair" and len(dp["per_model"]) == 2
    for row in dp["per_model"]:
        assert 0 < row["epsilon"] < float("inf")
        assert row["noise_multiplier"] == 1.1 and row["max_grad_norm"] == 0.5 and row["steps"] >= 1
        assert 0 < row["delta"] < 1 / row["pairs"] and 0 < row["sample_rate"] <= 1
    report = (run_dir / "report.md").read_text()
    assert GROUP_PRIVACY_NOTE in report and "DP-SGD on" in report
    assert 0.0 <= metrics["average"]["eer"] <= 1.0
    # issue 59 §2: the file, released.json and the report say what the guarantee does not cover
    assert "**Outside the guarantee.**" in report and "keyed hash per finger" in report
    from fedprint.models.model_file import load_model

    for f in sorted(run_dir.glob("model_*.pt")):
        m = load_model(f)
        privacy = m.meta["privacy"]
        assert set(privacy["covered_by_dp"]) == {"state_dict"}
        outside = privacy["outside_dp_guarantee"]
        for entry in ("threshold", "score_fusion", "metrics.test", "data.clients"):
            assert entry in outside, entry
        assert m.threshold is not None and m.meta["metrics"]["test"]  # released, and listed as outside
        assert privacy["guarantee"]["split"] == "finger-hash" and privacy["guarantee"]["epsilon"] > 0
    released = json.loads((run_dir / "released.json").read_text())
    assert set(released["released_under_dp"]) == {f.name for f in run_dir.glob("model_*.pt")}
    assert "clients.csv" in released["outside_dp_guarantee"]


def test_two_runs_with_the_same_config_draw_different_noise(client):
    """DP noise and Poisson sampling come from OS entropy: the same config and seed never give the same model."""
    from fedprint.training.dp_sgd import train_siamese_dp

    params = []
    for _ in range(2):
        enc = _encoder(0)
        train_siamese_dp(enc, client.images, client.train_pairs, TrainConfig(epochs=1, batch_size=8, seed=0),
                         noise_multiplier=1.0, progress=False)
        params.append(torch.cat([p.detach().reshape(-1) for p in enc.parameters()]))
    assert not torch.allclose(params[0], params[1])


def test_injected_generators_make_dp_training_reproducible_for_tests(client):
    from fedprint.training.dp_sgd import train_siamese_dp

    params = []
    for _ in range(2):
        enc = _encoder(0)
        gens = (torch.Generator().manual_seed(1), torch.Generator().manual_seed(2))
        train_siamese_dp(enc, client.images, client.train_pairs, TrainConfig(epochs=1, batch_size=8, seed=0),
                         noise_multiplier=1.0, progress=False, generators=gens)
        params.append(torch.cat([p.detach().reshape(-1) for p in enc.parameters()]))
    assert torch.equal(params[0], params[1])


def test_group_privacy_bound_and_finger_accounting(client):
    import math

    from fedprint.privacy.group_privacy import group_privacy
    from fedprint.training.dp_sgd import max_pairs_per_finger, train_siamese_dp

    assert group_privacy(1.0, 1e-5, 1) == (1.0, pytest.approx(1e-5))
    eps, delta = group_privacy(0.5, 1e-6, 4)
    assert eps == 2.0 and delta == pytest.approx(4 * math.exp(1.5) * 1e-6)  # not "≈ g·ε, same δ"
    assert group_privacy(2.0, 1e-5, 20)[1] == 1.0  # vacuous: capped at 1
    g = max_pairs_per_finger(client.train_pairs)
    assert g > 1
    _, acc = train_siamese_dp(_encoder(0), client.images, client.train_pairs, TrainConfig(epochs=1, batch_size=8),
                              noise_multiplier=1.0, progress=False)
    assert acc["pairs_per_finger"] >= 1 and acc["finger_epsilon"] == pytest.approx(acc["pairs_per_finger"] *
                                                                                   acc["epsilon"])
    assert acc["finger_vacuous"] == (acc["finger_delta"] >= 1.0)


@pytest.mark.parametrize("setting", [{"ema": 0.9}, {"loss": "supcon"}, {"dense_weight": 1.0},
                                     {"flip_identities": 1}, {"proxy_weight": 1.0}, {"l2sp": 0.1},
                                     {"freeze_blocks": 1}])
def test_settings_dp_sgd_does_not_implement_are_refused_by_name(client, setting):
    cfg = TrainConfig(epochs=1, batch_size=8, seed=0, **setting)
    with pytest.raises(ValueError, match=f"{next(iter(setting))}.*not supported with"):
        train_siamese_dp(_encoder(), client.images, client.train_pairs, cfg, progress=False, noise_multiplier=1.0)
