"""What both Flower apps need from their run config: app settings, the experiment, paths against a base dir.

The ServerApp and the ClientApp share this module (as Flower's baselines share their task module) and never
import each other. Each app converts its flat Flower run config here, once, at its boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fedprint.config.experiment import ExperimentConfig, load_experiment
from fedprint.config.federation import FederationConfig
from fedprint.config.shipped import resolve_experiment

#: Run-config value meaning "not set here: take it from the experiment's ``[federation]``" (TOML has no null,
#: and Flower only accepts ``--run-config`` overrides of keys that ``pyproject.toml`` declares).
FROM_EXPERIMENT = "experiment"


@dataclass(frozen=True)
class ClientSettings:
    """What the ClientApp reads from the Flower run config (keys ``experiment``, ``base-dir``, ``client-threads``,
    ``device``: ``auto`` / ``cpu`` / ``cuda``, empty = the process default; a node config's ``device`` wins)."""

    experiment: str = "demo"
    base_dir: str | None = None
    client_threads: int = 1
    device: str = ""


@dataclass(frozen=True)
class ServerSettings:
    """What the ServerApp reads from the Flower run config; ``None`` = take it from the experiment.

    Each attribute is listed with its run-config key in brackets.

    Attributes
    ----------
    experiment [experiment] : path, or name of a shipped experiment (``experiments/<name>.toml``)
    strategy [strategy] : one of ``server.server_app.STRATEGIES``
    rounds [num-server-rounds] : server rounds T (None: ``federation.rounds``)
    run_dir [run-dir] : run directory (None: ``<run.out>/<run.name>-<strategy>-<timestamp>``)
    base_dir [base-dir] : relative paths of the experiment resolve against it (None: working directory)
    step [step] : AFFR step d (None: ``federation.step``)
    proximal_mu [proximal-mu] : FedProx μ (None: ``federation.proximal_mu``)
    timeout [timeout] : seconds per round (None: ``federation.timeout``)
    min_nodes [min-nodes] : nodes that must be connected before a round starts (default 2)
    resume [resume] : continue from the run directory's checkpoint when there is one (default True)
    stop_after_round [stop-after-round] : end this invocation after that round, resume later (None: run to T)
    secure_aggregation [secure-aggregation] : SecAgg+ on or off (None: ``federation.secure_aggregation``)
    """

    experiment: str = "demo"
    strategy: str = "affr"
    rounds: int | None = None
    run_dir: str | None = None
    base_dir: str | None = None
    step: float | None = None
    proximal_mu: float | None = None
    timeout: float | None = None
    min_nodes: int = 2
    resume: bool = True
    stop_after_round: int | None = None
    secure_aggregation: bool | None = None


#: Run-config key -> (settings class, field, type, check, what is expected). The one validator of both apps.
_KEYS: dict[str, tuple[type, str, type, Any, str]] = {
    "experiment": (ServerSettings, "experiment", str, bool, "a path or a shipped experiment name"),
    "strategy": (ServerSettings, "strategy", str, bool, "a strategy name"),
    "num-server-rounds": (ServerSettings, "rounds", int, lambda v: v >= 1, "an integer >= 1"),
    "run-dir": (ServerSettings, "run_dir", str, bool, "a folder path"),
    "base-dir": (ServerSettings, "base_dir", str, bool, "a folder path"),
    "step": (ServerSettings, "step", float, lambda v: 0 <= v < float("inf"), "a finite number >= 0"),
    "proximal-mu": (ServerSettings, "proximal_mu", float, lambda v: 0 <= v < float("inf"), "a finite number >= 0"),
    "timeout": (ServerSettings, "timeout", float, lambda v: 0 < v < float("inf"), "finite seconds > 0"),
    "min-nodes": (ServerSettings, "min_nodes", int, lambda v: v >= 1, "an integer >= 1"),
    "resume": (ServerSettings, "resume", bool, lambda v: True, "true or false"),
    "stop-after-round": (ServerSettings, "stop_after_round", int, lambda v: v >= 1, "an integer >= 1"),
    "secure-aggregation": (ServerSettings, "secure_aggregation", bool, lambda v: True,
                           "true or false"),
    "client-threads": (ClientSettings, "client_threads", int, lambda v: v >= 1, "an integer >= 1"),
    "device": (ClientSettings, "device", str, lambda v: v.strip().lower() in ("", "auto", "cpu", "cuda"),
               "auto, cpu or cuda"),
}
_CLIENT_KEYS = ("experiment", "base-dir", "client-threads", "device")


def _convert(key: str, value: Any) -> Any:
    _, _, kind, ok, expected = _KEYS[key]
    if kind is str and key.endswith("-dir") and value == "":
        return None  # a path key left empty: its default (see ServerSettings)
    if kind is not str and isinstance(value, str) and value.strip() == FROM_EXPERIMENT:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)) or not ok(value):
        unset = f', or "{FROM_EXPERIMENT}" to take it from the experiment' if kind in (int, float) else ""
        raise ValueError(f"run config {key!r}: expected {expected}{unset}; got {value!r}")
    return value


def _settings(cls: type, keys: Any, run_config: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> Any:
    merged = {**dict(run_config), **dict(overrides or {})}
    unknown = sorted(set(merged) - set(_KEYS))
    if unknown:
        raise ValueError(f"run config: unknown key(s) {unknown}; known: {sorted(_KEYS)}")
    return cls(**{_KEYS[k][1]: _convert(k, v) for k, v in merged.items() if k in keys})


def server_settings(run_config: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> ServerSettings:
    """The ServerApp's settings: Flower run config < ``overrides`` (run-config keys), validated once."""
    return _settings(ServerSettings, [k for k, v in _KEYS.items() if v[0] is ServerSettings], run_config, overrides)


def client_settings(run_config: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> ClientSettings:
    """The ClientApp's settings: Flower run config < ``overrides`` (run-config keys), validated once."""
    return _settings(ClientSettings, _CLIENT_KEYS, run_config, overrides)


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


def experiment(app: ServerSettings | ClientSettings
               ) -> tuple[ExperimentConfig, FederationConfig, str, str | None]:
    """Load the experiment an app's settings name: config, federation section, cache key, base dir."""
    base_dir = app.base_dir or None
    path = resolve_experiment(app.experiment, base_dir)
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
