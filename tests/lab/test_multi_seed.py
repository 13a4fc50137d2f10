"""lab/multi_seed.py: seed override, intervals, the paired AFFR − FedAvg verdict."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from scipy import stats

from fedprint.lab.multi_seed import ci95, parse_seeds, summarise, with_seed


def test_parse_seeds():
    assert parse_seeds("3") == [0, 1, 2] and parse_seeds("0,4,7") == [0, 4, 7]
    for bad in ("1", "x", "2,2", "-1,3", "5"[:0]):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)


def test_with_seed_replaces_or_adds_and_keeps_everything_else():
    text = '[run]\nname = "x"\nseed = 0\n\n[train]\nseed = 9\nepochs = 2\n'
    got = tomllib.loads(with_seed(text, 5))
    assert got["run"] == {"name": "x", "seed": 5} and got["train"] == {"seed": 9, "epochs": 2}
    assert tomllib.loads(with_seed('[run]\nname = "x"\n[model]\nwidth = 8\n', 3))["run"]["seed"] == 3
    assert tomllib.loads(with_seed('[model]\nwidth = 8\n', 4)) == {"run": {"seed": 4}, "model": {"width": 8}}


def test_ci95_is_student_t_over_seeds():
    x = [0.1, 0.2, 0.3]
    mean, lo, hi = ci95(x)
    half = stats.t.ppf(0.975, 2) * np.std(x, ddof=1) / np.sqrt(3)
    assert mean == pytest.approx(0.2) and (lo, hi) == pytest.approx((0.2 - half, 0.2 + half))


def _res(fedavg, affr):
    return {"fedavg": [{"eer": e, "fmr100": 2 * e} for e in fedavg],
            "affr": [{"eer": e, "fmr100": 2 * e} for e in affr]}


def test_paired_verdict_needs_the_interval_to_exclude_zero():
    clear = {s: _res([0.10 + s / 100, 0.20], [0.08 + s / 100, 0.18]) for s in range(3)}  # always 0.02 lower
    table, paired = summarise(clear)
    assert {r["method"] for r in table} == {"fedavg", "affr"}
    assert paired[0]["metric"] == "avg EER" and paired[0]["verdict"] == "AFFR lower (better) beyond the noise"
    noisy = {0: _res([0.1], [0.12]), 1: _res([0.1], [0.08]), 2: _res([0.1], [0.11])}
    assert summarise(noisy)[1][0]["verdict"] == "no difference beyond the noise"


def test_unseen_column_wall_time_and_every_method_against_fedavg():
    per_seed = {s: {**_res([0.1 + s / 100], [0.12 + s / 100]), "fedala": [{"eer": 0.05, "fmr100": 0.1}]}
                for s in range(3)}
    unseen = {s: [{"model": "fedavg", "EER": 0.3 + s / 100}, {"model": "affr", "EER": 0.2 + s / 100},
                  {"model": "fedala", "EER": 0.3}] for s in range(3)}
    timings = {s: {"fedavg": 10.0, "affr": 12.0, "fedala": 20.0} for s in range(3)}
    table, paired = summarise(per_seed, unseen=unseen, timings=timings)
    row = {r["method"]: r for r in table}
    assert row["affr"]["unseen-domain EER"].startswith("0.2100") and row["fedala"]["wall time (s)"] == "20"
    assert paired[0]["comparison"] == "affr − fedavg"
    got = {(p["comparison"], p["metric"]): p["verdict"] for p in paired}
    assert got[("affr − fedavg", "unseen-domain EER")] == "AFFR lower (better) beyond the noise"
    assert got[("affr − fedavg", "avg EER")] == "AFFR higher (worse) beyond the noise"
    assert got[("fedala − fedavg", "unseen-domain EER")] == "no difference beyond the noise"


def test_signed_interval_formats_the_mean_difference_and_its_t_interval():
    from fedprint.lab.multi_seed import signed_interval

    assert signed_interval([1.0, 2.0, 3.0]) == "+2.0 [-0.5, +4.5]"  # t(0.975, 2) = 4.30, sd 1, n 3
    assert signed_interval([-0.4], "seed") == "-0.4 (one seed: no interval)"
