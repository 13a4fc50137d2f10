"""Tests for the AFFR strategy (server/affr.py) and reply validation (server/reply_checks.py).

Replies are built by hand as Flower Messages with explicit metadata (src_node_id), so no simulation engine is
needed except in the one slow end-to-end test at the bottom.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Error,
    Message,
    MessageType,
    Metadata,
    MetricRecord,
    RecordDict,
)

from fedprint.server.affr import AFFR, step_size, update_weights
from fedprint.server.reply_checks import check_reply

SHAPES = {"conv.weight": ((2, 3), np.float32), "fc.bias": ((4,), np.float64), "bn.count": ((), np.int64)}


# ----------------------------------------------------------------------------------------------- helpers
def model(rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for key, (shape, dtype) in SHAPES.items():
        if np.issubdtype(dtype, np.integer):
            out[key] = np.asarray(rng.integers(0, 100), dtype=dtype).reshape(shape)
        else:
            out[key] = rng.normal(size=shape).astype(dtype)
    return out


def record(arrays: dict[str, np.ndarray]) -> ArrayRecord:
    return ArrayRecord({k: Array(np.asarray(v)) for k, v in arrays.items()})


def reply(node: int, arrays: dict[str, np.ndarray] | None, metrics: dict | None = None,
          error: str | None = None) -> Message:
    meta = Metadata(run_id=1, message_id="", src_node_id=node, dst_node_id=0, reply_to_message_id="",
                    group_id="", created_at=0.0, ttl=60.0, message_type=MessageType.TRAIN)
    if error is not None:
        return Message(error=Error(code=7, reason=error), metadata=meta)
    content = RecordDict()
    if arrays is not None:
        content["arrays"] = record(arrays)
    if metrics is not None:
        content["metrics"] = MetricRecord(metrics)
    return Message(content=content, metadata=meta)


def train_reply(node: int, arrays: dict[str, np.ndarray], gap: float, n: int = 10, name: str | None = None,
                **extra) -> Message:
    msg = reply(node, arrays, {"gap": gap, "num-examples": n, **extra})
    if name is not None:  # the ClientApp's identity record
        msg.content["client"] = ConfigRecord({"name": name, "client-id": 0})
    return msg


class FakeGrid:
    """Just enough of flwr.serverapp.Grid for FedAvg.configure_train."""

    def __init__(self, nodes: list[int]) -> None:
        self.nodes = nodes

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)


def configure(strategy: AFFR, server_round: int, global_arrays: dict[str, np.ndarray],
              nodes=(1, 2, 3)) -> list[Message]:
    return list(strategy.configure_train(server_round, record(global_arrays), ConfigRecord(),
                                         FakeGrid(list(nodes))))


def numpy_of(arrays: ArrayRecord) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in arrays.items()}


def weighted(models: dict[int, dict[str, np.ndarray]], weights: dict[int, float]) -> dict[str, np.ndarray]:
    out = {}
    for key, (_, dtype) in SHAPES.items():
        acc = sum(weights[n] * models[n][key].astype(np.float64) for n in weights)
        out[key] = (np.rint(acc) if np.issubdtype(dtype, np.integer) else acc).astype(dtype)
    return out


def ints(d):
    """AFFR keys by client identity; these replies carry none, so it is ``node-<id>``: back to node ids."""
    if isinstance(d, dict):
        return {int(k.removeprefix("node-")): v for k, v in d.items()}
    return [int(k.removeprefix("node-")) for k in d]


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    """Outside a Flower process, instruction Messages (FedAvg.configure_train) need a task identity."""
    from flwr.supercore.task_identity import TaskIdentity

    for attr, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 0)):
        monkeypatch.setattr(TaskIdentity, attr, value)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def glob(rng) -> dict[str, np.ndarray]:
    return model(rng)


def run_round(strategy, server_round, glob, models, gaps, nodes=None, shuffle_seed=None):
    configure(strategy, server_round, glob)
    replies = [train_reply(n, models[n], gaps[n]) for n in (nodes or sorted(models))]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(replies)
    return strategy.aggregate_train(server_round, replies)


# ----------------------------------------------------------------------------------------- pure rules
def test_update_weights_two_nodes_hand_computed():
    # μ = 0.1, G − μ = ±0.1, max = 0.1 -> ±step
    new = update_weights({1: 0.5, 2: 0.5}, {1: 0.2, 2: 0.0}, 0.4)
    assert new[1] == pytest.approx(0.9) and new[2] == pytest.approx(0.1)


def test_update_weights_clips_at_zero_and_renormalises():
    # μ = −0.1, G − μ = (0.4, 0.1, −0.5), max 0.5; step 0.8 -> +0.64, +0.16, −0.8 (clipped to 0)
    new = update_weights({1: 1 / 3, 2: 1 / 3, 3: 1 / 3}, {1: 0.3, 2: 0.0, 3: -0.6}, 0.8)
    raw1, raw2 = 1 / 3 + 0.64, 1 / 3 + 0.16
    assert new[3] == 0.0
    assert new[1] == pytest.approx(raw1 / (raw1 + raw2))
    assert new[2] == pytest.approx(raw2 / (raw1 + raw2))
    assert sum(new.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("value,count", [(0.3, 3), (0.1, 7), (0.0, 4), (-0.25, 5)])
def test_update_weights_equal_gaps_leave_weights_unchanged(value, count):
    alpha = {n: w for n, w in enumerate(np.random.default_rng(count).dirichlet(np.ones(count)))}
    new = update_weights(alpha, dict.fromkeys(alpha, value), 0.8)
    assert new == alpha  # exactly, no NaN, no spurious ±1 from a 1e-17 spread


def test_update_weights_step_zero_unchanged_and_clips_gaps():
    alpha = {1: 0.2, 2: 0.3, 3: 0.5}
    assert update_weights(alpha, {1: 0.9, 2: 0.0, 3: -0.4}, 0.0) == alpha
    # an absurd gap of 50 counts as 1 (with three nodes the magnitude matters after centring)
    assert update_weights(alpha, {1: 50.0, 2: 0.5, 3: 0.0}, 0.3) == update_weights(
        alpha, {1: 1.0, 2: 0.5, 3: 0.0}, 0.3)
    # without clipping, a gap of 50 would centre differently from a gap of 1
    assert update_weights(alpha, {1: 1.0, 2: 0.5, 3: 0.0}, 0.3) != update_weights(
        alpha, {1: 0.9, 2: 0.5, 3: 0.0}, 0.3)
    assert update_weights(alpha, {1: -9.0, 2: 0.5, 3: 0.0}, 0.3) == update_weights(
        alpha, {1: -1.0, 2: 0.5, 3: 0.0}, 0.3)


def test_update_weights_rejects_bad_input():
    with pytest.raises(ValueError, match="same node ids"):
        update_weights({1: 0.5, 2: 0.5}, {1: 0.0, 3: 0.0}, 0.1)
    with pytest.raises(ValueError, match="sum to 1"):
        update_weights({1: 0.5, 2: 0.2}, {1: 0.0, 2: 0.1}, 0.1)
    with pytest.raises(ValueError, match="gaps must be finite"):
        update_weights({1: 0.5, 2: 0.5}, {1: float("nan"), 2: 0.1}, 0.1)
    with pytest.raises(ValueError, match="step"):
        update_weights({1: 0.5, 2: 0.5}, {1: 0.0, 2: 0.1}, -0.1)
    with pytest.raises(ValueError, match="at least one"):
        update_weights({}, {}, 0.1)


def test_step_size_schedule():
    """Alg. 1 runs t' = 0 .. T-1: round 1 uses d, the last round d/T (it still moves the weights)."""
    assert step_size(1, 20, 0.8) == pytest.approx(0.8)
    assert step_size(11, 20, 0.8) == pytest.approx(0.4)
    assert step_size(20, 20, 0.8) == pytest.approx(0.04)
    steps = [step_size(t, 5, 1.0) for t in range(1, 6)]
    assert steps == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])
    for bad in [(0, 20, 0.8), (21, 20, 0.8), (1, 0, 0.8), (1, 5, -0.1), (1, 5, float("nan"))]:
        with pytest.raises(ValueError):
            step_size(*bad)


