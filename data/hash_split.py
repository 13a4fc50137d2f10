"""A train / val / test split in which each finger's part is a keyed hash of that finger alone.

Why. :func:`fedprint.data.pairs.split_records` permutes the fingers with a seeded generator and cuts the
permutation at counts computed from the pool; removing one finger shifts the cut, so other fingers move in or out
of training (30 fingers x 4: 10 other fingers moved and 184 DP pairs not involving the removed finger changed,
issue 59 §3). DP-SGD's unit is one finger of the data set the user gives, so its training set must change only by
that finger's own records when the finger is removed. Here every decision about finger f is a function of
``(key, f)`` only:

    u_f = blake2b_key(domain, identity) / 2^64  (uniform on [0, 1) for a fixed key)

* ``"open"`` protocol: f is a test finger iff u_f < t; else a validation finger iff (u_f − t)/(1 − t) < v; else a
  training finger (t = ``test_fraction``, v = ``val_fraction``). With ``fold = (k, K)``: test iff ⌊K·u_f⌋ = k,
  validation iff frac(K·u_f) < v among the rest (given ⌊K·u_f⌋, frac(K·u_f) is again uniform).
* ``"closed"`` protocol: f's impressions (each with its altered copies) are ordered by a keyed hash of
  (f, impression); the first two stay in training; every further impression goes to test with probability
  p_t = min(1, t·n_f/s_f) and to validation with p_v = min(1 − p_t, (1 − t)·v·n_f/s_f) (n_f impressions, s_f spare
  ones: the finger's own counts), decided by a keyed hash of (f, impression).

So removing a finger removes its records from whichever part it was in and moves no other finger or impression.
The price: the parts' sizes are random (binomial around the fractions) instead of rounded counts, and no
rebalancing is done when a part ends up with fewer than two fingers or no genuine pair (moving fingers to fix it
would depend on the pool) — the split is refused with a message instead. With the default fractions (validation,
p = 0.16 a finger, is the short part) a client of 20 fingers is refused for about one key in five, one of 50
fingers for about one in 500, one of 100 fingers for fewer than one in 10^6. Deterministic given ``key``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from fedprint.data.pairs import Split, check_split_args
from fedprint.data.partition import finger_codes
from fedprint.data.record import FingerprintRecord

#: Name of this split rule (recorded in run reports and model files).
RULE = "finger-hash"


def finger_uniform(key: int, domain: str, identity: str, salt: str = "") -> float:
    """u in [0, 1): blake2b of ``domain``, ``identity`` (and ``salt``) keyed with ``key``; a function of these only."""
    if isinstance(key, bool) or not isinstance(key, int | np.integer):
        raise ValueError(f"key: expected an integer (the run seed), got {key!r}")
    h = hashlib.blake2b(f"{domain}\x00{identity}\x00{salt}".encode(), digest_size=8,
                        key=int(key).to_bytes(16, "little", signed=True), person=b"fedprint-split")
    return int.from_bytes(h.digest(), "little") / 2.0 ** 64


def hash_split_records(
    records: Sequence[FingerprintRecord],
    indices=None,
    *,
    key: int,
    protocol: str = "open",
    test_fraction: float = 0.2,
    val_fraction: float = 0.2,
    fold: tuple[int, int] | None = None,
) -> Split:
    """Split ``records`` by a keyed hash per finger (module docstring); same parameters as
    :func:`fedprint.data.pairs.split_records`, with ``key`` (e.g. the run seed) in place of its ``seed``.

    Raises
    ------
    ValueError
        On bad parameters, or when train, test or (non-empty-by-request) val holds no genuine pair.
    """
    idx = check_split_args(records, indices, protocol, test_fraction, val_fraction, fold)
    codes, n_fingers = finger_codes(records, idx)
    first = {}
    for pos, c in enumerate(codes.tolist()):
        first.setdefault(c, records[int(idx[pos])])
    if protocol == "open":
        part_of = np.array([_open_part(finger_uniform(key, first[f].domain, first[f].identity), test_fraction,
                                       val_fraction, fold) for f in range(n_fingers)], dtype=np.int64)
        part = part_of[codes]
    else:
        imp = np.array([records[i].impression for i in idx.tolist()], dtype=np.int64)
        part = _closed_parts(codes, imp, first, key, test_fraction, val_fraction)
    for p, name in ((0, "train"), (2, "test"), (1, "val")):
        if p == 1 and val_fraction == 0:
            continue
        members = codes[part == p]
        fingers = np.unique(members).size
        genuine = bool(members.size) and int(np.bincount(members).max()) >= 2
        if not (fingers >= 2 and genuine):
            raise ValueError(f"{protocol}-set {RULE} split of {idx.size} records ({n_fingers} fingers): the {name} "
                             f"part holds {fingers} finger(s) and {'a' if genuine else 'no'} genuine pair; it needs "
                             "two fingers and a genuine pair (genuine and impostor pairs). The split is a hash per "
                             "finger and is not rebalanced (that would move other fingers): use more fingers, other "
                             "fractions or another [run] seed")
    return Split(train=idx[part == 0], val=idx[part == 1], test=idx[part == 2])


def _open_part(u: float, tf: float, vf: float, fold: tuple[int, int] | None) -> int:
    """0 train, 1 val, 2 test for a finger whose hash is ``u``."""
    if fold is not None:
        k, n_folds = fold
        j, rest = divmod(u * n_folds, 1.0)
        return 2 if int(j) == k else (1 if rest < vf else 0)
    if u < tf:
        return 2
    return 1 if (u - tf) / (1.0 - tf) < vf else 0


def _closed_parts(codes: np.ndarray, imp: np.ndarray, first: dict, key: int, tf: float, vf: float) -> np.ndarray:
    """Part of each record under the closed protocol: per finger, two hash-chosen impressions stay in training,
    each spare impression goes to test / val by its own hash (module docstring)."""
    part = np.zeros(codes.size, dtype=np.int64)
    for f in np.unique(codes).tolist():
        rec = first[f]
        mine = np.flatnonzero(codes == f)
        units = sorted(set(imp[mine].tolist()), key=lambda i: finger_uniform(key, rec.domain, rec.identity,
                                                                             f"order:{i}"))
        spare = units[2:]
        if not spare:
            continue
        n, s = len(units), len(spare)
        p_test = min(1.0, tf * n / s)
        p_val = min(1.0 - p_test, (1.0 - tf) * vf * n / s)
        for i in spare:
            w = finger_uniform(key, rec.domain, rec.identity, f"part:{i}")
            where = 2 if w < p_test else (1 if w < p_test + p_val else 0)
            part[mine[imp[mine] == i]] = where
    return part
