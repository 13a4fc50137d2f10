"""Personalised baselines FedALA / FedDBE / FedAS: client pieces (client.fedala, client.feddbe, client.fedas),
the node handlers (client.personalized through client.client_app) and the server strategies (server.personalized,
one round trip each through the real Flower apps)."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, Context, RecordDict

from fedprint.client.client_app import evaluate_handler, train_handler
from fedprint.client.fedala import ALASettings, adaptive_local_aggregation
from fedprint.client.fedas import align_to_prototypes, finger_prototypes, fisher_trace, with_own_head
from fedprint.client.feddbe import DBEEncoder
from fedprint.config import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.models.siamese import head_parameter_names, new_encoder
from tests.client.test_client_app import train_message, write_experiment

#: The P x K shape and loss of the toy clients (Eq. 1, margin 1, balanced).
_PK = TrainConfig(p=3, k=4)


def _toy(n_fingers: int = 6, k: int = 4, size: int = 32, seed: int = 0):
    """Images (N, 1, S, S) with k impressions per finger and every genuine + some impostor pairs."""
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(n_fingers, 1, size, size, generator=g)
    images = torch.cat([base[f:f + 1] + 0.1 * torch.randn(k, 1, size, size, generator=g)
                        for f in range(n_fingers)])
    ids = np.repeat(np.arange(n_fingers), k)
    i, j = np.triu_indices(len(ids), 1)
    keep = (ids[i] == ids[j]) | ((i + j) % 5 == 0)
    return images, PairSet(i[keep], j[keep], (ids[i] == ids[j])[keep].astype(np.int8))


def _net(seed: int):
    return new_encoder("compact", 16, seed, width=8)


def test_head_split_is_the_final_projection():
    net = _net(0)
    assert head_parameter_names(net) == ["fc.weight", "fc.bias"]
    x = torch.rand(3, 1, 32, 32)
    assert torch.allclose(net.project(net.representation(x)), net(x))


def test_ala_keeps_lower_layers_global_and_top_layers_between():
    images, pairs = _toy()
    glob, local = _net(0), _net(1)
    net, w, info = adaptive_local_aggregation(glob, local, images, pairs, None, settings=ALASettings(max_passes=12),
                                              cfg=_PK, rng=np.random.default_rng(0))
    assert not info["skipped"] and info["start_phase"] and info["passes"] >= 1
    g, loc, out = dict(glob.named_parameters()), dict(local.named_parameters()), dict(net.named_parameters())
    top = list(w)
    assert top == ["fc.weight", "fc.bias"]
    for n in g:
        if n not in top:
            assert torch.equal(out[n], g[n]), n
    for n in top:  # θ + (θ_g − θ)·W with W in [0, 1]: elementwise between the local and the global value
        lo, hi = torch.minimum(g[n], loc[n]), torch.maximum(g[n], loc[n])
        assert bool(((out[n] >= lo - 1e-6) & (out[n] <= hi + 1e-6)).all())
        assert float(w[n].min()) >= 0.0 and float(w[n].max()) <= 1.0
    assert any(float(w[n].min()) < 1.0 for n in top)  # the weights were learned, not left at "take global"
    # later rounds: one pass only, starting from the stored weights
    _, w2, info2 = adaptive_local_aggregation(glob, local, images, pairs, w, settings=ALASettings(), cfg=_PK,
                                              rng=np.random.default_rng(1))
    assert info2["passes"] == 1 and not info2["start_phase"]


def test_ala_first_round_takes_the_global_model():
    images, pairs = _toy()
    glob = _net(0)
    net, _, info = adaptive_local_aggregation(glob, copy.deepcopy(glob), images, pairs, None,
                                              settings=ALASettings(), cfg=_PK,
                                              rng=np.random.default_rng(0))
    assert info["skipped"]
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), glob.state_dict().values(),
                                                     strict=True))


def test_dbe_bias_running_mean_and_regulariser():
    net = _net(0)
    x = torch.rand(5, 1, 32, 32)
    wrapper = DBEEncoder(net, momentum=0.5)
    assert torch.allclose(wrapper(x), net(x))  # zero bias: the plain model
    rep = net.representation(x).detach().mean(0)
    assert torch.allclose(wrapper.running_mean, 0.5 * rep, atol=1e-6)  # EMA from zeros, momentum 0.5
    reg = wrapper.mean_regulariser(torch.zeros_like(rep), kappa=2.0)()
    assert float(reg.detach()) == pytest.approx(float(2.0 * torch.mean(0.5 * (0.5 * rep) ** 2)), rel=1e-5)
    reg.backward()  # MR's gradient reaches the base through this batch's mean
    assert net.features[0].weight.grad is not None and float(net.features[0].weight.grad.abs().sum()) > 0
    biased = DBEEncoder(net, torch.ones(rep.shape[0])).eval()
    assert not torch.allclose(biased(x), net(x))
    assert torch.allclose(biased(x), net.project(net.representation(x) + 1.0))


def test_fedas_alignment_moves_the_base_to_local_prototypes_only():
    images, pairs = _toy()
    local, glob = _net(1), _net(0)
    used, labels, protos = finger_prototypes(local, images, pairs)
    assert protos.shape == (len(np.unique(labels)), local.head_layer.in_features)

    def distance_to_protos(net):
        with torch.no_grad():
            return float(((net.representation(images[torch.from_numpy(used)]) - protos[labels]) ** 2).mean())

    head_before = glob.fc.weight.detach().clone()
    before = distance_to_protos(glob)
    align_to_prototypes(glob, images, used, labels, protos, rng=np.random.default_rng(0), lr=0.05, epochs=5)
    assert distance_to_protos(glob) < before
    assert torch.equal(glob.fc.weight, head_before)  # the head is not aligned
    mixed = with_own_head(glob, local)
    assert torch.equal(mixed.fc.weight, local.fc.weight) and torch.equal(mixed.features[0].weight,
                                                                           glob.features[0].weight)
    assert fisher_trace(mixed, images, pairs, cfg=_PK,
                        rng=np.random.default_rng(0)) > 0


@pytest.mark.parametrize("method", ["fedala", "feddbe", "fedas"])
def test_node_handlers_keep_the_personal_part_on_the_node(tmp_path, method):
    exp = write_experiment(tmp_path)
    defaults = {"experiment": str(exp)}
    ctx = Context(run_id=1, node_id=7, node_config={"partition-id": 0, "num-partitions": 2},
                  state=RecordDict(), run_config={})
    arrays = ArrayRecord(new_encoder("compact", 16, 3, width=16).state_dict())
    r1 = train_handler(train_message(arrays, 1, method=method), ctx, defaults=defaults)
    m1 = r1.content["metrics"]
    assert set(r1.content["arrays"].keys()) == set(arrays.keys())  # the personal part is never sent
    if method == "feddbe":
        assert len(m1["dbe-mean"]) == 8 * 16 and "dbe-bias" not in ctx.state.array_records  # no ḡ yet
        mean = [float(v) for v in m1["dbe-mean"]]
        r2 = train_handler(train_message(r1.content["arrays"], 2, method=method, **{"dbe-global-mean": mean}),
                           ctx, defaults=defaults)
        assert "dbe-bias" in ctx.state.array_records
        bias = ctx.state.array_records["dbe-bias"].to_torch_state_dict()["bias"]
        assert float(bias.abs().sum()) > 0  # b̄_i was trained
    elif method == "fedas":
        assert m1["fim-trace"] > 0 and math.isfinite(m1["fim-trace"])
        r2 = train_handler(train_message(r1.content["arrays"], 2, method=method), ctx, defaults=defaults)
    else:
        assert "personal-model" in ctx.state.array_records
        r2 = train_handler(train_message(r1.content["arrays"], 2, method=method), ctx, defaults=defaults)
        assert "ala-weights" in ctx.state.array_records
        m2 = r2.content["metrics"]
        assert 0.0 <= m2["ala-mean-weight"] <= 1.0 and m1["ala-passes"] == 0  # round 1: nothing to aggregate
    ev = evaluate_handler(train_message(r2.content["arrays"], 2, method=method), ctx, defaults=defaults)
    em = ev.content["metrics"]
    assert 0 <= em["eer"] <= 1 and em["num-examples"] > 0


@pytest.mark.parametrize("strategy", ["fedala", "feddbe", "fedas"])
def test_personalised_strategies_through_the_real_flower_apps(tmp_path, monkeypatch, strategy):
    from fedprint.lab.simulate import run_federated
    from fedprint.models.model_file import load_model
    from fedprint.server.checkpoint import load_checkpoint

    monkeypatch.setenv("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
    exp = write_experiment(tmp_path, clients=2, rounds=2, fingers=12)
    run_dir = tmp_path / strategy
    run_federated(exp, strategy, run_dir, num_clients=2, progress=False)
    final = json.loads((run_dir / "final.json").read_text())
    assert final["rounds"] == 2 and len(final["clients"]) == 2 and not final["problems"]
    model = load_model(run_dir / "model.pt")
    assert model.meta["method"] == strategy and model.threshold is None  # global model; clients' are personal
    state, _ = load_checkpoint(run_dir)
    if strategy == "feddbe":
        assert len(state["strategy_state"]["global_mean"]) == 8 * 16
    rounds = json.loads((run_dir / "rounds.json").read_text())
    if strategy == "fedas":
        assert all(row["fim-trace"] > 0 for row in rounds[-1]["clients"])


def _train_reply(node: int, w: float, **metrics):
    from flwr.app import Message, MessageType, Metadata, MetricRecord

    meta = Metadata(run_id=1, message_id="", src_node_id=node, dst_node_id=0, reply_to_message_id="",
                    group_id="", created_at=0.0, ttl=60.0, message_type=MessageType.TRAIN)
    content = RecordDict({"arrays": ArrayRecord({"w": torch.full((2,), float(w))}),
                          "metrics": MetricRecord(metrics)})
    return Message(content=content, metadata=meta)


def test_fedas_averages_by_fisher_trace_not_by_examples():
    from fedprint.server.personalized import FedAS

    strat = FedAS(min_train_nodes=2, min_available_nodes=2, min_evaluate_nodes=2)
    arrays, _ = strat.aggregate_train(1, [_train_reply(1, 0.0, **{"num-examples": 100, "fim-trace": 3.0}),
                                          _train_reply(2, 4.0, **{"num-examples": 1, "fim-trace": 1.0})])
    assert arrays["w"].numpy() == pytest.approx([1.0, 1.0])  # 0.75·0 + 0.25·4, not the example-weighted ≈ 0.04
    assert strat.weighted_by_key == "num-examples"  # evaluation stays weighted by test pairs


def test_feddbe_global_mean_is_the_example_weighted_round_one_mean_then_fixed():
    from fedprint.server.personalized import FedDBE

    strat = FedDBE(min_train_nodes=2, min_available_nodes=2, min_evaluate_nodes=2)
    assert "dbe-global-mean" not in strat.client_config()
    strat.aggregate_train(1, [_train_reply(1, 0.0, **{"num-examples": 3, "dbe-mean": [1.0, 0.0]}),
                              _train_reply(2, 0.0, **{"num-examples": 1, "dbe-mean": [5.0, 4.0]})])
    assert strat.client_config()["dbe-global-mean"] == pytest.approx([2.0, 1.0])
    strat.aggregate_train(2, [_train_reply(1, 0.0, **{"num-examples": 3, "dbe-mean": [9.0, 9.0]}),
                              _train_reply(2, 0.0, **{"num-examples": 1, "dbe-mean": [9.0, 9.0]})])
    assert strat.client_config()["dbe-global-mean"] == pytest.approx([2.0, 1.0])  # fixed after round 1
    again = FedDBE()
    again.load_state_dict(strat.state_dict())
    assert again.client_config() == strat.client_config()  # survives a resume
