"""Which data a federated node holds, resolved from its Flower node config, and built once per process.

The same ClientApp runs in simulation and in a deployment; only the node config differs:

* **simulation** (Flower sets ``partition-id`` and ``num-partitions``): the node loads the experiment's
  records (``[[data.sources]]``), makes the experiment's partitions with the experiment's seed and takes
  partition ``partition-id`` — exactly the client the local-only / centralized baselines see;
* **deployment** (``--node-config "data-dir='/data' layout='generic' name='hospital-a' beta=0.5"``): the node
  loads only its own folder with :func:`fedprint.data.datasets.load_dataset`. Optional ``client-id`` (int, default 0)
  offsets the split seed like a partition id does. ``beta`` (default ``[fpdfsn] beta``) applies only under
  ``[fpdfsn] enabled = true``, the rule every other path follows
  (:func:`fedprint.training.experiment_data.effective_beta`).

Relative paths (data sources, caches, ``data-dir``) are resolved against ``base_dir``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedprint.config import ExperimentConfig
from fedprint.config.app import resolve
from fedprint.data.datasets import load_dataset
from fedprint.training.experiment_data import client_data, effective_beta, experiment_partitions, partition_data
from fedprint.training.local_data import ClientData

#: Built ClientData per process, keyed by (experiment file, its mtime, base dir, node config items).
_CACHE: dict[tuple, ClientData] = {}
#: The experiment's records and partitions per process, keyed by (experiment file, its mtime, base dir): a
#: simulation worker (Ray actor) serves several partitions over a run, and loading every record again for each
#: one cost as much as building the partition itself (issue 61).
_PARTITIONS: dict[tuple, tuple[list, list]] = {}
#: Environment variable for the before / after figures of ``benchmarks.bench_round_overhead`` only: ``1`` turns
#: both caches off (every message rebuilds its node's data), ``records`` only the records cache (the code before
#: issue 61).
NO_CACHE_ENV = "FEDPRINT_NO_NODE_CACHE"


def _caching(what: str = "data") -> bool:
    value = os.environ.get(NO_CACHE_ENV, "")
    return value not in ("1", "true", "yes") and not (what == "records" and value == "records")


def _experiment_partitions(cfg: ExperimentConfig, key: tuple) -> tuple[list, list]:
    if not _caching("records"):
        return experiment_partitions(cfg)
    if key not in _PARTITIONS:
        _PARTITIONS[key] = experiment_partitions(cfg)
    return _PARTITIONS[key]


def _node_value(node_config: Mapping[str, Any], key: str, kind: type) -> Any:
    value = node_config[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"node config {key!r}: expected {kind.__name__}, got {value!r}")
    return value


def node_client_data(cfg: ExperimentConfig, node_config: Mapping[str, Any], *, experiment_key: str = "",
                     base_dir: str | Path | None = None) -> tuple[ClientData, int]:
    """This node's ClientData and client id, built on first use and cached for the process.

    Parameters
    ----------
    cfg : ExperimentConfig
        The experiment (paths already absolute, see :func:`fedprint.config.app.with_base_dir`).
    node_config : mapping
        Flower node config: ``partition-id`` + ``num-partitions`` (simulation) or ``data-dir`` + ``layout``
        (+ ``name``, ``beta``, ``client-id``, ``dpi``) (deployment).
    experiment_key : str
        Identifies the experiment in the cache key (e.g. its path and modification time).
    """
    key = (experiment_key, str(base_dir), tuple(sorted((k, str(v)) for k, v in node_config.items())))
    if key in _CACHE and _caching():
        return _CACHE[key], _client_id(node_config)
    if "partition-id" in node_config:
        pid = _node_value(node_config, "partition-id", int)
        records, parts = _experiment_partitions(cfg, key[:2])
        if "num-partitions" in node_config and _node_value(node_config, "num-partitions", int) != len(parts):
            raise ValueError(f"node config num-partitions = {node_config['num-partitions']} but the experiment "
                             f"has {len(parts)} clients; run the simulation with {len(parts)} supernodes")
        if not 0 <= pid < len(parts):
            raise ValueError(f"node config partition-id = {pid}: expected 0..{len(parts) - 1}")
        data = partition_data(cfg, records, parts[pid])
    elif "data-dir" in node_config:
        root = resolve(_node_value(node_config, "data-dir", str), base_dir)
        layout = str(node_config.get("layout", "auto"))
        dpi = _node_value(node_config, "dpi", float) if "dpi" in node_config else None
        records = load_dataset(layout, root, dpi=dpi)
        name = str(node_config.get("name", root.name))
        beta = _node_value(node_config, "beta", float) if "beta" in node_config else cfg.fpdfsn.beta
        # the experiment's FP-DFSN rule (effective_beta): a node's beta counts only under [fpdfsn] enabled = true
        data = client_data(cfg, records, name=name, beta=effective_beta(cfg, beta), client_id=_client_id(node_config))
    else:
        raise ValueError("node config: expected 'partition-id' (simulation) or 'data-dir' (deployment), got "
                         f"keys {sorted(node_config)}")
    if _caching():
        _CACHE[key] = data
    return data, _client_id(node_config)


def _client_id(node_config: Mapping[str, Any]) -> int:
    for key in ("partition-id", "client-id"):
        if key in node_config:
            return _node_value(node_config, key, int)
    return 0
