"""Tests for data.pairs: splits and verification pairs of Yan et al. 2025, Sec. 5.2."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from fedprint.data.pairs import MAX_IMPOSTORS, PairSet, make_pairs, sample_epoch_pairs, split_records
from fedprint.data.partition import partition_split
from fedprint.data.record import FingerprintRecord

IMG = np.zeros((4, 4), np.uint8)


def make_records(n_fingers: int, n_impressions: int = 5, domain: str = "casia",
                 alterations: tuple[str, ...] = ()) -> list[FingerprintRecord]:
    recs = []
    for f in range(n_fingers):
        for i in range(n_impressions):
            recs.append(FingerprintRecord(f"id{f:03d}", i, IMG, domain))
            recs.extend(FingerprintRecord(f"id{f:03d}", i, IMG, domain, alteration=a) for a in alterations)
    return recs


def ragged_records(sizes) -> list[FingerprintRecord]:
    return [FingerprintRecord(f"f{f}", i, IMG, "d") for f, n in enumerate(sizes) for i in range(n)]


def ids(records, idx) -> set[str]:
    return {records[i].identity for i in np.asarray(idx).tolist()}


def has_genuine(records, idx) -> bool:
    names = [records[i].identity for i in np.asarray(idx).tolist()]
    return len(names) > len(set(names))


# ------------------------------------------------------------------------------------------ open-set split


def test_open_split_disjoint_fingers_cover_and_fractions():
    recs = make_records(50, 4)
    idx = np.arange(0, len(recs))
    s = split_records(recs, idx, seed=0)
    tr, va, te = ids(recs, s.train), ids(recs, s.val), ids(recs, s.test)
    assert not (tr & va) and not (tr & te) and not (va & te)
    assert np.array_equal(np.sort(np.concatenate([s.train, s.val, s.test])), idx)
    assert (len(tr), len(va), len(te)) == (32, 8, 10)  # 4:1, then 1/5 of train
    assert all(has_genuine(recs, p) for p in (s.train, s.val, s.test))
    assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in (s.train, s.val, s.test))


def test_open_split_deterministic_and_on_subset():
    recs = make_records(30, 3)
    part = partition_split(recs, 2, seed=0)[1]
    a = split_records(recs, part.indices, seed=5)
    b = split_records(recs, part.indices, seed=np.random.default_rng(5))
    c = split_records(recs, part.indices, seed=6)
    assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("train", "val", "test"))
    assert not np.array_equal(a.test, c.test)
    assert set(np.concatenate([a.train, a.val, a.test]).tolist()) == set(part.indices.tolist())


def test_open_split_single_image_fingers_stratified():
    # 6 fingers with 2 images, 20 with one: every part still gets a pair-capable finger.
    recs = ragged_records([2] * 6 + [1] * 20)
    for seed in range(10):
        s = split_records(recs, seed=seed)
        assert all(has_genuine(recs, p) for p in (s.train, s.val, s.test))


def test_open_split_alterations_give_genuine_pairs():
    # SOCOFing-like: one real impression per finger plus altered copies.
    recs = make_records(20, 1, alterations=("Easy/CR", "Hard/Zcut"))
    s = split_records(recs, seed=0)
    assert not (ids(recs, s.train) & ids(recs, s.test))
    assert all(has_genuine(recs, p) for p in (s.train, s.val, s.test))


def test_open_split_val_fraction_zero():
    recs = make_records(10, 2)
    s = split_records(recs, seed=0, val_fraction=0.0)
    assert s.val.size == 0 and len(ids(recs, s.test)) == 2 and len(ids(recs, s.train)) == 8


def test_open_split_too_few_capable_fingers():
    with pytest.raises(ValueError, match=r"only 2 finger\(s\) have >= 2 images; train, test and val"):
        split_records(ragged_records([2, 2, 1, 1, 1]), seed=0)
    with pytest.raises(ValueError, match="only 1 finger"):
        split_records(ragged_records([3, 1, 1]), seed=0, val_fraction=0.0)


def test_open_split_folds_cover_every_finger_once():
    recs = make_records(17, 3)
    tests = [split_records(recs, seed=4, val_fraction=0.1, fold=(k, 3)) for k in range(3)]
    held = [ids(recs, s.test) for s in tests]
    assert sorted(len(h) for h in held) == [5, 6, 6]
    assert set().union(*held) == ids(recs, np.arange(len(recs)))  # every finger tested once ...
    assert sum(len(h) for h in held) == 17  # ... and only once
    for s in tests:
        assert not (ids(recs, s.train) & ids(recs, s.test)) and not (ids(recs, s.val) & ids(recs, s.test))
        assert len(ids(recs, s.val)) == 2  # the minimum two validation fingers
        assert np.array_equal(np.sort(np.concatenate([s.train, s.val, s.test])), np.arange(len(recs)))
    other = split_records(recs, seed=5, val_fraction=0.1, fold=(0, 3))
    assert ids(recs, other.test) != held[0]  # the seed draws the folds


@pytest.mark.parametrize("kwargs, msg", [
    (dict(fold=(3, 3)), r"fold: expected \(k, K\)"),
    (dict(fold=(0, 1)), r"fold: expected \(k, K\)"),
    (dict(fold=(0.0, 2)), r"fold: expected \(k, K\)"),
    (dict(fold=(0, 2), protocol="closed"), "need protocol='open'"),
    (dict(fold=(2, 8)), r"8-fold open-set split: 10 finger\(s\) with >= 2 images leave 1 test and 7 training "
                        r"finger\(s\) in fold 2"),
])
def test_open_split_fold_errors(kwargs, msg):
    recs = make_records(10, 3)
    with pytest.raises(ValueError, match=msg):
        split_records(recs, seed=0, **kwargs)


# ------------------------------------------------------------------------------------------ closed-set split


def test_closed_split_identities_in_train_and_two_kept():
    recs = make_records(20, 5)
    s = split_records(recs, protocol="closed", seed=0)
    tr = ids(recs, s.train)
    assert tr == ids(recs, range(len(recs)))  # every finger trains
    assert ids(recs, s.test) <= tr and ids(recs, s.val) <= tr
    assert len(ids(recs, s.test)) > 0 and len(ids(recs, s.val)) > 0
    per_finger = np.bincount([int(recs[i].identity[2:]) for i in s.train.tolist()])
    assert per_finger.min() >= 2
    assert (s.test.size, s.val.size, s.train.size) == (20, 16, 64)  # 20 % of 100, then 20 % of 80
    # Test takes impressions two per finger, so every test finger has a genuine pair in test.
    test_counts = np.unique([recs[i].identity for i in s.test.tolist()], return_counts=True)[1]
    assert test_counts.min() >= 2
    assert np.array_equal(np.sort(np.concatenate([s.train, s.val, s.test])), np.arange(len(recs)))


def test_closed_split_alterations_stay_with_source():
    recs = make_records(15, 4, alterations=("Easy/CR", "Medium/Obl"))
    s = split_records(recs, protocol="closed", seed=2)
    where = {}
    for name, part in (("train", s.train), ("val", s.val), ("test", s.test)):
        for i in part.tolist():
            where.setdefault((recs[i].identity, recs[i].impression), set()).add(name)
    assert all(len(v) == 1 for v in where.values())
    assert {n for v in where.values() for n in v} == {"train", "val", "test"}


def test_closed_split_fingers_with_few_impressions_stay_in_train():
    recs = ragged_records([2] * 5 + [6] * 5)
    s = split_records(recs, protocol="closed", seed=0)
    small = {f"f{f}" for f in range(5)}
    assert not (ids(recs, s.test) & small) and not (ids(recs, s.val) & small)


def test_closed_split_deterministic():
    recs = make_records(12, 6)
    a = split_records(recs, protocol="closed", seed=3)
    b = split_records(recs, protocol="closed", seed=3)
    c = split_records(recs, protocol="closed", seed=4)
    assert np.array_equal(a.test, b.test) and np.array_equal(a.val, b.val)
    assert not np.array_equal(a.test, c.test)


def test_closed_split_one_impression_dataset_errors():
    recs = make_records(20, 1, alterations=("Easy/CR",))
    with pytest.raises(ValueError, match="test part would contain no genuine pair.*use protocol='open'"):
        split_records(recs, protocol="closed", seed=0)


@pytest.mark.parametrize("kwargs,msg", [
    (dict(protocol="leave-one-out"), "protocol must be one of"),
    (dict(test_fraction=0.0), r"test_fraction must lie in \(0, 1\)"),
    (dict(test_fraction=1.0), r"test_fraction must lie in \(0, 1\)"),
    (dict(val_fraction=-0.1), r"val_fraction must lie in \[0, 1\)"),
    (dict(val_fraction=float("nan")), r"val_fraction must lie in \[0, 1\)"),
    (dict(indices=[0]), "need at least 2 records"),
    (dict(indices=[0, 0, 1]), "duplicate record index 0"),
    (dict(indices=[0, 999]), "must lie in"),
])
def test_split_errors(kwargs, msg):
    recs = make_records(10, 3)
    with pytest.raises(ValueError, match=msg):
        split_records(recs, seed=0, **kwargs)


# ------------------------------------------------------------------------------------------ make_pairs


def check_pairset(recs, ps: PairSet, idx=None):
    key = np.array([f"{r.domain}/{r.identity}" for r in recs])
    same = key[ps.a] == key[ps.b]
    assert np.array_equal(same, ps.label == 1)  # genuine iff same finger; no same-finger impostor
    assert np.all(ps.a < ps.b)
    assert len({(a, b) for a, b in zip(ps.a.tolist(), ps.b.tolist(), strict=True)}) == len(ps)
    if idx is not None:
        assert set(ps.a.tolist()) | set(ps.b.tolist()) <= set(np.asarray(idx).tolist())


def test_make_pairs_genuine_count_and_all_impostors_under_cap():
    sizes = [1, 2, 3, 5, 5, 8]
    recs = ragged_records(sizes)
    ps = make_pairs(recs, seed=0)
    n = len(recs)
    n_gen = sum(comb(s, 2) for s in sizes)
    assert ps.n_genuine == n_gen
    assert ps.n_impostor == comb(n, 2) - n_gen  # cap not reached: every impostor pair
    assert ps.label.dtype == np.int8 and len(ps) == comb(n, 2)
    check_pairset(recs, ps)


def test_make_pairs_cap_uniform_and_deterministic():
    recs = ragged_records([4] * 30)
    n_imp_total = comb(120, 2) - 30 * comb(4, 2)
    a = make_pairs(recs, max_impostors=500, seed=1)
    b = make_pairs(recs, max_impostors=500, seed=1)
    c = make_pairs(recs, max_impostors=500, seed=2)
    assert a.n_impostor == 500 and a.n_genuine == 180
    check_pairset(recs, a)
    assert np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    assert not np.array_equal(a.a, c.a)
    # Uniformity: over many draws every record appears in impostor pairs about equally often.
    hits = np.zeros(len(recs))
    for s in range(40):
        p = make_pairs(recs, max_impostors=500, seed=s)
        m = p.label == 0
        hits += np.bincount(p.a[m], minlength=120) + np.bincount(p.b[m], minlength=120)
    expected = 40 * 500 * 2 / 120
    assert np.abs(hits / expected - 1).max() < 0.2
    assert n_imp_total > 500


def test_make_pairs_on_subset_and_zero_cap():
    recs = make_records(10, 3)
    idx = np.array([0, 1, 2, 3, 4, 9, 10])
    ps = make_pairs(recs, idx, max_impostors=0, seed=0)
    assert ps.n_impostor == 0 and ps.n_genuine == comb(3, 2) + comb(2, 2) + comb(2, 2)
    check_pairset(recs, ps, idx)
    ps = make_pairs(recs, idx[::-1], seed=0)  # order of indices does not matter
    assert ps.n_genuine == 5 and ps.n_impostor == comb(7, 2) - 5
    check_pairset(recs, ps, idx)


def test_make_pairs_alterations_are_genuine():
    recs = make_records(3, 1, alterations=("Easy/CR", "Hard/Obl"))
    ps = make_pairs(recs, seed=0)
    assert ps.n_genuine == 3 * comb(3, 2)
    pairs = set(zip(ps.a[ps.label == 1].tolist(), ps.b[ps.label == 1].tolist(), strict=True))
    # source-alteration and alteration-alteration pairs
    assert (0, 1) in pairs and (0, 2) in pairs and (1, 2) in pairs
    check_pairset(recs, ps)


def test_make_pairs_same_identity_other_domain_is_impostor():
    recs = make_records(2, 2, domain="x") + make_records(2, 2, domain="y")
    ps = make_pairs(recs, seed=0)
    assert ps.n_genuine == 4
    assert ps.n_impostor == comb(8, 2) - 4
    check_pairset(recs, ps)


def test_make_pairs_large_is_capped():
    recs = make_records(4000, 5)  # 20,000 records: ~2e8 candidate pairs, never materialised (timing: studies/)
    ps = make_pairs(recs, seed=0)
    assert ps.n_impostor == MAX_IMPOSTORS and ps.n_genuine == 4000 * comb(5, 2)
    check_pairset(recs, ps)


def test_make_pairs_errors():
    with pytest.raises(ValueError, match="no genuine pair"):
        make_pairs(ragged_records([1, 1, 1]), seed=0)
    with pytest.raises(ValueError, match="no genuine pair"):
        make_pairs(ragged_records([2, 2]), [], seed=0)
    with pytest.raises(ValueError, match="max_impostors must be an integer >= 0"):
        make_pairs(ragged_records([2, 2]), max_impostors=-1, seed=0)
    with pytest.raises(ValueError, match="max_impostors must be an integer >= 0"):
        make_pairs(ragged_records([2, 2]), max_impostors=10.0, seed=0)
    with pytest.raises(ValueError, match="duplicate"):
        make_pairs(ragged_records([2, 2]), [1, 1], seed=0)


# ------------------------------------------------------------------------------------------ epoch sampling


def test_sample_epoch_pairs_balanced_fresh_and_seeded():
    recs = ragged_records([3] * 20)
    ps = make_pairs(recs, seed=0)
    rng = np.random.default_rng(0)
    e1 = sample_epoch_pairs(ps, rng=rng)
    e2 = sample_epoch_pairs(ps, rng=rng)
    assert e1.n_genuine == ps.n_genuine == 60 and e1.n_impostor == 60
    orig = set(zip(ps.a.tolist(), ps.b.tolist(), ps.label.tolist(), strict=True))
    s1 = set(zip(e1.a.tolist(), e1.b.tolist(), e1.label.tolist(), strict=True))
    s2 = set(zip(e2.a.tolist(), e2.b.tolist(), e2.label.tolist(), strict=True))
    assert s1 <= orig and len(s1) == len(e1)  # subset, without replacement
    assert {p for p in s1 if p[2] == 1} == {p for p in orig if p[2] == 1}
    assert s1 != s2  # fresh impostors each epoch
    again = sample_epoch_pairs(ps, rng=np.random.default_rng(0))
    assert np.array_equal(again.a, e1.a) and np.array_equal(again.label, e1.label)
    assert not np.all(e1.label[:60] == 1)  # shuffled, not genuine-first
    e3 = sample_epoch_pairs(ps, n_impostor_per_genuine=2.5, rng=1)
    assert e3.n_impostor == 150
    e0 = sample_epoch_pairs(ps, n_impostor_per_genuine=0, rng=1)
    assert e0.n_impostor == 0 and e0.n_genuine == 60


def test_sample_epoch_pairs_caps_at_available_and_errors():
    ps = make_pairs(ragged_records([2, 2, 2, 2]), max_impostors=3, seed=0)
    e = sample_epoch_pairs(ps, n_impostor_per_genuine=5.0, rng=0)
    assert e.n_genuine == 4 and e.n_impostor == 3
    with pytest.raises(ValueError, match="n_impostor_per_genuine must be"):
        sample_epoch_pairs(ps, n_impostor_per_genuine=-1.0, rng=0)
    with pytest.raises(ValueError, match="no genuine pair"):
        sample_epoch_pairs(PairSet(np.array([0]), np.array([1]), np.array([0])), rng=0)


def test_pairset_validation():
    ps = PairSet(np.array([0, 1]), np.array([2, 3]), np.array([1, 0]))
    assert len(ps) == 2 and ps.n_genuine == 1 and ps.n_impostor == 1 and ps.label.dtype == np.int8
    with pytest.raises(ValueError, match="equal length"):
        PairSet(np.array([0, 1]), np.array([2]), np.array([1, 0]))
    with pytest.raises(ValueError, match="only 0"):
        PairSet(np.array([0]), np.array([2]), np.array([2]))


def test_pairset_take_keeps_the_three_columns_aligned():
    from fedprint.data.pairs import PairSet

    p = PairSet(np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7]), np.array([1, 0, 0, 1]))
    sub = p.take(np.array([3, 0]))
    assert sub.a.tolist() == [3, 0] and sub.b.tolist() == [7, 4] and sub.label.tolist() == [1, 1]
    masked = p.take(p.label == 0)
    assert masked.a.tolist() == [1, 2] and masked.n_impostor == 2