# --------------------------------------------------------------------------------------- reply checks
def test_check_reply_accepts_good_and_names_each_problem(rng, glob):
    ref = record(glob)
    good = model(rng)
    assert check_reply(train_reply(1, good, 0.1).content, ref, ["gap"], ["num-examples"]) is None

    nan = {**good, "fc.bias": np.array([0, np.nan, 0, np.inf])}
    assert "non-finite" in check_reply(train_reply(1, nan, 0.1).content, ref, ["gap"])
    shape = {**good, "conv.weight": np.zeros((3, 2), np.float32)}
    assert "shape" in check_reply(train_reply(1, shape, 0.1).content, ref, ["gap"])
    dtype = {**good, "conv.weight": good["conv.weight"].astype(np.float64)}
    assert "dtype" in check_reply(train_reply(1, dtype, 0.1).content, ref, ["gap"])
    missing = {k: v for k, v in good.items() if k != "fc.bias"}
    assert "missing ['fc.bias']" in check_reply(train_reply(1, missing, 0.1).content, ref, ["gap"])
    extra = {**good, "head.w": np.zeros(2)}
    assert "unexpected ['head.w']" in check_reply(train_reply(1, extra, 0.1).content, ref, ["gap"])
    assert "ArrayRecord" in check_reply(reply(1, None, {"gap": 0.1}).content, ref, ["gap"])
    assert "'gap' is missing" in check_reply(reply(1, good, {"num-examples": 3}).content, ref, ["gap"])
    assert "not finite" in check_reply(train_reply(1, good, float("nan")).content, ref, ["gap"])
    assert "real scalar" in check_reply(reply(1, good, {"gap": [0.1, 0.2]}).content, ref, ["gap"])
    assert "> 0" in check_reply(train_reply(1, good, 0.1, n=0).content, ref, ["gap"], ["num-examples"])
    # evaluate replies: no ArrayRecord expected
    assert check_reply(reply(1, None, {"num-examples": 3}).content, None, [], ["num-examples"],
                       expect_arrays=False) is None


