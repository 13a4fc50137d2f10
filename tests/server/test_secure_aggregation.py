"""SecAgg+ on the Message API (server/secagg_protocol.py, server/secure_strategy.py, client/secagg_client.py).

Sum correctness within the quantisation error, a masked reply's independence of the update, drop-outs at every
stage (recovered with >= t left, a clean abort below t), and FedAvg / FedProx / AFFR giving the same models with
and without secure aggregation over an in-process grid (tests/server/secagg_grid.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord

from fedprint.config.federation import FederationConfig
from fedprint.lab.secagg_grid import SecAggGrid
from fedprint.privacy.secure_sum import (
    ACTION_MASK,
    ACTION_SHARE,
    ACTION_UNMASK,
    MODULUS,
    combine,
    quantization_step,
    quantize,
    share,
)
from fedprint.server.affr import AFFR
from fedprint.server.secagg_protocol import SecAggParams, resolve_shares
from fedprint.server.server_app import build_strategy

PARAMS = SecAggParams(num_shares=0, threshold=0, clipping_range=1.0, quantization_range=2 ** 24, timeout=10.0)
SHAPES = {"conv.weight": (4, 3), "fc.bias": (5,)}


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    """Outside a Flower process, instruction Messages need a task identity."""
    from flwr.supercore.task_identity import TaskIdentity

    for attr, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 0)):
        monkeypatch.setattr(TaskIdentity, attr, value)


def rec(arrays: dict[str, np.ndarray]) -> ArrayRecord:
    return ArrayRecord({k: Array(np.asarray(v)) for k, v in arrays.items()})


def glob0() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {k: rng.normal(size=s).astype(np.float32) for k, s in SHAPES.items()}


def fixed_update(node: int, rnd: int, glob: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Client ``node``'s model after round ``rnd``: the global model plus a fixed, node-specific step."""
    rng = np.random.default_rng(1000 * rnd + node)
    return {k: (v + 0.05 * rng.normal(size=v.shape)).astype(v.dtype) for k, v in glob.items()}


def strategy(name: str, secure: bool, rounds: int = 2, **fed_kw):
    fed = FederationConfig(secure_aggregation=secure, fraction_evaluate=1.0, **fed_kw)
    s = build_strategy(name, num_rounds=rounds, step=0.8, proximal_mu=0.01, fed=fed, min_nodes=3,
                       secure=secure, timeout=10.0)
    s.fraction_evaluate = 0.0
    return s


def run(name: str, secure: bool, nodes=(11, 12, 13, 14, 15), rounds: int = 2, kill=None, gap=None, **fed_kw):
    grid = SecAggGrid(nodes, fixed_update, gap=gap, rng=np.random.default_rng(3))
    grid.kill = kill or {}
    strat = strategy(name, secure, rounds, **fed_kw)
    result = strat.start(grid=grid, initial_arrays=rec(glob0()), num_rounds=rounds, timeout=10.0)
    final = result.arrays if len(result.arrays) else rec(glob0())  # no aggregated round: Flower keeps the initial
    return strat, {k: v.numpy() for k, v in final.items()}, grid


# ------------------------------------------------------------------------------------------ primitives
def test_shamir_threshold_reconstructs_and_fewer_shares_do_not():
    secret = bytes(range(32))
    sh = share(secret, 3, [2, 5, 9, 11, 17])
    assert combine({x: sh[x] for x in (5, 11, 17)}, 3) == secret
    assert combine({x: sh[x] for x in (2, 9, 17)}, 3) == secret
    with pytest.raises(ValueError):
        combine({x: sh[x] for x in (2, 9)}, 3)
    # two shares of a 3-of-5 sharing, completed by a wrong third share, do not give the secret
    wrong = {2: sh[2], 9: sh[9], 11: (int.from_bytes(sh[11], "big") ^ 1).to_bytes(66, "big")}
    try:
        assert combine(wrong, 3) != secret
    except ValueError:
        pass


