"""Issue 24 §1 and §9: the client-DP cohort, its weights and σ are fixed before replies — a client whose data makes
its reply fail (D') changes neither m, nor the cap, nor any weight, nor σ; the sampling sentence tells the truth."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.server.dp_affr import DPAFFR
from tests.server.test_affr import SHAPES, configure, reply, task_identity, train_reply  # noqa: F401


def _models():
    rng = np.random.default_rng(5)
    return {n: {k: (rng.normal(size=s).astype(d) if not np.issubdtype(d, np.integer) else np.asarray(3, d))
                for k, (s, d) in SHAPES.items()} for n in (1, 2, 3)}


def _glob():
    return {k: (np.zeros(s, d) if not np.issubdtype(d, np.integer) else np.asarray(3, d))
            for k, (s, d) in SHAPES.items()}


def _run(step: float, broken: str | None, rounds: int = 2):
    """Rounds of DP-AFFR on three clients; in the last round client 3's data is D (gap 0) or D' (its reply fails)."""
    strat = DPAFFR(num_rounds=3, step=step, noise_multiplier=1.0, gap_noise_multiplier=None if step == 0 else 1.0,
                   clip=1.0, rng=np.random.default_rng(7))
    models = _models()
    for t in range(1, rounds + 1):
        configure(strat, t, _glob(), nodes=(1, 2, 3))
        msgs = [train_reply(n, models[n], {1: 0.5, 2: -0.3, 3: 0.0}[n], name=f"inst-{n}") for n in (1, 2)]
        if t < rounds or broken is None:
            msgs.append(train_reply(3, models[3], 0.0, name="inst-3"))
        elif broken == "empty":  # D': client 3's data replaced by an empty set
            msgs.append(train_reply(3, models[3], 0.0, n=0, name="inst-3"))
        elif broken == "error":
            msgs.append(reply(3, None, error="client crashed"))
        # broken == "silent": no reply at all (time-out)
        strat.aggregate_train(t, msgs)
    return strat


@pytest.mark.parametrize("step", [0.0, 0.8])
@pytest.mark.parametrize("broken", ["empty", "error", "silent"])
def test_a_failing_client_changes_neither_weights_nor_sigma(step, broken):
    d, d_prime = _run(step, None), _run(step, broken)
    w, w_prime = d.history[-1]["round_weights"], d_prime.history[-1]["round_weights"]
    assert set(w) == set(w_prime) == {"inst-1", "inst-2", "inst-3"}  # m = 3 in both: the cohort is public
    assert w_prime == pytest.approx(w, abs=1e-12)
    assert d_prime.sigmas[-1] == pytest.approx(d.sigmas[-1], abs=1e-15)
    assert d_prime.releases[-1]["cohort_size"] == 3
    assert "inst-3" in d_prime.history[-1]["rejected"] and "inst-3" not in d.history[-1]["rejected"]
    if step == 0:
        assert w_prime == pytest.approx(dict.fromkeys(w, 1 / 3)) and d_prime.sigmas[-1] == pytest.approx(2 / 3)


def test_a_rejected_member_contributes_a_zero_update_at_its_weight():
    strat = DPAFFR(num_rounds=2, step=0.0, noise_multiplier=1e-12, gap_noise_multiplier=None, clip=100.0,
                   rng=np.random.default_rng(0))
    models = _models()
    configure(strat, 1, _glob(), nodes=(1, 2, 3))
    arrays, _ = strat.aggregate_train(1, [train_reply(n, models[n], 0.0, name=f"i{n}") for n in (1, 2)])
    got = arrays["fc.bias"].numpy()
    np.testing.assert_allclose(got, (models[1]["fc.bias"] + models[2]["fc.bias"]) / 3, atol=1e-9)


def test_sampling_sentence_tells_the_truth():
    full = DPAFFR(num_rounds=2, step=0.0, noise_multiplier=1.0, gap_noise_multiplier=None, clip=1.0)
    part = DPAFFR(num_rounds=2, step=0.0, noise_multiplier=1.0, gap_noise_multiplier=None, clip=1.0,
                  fraction_train=0.5)
    assert full.accounting()["sampling"].startswith("none: every connected client")
    s = part.accounting()["sampling"]
    assert "fraction_train = 0.5" in s and "every client" not in s.split(":")[1][:40]
    assert "no privacy amplification by sampling is claimed" in s