# ------------------------------------------------------------------------------------- AFFR strategy
def three_models(seed: int = 1) -> dict[int, dict[str, np.ndarray]]:
    r = np.random.default_rng(seed)
    return {n: model(r) for n in (11, 22, 33)}


def test_round1_uniform_and_aggregate_is_hand_computed_weighted_average(glob):
    models = three_models()
    strat = AFFR(num_rounds=5, step=0.8)
    # round 1: reported gaps are ignored (first participation, Eq. 5 undefined) -> weights 1/3
    arrays, metrics = run_round(strat, 1, glob, models, {11: 0.5, 22: 0.0, 33: -0.2})
    assert ints(strat.history[0]["gaps"]) == {11: 0.0, 22: 0.0, 33: 0.0}
    assert ints(strat.history[0]["round_weights"]) == pytest.approx({11: 1 / 3, 22: 1 / 3, 33: 1 / 3})
    out = numpy_of(arrays)
    expect = weighted(models, {11: 1 / 3, 22: 1 / 3, 33: 1 / 3})
    for key, (_, dtype) in SHAPES.items():
        assert out[key].dtype == dtype
        np.testing.assert_allclose(out[key], expect[key], rtol=1e-6)
    assert list(out) == list(glob)  # key order of the global model
    assert "gap" in metrics and "num-examples" not in metrics

    # round 2: weights from the rule, aggregate = Σ α_i θ_i with exactly those weights
    gaps = {11: 0.3, 22: 0.1, 33: 0.0}
    arrays, _ = run_round(strat, 2, glob, models, gaps)
    expect_w = update_weights({11: 1 / 3, 22: 1 / 3, 33: 1 / 3}, gaps, step_size(2, 5, 0.8))
    assert ints(strat.history[1]["round_weights"]) == pytest.approx(expect_w)
    expect = weighted(models, expect_w)
    for key in SHAPES:
        np.testing.assert_allclose(numpy_of(arrays)[key], expect[key], rtol=1e-6)


def test_weights_move_towards_larger_gap_over_rounds(glob):
    models = three_models()
    strat = AFFR(num_rounds=6, step=0.3)  # small enough that no weight saturates at 0 or 1
    gaps = {11: 0.3, 22: 0.1, 33: 0.0}
    alphas = []
    for t in range(1, 6):
        run_round(strat, t, glob, models, gaps)
        alphas.append(ints(strat.alpha))
    assert alphas[0] == pytest.approx({11: 1 / 3, 22: 1 / 3, 33: 1 / 3})
    a11 = [a[11] for a in alphas]
    assert all(b > a for a, b in zip(a11, a11[1:], strict=False))
    assert alphas[-1][11] > alphas[-1][22] > alphas[-1][33]
    assert sum(alphas[-1].values()) == pytest.approx(1.0)