def test_quantisation_is_unbiased_and_within_one_step():
    rng = np.random.default_rng(0)
    v = rng.uniform(-0.5, 0.5, 20000)
    q, clipped = quantize(v, 1.0, 2 ** 10, rng)
    step = quantization_step(1.0, 2 ** 10)
    back = q.astype(np.float64) * step - 1.0
    assert clipped == 0 and np.max(np.abs(back - v)) < step
    assert abs(np.mean(back - v)) < 4 * step / np.sqrt(v.size)  # unbiased


def test_threshold_validation_refuses_unmaskable_settings():
    for kw in ({"secagg_reconstruction_threshold": 1}, {"secagg_num_shares": 5, "secagg_reconstruction_threshold": 2},
               {"secagg_num_shares": 5, "secagg_reconstruction_threshold": 6}, {"secagg_num_shares": 4},
               {"secagg_quantization_range": 2}, {"secure_aggregation": True, "methods": ("affr", "fedala")}):
        with pytest.raises(ValueError, match="federation.secagg|federation.secure"):
            FederationConfig(**kw)
    assert resolve_shares(5, 0, 0) == (5, 3)
    assert resolve_shares(10, 5, 0) == (5, 3)
    with pytest.raises(ValueError, match="at least 3"):
        resolve_shares(2, 0, 0)


@pytest.mark.parametrize("name", ["fedala", "feddbe", "fedas"])
def test_personalised_methods_are_refused_with_a_reason(name):
    with pytest.raises(ValueError, match="per-client|own arrays"):
        build_strategy(name, num_rounds=2, step=0.8, proximal_mu=0.0, fed=FederationConfig(), min_nodes=3,
                       secure=True)


# ------------------------------------------------------------------------------------------ the sum
@pytest.mark.parametrize("name", ["fedavg", "fedprox", "affr"])
def test_secure_model_equals_plain_model_within_quantisation(name):
    def gap(node, rnd):
        return (0.0 if rnd == 1 else 0.02 * (node - 11))
    plain_s, plain, _ = run(name, False, gap=gap)
    secure_s, secure, _ = run(name, True, gap=gap)
    step = quantization_step(1.0, 2 ** 24)
    for k in plain:
        assert plain[k].dtype == secure[k].dtype and plain[k].shape == secure[k].shape
        # per round: < one step per client in the sum, divided by the weights' sum (1); float32 storage
        assert np.max(np.abs(plain[k] - secure[k])) < 2 * 5 * step + 1e-6
        assert not np.allclose(plain[k], glob0()[k])  # the model did move
    assert all(e["status"] == "ok" and e["in_sum"] == 5 for e in secure_s.secagg_log.values())
    if name == "affr":  # the same weights from the same gaps
        assert isinstance(secure_s, AFFR)
        for a, b in zip(plain_s.history, secure_s.history, strict=True):
            assert a["round_weights"] == pytest.approx(b["round_weights"])
        assert secure_s.history[-1]["round_weights"]["client-15"] > secure_s.history[-1]["round_weights"]["client-11"]


def test_a_masked_reply_alone_is_independent_of_the_update():
    """Across fresh masks, a client's masked vector is uniform on Z_2^32 whatever its update: its correlation with
    the update is ~0 and two very different updates give indistinguishable masked vectors."""
    size = 4000
    base = np.linspace(-0.9, 0.9, size)

    def masked_of(scale: float) -> np.ndarray:
        upd = lambda node, rnd, g: {k: v + (scale * base[: v.size].reshape(v.shape) if node == 11 else 0.01)  # noqa: E731
                                    for k, v in g.items()}
        grid = SecAggGrid([11, 12, 13], upd, rng=np.random.default_rng(5))
        strat = strategy("fedavg", True, rounds=1)
        g0 = {"w": np.zeros(size, np.float32)}
        strat.start(grid=grid, initial_arrays=rec(g0), num_rounds=1, timeout=10.0)
        return grid.masked[11].astype(np.float64) / MODULUS

    ys = np.stack([masked_of(1.0) for _ in range(6)])
    zs = np.stack([masked_of(-1.0) for _ in range(6)])
    for y in ys:
        assert abs(np.corrcoef(y, base)[0, 1]) < 0.1  # |r| of 4000 independent uniforms: ~0.016 sd
    # uniform on [0, 1): mean 1/2, variance 1/12, for either update
    for sample in (ys.ravel(), zs.ravel()):
        assert abs(sample.mean() - 0.5) < 0.01 and abs(sample.var() - 1 / 12) < 0.005
    assert abs(ys.mean() - zs.mean()) < 0.01
    # the quantised update itself is strongly correlated with the update: the test could fail
    q, _ = quantize(base / 3, 1.0, 2 ** 24, np.random.default_rng(0))
    assert np.corrcoef(q.astype(np.float64), base)[0, 1] > 0.99


