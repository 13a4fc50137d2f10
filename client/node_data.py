"""Which data a federated node holds, resolved from its Flower node config, and built once per process.

The same ClientApp runs in simulation and in a deployment; only the node config differs:

* **simulation** (Flower sets ``partition-id`` and ``num-partitions``): the node loads the experiment's
  records (``[[data.sources]]``), makes the experiment's partitions with the experiment's seed and takes
  partition ``partition-id`` — exactly the client the local-only / centralized baselines see;
* **deployment** (``--node-config "data-dir='/data' layout='generic' name='hospital-a' beta=0.5"``): the node
  loads only its own folder with :func:`data.datasets.load_dataset`. Optional ``client-id`` (int, default 0)
  offsets the split seed like a partition id does.

Relative paths (data sources, caches, ``data-dir``) are resolved against ``base_dir``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from client.local_data import ClientData, build_client_data
from data.datasets import load_dataset
from data.partition import ClientPartition
from data.record import FingerprintRecord
from data.sources import load_records, make_partitions
from fedprint_config import ExperimentConfig
from fedprint_config.app import resolve
from models.preprocess import InputSpec
from privacy.fpdfsn import FPDFSNParams

#: Built ClientData per process, keyed by (experiment file, its mtime, base dir, node config items).
_CACHE: dict[tuple, ClientData] = {}


def fpdfsn_params(cfg: ExperimentConfig, beta: float) -> FPDFSNParams | None:
    """FP-DFSN parameters of a client with coefficient ``beta`` (None when FP-DFSN is disabled)."""
    if not cfg.fpdfsn.enabled:
        return None
    given = {k: getattr(cfg.fpdfsn, k) for k in ("d0", "border", "radius", "sigma2")
             if getattr(cfg.fpdfsn, k) is not None}
    return FPDFSNParams(beta=float(beta), **given)


def client_data(cfg: ExperimentConfig, records: list[FingerprintRecord], *, name: str, beta: float,
                client_id: int, progress: bool = False) -> ClientData:
    """Split, pair, FP-DFSN and preprocess one client's records with the experiment's settings.

    The split seed is ``run.seed + client_id`` so clients of one experiment draw different splits but every
    method (local, centralized, federated) sees the same split of a given client.
    """
    return build_client_data(
        records, name=name, spec=InputSpec(size=cfg.model.input_size), protocol=cfg.data.protocol,
        test_fraction=cfg.data.test_fraction, val_fraction=cfg.data.val_fraction,
        max_impostors=cfg.data.max_impostors, fpdfsn=fpdfsn_params(cfg, beta), seed=cfg.run.seed + client_id,
        cache_dir=Path(cfg.run.out) / ".cache" / "fpdfsn", progress=progress,
    )


def experiment_partitions(cfg: ExperimentConfig, *, progress: bool = False
                          ) -> tuple[list[FingerprintRecord], list[ClientPartition]]:
    """All records of the experiment and its client partitions (seeded by ``run.seed``)."""
    records = load_records(cfg.data.sources, progress=progress)
    parts = make_partitions(records, cfg.partition, seed=cfg.run.seed, default_beta=cfg.fpdfsn.beta)
    return records, parts


def partition_data(cfg: ExperimentConfig, records: list[FingerprintRecord], part: ClientPartition,
                   *, progress: bool = False) -> ClientData:
    """ClientData of one experiment partition."""
    return client_data(cfg, [records[i] for i in part.indices], name=part.name, beta=part.beta,
                       client_id=part.client_id, progress=progress)


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
        The experiment (paths already absolute, see :func:`fedprint_config.app.with_base_dir`).
    node_config : mapping
        Flower node config: ``partition-id`` + ``num-partitions`` (simulation) or ``data-dir`` + ``layout``
        (+ ``name``, ``beta``, ``client-id``) (deployment).
    experiment_key : str
        Identifies the experiment in the cache key (e.g. its path and modification time).
    """
    key = (experiment_key, str(base_dir), tuple(sorted((k, str(v)) for k, v in node_config.items())))
    if key in _CACHE:
        return _CACHE[key], _client_id(node_config)
    if "partition-id" in node_config:
        pid = _node_value(node_config, "partition-id", int)
        records, parts = experiment_partitions(cfg)
        if "num-partitions" in node_config and _node_value(node_config, "num-partitions", int) != len(parts):
            raise ValueError(f"node config num-partitions = {node_config['num-partitions']} but the experiment "
                             f"has {len(parts)} clients; run the simulation with {len(parts)} supernodes")
        if not 0 <= pid < len(parts):
            raise ValueError(f"node config partition-id = {pid}: expected 0..{len(parts) - 1}")
        data = partition_data(cfg, records, parts[pid])
    elif "data-dir" in node_config:
        root = resolve(_node_value(node_config, "data-dir", str), base_dir)
        layout = str(node_config.get("layout", "auto"))
        records = load_dataset(layout, root)
        name = str(node_config.get("name", root.name))
        beta = _node_value(node_config, "beta", float) if "beta" in node_config else cfg.fpdfsn.beta
        data = client_data(cfg, records, name=name, beta=beta, client_id=_client_id(node_config))
    else:
        raise ValueError("node config: expected 'partition-id' (simulation) or 'data-dir' (deployment), got "
                         f"keys {sorted(node_config)}")
    _CACHE[key] = data
    return data, _client_id(node_config)


def _client_id(node_config: Mapping[str, Any]) -> int:
    for key in ("partition-id", "client-id"):
        if key in node_config:
            return _node_value(node_config, key, int)
    return 0