def test_reply_order_does_not_change_aggregate_or_weights(glob):
    models = three_models()
    gaps = {11: 0.3, 22: 0.1, 33: 0.0}
    results = []
    for seed in (0, 1, 2):
        strat = AFFR(num_rounds=4)
        for t in (1, 2, 3):
            arrays, _ = run_round(strat, t, glob, models, gaps, shuffle_seed=seed * 10 + t)
        results.append((numpy_of(arrays), strat.alpha))
    for arrays, alpha in results[1:]:
        assert alpha == results[0][1]
        for key in SHAPES:
            assert np.array_equal(arrays[key], results[0][0][key])  # bitwise


def test_missing_node_is_renormalised_away_and_keeps_its_alpha(glob):
    models = three_models()
    strat = AFFR(num_rounds=6)
    run_round(strat, 1, glob, models, {11: 0, 22: 0, 33: 0})
    run_round(strat, 2, glob, models, {11: 0.3, 22: 0.1, 33: 0.0})
    before = ints(strat.alpha)
    configure(strat, 3, glob)
    arrays, _ = strat.aggregate_train(3, [train_reply(22, models[22], 0.0), train_reply(11, models[11], 0.2)])
    h = strat.history[-1]
    assert ints(h["participating"]) == [11, 22]
    assert ints(strat.alpha)[33] == before[33]
    assert sum(strat.alpha.values()) == pytest.approx(1.0)
    mass = before[11] + before[22]
    expect_w = update_weights({11: before[11] / mass, 22: before[22] / mass}, {11: 0.2, 22: 0.0},
                              step_size(3, 6, 0.8))
    assert ints(h["round_weights"]) == pytest.approx(expect_w)
    assert ints(strat.alpha)[11] == pytest.approx(expect_w[11] * mass)
    expect = weighted(models, expect_w)
    for key in SHAPES:
        np.testing.assert_allclose(numpy_of(arrays)[key], expect[key], rtol=1e-6)
    # the node returns: its stored weight is used again
    run_round(strat, 4, glob, models, {11: 0.0, 22: 0.0, 33: 0.0})
    assert ints(strat.history[-1]["round_weights"])[33] == pytest.approx(ints(strat.alpha)[33])


def test_bad_replies_rejected_with_reasons_and_do_not_affect_aggregate(glob, caplog):
    models = three_models()
    gaps = {11: 0.3, 22: 0.1, 33: 0.0}
    dirty = AFFR(num_rounds=4)
    run_round(dirty, 1, glob, models, gaps)
    # node 33 is known but now fails; 44..49 are new nodes sending junk; 33's junk must not count either
    bad = {
        33: train_reply(33, {**models[33], "fc.bias": np.full(4, np.nan)}, 0.0),
        44: train_reply(44, {**models[33], "conv.weight": np.zeros((6,), np.float32)}, 0.0),
        45: reply(45, models[33], {"num-examples": 10}),
        46: train_reply(46, models[33], float("inf")),
        47: reply(47, None, {"gap": 0.0, "num-examples": 10}),
        48: reply(48, None, error="client crashed"),
        49: train_reply(49, {k: v for k, v in models[33].items() if k != "bn.count"}, 0.0),
    }
    configure(dirty, 2, glob)
    good = [train_reply(n, models[n], gaps[n]) for n in (11, 22)]
    arrays, _ = dirty.aggregate_train(2, [*bad.values(), *good])
    rej = ints(dirty.history[-1]["rejected"])
    assert set(rej) == set(bad)
    assert "non-finite" in rej[33] and "shape" in rej[44] and "'gap' is missing" in rej[45]
    assert "not finite" in rej[46] and "ArrayRecord" in rej[47] and "client crashed" in rej[48]
    assert "missing ['bn.count']" in rej[49]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert all(any(f"from node {n}:" in w for w in warned) for n in bad)
    assert ints(dirty.history[-1]["participating"]) == [11, 22]
    assert set(ints(dirty.alpha)) == {11, 22, 33}  # junk nodes are never admitted
    # same aggregate as a run that only ever saw the two good nodes (33's stored 1/3 is renormalised away)
    clean2 = AFFR(num_rounds=4)
    run_round(clean2, 1, glob, models, gaps)
    configure(clean2, 2, glob)
    ref_arrays, _ = clean2.aggregate_train(2, good)
    for key in SHAPES:
        assert np.array_equal(numpy_of(arrays)[key], numpy_of(ref_arrays)[key])


