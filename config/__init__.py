"""FedPrint configuration: one experiment TOML, validated once into frozen dataclasses.

This package is the single place a run's settings are read and checked (the lowest layer above ``data`` and
``models``; it imports nothing from privacy, client, server or attacks):

* :mod:`fedprint.config.experiment` — ``[run]``, ``[[data.sources]]``, ``[partition]``, ``[model]``,
  ``[train]``, ``[fpdfsn]``, ``[dp]`` → :class:`ExperimentConfig`;
* :mod:`fedprint.config.minutiae` — ``[minutiae]``, the one choice of minutiae backend;
* :mod:`fedprint.config.train` — :class:`TrainConfig` (the ``[train]`` table);
* :mod:`fedprint.config.federation` — the ``[federation]`` section, :class:`FederationConfig` (``fedprint
  simulate`` and the Flower apps);
* :mod:`fedprint.config.shipped` — finding an experiment by path or by the name of a shipped one;
* :mod:`fedprint.config.app` — the Flower apps' run-config settings, converted once at each app boundary.
"""

from fedprint.config.experiment import (
    DataSection,
    DPSection,
    ExperimentConfig,
    FPDFSNSection,
    ModelSection,
    PartitionSection,
    RunSection,
    SourceSection,
    load_config,
    load_experiment,
    parse_config,
    parse_experiment,
    read_toml,
)
from fedprint.config.federation import FEDERATED, METHODS, PERSONALIZED, FederationConfig
from fedprint.config.minutiae import MinutiaeSection
from fedprint.config.shipped import SHIPPED_DIR, resolve_experiment
from fedprint.config.train import TrainConfig

__all__ = [
    "DPSection", "DataSection", "ExperimentConfig", "FEDERATED", "FPDFSNSection", "FederationConfig", "METHODS",
    "MinutiaeSection", "PERSONALIZED", "ModelSection", "PartitionSection", "RunSection", "SHIPPED_DIR",
    "SourceSection", "TrainConfig", "load_config",
    "load_experiment", "parse_config", "parse_experiment", "read_toml", "resolve_experiment",
]
