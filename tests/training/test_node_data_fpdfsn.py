"""A deployed node follows the experiment's FP-DFSN rule: its ``beta`` counts only under ``[fpdfsn] enabled``.

Before this fix ``node_client_data`` passed the node's β (or ``[fpdfsn] beta``) to FP-DFSN even with
``[fpdfsn] enabled = false``, so a deployment trained on FP-DFSN images that the experiment said were off."""

from __future__ import annotations

import pytest

from fedprint.config import parse_config
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.training import node_data


@pytest.fixture
def data_dir(tmp_path):
    return write_generic(stripe_records(n_fingers=8, n_impressions=3, size=40), tmp_path / "prints")


def _cfg(tmp_path, enabled: bool):
    return parse_config({"run": {"out": str(tmp_path / "runs")}, "model": {"input_size": 32},
                         "fpdfsn": {"enabled": enabled, "beta": 0.5}})


@pytest.mark.parametrize("node_beta", [None, 0.7])
def test_disabled_fpdfsn_is_not_applied_on_a_deployed_node(tmp_path, data_dir, node_beta, monkeypatch):
    monkeypatch.setattr(node_data, "_CACHE", {})
    node = {"data-dir": str(data_dir), "layout": "generic"} | ({"beta": node_beta} if node_beta else {})
    data, _ = node_data.node_client_data(_cfg(tmp_path, False), node)
    assert data.beta == 0.0 and not data.fpdfsn_stats["enabled"] and data.fpdfsn_images is None


def test_enabled_fpdfsn_uses_the_nodes_beta(tmp_path, data_dir, monkeypatch):
    monkeypatch.setattr(node_data, "_CACHE", {})
    seen = {}

    def fake_client_data(cfg, records, *, name, beta, client_id):
        seen["beta"] = beta
        return "data"

    monkeypatch.setattr(node_data, "client_data", fake_client_data)
    node_data.node_client_data(_cfg(tmp_path, True), {"data-dir": str(data_dir), "layout": "generic", "beta": 0.7})
    assert seen["beta"] == 0.7