def test_duplicate_replies_and_no_usable_reply(glob):
    models = three_models()
    strat = AFFR(num_rounds=3)
    configure(strat, 1, glob)
    arrays, metrics = strat.aggregate_train(
        1, [train_reply(11, models[11], 0.0), train_reply(11, models[22], 0.0), reply(22, None, error="x")])
    assert arrays is None and metrics is None
    assert "2 replies" in ints(strat.history[0]["rejected"])[11]
    assert strat.alpha == {}


def test_reported_gap_outside_unit_range_is_clipped(glob):
    models = three_models()
    strat = AFFR(num_rounds=5)
    run_round(strat, 1, glob, models, {11: 0.0, 22: 0.0, 33: 0.0})
    run_round(strat, 2, glob, models, {11: 40.0, 22: 0.5, 33: -3.0})
    h = strat.history[-1]
    assert ints(h["gaps"]) == {11: 1.0, 22: 0.5, 33: -1.0} and ints(h["reported_gaps"])[11] == 40.0
    assert ints(h["round_weights"]) == update_weights({11: 1 / 3, 22: 1 / 3, 33: 1 / 3},
                                                {11: 1.0, 22: 0.5, 33: -1.0}, step_size(2, 5, 0.8))


def test_new_node_enters_with_mean_weight(glob):
    models = three_models()
    strat = AFFR(num_rounds=5)
    run_round(strat, 1, glob, {n: models[n] for n in (11, 22)}, {11: 0.0, 22: 0.0})
    run_round(strat, 2, glob, {n: models[n] for n in (11, 22)}, {11: 0.2, 22: 0.0})
    before = ints(strat.alpha)
    mean = (before[11] + before[22]) / 2
    # node 33 reports a gap on its first participation: taken as 0
    run_round(strat, 3, glob, models, {11: 0.0, 22: 0.0, 33: 0.9})
    h = strat.history[-1]
    assert ints(h["gaps"])[33] == 0.0 and ints(h["reported_gaps"])[33] == 0.9
    total = before[11] + before[22] + mean
    assert ints(h["round_weights"]) == pytest.approx(  # equal gaps -> admitted weights used unchanged
        {11: before[11] / total, 22: before[22] / total, 33: mean / total})


def test_present_nodes_without_stored_mass_start_uniform(glob):
    models = three_models()
    strat = AFFR(num_rounds=5)
    strat.load_state_dict({"format": "affr-state/2", "num_rounds": 5, "step": 0.8, "gap_key": "gap",
                           "rounds_done": 1, "alpha": {"node-11": 0.0, "node-22": 0.0, "node-33": 1.0}, "history": []})
    run_round(strat, 1, glob, {n: models[n] for n in (11, 22)}, {11: 0.1, 22: 0.1})
    assert strat.history[-1]["round"] == 2
    assert ints(strat.history[-1]["round_weights"]) == {11: 0.5, 22: 0.5}
    # they take over: no longer stuck at 0 while the node that held all the weight is gone (renormalised)
    assert ints(strat.alpha) == pytest.approx({11: 0.25, 22: 0.25, 33: 0.5})


def test_a_newcomers_forced_zero_gap_does_not_move_the_others(glob):
    """A node joining late reports gap 0 by definition; it must not enter the centring μ of the others."""
    models = three_models()
    with_new, without = AFFR(num_rounds=6, step=0.3), AFFR(num_rounds=6, step=0.3)
    gaps = {11: 0.3, 22: 0.1, 33: 0.0}
    for t in (1, 2):
        run_round(with_new, t, glob, {n: models[n] for n in (11, 22)}, gaps)
        run_round(without, t, glob, {n: models[n] for n in (11, 22)}, gaps)
    run_round(with_new, 3, glob, models, gaps)  # node 33 joins in round 3
    run_round(without, 3, glob, {n: models[n] for n in (11, 22)}, gaps)
    a, b = ints(with_new.history[-1]["round_weights"]), ints(without.history[-1]["round_weights"])
    assert a[11] / a[22] == pytest.approx(b[11] / b[22])  # the veterans moved exactly as without it


