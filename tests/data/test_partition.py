"""Tests for data.partition: institution partitions of Yan et al. 2025, Sec. 5.2."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.data.partition import (
    DEFAULT_BETA,
    ClientPartition,
    beta_schedule,
    check_indices,
    finger_codes,
    partition_by_domain,
    partition_split,
    summary,
)
from fedprint.data.record import FingerprintRecord

IMG = np.zeros((4, 4), np.uint8)


def make_records(n_fingers: int, n_impressions: int = 3, domain: str = "casia",
                 alterations: tuple[str, ...] = ()) -> list[FingerprintRecord]:
    recs = []
    for f in range(n_fingers):
        for i in range(n_impressions):
            recs.append(FingerprintRecord(f"id{f:03d}", i, IMG, domain))
            recs.extend(FingerprintRecord(f"id{f:03d}", i, IMG, domain, alteration=a) for a in alterations)
    return recs


def fingers_of(records, indices) -> set[str]:
    return {records[i].identity for i in indices.tolist()}


def assert_exact_cover(parts, n_records):
    allidx = np.concatenate([p.indices for p in parts])
    assert np.array_equal(np.sort(allidx), np.arange(n_records))


# ------------------------------------------------------------------------------------------ by domain


def test_partition_by_domain_one_client_per_sorted_domain():
    recs = make_records(3, domain="nist") + make_records(4, domain="casia")
    recs += make_records(2, domain="socofing")
    parts = partition_by_domain(recs)
    assert [p.domain for p in parts] == ["casia", "nist", "socofing"]
    assert [p.client_id for p in parts] == [0, 1, 2]
    assert [len(p) for p in parts] == [12, 9, 6]
    for p in parts:
        assert {recs[i].domain for i in p.indices.tolist()} == {p.domain}
        assert p.beta == DEFAULT_BETA
        assert p.indices.dtype == np.int64
    assert_exact_cover(parts, len(recs))


def test_partition_by_domain_betas():
    recs = make_records(2, domain="b") + make_records(2, domain="a")
    assert [p.beta for p in partition_by_domain(recs, betas=[0.1, 0.7])] == [0.1, 0.7]
    assert [p.beta for p in partition_by_domain(recs, betas=0.0)] == [0.0, 0.0]
    with pytest.raises(ValueError, match="expected 2 values"):
        partition_by_domain(recs, betas=[0.1])
    with pytest.raises(ValueError, match=r"betas\[1\] must lie in \[0, 1\]"):
        partition_by_domain(recs, betas=[0.1, 1.5])
    with pytest.raises(ValueError, match="empty"):
        partition_by_domain([])


# ------------------------------------------------------------------------------------------ split


@pytest.mark.parametrize("n_fingers,n_clients", [(23, 5), (20, 10), (7, 3)])
def test_iid_sizes_equal_within_one_and_fingers_whole(n_fingers, n_clients):
    recs = make_records(n_fingers, 3, alterations=("Easy/CR",))
    parts = partition_split(recs, n_clients, mode="iid", seed=0)
    n_f = [len(fingers_of(recs, p.indices)) for p in parts]
    assert sum(n_f) == n_fingers
    assert max(n_f) - min(n_f) <= 1
    assert_exact_cover(parts, len(recs))
    # A finger (all impressions and alterations: 6 images) lives on exactly one client.
    owners = {}
    for p in parts:
        for i in p.indices.tolist():
            owners.setdefault(recs[i].identity, set()).add(p.client_id)
    assert all(len(o) == 1 for o in owners.values())
    assert all(len(p) == 6 * len(fingers_of(recs, p.indices)) for p in parts)
    assert [p.name for p in parts][:2] == ["casia-c00", "casia-c01"]


def test_split_deterministic_given_seed():
    recs = make_records(40)
    for mode in ("iid", "niid"):
        a = partition_split(recs, 4, mode=mode, seed=7)
        b = partition_split(recs, 4, mode=mode, seed=np.random.default_rng(7))
        c = partition_split(recs, 4, mode=mode, seed=8)
        assert all(np.array_equal(x.indices, y.indices) for x, y in zip(a, b, strict=True))
        assert not all(np.array_equal(x.indices, y.indices) for x, y in zip(a, c, strict=True))


def test_niid_dirichlet_unequal_seeded_and_min_fingers():
    recs = make_records(100, 2)
    parts = partition_split(recs, 10, mode="niid", alpha=0.3, seed=1)
    n_f = np.array([len(fingers_of(recs, p.indices)) for p in parts])
    assert n_f.sum() == 100
    assert n_f.min() >= 2
    assert n_f.max() - n_f.min() > 5  # clearly unequal, unlike IID
    parts2 = partition_split(recs, 10, mode="niid", alpha=0.3, seed=1)
    again = [len(fingers_of(recs, p.indices)) for p in parts2]
    assert again == n_f.tolist()
    parts = partition_split(recs, 10, mode="niid", alpha=0.01, seed=3, min_fingers=5)
    assert min(len(fingers_of(recs, p.indices)) for p in parts) >= 5
    assert_exact_cover(parts, len(recs))


def test_niid_explicit_sizes():
    recs = make_records(20, 2)
    parts = partition_split(recs, 3, mode="niid", sizes=[0.5, 0.3, 0.2], seed=0)
    assert [len(fingers_of(recs, p.indices)) for p in parts] == [10, 6, 4]
    msg = r"sizes\[2\]=0.05 gives client 2 1 of 20 fingers, fewer than min_fingers"
    with pytest.raises(ValueError, match=msg):
        partition_split(recs, 3, mode="niid", sizes=[0.6, 0.35, 0.05], seed=0)
    with pytest.raises(ValueError, match="expected 3 fractions"):
        partition_split(recs, 3, mode="niid", sizes=[0.5, 0.5], seed=0)
    with pytest.raises(ValueError, match="summing to 1"):
        partition_split(recs, 3, mode="niid", sizes=[0.5, 0.3, 0.3], seed=0)
    with pytest.raises(ValueError, match="summing to 1"):
        partition_split(recs, 3, mode="niid", sizes=[1.2, -0.1, -0.1], seed=0)
    with pytest.raises(ValueError, match="only used with mode='niid'"):
        partition_split(recs, 3, mode="iid", sizes=[0.5, 0.3, 0.2], seed=0)


def test_split_betas_and_domain_selection():
    recs = make_records(6, domain="x") + make_records(10, domain="y")
    parts = partition_split(recs, 5, seed=0, domain="y", betas=beta_schedule(5))
    assert [p.beta for p in parts] == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert all({recs[i].domain for i in p.indices.tolist()} == {"y"} for p in parts)
    assert sum(len(p) for p in parts) == 30
    with pytest.raises(ValueError, match="2 domains"):
        partition_split(recs, 2, seed=0)
    with pytest.raises(ValueError, match="'z' not among"):
        partition_split(recs, 2, seed=0, domain="z")


def test_split_identity_key_includes_domain():
    # Same identity string in two domains = two different fingers.
    recs = make_records(4, domain="x") + make_records(4, domain="y")
    codes, n = finger_codes(recs, np.arange(len(recs)))
    assert n == 8
    assert codes[0] != codes[12]


@pytest.mark.parametrize("kwargs,msg", [
    (dict(n_clients=0), "n_clients must be an integer >= 1"),
    (dict(n_clients=2.0), "n_clients must be an integer >= 1"),
    (dict(n_clients=11), "more clients than fingers"),
    (dict(n_clients=6), r"min_fingers=2 fingers: domain 'casia' has only 10 fingers \(need 12\)"),
    (dict(n_clients=2, min_fingers=0), "min_fingers must be an integer >= 1"),
    (dict(n_clients=2, mode="dirichlet"), "mode must be one of"),
    (dict(n_clients=2, mode="niid", alpha=0.0), "alpha must be"),
    (dict(n_clients=2, betas=[0.1, 0.2, 0.3]), "expected 2 values"),
    (dict(n_clients=2, betas=-0.1), r"must lie in \[0, 1\]"),
    (dict(n_clients=2, betas=[0.1, float("nan")]), r"betas\[1\] must lie in \[0, 1\]"),
    (dict(n_clients=2, betas=[0.1, "x"]), "must be a number"),
])
def test_split_errors(kwargs, msg):
    recs = make_records(10)
    kwargs = {"seed": 0, **kwargs}
    n = kwargs.pop("n_clients")
    with pytest.raises(ValueError, match=msg):
        partition_split(recs, n, **kwargs)


def test_split_empty_records():
    with pytest.raises(ValueError, match="empty"):
        partition_split([], 2, seed=0)


# ------------------------------------------------------------------------------------------ betas, summary


def test_beta_schedule_seed003():
    assert beta_schedule(10) == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert beta_schedule(11) == [round(0.1 * i, 12) for i in range(11)]
    assert beta_schedule(3, start=0.5, step=0.25) == [0.5, 0.75, 1.0]
    with pytest.raises(ValueError, match=r"β of client 11 is 1.1, outside \[0, 1\]"):
        beta_schedule(12)
    with pytest.raises(ValueError, match=r"β of client 0 is -0.1"):
        beta_schedule(2, start=-0.1)
    with pytest.raises(ValueError, match="n_clients must be an integer >= 1"):
        beta_schedule(0)


def test_summary_counts_alterations():
    recs = make_records(4, 2, alterations=("Easy/CR", "Hard/Obl"))
    parts = partition_split(recs, 2, seed=0)
    rows = summary(parts, recs)
    assert [r["fingers"] for r in rows] == [2, 2]
    assert [r["impressions"] for r in rows] == [4, 4]
    assert [r["altered"] for r in rows] == [8, 8]
    assert [r["images"] for r in rows] == [12, 12]
    assert rows[1]["name"] == "casia-c01" and rows[1]["beta"] == DEFAULT_BETA


def test_client_partition_validation_and_readonly():
    p = ClientPartition(0, "c", "d", np.array([3, 1], np.int32), 0.2)
    assert p.indices.dtype == np.int64
    with pytest.raises(ValueError):
        p.indices[0] = 5
    with pytest.raises(ValueError, match="beta must lie"):
        ClientPartition(0, "c", "d", np.array([1]), 1.2)
    with pytest.raises(ValueError, match="1-D integer array"):
        ClientPartition(0, "c", "d", np.array([1.0]), 0.2)


def test_check_indices():
    recs = make_records(2)
    assert check_indices(recs, [5, 0, 2]).tolist() == [0, 2, 5]
    assert check_indices(recs, None).tolist() == list(range(6))
    with pytest.raises(ValueError, match=r"must lie in \[0, 6\)"):
        check_indices(recs, [0, 6])
    with pytest.raises(ValueError, match=r"must lie in \[0, 6\)"):
        check_indices(recs, [-1])
    with pytest.raises(ValueError, match="duplicate record index 2"):
        check_indices(recs, [2, 1, 2])
    with pytest.raises(ValueError, match="integer record indices"):
        check_indices(recs, [0.5])
    with pytest.raises(ValueError, match="integer record indices"):
        check_indices(recs, [[0, 1]])


def test_unseen_domains_go_to_no_client_and_indices_stay_global():
    from types import SimpleNamespace

    from fedprint.data.sources import make_partitions, unseen_records
    from fedprint.data.stripes import stripe_records

    records = (stripe_records(4, 3, size=24, domain="a") + stripe_records(4, 3, size=24, domain="b", seed=1)
               + stripe_records(4, 3, size=24, domain="c", seed=2))
    part = SimpleNamespace(mode="domain", betas=(), unseen=("b",), n_clients=2, alpha=0.5, min_fingers=2)
    parts = make_partitions(records, part, seed=0, default_beta=0.5)
    assert [p.domain for p in parts] == ["a", "c"]
    assert {records[i].domain for i in parts[1].indices} == {"c"} and len(parts[1]) == 12
    held = unseen_records(records, part)
    assert list(held) == ["b"] and len(held["b"]) == 12
    with pytest.raises(ValueError, match=r"partition.unseen: domain\(s\) \['x'\]"):
        make_partitions(records, SimpleNamespace(**{**vars(part), "unseen": ("x",)}), seed=0, default_beta=0.5)
    with pytest.raises(ValueError, match="leaves no domain to train on"):
        unseen_records(records, SimpleNamespace(unseen=("a", "b", "c")))
