"""recognition.identification: 1:N search by the embedding, and the prefilter + minutiae re-rank, with the
stand-in minutiae matcher of tests/conftest.py (it separates fingers perfectly)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprint.data.stripes import stripe_records
from fedprint.models.model_file import load_model, model_bytes, with_minutiae_fusion_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder
from fedprint.recognition.identification import _per_identity, cmc, identify
from fedprint.recognition.matching import embed_images


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """An untrained 32 px model with a minutiae calibration in which the matcher decides, a gallery of 12
    fingers (first impressions) and their second impressions as probes."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("identify")
    plain = root / "model.pt"
    plain.write_bytes(model_bytes(build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
                                  encoder_kwargs={"width": 4}, spec=InputSpec(size=32), threshold=0.6, method="toy"))
    path = root / "fused.pt"
    path.write_bytes(with_minutiae_fusion_bytes(plain, {"cosine": [0.5, 10.0], "minutiae": [5.0, 1.0],
                                                        "threshold": 10.0, "matcher": "nbis"}))
    recs = stripe_records(n_fingers=12, n_impressions=3, size=40, seed=5)
    gallery = [r for r in recs if r.impression != 1]
    probes = [r for r in recs if r.impression == 1]
    return load_model(path), gallery, probes


def test_per_identity_takes_each_identitys_nearest_impression():
    dist = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, np.inf]])
    got = _per_identity(dist, np.array(["b", "a", "b"]), np.array(["a", "b"]))
    np.testing.assert_array_equal(got, [[1.0, 2.0], [4.0, 0.5]])


def test_rerank_finds_every_mate_the_shortlist_holds_and_no_other(fake_matcher, searched):
    model, gallery, probes = searched
    ge = embed_images(model, [r.image for r in gallery], [r.dpi for r in gallery])
    pe = embed_images(model, [r.image for r in probes], [r.dpi for r in probes])
    pre = _per_identity(np.sqrt(np.clip(2 - 2 * pe @ ge.T, 0, None)), np.array([r.identity for r in gallery]),
                        np.unique([r.identity for r in gallery]))
    names = np.unique([r.identity for r in gallery])
    prefilter_rank = np.array([1 + int(np.sum(row < row[names == p.identity][0]))
                               for row, p in zip(pre, probes, strict=True)])
    for k in (1, 3, 12):
        timings: dict = {}
        res = identify(model, gallery, probes, score="minutiae", shortlist=k, top_k=k, min_quality=0,
                       timings=timings)
        got = np.array([r.rank for r in res])
        # the matcher is perfect: a mate in the shortlist comes first, one outside keeps its prefilter rank
        np.testing.assert_array_equal(got == 1, prefilter_rank <= k)
        np.testing.assert_array_equal(got[prefilter_rank > k], prefilter_rank[prefilter_rank > k])
        assert timings["minutiae_pairs"] == len(probes) * 2 * k  # two gallery impressions per identity
        assert all(len(r.ranked) == k for r in res) and all(r.candidate == r.ranked[0][0] for r in res if
                                                             r.rank == 1)
    assert cmc(res, 1)[0] == 1.0  # exhaustive: the perfect matcher's rank-1
    exhaustive = identify(model, gallery, probes, score="minutiae", shortlist=None, min_quality=0)
    assert [r.rank for r in exhaustive] == [1] * len(probes)


def test_rerank_needs_a_minutiae_calibration_and_checks_its_options(fake_matcher, searched, tmp_path):
    model, gallery, probes = searched
    with pytest.raises(ValueError, match="--shortlist"):
        identify(model, gallery, probes, score="minutiae", shortlist=0, min_quality=0)
    del model.meta["minutiae_fusion"]
    try:
        with pytest.raises(ValueError, match="calibrate --score minutiae"):
            identify(model, gallery, probes, score="minutiae", min_quality=0)
    finally:
        model.meta["minutiae_fusion"] = {"cosine": [0.5, 10.0], "minutiae": [5.0, 1.0], "threshold": 10.0,
                                         "matcher": "nbis"}


def test_a_probe_is_never_matched_to_its_own_file(searched):
    model, gallery, _ = searched
    res = identify(model, gallery, gallery, min_quality=0, top_k=30)
    assert all(r.ranked[0][1] > 0 for r in res)  # its own image (distance 0) is left out
    assert all(r.rank is not None for r in res)  # every finger has another gallery impression


def test_auto_score_is_the_minutiae_fusion_where_the_model_and_the_matcher_allow_it(searched, monkeypatch):
    import fedprint.data.minutiae_matchers as mm
    from fedprint.recognition.matching import resolve_score

    model = searched[0]
    monkeypatch.setattr(mm, "available", lambda name: True)
    assert resolve_score(model, "auto")[0] == "minutiae"
    assert resolve_score(model, "global") == ("global", "asked for")
    monkeypatch.setattr(mm, "available", lambda name: False)
    score, why = resolve_score(model, "auto")
    assert score == "global" and "not installed" in why and "fedprint[classical]" in why
    cal = model.meta.pop("minutiae_fusion")
    try:
        score, why = resolve_score(model, "auto")
        assert score == "global" and "no minutiae-fusion calibration" in why
    finally:
        model.meta["minutiae_fusion"] = cal
    with pytest.raises(ValueError, match="--score"):
        resolve_score(model, "best")


def test_identify_says_which_probes_have_no_mate_to_find(tmp_path, capsys):
    import json

    import fedprint.cli.main as fedprint_cli
    from fedprint.data.stripes import write_generic

    recs = stripe_records(n_fingers=3, n_impressions=2, size=40, seed=2)
    data = write_generic([*recs[:5]], tmp_path / "g")  # the third finger keeps one impression
    assert fedprint_cli.main(["identify", "--gallery", str(data), "--probe", str(data), "--score", "global",
                              "--min-quality", "0", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert len(found["probes_without_mate"]) == 1 and found["probes"] == 5