def test_metrics_aggregated_like_fedavg_on_shared_keys(glob):
    models = three_models()
    strat = AFFR(num_rounds=3)
    configure(strat, 1, glob)
    replies = [train_reply(11, models[11], 0.0, n=10, loss=1.0, extra=5.0),
               train_reply(22, models[22], 0.0, n=30, loss=2.0)]
    _, metrics = strat.aggregate_train(1, replies)
    assert metrics["loss"] == pytest.approx((10 * 1.0 + 30 * 2.0) / 40)
    assert "extra" not in metrics


def test_aggregate_evaluate_skips_invalid_replies(glob):
    strat = AFFR(num_rounds=3)
    replies = [reply(11, None, {"num-examples": 10, "acc": 0.5}), reply(22, None, {"acc": 0.9}),
               reply(33, None, {"num-examples": 30, "acc": 0.7}), reply(44, None, error="down")]
    metrics = strat.aggregate_evaluate(1, replies)
    assert metrics["acc"] == pytest.approx((10 * 0.5 + 30 * 0.7) / 40)
    assert strat.aggregate_evaluate(1, [reply(44, None, error="down")]) is None


def test_state_dict_round_trip_reproduces_next_round(glob):
    models = three_models()
    gaps = [{11: 0.0, 22: 0.0, 33: 0.0}, {11: 0.3, 22: 0.1, 33: 0.0}, {11: 0.1, 22: 0.2, 33: -0.1}]
    a = AFFR(num_rounds=5, step=0.6)
    run_round(a, 1, glob, models, gaps[0])
    configure(a, 2, glob)
    a.aggregate_train(2, [train_reply(11, models[11], 0.3), train_reply(22, models[22], 0.1),
                          reply(33, None, error="offline")])
    state = json.loads(json.dumps(a.state_dict()))
    b = AFFR(num_rounds=5, step=0.6)
    b.load_state_dict(state)
    assert b.round_offset == 2 and b.rounds_remaining == 3
    assert b.alpha == a.alpha and b.history == a.history
    arr_a, met_a = run_round(a, 3, glob, models, gaps[2])
    arr_b, met_b = run_round(b, 1, glob, models, gaps[2])  # Flower restarts server_round at 1
    assert b.history[-1]["round"] == 3 and b.history[-1]["step"] == a.history[-1]["step"]
    assert a.alpha == b.alpha
    for key in SHAPES:
        assert np.array_equal(numpy_of(arr_a)[key], numpy_of(arr_b)[key])
    assert dict(met_a) == dict(met_b)
    with pytest.raises(ValueError, match="step"):
        AFFR(num_rounds=5, step=0.8).load_state_dict(state)


def test_weights_keyed_by_client_name_survive_new_node_ids_on_resume(glob):
    """Node ids are new after every restart; the learned α must follow the client names, not the ids."""
    models = three_models()
    names = {11: "inst-a", 22: "inst-b", 33: "inst-c"}
    gaps = {11: 0.3, 22: 0.1, 33: 0.0}

    def named_round(strat, t, ids):  # ids: node id now used by each original node
        configure(strat, t, glob)
        replies = [train_reply(ids[n], models[n], gaps[n], name=names[n]) for n in models]
        return strat.aggregate_train(t, replies)

    same = {n: n for n in models}
    uninterrupted = AFFR(num_rounds=4, step=0.5)
    for t in (1, 2, 3):
        named_round(uninterrupted, t, same)
    stopped = AFFR(num_rounds=4, step=0.5)
    for t in (1, 2):
        named_round(stopped, t, same)
    assert set(stopped.alpha) == set(names.values())
    before = dict(stopped.alpha)
    assert before["inst-a"] > before["inst-b"] > before["inst-c"]  # weights have moved: a real test
    resumed = AFFR(num_rounds=4, step=0.5)
    resumed.load_state_dict(json.loads(json.dumps(stopped.state_dict())))
    assert resumed.alpha == before
    new_ids = {11: 901, 22: 902, 33: 903}  # what a restarted simulation / SuperNode gets
    named_round(resumed, 1, new_ids)
    assert resumed.history[-1]["round_weights"] == pytest.approx(uninterrupted.history[-1]["round_weights"])
    assert resumed.alpha == pytest.approx(uninterrupted.alpha)
    assert set(resumed.alpha) == set(names.values())  # the old ids hold no mass