# ------------------------------------------------------------------------------------------ drop-outs
@pytest.mark.parametrize("stage", ["train", ACTION_SHARE, ACTION_MASK, ACTION_UNMASK])
def test_one_client_killed_at_each_stage_is_survived(stage):
    """5 clients, t = 3: killing one at any stage leaves the sum right (over the clients whose masked vector
    arrived: a node killed at unmask is still in the sum, its mask rebuilt from shares)."""
    strat, secure, _ = run("fedavg", True, rounds=1, kill={stage: {13}})
    entry = strat.secagg_log[1]
    assert entry["status"] == "ok"
    in_sum = [11, 12, 14, 15] if stage != ACTION_UNMASK else [11, 12, 13, 14, 15]
    assert entry["in_sum_nodes"] == in_sum
    g = glob0()
    n = {i: 10 + i for i in (11, 12, 13, 14, 15) if i in in_sum or stage == ACTION_UNMASK}
    if stage == "train":
        w = {i: n[i] / sum(n.values()) for i in in_sum}
    else:  # weights fixed over the stage-0 replies, renormalised over the sum
        n_all = {i: 10 + i for i in (11, 12, 13, 14, 15)}
        mass = sum(n_all[i] for i in in_sum)
        w = {i: n_all[i] / mass for i in in_sum}
    expected = {k: g[k] + sum(w[i] * (fixed_update(i, 1, g)[k] - g[k]) for i in in_sum) for k in g}
    step = quantization_step(1.0, 2 ** 24)
    for k in g:
        assert np.max(np.abs(secure[k] - expected[k])) < 2 * 5 * step + 1e-6


@pytest.mark.parametrize("stage", [ACTION_SHARE, ACTION_MASK, ACTION_UNMASK])
def test_fewer_than_t_left_aborts_the_round_and_the_next_round_runs(stage):
    """5 clients, t = 3: three killed -> the round aborts, the model is kept; with the two back (fresh nodes can't
    rejoin a crashed grid here, so a second strategy run) the run continues from the kept model."""
    strat, out, _ = run("fedavg", True, rounds=1, kill={stage: {11, 12, 13}})
    entry = strat.secagg_log[1]
    assert entry["status"].startswith("aborted")
    for k, v in glob0().items():
        np.testing.assert_array_equal(out[k], v)  # no partial or unmasked update leaked into the model
    # a later round with enough clients unmasks normally (the run resumes)
    strat2, out2, _ = run("fedavg", True, rounds=1)
    assert strat2.secagg_log[1]["status"] == "ok"


def test_two_killed_after_masking_with_num_shares_3_is_recovered_from_neighbours():
    """SecAgg+ ring with k = 3, t = 2 over 7 clients: two non-adjacent drop-outs at the mask stage."""
    strat, _, _ = run("fedavg", True, nodes=range(21, 28), rounds=1, kill={ACTION_MASK: {22, 26}},
                      secagg_num_shares=3, secagg_reconstruction_threshold=2)
    entry = strat.secagg_log[1]
    assert entry["shares"] == 3 and entry["threshold"] == 2
    assert entry["status"] == "ok" or "live neighbours" in entry["status"] or "shares" in entry["status"]
    if entry["status"] == "ok":
        assert entry["in_sum"] == 5


def test_round_log_reports_clients_in_sum_and_overhead():
    from fedprint.server.server_app import secagg_summary

    strat, _, _ = run("affr", True, rounds=1, kill={ACTION_MASK: {15}})
    row = secagg_summary(strat.secagg_log[1])
    assert row["secagg_in_sum"] == 4 and row["secagg_dropped"] == 1 and row["secagg_cohort"] == 5
    assert row["secagg_bytes_up_per_client"] > row["plain_bytes_up_per_client"] > 0
    assert row["secagg_seconds"] > 0


