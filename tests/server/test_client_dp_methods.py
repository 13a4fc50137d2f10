"""Issue 59 §6: under ``[dp] level = "client"`` only fedavg and affr run (as DP-FedAvg / DP-AFFR); fedprox and the
personalised methods (fedala, feddbe, fedas) are refused with one line naming the method and why — before this
fix the personalised ones ran as DP-FedAvg under their own names — in the ServerApp and in `simulate --check`."""

from __future__ import annotations

import pytest

from fedprint.cli.main import main
from fedprint.config import DPSection, FederationConfig
from fedprint.server.dp_affr import DPAFFR
from fedprint.server.server_app import build_strategy
from tests.client.test_client_app import write_experiment

CLIENT_DP = DPSection(enabled=True, level="client", noise_multiplier=1.0)


def _build(name: str, dp: DPSection | None = CLIENT_DP):
    return build_strategy(name, num_rounds=3, step=0.8, proximal_mu=0.01, fed=FederationConfig(), min_nodes=2,
                          dp=dp, secure=False)


@pytest.mark.parametrize("name", ["fedprox", "fedala", "feddbe", "fedas"])
def test_methods_without_client_dp_are_refused_naming_them(name):
    with pytest.raises(ValueError, match=rf"implemented for fedavg and affr only, not {name} \(.*would run as "
                                         rf"DP-FedAvg under the name {name}\)") as info:
        _build(name)
    assert "\n" not in str(info.value)
    assert not isinstance(_build(name, dp=None), DPAFFR)  # without [dp] the method runs as itself


@pytest.mark.parametrize("name,step", [("fedavg", 0.0), ("affr", 0.8)])
def test_fedavg_and_affr_become_dp_affr(name, step):
    strat = _build(name)
    assert isinstance(strat, DPAFFR) and strat.step == step


@pytest.mark.parametrize("method", ["fedala", "fedprox"])
def test_simulate_check_refuses_them_too(tmp_path, capsys, method):
    exp = write_experiment(tmp_path, extra=f'methods = ["fedavg", "{method}"]\n[dp]\nenabled = true\n'
                                             'level = "client"\n')
    assert main(["simulate", "--config", str(exp), "--check", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"exp.toml: [dp] level = \"client\": client-level DP is implemented for fedavg and affr only, not {method}" \
        in err
    ok = write_experiment(tmp_path / "ok", extra='methods = ["fedavg", "affr", "local"]\n[dp]\nenabled = true\n'
                                                 'level = "client"\n')
    assert main(["simulate", "--config", str(ok), "--check", "--quiet"]) == 0
