"""recognition.gallery_index: the on-disk gallery index (format, refusals, add / remove) and its exact search, which
must rank as identify does."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
import torch

import fedprint.recognition.gallery_index as gi
from fedprint.data.stripes import stripe_records
from fedprint.models.model_file import load_model, model_bytes, with_input_size_bytes, with_minutiae_fusion_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder
from fedprint.recognition.identification import identify

FUSION = {"cosine": [0.5, 10.0], "minutiae": [5.0, 1.0], "threshold": 10.0, "matcher": "nbis"}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """An untrained 32 px model with a minutiae calibration in which the matcher decides; 10 fingers x 3
    impressions (impression 1: probes)."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("gallery")
    plain = root / "model.pt"
    plain.write_bytes(model_bytes(build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
                                  encoder_kwargs={"width": 4}, spec=InputSpec(size=32), threshold=0.6, method="toy"))
    fused = root / "fused.pt"
    fused.write_bytes(with_minutiae_fusion_bytes(plain, FUSION))
    recs = stripe_records(n_fingers=10, n_impressions=3, size=40, seed=3)
    return {"model": load_model(fused), "plain": plain, "root": root,
            "gallery": [r for r in recs if r.impression != 1], "probes": [r for r in recs if r.impression == 1]}


@pytest.fixture
def fake_templates(monkeypatch):
    """Stand-in minutiae templates: a record's identity as bytes; same finger scores 20, else 0."""
    def extract(records, matcher, *, progress=False):
        return [str(r.identity).encode() for r in records]

    def match(probe, gallery, matcher):
        return np.array([20.0 if g == probe else 0.0 for g in gallery])

    monkeypatch.setattr(gi, "extract_templates", extract)
    monkeypatch.setattr(gi, "match_templates", match)