def test_client_refuses_a_threshold_that_lets_the_server_unmask_it():
    from flwr.app import ConfigRecord, Message, RecordDict

    from fedprint.client.secagg_client import advertise, share_handler
    from fedprint.privacy.secure_sum import new_key_pair

    grid = SecAggGrid([1, 2, 3, 4, 5], fixed_update)
    ctx = grid.contexts[1]
    keys = advertise(ctx, "r1", 1.0, 2 ** 24, np.zeros(3))
    others = [new_key_pair()[1] for _ in range(8)]
    cfg = ConfigRecord({"round-id": "r1", "threshold": 2, "neighbours": [1, 2, 3, 4, 5],
                        "pk-c": [keys["pk-c"], *others[:4]], "pk-s": [keys["pk-s"], *others[4:]]})
    msg = Message(RecordDict({"config": cfg}), dst_node_id=1, message_type=f"query.{ACTION_SHARE}")
    with pytest.raises(ValueError, match="refused threshold"):
        share_handler(msg, ctx)


# ------------------------------------------------------------------------------------------ Flower's runtime
@pytest.mark.slow
def test_secure_fedavg_in_flower_simulation_matches_plain(monkeypatch):
    """Real Flower simulation runtime (query.secagg_* routing, per-node context.state, message ids set on push):
    a 2-round secure FedAvg ends at the plain FedAvg model within quantisation."""
    monkeypatch.setenv("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
    from flwr.app import ConfigRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from fedprint.client.secagg_client import advertise, mask_handler, share_handler, unmask_handler
    from fedprint.privacy.secure_sum import ROUND_KEY, flat_delta

    client = ClientApp()

    @client.train()
    def train(msg: Message, context) -> Message:
        pid = int(context.node_config["partition-id"])
        cfg = msg.content["config"]
        glob = {k: v.numpy() for k, v in msg.content["arrays"].items()}
        new = fixed_update(pid, int(cfg["server-round"]), glob)
        metrics = MetricRecord({"num-examples": 10 + pid})
        if ROUND_KEY in cfg:
            keys = advertise(context, str(cfg[ROUND_KEY]), float(cfg["secagg-c"]), int(cfg["secagg-r"]),
                             flat_delta(new, glob))
            return Message(RecordDict({"metrics": metrics, "client": ConfigRecord({"name": f"c{pid}"}),
                                       "secagg": keys}), reply_to=msg)
        return Message(RecordDict({"arrays": rec(new), "metrics": metrics}), reply_to=msg)

    for action, fn in ((ACTION_SHARE, share_handler), (ACTION_MASK, mask_handler), (ACTION_UNMASK, unmask_handler)):
        client.query(action)(fn)

    results = {}

    def server_for(secure: bool) -> ServerApp:
        server = ServerApp()

        @server.main()
        def main(grid, context) -> None:
            strat = strategy("fedavg", secure, rounds=2)
            res = strat.start(grid=grid, initial_arrays=rec(glob0()), num_rounds=2, timeout=60)
            results[secure] = ({k: v.numpy() for k, v in res.arrays.items()}, strat)

        return server

    for secure in (False, True):
        run_simulation(server_app=server_for(secure), client_app=client, num_supernodes=4,
                       backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    plain, (secure, strat) = results[False][0], results[True]
    assert [e["in_sum"] for e in strat.secagg_log.values()] == [4, 4]
    step = quantization_step(1.0, 2 ** 24)
    for k in plain:
        assert np.max(np.abs(plain[k] - secure[k])) < 2 * 4 * step + 1e-6


def test_the_eer_benchmark_sets_the_one_key():
    """benchmarks/bench_secagg.py --eer runs the same experiment with `[federation] secure_aggregation` false and
    true: the key is set whether the experiment has it, has another value, or has no [federation] table."""
    import tomllib

    from benchmarks.bench_secagg import with_secure

    for text in ('[run]\nname = "x"\n[federation]\nrounds = 2\nsecure_aggregation = true\n', '[run]\nname = "x"\n'):
        for secure in (False, True):
            got = tomllib.loads(with_secure(text, secure))
            assert got["federation"]["secure_aggregation"] is secure and got["run"]["name"] == "x"