def test_two_nodes_claiming_one_identity_are_both_rejected(glob):
    models = three_models()
    strat = AFFR(num_rounds=3)
    configure(strat, 1, glob)
    strat.aggregate_train(1, [train_reply(11, models[11], 0.0, name="inst-a"),
                              train_reply(22, models[22], 0.0, name="inst-a"),
                              train_reply(33, models[33], 0.0, name="inst-c")])
    h = strat.history[-1]
    assert h["participating"] == ["inst-c"]
    assert "claimed by nodes [11, 22]" in h["rejected"]["inst-a"]


def test_state_keyed_by_node_id_is_refused():
    with pytest.raises(ValueError, match="node id"):
        AFFR(num_rounds=5).load_state_dict({"format": "affr-state/1", "num_rounds": 5, "step": 0.8,
                                            "gap_key": "gap", "rounds_done": 1, "alpha": {}, "history": []})


def test_configure_train_sends_schedule_round_and_requires_reference(glob):
    strat = AFFR(num_rounds=4)
    with pytest.raises(RuntimeError, match="configure_train"):
        strat.aggregate_train(1, [])
    strat.round_offset = 2
    msgs = configure(strat, 1, glob)
    assert len(msgs) == 3 and all(m.content["config"]["server-round"] == 3 for m in msgs)
    with pytest.raises(ValueError):
        AFFR(num_rounds=0)
    with pytest.raises(ValueError):
        AFFR(num_rounds=3, gap_key="num-examples")


# -------------------------------------------------------------------------- end-to-end (Flower sim)
@pytest.mark.slow
def test_affr_in_flower_simulation_moves_weight_to_larger_gap(monkeypatch):
    """Real ServerApp + ClientApp under flwr.simulation.run_simulation; node gaps fixed by partition id."""
    monkeypatch.setenv("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    captured: dict = {}
    gap_of_partition = {0: 0.3, 1: 0.1, 2: 0.0}

    client = ClientApp()

    @client.train()
    def train(msg: Message, context) -> Message:
        pid = int(context.node_config["partition-id"])
        arrays = msg.content["arrays"].to_numpy_ndarrays()
        new = [a + np.float32(pid + 1) for a in arrays]
        first = msg.content["config"]["server-round"] == 1
        content = RecordDict({
            "arrays": ArrayRecord(new),
            "metrics": MetricRecord({"gap": 0.0 if first else gap_of_partition[pid], "num-examples": 10,
                                     "partition": pid}),
        })
        return Message(content=content, reply_to=msg)

    server = ServerApp()

    @server.main()
    def main(grid, context) -> None:
        strat = AFFR(num_rounds=4, step=0.8, fraction_evaluate=0.0, min_train_nodes=3,
                     min_available_nodes=3)
        strat.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(3, np.float32)]), num_rounds=4,
                    timeout=60)
        captured["strategy"] = strat

    run_simulation(server_app=server, client_app=client, num_supernodes=3,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    strat = captured["strategy"]
    assert len(strat.history) == 4 and all(not ints(h["rejected"]) for h in strat.history)
    final = strat.history[-1]["alpha"]
    assert len(final) == 3 and sum(final.values()) == pytest.approx(1.0)
    ranked = sorted(final, key=final.get, reverse=True)
    gaps_by_node = strat.history[-1]["gaps"]
    assert [gaps_by_node[n] for n in ranked] == [0.3, 0.1, 0.0]


def test_gap_differences_inside_the_validation_noise_are_flagged_and_can_be_ignored(glob):
    """AFFR's normalisation turns any spread into a full step; the round records when that spread is within
    2 standard errors, and the noise-floor variant leaves the weights alone then."""
    models = three_models()
    moved = {}
    for floor in (0.0, 2.0):
        strat = AFFR(num_rounds=4, step=0.5, noise_floor=floor)
        for t in (1, 2):
            configure(strat, t, glob)
            strat.aggregate_train(t, [train_reply(n, models[n], g, **{"gap-se": 0.05})
                                      for n, g in ((11, 0.01), (22, 0.0), (33, -0.01))])
        h = strat.history[-1]
        assert h["within_noise"] and h["max_centred_gap"] == pytest.approx(0.01) and h["gap_se"] == 0.05
        moved[floor] = ints(h["round_weights"])
    assert moved[0.0][11] > 0.4  # the paper's rule: a full step on a 0.01 gap difference
    assert moved[2.0] == pytest.approx({11: 1 / 3, 22: 1 / 3, 33: 1 / 3})  # the variant: unchanged
