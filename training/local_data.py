"""One client's data, ready to train on: split, pairs, FP-DFSN and preprocessed tensors.

The same function serves every way FedPrint trains: centralized (one "client" holding the union), local-only
baselines, Flower simulation and a real SuperNode.

Order of operations: each image is first brought to the network's working resolution and cropped on the print
(:func:`fedprint.models.preprocess.prepare`); FP-DFSN (Yan et al. 2025 Eqs. 8-10) then runs on that crop — a few hundred
pixels a side instead of a full 832x768 frame, so minutiae extraction is cheap. FP-DFSN protects the TRAINING
data: ``images`` holds FP-DFSN crops for the training split and raw crops for validation and test (what a
deployed verifier is asked to verify); ``fpdfsn_images`` holds FP-DFSN crops of every image, for the second
evaluation column "FP-DFSN probes". β = 0 (or FP-DFSN disabled) leaves images untouched.

Two split rules. By default the split is :func:`fedprint.data.pairs.split_records` (a seeded permutation cut at
rounded counts: exact fractions, but removing one finger moves others). With ``finger_hash_key`` set (what
``fedprint train`` does under ``[dp] level = "sample"``) it is :func:`fedprint.data.hash_split.hash_split_records`:
each finger's part is a keyed hash of that finger alone, so removing a finger moves no other finger and DP-SGD's
one-finger unit holds for the data set the user gives, not only for the pool after a split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from fedprint.data import hash_split
from fedprint.data.pairs import PairSet, Split, make_pairs, split_records
from fedprint.data.record import FingerprintRecord
from fedprint.models.preprocess import InputSpec, normalize, prepare
from fedprint.privacy.fpdfsn import FPDFSNParams
from fedprint.privacy.fpdfsn_cache import FPDFSNCache


@dataclass(frozen=True, eq=False)
class ClientData:
    """Everything local training and evaluation need, indexed consistently.

    ``images[k]`` is the network input of ``records[k]``; split and pair indices refer to that same k.
    """

    name: str
    domain: str
    beta: float
    records: list[FingerprintRecord]
    images: torch.Tensor
    split: Split
    train_pairs: PairSet
    val_pairs: PairSet
    test_pairs: PairSet
    fpdfsn_stats: dict = field(default_factory=dict)
    fpdfsn_images: torch.Tensor | None = None
    split_rule: str = "seeded"

    @property
    def num_train_examples(self) -> int:
        """Training images (the FedAvg weight ``num-examples``)."""
        return len(self.split.train)

    def summary(self) -> dict:
        return {
            "client": self.name, "domain": self.domain, "beta": self.beta, "images": len(self.records),
            "fingers": len({r.identity for r in self.records}),
            "train_images": len(self.split.train), "val_images": len(self.split.val),
            "test_images": len(self.split.test),
            "train_pairs": len(self.train_pairs), "val_pairs": len(self.val_pairs),
            "test_pairs": len(self.test_pairs), **{f"fpdfsn_{k}": v for k, v in self.fpdfsn_stats.items()},
        }


def apply_fpdfsn(
    images: Sequence[np.ndarray],
    params: FPDFSNParams,
    *,
    seed: int,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    desc: str = "FP-DFSN",
) -> tuple[list[np.ndarray], dict]:
    """FP-DFSN every image through the on-disk cache; returns the images and run statistics.

    Statistics: ``images``, ``without_minutiae`` (images whose noise step was a no-op), ``mean_minutiae``,
    cache ``hits`` / ``misses``.
    """
    cache = FPDFSNCache(cache_dir, max_memory_entries=0)
    out, counts = [], []
    for img in tqdm(images, desc=desc, disable=not progress, leave=False, unit="img"):
        res = cache.get_or_compute(img, params, seed)
        out.append(res.image)
        counts.append(res.n_minutiae)
    counts = np.asarray(counts)
    stats = {
        "images": len(out), "without_minutiae": int((counts == 0).sum()),
        "mean_minutiae": float(counts.mean()) if len(counts) else 0.0,
        "cache_hits": cache.hits, "cache_misses": cache.misses,
        "minutiae_backend": getattr(params, "backend", "crossing"),  # what this node's "auto" resolved to
    }
    return out, stats


def build_client_data(
    records: Sequence[FingerprintRecord],
    *,
    name: str,
    spec: InputSpec,
    protocol: str = "open",
    test_fraction: float = 0.2,
    val_fraction: float = 0.2,
    fold: tuple[int, int] | None = None,
    max_impostors: int = 10_000,
    fpdfsn: FPDFSNParams | None = None,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    finger_hash_key: int | None = None,
) -> ClientData:
    """Split ``records`` (Yan et al. 2025 Sec. 5.2), build pairs, optionally FP-DFSN, preprocess to tensors.

    Parameters
    ----------
    records : sequence of FingerprintRecord
        This client's records only.
    name : str
        Client name used in logs and reports.
    spec : InputSpec
        Network input size / padding / normalisation.
    protocol : {"open", "closed"}
        Split protocol (open-set: disjoint fingers in train / val / test).
    fold : tuple (k, K) of int, optional
        K-fold split by finger (:func:`fedprint.data.pairs.split_records`); None (default): ``test_fraction``.
    fpdfsn : FPDFSNParams or None
        FP-DFSN parameters (with this client's β); None = no perturbation.
    seed : int
        Seeds the split, the impostor sampling and the FP-DFSN noise.
    cache_dir : path or None
        FP-DFSN cache directory (repeated runs and rounds reuse it).
    finger_hash_key : int or None
        None (default): the seeded split of :func:`fedprint.data.pairs.split_records`. An integer: the per-finger
        keyed-hash split of :func:`fedprint.data.hash_split.hash_split_records` with this key (``seed`` then only
        seeds the impostor sampling and FP-DFSN), so removing one finger moves no other finger.
    """
    records = list(records)
    if not records:
        raise ValueError(f"client {name!r}: no records")
    if finger_hash_key is None:
        split = split_records(records, protocol=protocol, test_fraction=test_fraction,
                              val_fraction=val_fraction, seed=seed, fold=fold)
    else:
        split = hash_split.hash_split_records(records, key=finger_hash_key, protocol=protocol,
                                              test_fraction=test_fraction, val_fraction=val_fraction, fold=fold)
    pairs = {
        part: make_pairs(records, getattr(split, part), max_impostors=max_impostors, seed=seed + k)
        if len(getattr(split, part)) else PairSet(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                                    np.zeros(0, np.int8))
        for k, part in enumerate(("train", "val", "test"))
    }
    crops = [prepare(r.image, spec, r.dpi) for r in records]
    stats: dict = {"enabled": fpdfsn is not None and fpdfsn.beta > 0}
    fp_images = None
    images = crops
    if stats["enabled"]:
        fp_crops, more = apply_fpdfsn(crops, fpdfsn, seed=seed, cache_dir=cache_dir, progress=progress,
                                      desc=f"FP-DFSN {name}")
        stats.update(more)
        train = set(int(i) for i in split.train)
        images = [fp_crops[i] if i in train else crops[i] for i in range(len(crops))]
        fp_images = normalize(np.stack(fp_crops), spec)
    domains = sorted({r.domain for r in records})
    return ClientData(
        name=name, domain="+".join(domains), beta=0.0 if fpdfsn is None else float(fpdfsn.beta),
        records=records, images=normalize(np.stack(images), spec), split=split,
        train_pairs=pairs["train"], val_pairs=pairs["val"], test_pairs=pairs["test"], fpdfsn_stats=stats,
        fpdfsn_images=fp_images, split_rule="seeded" if finger_hash_key is None else hash_split.RULE,
    )
