"""What both Flower apps need from their run config: app settings, the experiment, paths against a base dir.

The ServerApp and the ClientApp share this module (as Flower's baselines share their task module) and never
import each other. Each app converts its flat Flower run config here, once, at its boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fedprint_config.experiment import ExperimentConfig, load_experiment
from fedprint_config.federation import FederationConfig
from fedprint_config.shipped import resolve_experiment

#: Run-config keys the ClientApp reads, with their defaults.
CLIENT_DEFAULTS: dict[str, Any] = {"experiment": "demo", "base-dir": "", "client-threads": 1}

#: Run-config keys of the ServerApp. Values <= 0 / "" mean "take it from the experiment's [federation]".
SERVER_DEFAULTS: dict[str, Any] = {
    "experiment": "demo",  # path, or name of a shipped experiment (experiments/<name>.toml)
    "strategy": "affr",  # affr | fedavg | fedprox
    "num-server-rounds": 0,  # 0: federation.rounds
    "run-dir": "",  # "": <run.out>/<run.name>-<strategy>-<timestamp>
    "base-dir": "",  # relative paths of the experiment resolve against it ("" = working directory)
    "step": -1.0,  # AFFR step d (< 0: federation.step)
    "proximal-mu": -1.0,  # FedProx μ (< 0: federation.proximal_mu)
    "timeout": 0.0,  # seconds per round (0: federation.timeout)
    "min-nodes": 2,  # nodes that must be connected before a round starts
    "resume": True,
    "stop-after-round": 0,  # > 0: end this invocation after that round (resume later); 0: run to the end
}


def resolve(path: str | Path, base_dir: str | Path | None) -> Path:
    """``path`` itself when absolute, else relative to ``base_dir`` (default: the working directory)."""
    p = Path(path)
    return p if p.is_absolute() or base_dir is None else Path(base_dir) / p


def with_base_dir(cfg: ExperimentConfig, base_dir: str | Path | None) -> ExperimentConfig:
    """The experiment with its relative source roots / caches / run output made absolute against base_dir."""
    if base_dir is None:
        return cfg
    sources = tuple(replace(s, cache=str(resolve(s.cache, base_dir)),
                            root=str(resolve(s.root, base_dir)) if s.root else s.root)
                    for s in cfg.data.sources)
    return replace(cfg, data=replace(cfg.data, sources=sources),
                   run=replace(cfg.run, out=str(resolve(cfg.run.out, base_dir))))


def settings(builtin: Mapping[str, Any], run_config: Mapping[str, Any],
             defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Effective app settings: ``builtin`` defaults < Flower run config < explicit ``defaults``."""
    return {**dict(builtin), **dict(run_config), **dict(defaults or {})}


def experiment(conf: Mapping[str, Any]) -> tuple[ExperimentConfig, FederationConfig, str, str | None]:
    """Load the experiment named in ``conf``: config, federation section, cache key, base dir."""
    base_dir = str(conf.get("base-dir") or "") or None
    path = resolve_experiment(str(conf["experiment"]), base_dir)
    cfg, fed = load_experiment(path)
    refuse_dp_in_federated_runs(cfg, str(path))
    return with_base_dir(cfg, base_dir or Path.cwd()), fed, f"{path}@{path.stat().st_mtime_ns}", base_dir


def refuse_dp_in_federated_runs(cfg: ExperimentConfig, source: str) -> None:
    """``[dp] enabled = true`` is honoured by ``fedprint train`` only: a federated run refuses it rather than
    silently training without DP (so nobody believes a federated model had a DP guarantee it does not have)."""
    if cfg.dp.enabled and cfg.dp.level != "client":
        raise ValueError(f"{source}: [dp] enabled = true with level = {cfg.dp.level!r}: sample-level DP-SGD is not "
                         "implemented for federated runs (simulate, demo, the Flower apps) — they would train "
                         "without it; use `fedprint train` for DP-SGD, or level = \"client\" for client-level DP of "
                         "the federated aggregation, or set [dp] enabled = false")
