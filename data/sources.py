"""Resolve the ``[[data.sources]]`` of an experiment into records, and spread them over clients.

A synthetic source is generated once into its cache folder (resumable, deterministic) and read back through the
generic loader, so a cached synthetic set and a real database follow exactly the same path from disk on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from fedprint.data.datasets import load_dataset
from fedprint.data.partition import ClientPartition, partition_by_domain, partition_split
from fedprint.data.record import FingerprintRecord


def synth_cache_dir(source) -> Path:
    """Cache folder of a synthetic source: one folder per (profile content, seed, fingers, impressions).

    The profile's content hash is part of the name, so editing ``profiles.toml`` starts a new cache instead of
    colliding with data generated under the old settings.
    """
    from fedprint.data.synth.profiles import get_profile

    digest = hashlib.sha256(json.dumps(get_profile(source.profile).to_json(), sort_keys=True).encode())
    return Path(source.cache) / (f"{source.profile}-{digest.hexdigest()[:8]}-s{source.seed}-f{source.fingers}"
                                 f"-i{source.impressions}")


def load_source(source, *, progress: bool = True, workers: int | None = None) -> list[FingerprintRecord]:
    """Records of one ``data.sources`` entry (see :class:`fedprint.config.SourceSection`).

    Raises FileNotFoundError (one line, naming the folder) when a real set is absent from the real-set root.
    """
    dpi = getattr(source, "dpi", None)
    if source.kind in ("dataset", "real"):
        if source.kind == "real":
            from fedprint.data.real_sets import real_set_dir

            root, domain = real_set_dir(source.name), source.domain or source.name
        else:
            root, domain = source.root, getattr(source, "domain", "")
        recs = load_dataset(source.layout or "auto", root, skip_bad=source.skip_bad, dpi=dpi)
        return [replace(r, domain=domain) for r in recs] if domain else recs
    from fedprint.data.synth.generate import generate_dataset

    out = synth_cache_dir(source)
    generate_dataset(source.profile, fingers=source.fingers, impressions=source.impressions, seed=source.seed,
                     out=out, workers=workers, progress=progress)
    return load_dataset("generic", out, dpi=dpi)


def load_records(sources: Sequence, *, progress: bool = True, workers: int | None = None
                 ) -> list[FingerprintRecord]:
    """Concatenate the records of all sources; two sources must not share a domain tag."""
    records: list[FingerprintRecord] = []
    seen: dict[str, int] = {}
    for k, src in enumerate(sources):
        recs = load_source(src, progress=progress, workers=workers)
        for dom in sorted({r.domain for r in recs}):
            if dom in seen:
                raise ValueError(f"data.sources[{k}] and data.sources[{seen[dom]}] both yield domain {dom!r}; "
                                 "use distinct profiles/databases")
            seen[dom] = k
        records += recs
    return records


def unseen_records(records: Sequence[FingerprintRecord], partition) -> dict[str, list[FingerprintRecord]]:
    """The records of each held-out domain (``[partition] unseen``), by domain tag.

    Raises ValueError naming a held-out domain that no source yields, or when nothing would be left to train on.
    """
    unseen = tuple(getattr(partition, "unseen", ()))
    domains = sorted({r.domain for r in records})
    missing = [d for d in unseen if d not in domains]
    if missing:
        raise ValueError(f"partition.unseen: domain(s) {missing} are not among the sources' domains {domains}")
    if unseen and set(domains) <= set(unseen):
        raise ValueError(f"partition.unseen: holding out {list(unseen)} leaves no domain to train on")
    return {d: [r for r in records if r.domain == d] for d in unseen}


def make_partitions(records: Sequence[FingerprintRecord], partition, *, seed: int,
                    default_beta: float) -> list[ClientPartition]:
    """Clients of an experiment (``[partition]`` section): one per domain, or one domain split IID / NIID.

    Domains in ``partition.unseen`` go to no client; partition indices still refer to ``records``.
    """
    held_out = set(unseen_records(records, partition))
    keep = np.array([i for i, r in enumerate(records) if r.domain not in held_out], dtype=np.int64)
    seen = [records[i] for i in keep]
    betas = list(partition.betas) or None
    if partition.mode == "domain":
        n = len({r.domain for r in seen})
        parts = partition_by_domain(seen, betas=betas or [default_beta] * n)
    else:
        parts = partition_split(seen, partition.n_clients, mode=partition.mode, alpha=partition.alpha,
                                seed=seed, betas=betas or [default_beta] * partition.n_clients,
                                min_fingers=partition.min_fingers)
    if not held_out:
        return parts
    return [replace(p, indices=keep[p.indices]) for p in parts]