def _random_index(n_ids: int, per: int, dim: int, seed: int) -> gi.GalleryIndex:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n_ids * per, dim)).astype(np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    ids = [f"id{i:04d}" for i in rng.permutation(np.repeat(np.arange(n_ids), per))]
    g = gi._grouped(e, ids, [f"mem:{k}" for k in range(len(ids))], np.full(len(ids), 500.0),
                    np.ones(len(ids)), None)
    return gi.GalleryIndex(**g, model={"fingerprint": "sha256:x"})


@pytest.mark.parametrize("method", ["blocked", "direct"])
@pytest.mark.parametrize("per", [1, 3])
def test_search_equals_brute_force_over_blocks(monkeypatch, per, method):
    index = _random_index(300, per, 8, seed=1)
    monkeypatch.setattr(gi, "BLOCK_ROWS", 64)
    monkeypatch.setattr(gi, "BLOCK_SCORES", 64)  # many blocks, cut at identity boundaries
    monkeypatch.setattr(gi, "PROBE_BLOCK", 7)
    monkeypatch.setattr(gi, "DIRECT_PROBES", 3)  # direct: probe groups of 3 and of 2, then one by one below
    rng = np.random.default_rng(2)
    q = rng.standard_normal((20, 8)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    exclude = [np.array([k]) for k in range(20)]  # probe k never matches row k
    true = rng.integers(0, 300, 20)
    found = gi.search(index, q, 10, exclude=exclude, true_codes=true, method=method)
    if method == "direct":  # one probe a call (the matrix-vector product) gives the same
        one = [gi.search(index, q[j:j + 1], 10, exclude=exclude[j:j + 1], true_codes=true[j:j + 1])
               for j in range(20)]
        np.testing.assert_array_equal(np.concatenate([o.codes for o in one]), found.codes)
        np.testing.assert_array_equal(np.concatenate([o.ranks for o in one]), found.ranks)
    s = q.astype(np.float64) @ index.embeddings.T.astype(np.float64)
    s[np.arange(20), np.arange(20)] = -np.inf
    per = np.full((20, 300), -np.inf)
    np.maximum.at(per.T, index.identity_codes, s.T)
    order = np.argsort(-per, axis=1, kind="stable")
    np.testing.assert_array_equal(found.codes, order[:, :10])
    np.testing.assert_allclose(found.sims, np.take_along_axis(per, order[:, :10], 1), atol=1e-6)
    want_rank = [1 + int(np.flatnonzero(order[j] == true[j])[0]) for j in range(20)]
    np.testing.assert_array_equal(found.ranks, want_rank)


def test_direct_threshold_lowered_until_k_identities_pass(monkeypatch):
    """Many impressions per identity and a sampled threshold aimed at too few rows: the direct path must lower
    it (not return fewer than k identities) and still equal the blocked search; float16 finds the same here."""
    index = _random_index(2000, 6, 16, seed=4)
    monkeypatch.setattr(gi, "DIRECT_AIM", 1)  # about k rows pass first: fewer than k identities
    monkeypatch.setattr(gi, "DIRECT_STRIDE", 4)
    rng = np.random.default_rng(5)
    q = index.embeddings[rng.choice(index.count, 5)] + 0.3 * rng.standard_normal((5, 16)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    true = rng.integers(0, 2000, 5)
    want = gi.search(index, q, 25, true_codes=true, method="blocked")
    thresholds, estimate = [], gi._threshold
    monkeypatch.setattr(gi, "_threshold", lambda s, aim: thresholds.append(aim) or estimate(s, aim))
    for j in range(5):
        got = gi.search(index, q[j:j + 1], 25, true_codes=true[j:j + 1])
        np.testing.assert_array_equal(got.codes[0], want.codes[j])
        np.testing.assert_array_equal(got.ranks[0], want.ranks[j])
        assert (got.codes >= 0).all() and len(np.unique(got.codes)) == 25
        half = gi.search(index, q[j:j + 1], 25, true_codes=true[j:j + 1], precision="float16")
        np.testing.assert_array_equal(half.codes[0], want.codes[j])
        np.testing.assert_allclose(half.sims[0], want.sims[j], atol=1e-6)  # re-scored in float32
        np.testing.assert_array_equal(half.ranks[0], want.ranks[j])
    assert max(thresholds) > 25  # some probe's first threshold let fewer than 25 identities through
    with pytest.raises(ValueError, match="direct path only"):
        gi.search(index, q, 5, method="blocked", precision="float16")


def test_index_search_ranks_as_identify_does(toy):
    model, gallery, probes = toy["model"], toy["gallery"], toy["probes"]
    index = gi.build_index(model, gallery, minutiae="none", min_quality=0, progress=False)
    want = identify(model, gallery, probes, top_k=4, min_quality=0, score="global")
    got = gi.identify_index(model, index, probes, top_k=4, min_quality=0, score="global")
    assert [r.rank for r in got] == [r.rank for r in want]
    for a, b in zip(got, want, strict=True):
        assert [n for n, _ in a.ranked] == [n for n, _ in b.ranked]
        np.testing.assert_allclose([d for _, d in a.ranked], [d for _, d in b.ranked], atol=1e-5)
        assert a.candidate == b.candidate
    # a probe that is a gallery file is never matched to itself
    own = gi.identify_index(model, index, gallery, top_k=3, min_quality=0)
    assert [r.rank for r in own] == [r.rank for r in identify(model, gallery, gallery, top_k=3, min_quality=0)]
    assert all(r.ranked[0][1] > 0 for r in own)


def test_minutiae_rerank_from_stored_templates(toy, fake_templates):
    model, gallery, probes = toy["model"], toy["gallery"], toy["probes"]
    index = gi.build_index(model, gallery, minutiae="nbis", min_quality=0, progress=False)
    assert index.matcher == "nbis" and index.template(0) == index.identities[index.identity_codes[0]].encode()
    plain = gi.identify_index(model, index, probes, top_k=10, min_quality=0, score="global")
    pre = np.array([r.rank for r in plain])
    for k in (1, 3, 10):
        timings: dict = {}
        res = gi.identify_index(model, index, probes, top_k=k, shortlist=k, min_quality=0, score="minutiae",
                                timings=timings, shortlist_by="embedding")
        got = np.array([r.rank for r in res])
        np.testing.assert_array_equal(got == 1, pre <= k)  # the perfect matcher finds every shortlisted mate
        np.testing.assert_array_equal(got[pre > k], pre[pre > k])  # the others keep their embedding rank
        assert timings["minutiae_pairs"] == len(probes) * 2 * k
    path = gi.write_index(index, toy["root"] / "tpl.fpg")
    back = gi.load_index(path)
    assert [back.template(r) for r in range(back.count)] == [index.template(r) for r in range(index.count)]
    bare = gi.build_index(model, gallery, minutiae="none", min_quality=0, progress=False)
    with pytest.raises(ValueError, match="no minutiae templates"):
        gi.identify_index(model, bare, probes, score="minutiae", min_quality=0)
    with pytest.raises(ValueError, match="fused"):
        gi.identify_index(model, bare, probes, score="fused", min_quality=0)


def test_cylinder_shortlist_finds_mates_the_embedding_ranks_low(toy, fake_templates, monkeypatch):
    """--shortlist-by cylinders (the default): the shortlist comes from the Minutia Cylinder-Code of the stored
    templates. Stand-in minutiae: 30 random ones per finger (seeded by its name), so the code ranks every mate
    first; with --pool the code scores only the embedding's top identities, and a mate outside keeps its rank."""
    from fedprint.data import minutiae_backends as mb

    def minutiae(record: bytes) -> np.ndarray:
        rng = np.random.default_rng(list(record))
        return np.c_[rng.uniform(0, 250, (30, 2)), rng.uniform(0, 2 * np.pi, 30)]

    monkeypatch.setattr(mb, "iso_minutiae", minutiae)
    model, gallery, probes = toy["model"], toy["gallery"], toy["probes"]
    index = gi.build_index(model, gallery, minutiae="nbis", min_quality=0, progress=False)
    pre = np.array([r.rank for r in gi.identify_index(model, index, probes, top_k=10, min_quality=0)])
    assert (pre > 1).any()  # the toy embedding misses some mates at rank 1
    timings: dict = {}
    res = gi.identify_index(model, index, probes, top_k=1, shortlist=1, min_quality=0, score="minutiae",
                            timings=timings)
    assert [r.rank for r in res] == [1] * len(probes) and timings["minutiae_pairs"] == 2 * len(probes)
    assert timings["cylinders_s"] > 0 and "cylinders" in index._cache
    pooled = gi.identify_index(model, index, probes, top_k=1, shortlist=1, pool=2, min_quality=0,
                               score="minutiae")
    got = np.array([r.rank for r in pooled])
    np.testing.assert_array_equal(got[pre <= 2], 1)
    np.testing.assert_array_equal(got[pre > 2], pre[pre > 2])  # outside the pool: the embedding's rank
    # an index read from a file keeps its codes beside it; the next process reads them instead of recomputing
    back = gi.load_index(gi.write_index(index, toy["root"] / "cyl.fpg"))
    first = gi.identify_index(model, back, probes, top_k=1, shortlist=1, min_quality=0, score="minutiae")
    cache = gi.cylinder_cache_path(back)
    assert cache.is_file() and [r.rank for r in first] == [1] * len(probes)
    probe_calls = []
    monkeypatch.setattr(mb, "iso_minutiae", lambda rec: probe_calls.append(rec) or minutiae(rec))
    again = gi.identify_index(model, gi.load_index(back.path), probes, top_k=1, shortlist=1, min_quality=0,
                              score="minutiae")
    assert [r.ranked for r in again] == [r.ranked for r in first]
    assert len(probe_calls) == len(probes)  # only the probes' codes were made: the gallery's came from the file
    cache.write_bytes(b"damaged")
    probe_calls.clear()
    gi.identify_index(model, gi.load_index(back.path), probes, top_k=1, shortlist=1, min_quality=0, score="minutiae")
    distinct = len({index.template(r) for r in range(index.count)})  # a stand-in template per finger
    assert len(probe_calls) == len(probes) + distinct  # made again (once per distinct template), and kept again
    assert len(gi._read_cylinder_cache(gi.load_index(back.path))) == distinct
    # gallery remove: the prints left keep their codes (keyed by template content, not row)
    fewer, _ = gi.remove_identities(gi.load_index(back.path), [index.identities[0]])
    gi.keep_cylinder_codes(fewer, gi.write_index(fewer, back.path), make=False)
    fewer = gi.load_index(back.path)
    left = gi._read_cylinder_cache(fewer)  # the removed finger's code is gone from the file too
    assert len(left) == distinct - 1 and gi._template_key(index, 0) not in left
    probe_calls.clear()
    gi.identify_index(model, fewer, probes[:2], top_k=1, shortlist=1, min_quality=0, score="minutiae")
    assert len(probe_calls) == 2
    with pytest.raises(ValueError, match="--shortlist-by"):
        gi.identify_index(model, index, probes, score="minutiae", shortlist_by="dense", min_quality=0)
    with pytest.raises(ValueError, match="--pool"):
        gi.identify_index(model, index, probes, score="minutiae", pool=0, min_quality=0)


def test_round_trip_add_and_remove(toy, tmp_path):
    model, gallery = toy["model"], toy["gallery"]
    first = [r for r in gallery if r.identity < "toy-005"]
    index = gi.build_index(model, first, minutiae="none", min_quality=0, progress=False)
    path = gi.write_index(index, tmp_path / "g.fpg")
    back = gi.load_index(path)
    np.testing.assert_array_equal(back.embeddings, index.embeddings)
    assert back.sources == index.sources and back.identities.tolist() == index.identities.tolist()
    assert back.model["fingerprint"] == gi.model_fingerprint(model) and back.count == len(first)
    grown, added = gi.add_records(back, model, [r for r in gallery if r not in first], min_quality=0,
                                  progress=False)
    whole = gi.build_index(model, gallery, minutiae="none", min_quality=0, progress=False)
    assert added == len(gallery) - len(first) and grown.identities.tolist() == whole.identities.tolist()
    np.testing.assert_allclose(grown.embeddings, whole.embeddings, atol=1e-6)  # same rows, same order
    assert grown.sources == whole.sources
    with pytest.raises(ValueError, match="already in"):
        gi.add_records(grown, model, gallery[:1], min_quality=0, progress=False)
    shrunk, removed = gi.remove_identities(grown, ["toy-001", "toy-007"])
    assert removed == 4 and "toy-001" not in shrunk.identities and shrunk.count == len(gallery) - 4
    assert shrunk.identities[shrunk.identity_codes].tolist() == [
        i for i in grown.identities[grown.identity_codes].tolist() if i not in ("toy-001", "toy-007")]
    with pytest.raises(ValueError, match="no identity 'nobody'"):
        gi.remove_identities(shrunk, ["nobody"])
    gi.write_index(shrunk, path)  # in place, atomically
    assert gi.load_index(path).count == shrunk.count
    assert [p.name for p in tmp_path.iterdir()] == ["g.fpg"]  # no temporary file left


def _rewrite(path, name, data):
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members[name] = data(members[name])
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)


def test_refuses_damage_other_versions_and_other_models(toy, tmp_path):
    model, gallery = toy["model"], toy["gallery"]
    path = gi.write_index(gi.build_index(model, gallery, minutiae="none", min_quality=0, progress=False),
                          tmp_path / "g.fpg")
    good = path.read_bytes()
    _rewrite(path, "embeddings.npy", lambda d: d[:-4] + np.float32(0.5).tobytes())
    with pytest.raises(ValueError, match=r"g\.fpg: checksum mismatch"):
        gi.load_index(path)
    path.write_bytes(good)
    _rewrite(path, "header.json", lambda d: json.dumps({**json.loads(d), "version": 99}).encode())
    with pytest.raises(ValueError, match=r"g\.fpg: gallery index version 99"):
        gi.load_index(path)
    path.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a FedPrint gallery index"):
        gi.load_index(path)
    path.write_bytes(good)
    index = gi.load_index(path)
    resized = tmp_path / "resized.pt"
    resized.write_bytes(with_input_size_bytes(toy["plain"], 48))  # same weights, another input pipeline
    for other in (load_model(resized), _other_weights(tmp_path)):
        with pytest.raises(ValueError, match=r"g\.fpg: built with model .*fused\.pt"):
            gi.identify_index(other, index, toy["probes"], min_quality=0)
    gi.check_model(index, load_model(toy["plain"]))  # the same weights without the fusion: the same embeddings


def _other_weights(tmp_path):
    torch.manual_seed(1)
    p = tmp_path / "other.pt"
    p.write_bytes(model_bytes(build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
                              encoder_kwargs={"width": 4}, spec=InputSpec(size=32), threshold=0.6))
    return load_model(p)


@pytest.mark.skipif(not gi.resolve_minutiae("auto"), reason="nbis-py is not installed (fedprint[classical])")
def test_nbis_templates_survive_the_iso_round_trip():
    from fedprint.data import minutiae_matchers as mm
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile

    recs = finger_records(get_profile("casia"), 0, 3, seed=1)
    direct = mm.templates(recs, "nbis", progress=False)
    stored = gi.extract_templates(recs, "nbis")
    want = np.array([[float(a.compare(b)) for b in direct] for a in direct])
    got = np.array([gi.match_templates(s, stored, "nbis") for s in stored])
    np.testing.assert_array_equal(got, want)
