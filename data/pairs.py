"""Verification protocol of Yan et al. 2025 (Sec. 5.2): train/val/test splits and genuine/impostor pairs.

Per client: a 4:1 train/test split, then 1/5 of the training part as the validation split on which AFFR
measures the generalisation gaps G_i (Alg. 1, Eq. 5). Pairs (x1, x2) are labelled 1 if both images come from
the same finger (genuine) and 0 otherwise (impostor); all genuine pairs are used, impostor pairs are capped
at 10,000.

Two split protocols (:func:`split_records`):

* ``"open"`` (default): train, val and test hold *disjoint fingers* -- the test measures verification of
  people never seen in training, which is what an institution deploying the model faces.
* ``"closed"``: split by impression inside each finger; test and val fingers are also training fingers.

**Genuine pairs and altered images.** A finger is ``(domain, identity)``. Any two distinct images of the same
finger form a genuine pair -- in particular an altered image (``record.alteration`` set, e.g. SOCOFing
``Altered/Easy/CR``) paired with its own source impression, with another impression of that finger, or with
another alteration of it. This is deliberate: an altered finger should still verify as its owner, and for
SOCOFing (one real impression per finger) these are the only genuine pairs there are.

All functions work on indices into the caller's list of :class:`~fedprint.data.record.FingerprintRecord`; no image is
copied.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedprint.data.partition import check_indices, finger_codes
from fedprint.data.record import FingerprintRecord

#: Split protocols understood by :func:`split_records`.
PROTOCOLS = ("open", "closed")

#: Impostor-pair cap of Yan et al. 2025, Sec. 5.2.
MAX_IMPOSTORS = 10_000


@dataclass(frozen=True, eq=False)
class Split:
    """Record indices (sorted int64) of the training, validation and test parts of one client's data."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


@dataclass(frozen=True, eq=False)
class PairSet:
    """Verification pairs ``(records[a[k]], records[b[k]])`` with label 1 = genuine, 0 = impostor.

    Attributes
    ----------
    a, b : ndarray of int64, shape (n,)
        Record indices, ``a[k] < b[k]``.
    label : ndarray of int8, shape (n,)
        1 for same finger (genuine), 0 for different fingers (impostor); the ``y`` of the contrastive loss,
        Yan et al. 2025 Eq. 1.
    """

    a: np.ndarray
    b: np.ndarray
    label: np.ndarray

    def __post_init__(self) -> None:
        a, b, y = (np.asarray(v) for v in (self.a, self.b, self.label))
        if not (a.ndim == b.ndim == y.ndim == 1 and a.shape == b.shape == y.shape):
            raise ValueError(f"PairSet: a, b and label must be 1-D of equal length, got shapes "
                             f"{a.shape}, {b.shape}, {y.shape}")
        if y.size and not np.all((y == 0) | (y == 1)):
            raise ValueError("PairSet: label must contain only 0 (impostor) and 1 (genuine)")
        object.__setattr__(self, "a", a.astype(np.int64, copy=False))
        object.__setattr__(self, "b", b.astype(np.int64, copy=False))
        object.__setattr__(self, "label", y.astype(np.int8, copy=False))

    def __len__(self) -> int:
        return int(self.label.size)

    def take(self, index) -> PairSet:
        """The pairs at ``index`` (integer indices or a boolean mask), in that order."""
        return PairSet(self.a[index], self.b[index], self.label[index])

    @property
    def n_genuine(self) -> int:
        return int(np.count_nonzero(self.label == 1))

    @property
    def n_impostor(self) -> int:
        return int(np.count_nonzero(self.label == 0))


# ---------------------------------------------------------------------------------------------- splits


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def _has_genuine(codes: np.ndarray) -> bool:
    return codes.size > 1 and int(np.bincount(codes).max()) >= 2


