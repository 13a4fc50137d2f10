"""`fedprint simulate --check`: every shipped experiment can be partitioned, split and paired.

The partition / split / pair protocol depends only on identities and impressions, not on pixels, so the check
runs on tiny stripe records with each shipped source's finger and impression counts (seconds, not the minutes
of generating the synthetic prints).
"""

from __future__ import annotations

import pytest

from fedprint.config import SHIPPED_DIR, load_experiment
from fedprint.data.real_sets import REAL_ENV, real_root
from fedprint.data.sources import load_source, make_partitions
from fedprint.data.stripes import stripe_records
from fedprint.lab.simulate import check_partitions

SHIPPED = sorted(p.stem for p in SHIPPED_DIR.glob("*.toml"))


def _stand_in_records(cfg):
    """Stripe records with each synthetic source's counts; a real set's own records (skip when it is absent)."""
    recs = []
    for k, s in enumerate(cfg.data.sources):
        if s.kind == "real":
            if not (real_root() / s.name).is_dir():
                pytest.skip(f"real set {s.name!r} not present under {real_root()} (${REAL_ENV})")
            recs += load_source(s, progress=False)
            continue
        recs += stripe_records(n_fingers=s.fingers, n_impressions=s.impressions, size=8, domain=f"synth:{s.profile}",
                               seed=k)
    return recs


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_experiment_splits(name):
    cfg, _ = load_experiment(SHIPPED_DIR / f"{name}.toml")
    records = _stand_in_records(cfg)
    parts = make_partitions(records, cfg.partition, seed=cfg.run.seed, default_beta=cfg.fpdfsn.beta)
    rows = check_partitions(cfg, records, parts, source=name)
    assert len(rows) == len(parts) and all(r["test"] > 0 and r["train"] > 0 for r in rows)


def test_a_client_too_small_for_the_protocol_is_named(tmp_path):
    cfg, _ = load_experiment(SHIPPED_DIR / "ten_clients_beta_niid.toml")
    from dataclasses import replace

    cfg = replace(cfg, partition=replace(cfg.partition, min_fingers=2))  # the old, too-small floor
    records = _stand_in_records(cfg)
    parts = make_partitions(records, cfg.partition, seed=cfg.run.seed, default_beta=cfg.fpdfsn.beta)
    with pytest.raises(ValueError, match=r"client 'synth:casia-c\d\d' \(\d fingers"):
        check_partitions(cfg, records, parts, source="niid")
