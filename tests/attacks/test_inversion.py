"""Gradient-inversion attacks: imprint (Robbing the Fed), DLG / IG, β-aware FP-DFSN inversion, metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import stripe_records

from fedprint.attacks import fpdfsn_inversion as fi
from fedprint.attacks import imprint as im
from fedprint.attacks import recon_metrics as rm
from fedprint.attacks.inversion import dlg_attack, inverting_gradients_attack, pair_gradients
from fedprint.attacks.inversion_audit import run_inversion_audit, save_grid
from fedprint.models.preprocess import InputSpec, to_tensor_batch
from fedprint.models.siamese import build_encoder
from fedprint.privacy.fpdfsn import FPDFSNParams, fpdfsn
from fedprint.training.local_data import build_client_data

S = 32


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Double backprop through tiny convs is dominated by thread synchronisation on a loaded machine.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def grays() -> list[np.ndarray]:
    return [r.image for r in stripe_records(n_fingers=30, n_impressions=4, size=S, seed=1)]


@pytest.fixture(scope="module")
def inputs(grays) -> torch.Tensor:
    return to_tensor_batch(grays, InputSpec(size=S))


@pytest.fixture(scope="module")
def tiny_encoder() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_encoder("compact", embedding_dim=8, width=4, channels_last=False)


def _imprint_fraction(encoder, x, n_images, bins, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(x) - 40, n_images, replace=False)  # last 40 inputs are the server's "public" data
    b = n_images // 2
    model = im.tamper(encoder, (1, S, S), bins, public_inputs=x[-40:], seed=seed)
    y = torch.tensor([1.0, 0.0] * (b // 2) + [1.0] * (b % 2))
    g = pair_gradients(model, x[idx[:b]], x[idx[b:]], y)
    rec = im.recover_from_gradients(*im.imprint_gradients(model, g), input_shape=(1, S, S))
    j, err = im.match_candidates(x[idx], rec)
    return rec, idx, j, err


def test_imprint_recovers_batch_of_four_exactly(tiny_encoder, inputs, grays):
    rec, idx, j, err = _imprint_fraction(tiny_encoder, inputs, 4, bins=128)
    ref = rm.gray_at_input_size([grays[k] for k in idx], InputSpec(size=S))
    assert len(np.unique(j)) == 4  # four distinct candidates
    for k in range(4):
        # gray view with the reference's own mean/std: PSNR far beyond any 8-bit quantisation (97 dB at 32x32)
        m = rm.compare(rec[j[k]], ref[k], "standardize", with_lpips=False)
        assert m["psnr"] > 100 and m["exact"]
        assert rm.psnr(rec[j[k]].numpy(), inputs[idx[k]].double().numpy(), data_range=8.0) > 100


def test_imprint_recovery_fraction_drops_when_batch_exceeds_bins(tiny_encoder, inputs):
    fractions = []
    for n in (4, 40):
        _, _, _, err = _imprint_fraction(tiny_encoder, inputs, n, bins=8, seed=3)
        fractions.append(float(np.mean(np.sqrt(err) < 1e-4)))
    assert fractions[1] < fractions[0]
    assert fractions[1] <= 8 / 40  # at most one exact image per bin


def test_imprint_tamper_leaves_encoder_untouched_and_still_embeds(tiny_encoder, inputs):
    before = [p.detach().clone() for p in tiny_encoder.parameters()]
    model = im.tamper(tiny_encoder, (1, S, S), 16)
    with torch.no_grad():
        e_t, e = model(inputs[:6]), tiny_encoder(inputs[:6])
    assert all(torch.equal(a, b) for a, b in zip(before, tiny_encoder.parameters(), strict=True))
    assert float((e_t - e).norm(dim=1).max()) < 0.5  # the residual block perturbs the input only slightly


def test_recover_from_gradients_validates_shapes():
    with pytest.raises(ValueError, match="grad_weight"):
        im.recover_from_gradients(torch.zeros(4, 10), torch.zeros(5))


class _LinearEncoder(torch.nn.Module):
    """A tiny two-layer MLP encoder with unit-norm output: the 'single tiny input' DLG setting."""

    def __init__(self, d_in: int) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(d_in, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(self.net(x), dim=1)


def test_dlg_reduces_matching_loss_and_beats_random_init(grays):
    torch.manual_seed(0)
    enc = _LinearEncoder(64)
    x = to_tensor_batch([grays[0], grays[8]], InputSpec(size=8))
    y = torch.tensor([0.0])
    g = pair_gradients(enc, x[:1], x[1:], y, margin=2.5)  # margin > 2: the impostor term is always active
    res = dlg_attack(enc, g, 1, (1, 8, 8), labels=[0], margin=2.5, iterations=30, seed=0)
    assert res.loss < 1e-2 * res.initial_loss
    init = torch.rand((2, 1, 8, 8), generator=torch.Generator().manual_seed(0))  # the attack's own init
    init = (init - init.mean(dim=(1, 2, 3), keepdim=True)) / init.std(dim=(1, 2, 3), keepdim=True,
                                                                      unbiased=False)
    _, err_rec = im.match_candidates(x, torch.cat([res.x1, res.x2]))
    _, err_init = im.match_candidates(x, init)
    assert err_rec.mean() < 0.5 * err_init.mean()


def test_ig_reduces_cosine_loss_with_estimated_labels(tiny_encoder, inputs):
    x1, x2 = inputs[0:1], inputs[1:2]
    g = pair_gradients(tiny_encoder, x1, x2, torch.tensor([1.0]))
    res = inverting_gradients_attack(tiny_encoder, g, 1, (1, S, S), iterations=40, restarts=1, seed=0)
    assert res.labels.tolist() == [1]  # the genuine labelling matches the genuine pair's gradient best
    assert res.loss < 0.9 * res.initial_loss


def test_metrics_known_cases():
    a = np.full((16, 16), 100, np.uint8)
    assert rm.psnr(a, a) == math.inf
    b = a.astype(np.float64) + 5.0  # MSE = 25
    assert rm.mse(a, b) == pytest.approx(25.0)
    assert rm.psnr(a, b, data_range=255.0) == pytest.approx(10 * math.log10(255**2 / 25))
    assert rm.psnr(a / 255.0, b / 255.0, data_range=1.0) == pytest.approx(10 * math.log10(255**2 / 25))
    with pytest.raises(ValueError, match="data_range"):
        rm.psnr(a / 255.0, b / 255.0)
    rng = np.random.default_rng(0)
    g = rng.integers(0, 256, (16, 16)).astype(np.uint8)
    x = to_tensor_batch([g], InputSpec(size=16))[0, 0]
    m = rm.compare(x, g, "standardize", with_lpips=False)
    assert m["exact"] and m["psnr"] > 90 and m["ssim"] > 0.999


def test_lpips_without_weights_says_unavailable(tmp_path, monkeypatch):
    """No ImageNet AlexNet weights: LPIPS is reported unavailable with the reason, never computed."""
    monkeypatch.setenv("FEDPRINT_ALEXNET_WEIGHTS", str(tmp_path / "absent.pth"))
    lp, note = rm.lpips_or_unavailable(np.zeros((32, 32)), np.zeros((32, 32)))
    assert lp is None and note.startswith("unavailable") and "absent.pth" in note


def test_lpips_with_weights_is_zero_on_identical_and_positive_on_different_images():
    from fedprint.privacy.similarity import alexnet_checkpoint_path

    if not alexnet_checkpoint_path().is_file():
        pytest.skip(f"ImageNet AlexNet weights not at {alexnet_checkpoint_path()} (FedPrint never downloads them)")
    g = np.random.default_rng(1).integers(0, 256, (64, 64)).astype(np.float64)
    same, _ = rm.lpips_or_unavailable(g, g)
    other, _ = rm.lpips_or_unavailable(g, 255.0 - g)
    assert same == pytest.approx(0.0, abs=1e-6) and other > 0.05


def _master_image(identity: int, size: int = 96) -> np.ndarray:
    from fedprint.data.synth.master import make_master

    m = make_master(identity, seed=7, size=(size, size), pattern_prior={"whorl": 1.0, "left_loop": 1.0})
    img = np.where(m.mask, 255.0 - (m.ridges + 1.0) * 127.5, 255.0)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def test_beta_aware_inversion_exact_outside_noise_mask():
    img = _master_image(1)
    beta = 0.5
    res = fpdfsn(img, FPDFSNParams(beta=beta), rng=0)
    assert res.n_minutiae > 0
    inv = fi.beta_aware_inversion(res.image, beta)
    outside = ~res.noise_mask
    err = np.abs(inv - img)[outside]
    assert err.max() <= 0.5 / (1 - beta) + 1e-9  # only the uint8 rounding of I_diff
    naive = np.abs(res.image.astype(float) - img)[outside]
    assert naive.mean() > 20 * err.mean()  # the naive attacker is off by the gain (1 - beta)
    x = to_tensor_batch([res.image], InputSpec(size=96, normalization="unit_range"))[0, 0]
    inv_x = fi.invert_network_input(x, beta, "unit_range")
    assert np.abs(inv_x - img)[outside].max() <= 0.5 / (1 - beta) + 1e-3


def test_run_inversion_audit_rows_and_grid(tmp_path, tiny_encoder):
    recs = stripe_records(n_fingers=10, n_impressions=3, size=S, seed=2)
    cd = build_client_data(recs, name="c0", spec=InputSpec(size=S), seed=0, progress=False)
    out = run_inversion_audit(tiny_encoder, cd, None, attacks=("imprint", "imprint_fedavg"), batch_sizes=(2,),
                              bins=(64,), seed=0, fedavg_steps=(2,), with_lpips=False, grid_dir=tmp_path)
    fedsgd = [r for r in out["rows"] if r["attack"] == "imprint" and r["reference"] == "raw"]
    assert fedsgd and fedsgd[0]["exact_fraction"] >= 0.5 and fedsgd[0]["psnr_median"] > 60
    assert {r["optimizer"] for r in out["rows"] if r["attack"] == "imprint_fedavg"} == {"sgd", "adam"}
    assert out["grids"] and all(p.endswith(".png") for p in out["grids"])
    assert out["classical_matcher"].startswith(("unavailable", "available"))
    p = save_grid([np.zeros((8, 8))], [np.full((8, 8), 255.0)], tmp_path / "g.png")
    assert p.stat().st_size > 0


def test_run_inversion_audit_requires_fpdfsn_inputs(tiny_encoder):
    recs = stripe_records(n_fingers=6, n_impressions=3, size=S, seed=2)
    cd = build_client_data(recs, name="c0", spec=InputSpec(size=S), seed=0, progress=False,
                           fpdfsn=FPDFSNParams(beta=0.5))
    with pytest.raises(ValueError, match="FP-DFSN"):
        run_inversion_audit(tiny_encoder, cd, None, attacks=("imprint",), batch_sizes=(1,), bins=(8,))