def _open_split(codes: np.ndarray, n_fingers: int, tf: float, vf: float,
                rng: np.random.Generator, fold: tuple[int, int] | None = None) -> np.ndarray:
    """Part (0 train, 1 val, 2 test) of each record, by finger; fingers with >= 2 images are split as their
    own stratum so that every part receives fingers that can form genuine pairs. With ``fold = (k, K)`` the
    test fingers are those at positions ``k, k + K, k + 2K, ...`` of the seeded permutation (``tf`` unused)."""
    images = np.bincount(codes, minlength=n_fingers)
    part = np.zeros(n_fingers, dtype=np.int64)
    for capable in (True, False):
        fingers = np.flatnonzero((images >= 2) == capable)
        n = fingers.size
        if fold is not None:
            perm = rng.permutation(fingers)  # the same permutation for every k: the K test parts cover each finger once
            k, n_folds = fold
            is_test = np.arange(n) % n_folds == k
            rest = perm[~is_test]
            n_val = _round_half_up(rest.size * vf)
            if capable and vf > 0:
                n_val = max(n_val, 2)
            if capable and (int(is_test.sum()) < 2 or rest.size - n_val < 2):
                raise ValueError(f"{n_folds}-fold open-set split: {n} finger(s) with >= 2 images leave "
                                 f"{int(is_test.sum())} test and {rest.size - n_val} training finger(s) in fold "
                                 f"{k}; each part needs two (genuine and impostor pairs)")
            part[perm[is_test]] = 2
            part[rest[:n_val]] = 1
            continue
        n_test = _round_half_up(n * tf)
        n_val = _round_half_up((n - n_test) * vf)
        if capable:
            # Each part needs >= 2 fingers: one for genuine pairs, a second for impostor pairs.
            need_val = 2 if vf > 0 else 0
            if n < 4 + need_val:
                raise ValueError(f"open-set split: only {n} finger(s) have >= 2 images; train, test"
                                 f"{' and val' if need_val else ''} each need two (genuine and impostor "
                                 "pairs)")
            n_test = max(n_test, 2)
            n_val = max(n_val, need_val)
            while n - n_test - n_val < 2:  # rounding took too many fingers; give them back to train
                if n_val > need_val:
                    n_val -= 1
                else:
                    n_test -= 1
        perm = rng.permutation(fingers)
        part[perm[:n_test]] = 2
        part[perm[n_test:n_test + n_val]] = 1
    return part[codes]


def _closed_split(codes: np.ndarray, imp: np.ndarray, n_fingers: int, tf: float, vf: float,
                  rng: np.random.Generator) -> np.ndarray:
    """Part (0 train, 1 val, 2 test) of each record, splitting whole impressions (with their alterations)."""
    units, unit_of_rec = np.unique(np.stack([codes, imp]), axis=1, return_inverse=True)
    unit_of_rec = unit_of_rec.reshape(-1)
    unit_finger = units[0]
    n_units = unit_finger.size
    # Units grouped by finger, random order inside each finger; the first two stay in training.
    order = np.lexsort((rng.random(n_units), unit_finger))
    per_finger = np.bincount(unit_finger, minlength=n_fingers)
    starts = np.cumsum(per_finger) - per_finger
    spare_next = starts + 2  # next spare unit (position in `order`) of each finger
    spare_end = starts + per_finger
    unit_part = np.zeros(n_units, dtype=np.int64)
    finger_order = rng.permutation(n_fingers)

    n_test = _round_half_up(n_units * tf)
    for part_id, frac in ((2, None), (1, vf)):
        target = n_test if frac is None else _round_half_up((n_units - n_test) * frac)
        remaining = target
        # Prefer chunks of two impressions per finger so that each finger in the part yields genuine pairs.
        for chunk in (2, 1):
            progress = True
            while remaining and progress:
                progress = False
                for f in finger_order.tolist():
                    if not remaining:
                        break
                    if spare_end[f] - spare_next[f] >= chunk:
                        take = min(chunk, remaining)
                        unit_part[order[spare_next[f]:spare_next[f] + take]] = part_id
                        spare_next[f] += take
                        remaining -= take
                        progress = True
        if frac is None:
            n_test = target - remaining
    return unit_part[unit_of_rec]


def check_fold(fold) -> None:
    """Raise ValueError unless ``fold`` is ``(k, K)`` with integers K >= 2 and 0 <= k < K."""
    ok = (isinstance(fold, tuple | list) and len(fold) == 2
          and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in fold)
          and fold[1] >= 2 and 0 <= fold[0] < fold[1])
    if not ok:
        raise ValueError(f"fold: expected (k, K) with integers K >= 2 and 0 <= k < K, got {fold!r}")


