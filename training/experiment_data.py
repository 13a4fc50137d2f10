"""The clients of an experiment, built from its config: partitions, FP-DFSN settings, splits, pairs, tensors.

One place for what every way of training needs (``fedprint train``, ``simulate``, a simulated SuperNode, the
audits that rebuild a run's clients): the same records, partitions, seeds and FP-DFSN rule, so a client's split
is identical whichever method sees it.

FP-DFSN rule (one for everyone): a client trains on FP-DFSN images iff ``[fpdfsn] enabled`` and its β > 0
(:func:`effective_beta`); FP-DFSN with β = 0 returns the image unchanged (Eq. 10), so it is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from fedprint.config import ExperimentConfig
from fedprint.data.pairs import PairSet
from fedprint.data.partition import ClientPartition
from fedprint.data.record import FingerprintRecord
from fedprint.data.sources import load_records, make_partitions
from fedprint.privacy.fpdfsn import FPDFSNParams
from fedprint.training.local_data import ClientData, build_client_data


def effective_beta(cfg: ExperimentConfig, beta: float) -> float:
    """The β a client with coefficient ``beta`` actually uses: 0 when FP-DFSN is disabled."""
    return float(beta) if cfg.fpdfsn.enabled else 0.0


def fpdfsn_params(cfg: ExperimentConfig, beta: float) -> FPDFSNParams | None:
    """FP-DFSN parameters with the experiment's d0 / border / radius / σ² and coefficient ``beta``.

    None for β = 0 (nothing to do). ``beta`` is taken as given, so an audit can ask for any β; use
    :func:`effective_beta` for the experiment's own setting. The minutiae backend is ``[minutiae] backend``,
    resolved here (refused with one line naming the key if its package is not installed).
    """
    if beta == 0:
        return None
    given = {k: getattr(cfg.fpdfsn, k) for k in ("d0", "border", "radius", "sigma2")}
    return FPDFSNParams(beta=float(beta), backend=cfg.minutiae.resolved(),
                        **{k: v for k, v in given.items() if v is not None})


def client_data(cfg: ExperimentConfig, records: list[FingerprintRecord], *, name: str, beta: float,
                client_id: int, input_size: int | None = None, cache: bool = True,
                progress: bool = False) -> ClientData:
    """Split, pair, FP-DFSN and preprocess one client's records with the experiment's settings.

    The split seed is ``run.seed + client_id`` so clients of one experiment draw different splits but every
    method (local, centralized, federated) sees the same split of a given client. ``beta`` is used as given
    (see :func:`effective_beta`); ``cache=False`` keeps FP-DFSN results in memory only (nothing written).
    Under ``[dp] enabled`` with ``level = "sample"`` (DP-SGD) the split is the per-finger keyed hash of
    :mod:`fedprint.data.hash_split` keyed by ``run.seed`` alone, so removing a finger moves no other finger (and
    which part a finger is in does not depend on its client).
    """
    return build_client_data(
        records, name=name, spec=cfg.model.input_spec(input_size),
        protocol=cfg.data.protocol, test_fraction=cfg.data.test_fraction, val_fraction=cfg.data.val_fraction,
        fold=cfg.data.fold_spec,
        max_impostors=cfg.data.max_impostors, fpdfsn=fpdfsn_params(cfg, beta), seed=cfg.run.seed + client_id,
        cache_dir=Path(cfg.run.out) / ".cache" / "fpdfsn" if cache else None, progress=progress,
        finger_hash_key=cfg.run.seed if cfg.dp.enabled and cfg.dp.level == "sample" else None,
    )


def experiment_partitions(cfg: ExperimentConfig, *, progress: bool = False
                          ) -> tuple[list[FingerprintRecord], list[ClientPartition]]:
    """All records of the experiment and its client partitions (seeded by ``run.seed``)."""
    records = load_records(cfg.data.sources, progress=progress)
    parts = make_partitions(records, cfg.partition, seed=cfg.run.seed, default_beta=cfg.fpdfsn.beta)
    return records, parts


def partition_data(cfg: ExperimentConfig, records: list[FingerprintRecord], part: ClientPartition,
                   *, progress: bool = False) -> ClientData:
    """ClientData of one experiment partition, with the experiment's own FP-DFSN setting."""
    return client_data(cfg, [records[i] for i in part.indices], name=part.name,
                       beta=effective_beta(cfg, part.beta), client_id=part.client_id, progress=progress)


def build_clients(cfg: ExperimentConfig, *, records: list[FingerprintRecord] | None = None,
                  beta: float | None = None, input_size: int | None = None, cache: bool = True,
                  progress: bool = True) -> list[ClientData]:
    """Every client of the experiment.

    Parameters
    ----------
    cfg : ExperimentConfig
    records : list of FingerprintRecord, optional
        The experiment's records when already loaded (default: load ``data.sources``).
    beta : float, optional
        None (default): each client's own FP-DFSN setting; a number: that β for every client (0 = raw images),
        whatever ``[fpdfsn] enabled`` says (audits compare β values).
    input_size : int, optional
        Overrides ``model.input_size``.
    cache : bool
        Write / reuse the on-disk FP-DFSN cache under ``run.out`` (default True).
    """
    if records is None:
        records, parts = experiment_partitions(cfg, progress=progress)
    else:
        parts = make_partitions(records, cfg.partition, seed=cfg.run.seed, default_beta=cfg.fpdfsn.beta)
    return [client_data(cfg, [records[i] for i in p.indices], name=p.name,
                        beta=effective_beta(cfg, p.beta) if beta is None else float(beta),
                        client_id=p.client_id, input_size=input_size, cache=cache, progress=progress)
            for p in parts]


def union_groups(clients: Sequence[ClientData]) -> np.ndarray:
    """The client (index into ``clients``) of each image of :func:`union`'s tensor."""
    return np.repeat(np.arange(len(clients)), [len(c.images) for c in clients])


def union(clients: Sequence[ClientData]) -> tuple[torch.Tensor, PairSet]:
    """All clients' images in one tensor and their TRAINING pairs re-indexed into it."""
    offsets = np.cumsum([0] + [len(c.images) for c in clients[:-1]])
    images = torch.cat([c.images for c in clients])
    pairs = PairSet(
        np.concatenate([c.train_pairs.a + o for c, o in zip(clients, offsets, strict=True)]),
        np.concatenate([c.train_pairs.b + o for c, o in zip(clients, offsets, strict=True)]),
        np.concatenate([c.train_pairs.label for c in clients]),
    )
    return images, pairs