def check_split_args(records, indices, protocol: str, test_fraction: float, val_fraction: float,
                     fold: tuple[int, int] | None) -> np.ndarray:
    """The checks every finger split makes (:func:`split_records`, :func:`fedprint.data.hash_split.hash_split`);
    returns the record indices to split."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if not (math.isfinite(test_fraction) and 0.0 < test_fraction < 1.0):
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    if not (math.isfinite(val_fraction) and 0.0 <= val_fraction < 1.0):
        raise ValueError(f"val_fraction must lie in [0, 1), got {val_fraction!r}")
    if fold is not None:
        check_fold(fold)
        if protocol != "open":
            raise ValueError(f"fold: K-fold splits by finger need protocol='open', got {protocol!r}")
    idx = check_indices(records, indices)
    if idx.size < 2:
        raise ValueError(f"indices: need at least 2 records to split, got {idx.size}")
    return idx


def split_records(
    records: Sequence[FingerprintRecord],
    indices=None,
    *,
    protocol: str = "open",
    test_fraction: float = 0.2,
    val_fraction: float = 0.2,
    seed: int | np.random.Generator,
    fold: tuple[int, int] | None = None,
) -> Split:
    """Split one client's records into train / val / test (Yan et al. 2025, Sec. 5.2: 4:1, then 1/5 of train as val).

    Parameters
    ----------
    records : sequence of FingerprintRecord
        The full record list.
    indices : array_like of int, optional
        The client's record indices (e.g. ``ClientPartition.indices``); default all records.
    protocol : {"open", "closed"}
        ``"open"`` (default): disjoint fingers in train, val and test; fractions count fingers. Fingers with
        at least 2 images are split separately from single-image fingers, so every part gets genuine pairs.
        ``"closed"``: whole impressions (each with its altered copies) are moved out of training; every finger
        keeps 2 impressions in train (all of them if it has fewer), and test/val take spare impressions two
        per finger where possible, so their fingers are also training fingers. Fractions count impressions.
    test_fraction : float
        Share of the client's data in the test part, in (0, 1). Default 0.2 (4:1).
    val_fraction : float
        Share of the remaining training data moved to validation, in [0, 1). Default 0.2; 0 gives an empty
        val.
    seed : int or numpy.random.Generator
        Randomness of the split.
    fold : tuple (k, K) of int, optional
        K-fold cross-validation by finger (open protocol only): the fingers are permuted by ``seed`` and every
        K-th one from position ``k`` is a test finger, so the K splits of one seed hold out each finger exactly
        once; ``test_fraction`` is then unused. Validation fingers come from the rest as above. Default None.

    Raises
    ------
    ValueError
        On bad parameters, or when train, test or (non-empty-by-request) val would contain no genuine pair.
    """
    idx = check_split_args(records, indices, protocol, test_fraction, val_fraction, fold)
    rng = np.random.default_rng(seed)
    codes, n_fingers = finger_codes(records, idx)

    if protocol == "open":
        part = _open_split(codes, n_fingers, test_fraction, val_fraction, rng, fold)
    else:
        imp = np.array([records[i].impression for i in idx.tolist()], dtype=np.int64)
        part = _closed_split(codes, imp, n_fingers, test_fraction, val_fraction, rng)

    for p, name in ((0, "train"), (2, "test"), (1, "val")):
        if p == 1 and val_fraction == 0:
            continue
        if not _has_genuine(codes[part == p]):
            if protocol == "closed":
                hint = ("closed-set needs fingers with >= 3 impressions (2 stay in train, the rest go to "
                        "test/val); use protocol='open' for one-impression datasets")
            else:
                hint = "too few fingers with >= 2 images"
            n_part = int(np.count_nonzero(part == p))
            raise ValueError(f"{protocol}-set split of {idx.size} records ({n_fingers} fingers): the {name} "
                             f"part would contain no genuine pair ({n_part} records); {hint}")
    return Split(train=idx[part == 0], val=idx[part == 1], test=idx[part == 2])


# ---------------------------------------------------------------------------------------------- pairs


def make_pairs(
    records: Sequence[FingerprintRecord],
    indices=None,
    *,
    max_impostors: int = MAX_IMPOSTORS,
    seed: int | np.random.Generator,
) -> PairSet:
    """All genuine pairs and a uniform sample of impostor pairs among ``indices`` (Yan et al. 2025, Sec. 5.2).

    Genuine pairs: every unordered pair of distinct records of the same finger (see the module docstring for
    altered images), ``Σ_f C(n_f, 2)`` of them. Impostor pairs: ``min(max_impostors, M)`` pairs drawn
    uniformly without replacement from the ``M`` different-finger pairs. The draw never materialises all
    ``M`` pairs: with records ordered by finger, the impostor partners of record ``i`` that come after it
    are exactly the records after the end of its finger's block, so the ``r``-th impostor pair is found from
    cumulative counts by binary search, and ``r`` is drawn with ``Generator.choice(M, k, replace=False)``
    (Floyd's algorithm, or a shuffle of at most ~50·k candidates: memory O(n + k), not O(n²)).

    Parameters
    ----------
    records : sequence of FingerprintRecord
    indices : array_like of int, optional
        Record indices to pair (e.g. ``Split.test``); default all records.
    max_impostors : int
        Cap on impostor pairs, >= 0. Default 10,000.
    seed : int or numpy.random.Generator
        Randomness of the impostor sample.

    Returns
    -------
    PairSet
        Genuine pairs first, then impostors, each block sorted by ``(a, b)``; ``a < b``.

    Raises
    ------
    ValueError
        On bad indices or ``max_impostors``, or if the records contain no genuine pair.
    """
    if (isinstance(max_impostors, bool) or not isinstance(max_impostors, (int, np.integer))
            or max_impostors < 0):
        raise ValueError(f"max_impostors must be an integer >= 0, got {max_impostors!r}")
    idx = check_indices(records, indices)
    rng = np.random.default_rng(seed)
    codes, n_fingers = finger_codes(records, idx)
    n = idx.size

    # Records in finger order: finger f occupies positions [start[f], end[f]).
    by_finger = np.argsort(codes, kind="stable")
    rec = idx[by_finger]
    size = np.bincount(codes, minlength=n_fingers)
    end = np.cumsum(size)
    start = end - size

    # Genuine: all within-block pairs, vectorised per distinct block size.
    ga, gb = [], []
    for s in np.unique(size[size >= 2]).tolist():
        iu, ju = np.triu_indices(s, 1)
        st = start[size == s][:, None]
        ga.append(rec[(st + iu).ravel()])
        gb.append(rec[(st + ju).ravel()])
    if not ga:
        raise ValueError(f"make_pairs: the {n} records ({n_fingers} fingers) contain no genuine pair -- "
                         "every finger has a single image")
    ga, gb = np.concatenate(ga), np.concatenate(gb)

    # Impostor: position i pairs with positions [end of its block, n).
    block_end = np.repeat(end, size)
    partners = n - block_end
    cum = np.cumsum(partners)
    total = int(cum[-1]) if n else 0
    k = min(int(max_impostors), total)
    ranks = np.arange(total, dtype=np.int64) if k == total else rng.choice(total, size=k, replace=False)
    i = np.searchsorted(cum, ranks, side="right")
    j = block_end[i] + (ranks - (cum[i] - partners[i]))
    ia, ib = rec[i], rec[j]

    def ordered(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.minimum(x, y), np.maximum(x, y)
        o = np.lexsort((hi, lo))
        return lo[o], hi[o]

    ga, gb = ordered(ga, gb)
    ia, ib = ordered(ia, ib)
    label = np.concatenate([np.ones(ga.size, np.int8), np.zeros(ia.size, np.int8)])
    return PairSet(a=np.concatenate([ga, ia]), b=np.concatenate([gb, ib]), label=label)


def sample_epoch_pairs(
    pairset: PairSet,
    *,
    n_impostor_per_genuine: float = 1.0,
    rng: int | np.random.Generator,
) -> PairSet:
    """One epoch's balanced training pairs: every genuine pair plus a fresh random subset of impostor pairs.

    Parameters
    ----------
    pairset : PairSet
        The client's training pairs (from :func:`make_pairs`).
    n_impostor_per_genuine : float
        Impostors drawn per genuine pair, >= 0; ``round(ratio * n_genuine)`` impostors are drawn without
        replacement, or all of them when the pair set holds fewer.
    rng : numpy.random.Generator or int
        Pass the trainer's generator so that each epoch draws a different subset.

    Returns
    -------
    PairSet
        The selected pairs in random order (ready for batching).
    """
    if not (math.isfinite(n_impostor_per_genuine) and n_impostor_per_genuine >= 0):
        raise ValueError(f"n_impostor_per_genuine must be a finite number >= 0, "
                         f"got {n_impostor_per_genuine!r}")
    rng = np.random.default_rng(rng)
    genuine = np.flatnonzero(pairset.label == 1)
    impostor = np.flatnonzero(pairset.label == 0)
    if genuine.size == 0:
        raise ValueError("sample_epoch_pairs: the pair set holds no genuine pair")
    k = min(impostor.size, _round_half_up(n_impostor_per_genuine * genuine.size))
    chosen = rng.choice(impostor, size=k, replace=False) if k else impostor[:0]
    sel = rng.permutation(np.concatenate([genuine, chosen]))
    return pairset.take(sel)
