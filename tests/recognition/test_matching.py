"""recognition.matching and `fedprint verify / evaluate / identify` on toy stripe prints with a tiny model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import fedprint.cli.main as fedprint_cli
from fedprint.config import TrainConfig
from fedprint.data.pairs import make_pairs
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.model_file import VerifierModel, load_model, model_bytes
from fedprint.models.preprocess import InputSpec, to_tensor_batch
from fedprint.models.siamese import build_encoder
from fedprint.recognition.identification import cmc, identify
from fedprint.recognition.matching import evaluate, protocol_pairs
from fedprint.training.trainer import train_siamese

SPEC = InputSpec(size=32)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A generic-layout folder of 8 fingers x 4 impressions and a model trained briefly on other fingers."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("recog")
    train = stripe_records(n_fingers=12, n_impressions=4, size=40, seed=1)
    net = build_encoder("compact", 16, width=8)
    x = to_tensor_batch([r.image for r in train], SPEC)
    train_siamese(net, x, make_pairs(train, np.arange(len(train)), seed=0),
                  TrainConfig(epochs=40, p=6, k=4, augment=False, seed=0), progress=False)
    model = root / "model.pt"
    model.write_bytes(model_bytes(net, encoder_name="compact", embedding_dim=16, encoder_kwargs={"width": 8},
                                  spec=SPEC, threshold=0.6, method="toy"))
    data = write_generic(stripe_records(n_fingers=8, n_impressions=4, size=40, seed=7), root / "data")
    return model, data


def test_fvc_protocol_pairs():
    recs = stripe_records(n_fingers=5, n_impressions=3, size=16)
    p = protocol_pairs(recs, "fvc")
    assert p.n_genuine == 5 * 3 and p.n_impostor == 5 * 4 // 2  # all genuine; first impressions only
    q = protocol_pairs(recs, "all")
    assert len(q) == 15 * 14 // 2
    with pytest.raises(ValueError, match="protocol"):
        protocol_pairs(recs, "nope")


def test_evaluate_and_identify_work_on_held_out_fingers(toy):
    model_path, data = toy
    from fedprint.data.datasets import load_dataset

    m = load_model(model_path)
    recs = load_dataset("generic", data, dpi=None)
    metrics, d, pairs = evaluate(m, recs, "all")
    assert metrics["eer"] < 0.3 and metrics["fnmr_at_fmr_1%"] is not None  # 448 impostor pairs >= 100
    assert metrics["fnmr_at_fmr_0.1%"] is None  # < 1000 impostor pairs: not resolvable, not reported
    res = identify(m, recs, recs, top_k=3)
    assert cmc(res, 3)[0] > 0.5  # chance would be 1/8; a probe never matches itself


def test_verify_exit_codes(toy, tmp_path, capsys):
    model_path, data = toy
    a, b = sorted((data / "toy-000").glob("*.png"))[:2]
    other = sorted((data / "toy-003").glob("*.png"))[0]
    assert fedprint_cli.main(["verify", str(a), str(a), "--model", str(model_path)]) == 0
    assert "MATCH" in capsys.readouterr().out
    assert fedprint_cli.main(["verify", str(a), str(other), "--model", str(model_path), "--threshold", "1e-6"]) == 1
    assert fedprint_cli.main(["verify", str(a), str(tmp_path / "missing.png"), "--model", str(model_path)]) == 2
    assert "missing.png" in capsys.readouterr().err


def test_evaluate_and_identify_commands_write_their_outputs(toy, tmp_path, capsys):
    model_path, data = toy
    out = tmp_path / "ev"
    assert fedprint_cli.main(["evaluate", "--model", str(model_path), "--data", str(data), "--protocol", "all",
                              "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0 <= metrics["eer"] < 0.3 and (out / "roc_det.png").stat().st_size > 0
    assert len((out / "scores.csv").read_text().splitlines()) == 1 + metrics["n_genuine"] + metrics["n_impostor"]
    assert fedprint_cli.main(["identify", "--model", str(model_path), "--gallery", str(data), "--probe", str(data),
                              "--top-k", "3", "--out", str(tmp_path / "id")]) == 0
    assert json.loads((tmp_path / "id" / "identify.json").read_text())["rank1"] > 0.5
    assert fedprint_cli.main(["evaluate", "--model", str(tmp_path / "nope.pt"), "--data", str(data)]) == 2


def test_model_without_threshold_needs_one():
    from fedprint.recognition.matching import verify

    m = VerifierModel(build_encoder("compact", 8, width=4).eval(), SPEC, None)
    img = np.zeros((32, 32), np.uint8)
    with pytest.raises(ValueError, match="--threshold"):
        verify(m, img, img, dpi_a=None, dpi_b=None)


def test_fused_score_needs_the_model_files_calibration_and_uses_it(toy, tmp_path):
    from fedprint.data.datasets import load_dataset
    from fedprint.models.dense_match import cell_descriptors, dense_similarity, feature_grid
    from fedprint.recognition.matching import fused_distances

    model_path, data = toy
    recs = load_dataset("generic", data, dpi=None)
    plain = load_model(model_path)
    with pytest.raises(ValueError, match="no score-fusion calibration"):
        evaluate(plain, recs, "all", score="fused")
    cal = {"radius": 1, "min_overlap": 1, "global_mean": -0.5, "global_std": 0.25, "dense_mean": 0.2,
           "dense_std": 0.1, "threshold": 0.0, "pairs": 10}
    fused_path = tmp_path / "fused.pt"
    fused_path.write_bytes(model_bytes(plain.encoder, encoder_name="compact", embedding_dim=16,
                                       encoder_kwargs={"width": 8}, spec=SPEC, threshold=0.6, method="toy",
                                       score_fusion=cal))
    m = load_model(fused_path)
    metrics, d, pairs = evaluate(m, recs, "all", score="fused")
    assert metrics["score"] == "fused" and metrics["threshold"] == 0.0 and metrics["eer"] < 0.5
    # the "distance" is −((−embedding distance − mean) / std + (dense − mean) / std) with the stored weights
    x = to_tensor_batch([r.image for r in recs], SPEC)
    with torch.no_grad():
        e = m.encoder(x)
    desc, skin = cell_descriptors(m.encoder, x)
    k = int(np.flatnonzero(pairs.label == 1)[0])
    a, b = pairs.a[k:k + 1], pairs.b[k:k + 1]
    g = -float((e[a] - e[b]).norm())
    dense = float(dense_similarity(desc, skin, a, b, grid=feature_grid(m.encoder, x), radius=1, min_overlap=1)[0])
    assert d[k] == pytest.approx(-((g + 0.5) / 0.25 + (dense - 0.2) / 0.1), rel=1e-4)
    assert fused_distances(m, recs, pairs)[k] == pytest.approx(d[k])
    with pytest.raises(ValueError, match="score"):
        evaluate(m, recs, "all", score="dense")


def test_calibrate_and_evaluate_with_the_fused_score(toy, tmp_path, capsys):
    model_path, data = toy
    # 32 px inputs leave a 2 x 2 feature map: too small to overlap, said in one line
    assert fedprint_cli.main(["calibrate", "--model", str(model_path), "--data", str(data), "--score", "fused",
                              "--eer", "-o", str(tmp_path / "no.pt")]) == 2
    assert "fewer than" in capsys.readouterr().err and not (tmp_path / "no.pt").exists()
    assert fedprint_cli.main(["evaluate", "--model", str(model_path), "--data", str(data), "--score", "fused",
                              "--out", str(tmp_path / "ev0")]) == 2
    assert "no score-fusion calibration" in capsys.readouterr().err
    # a 64 px model (untrained: the plumbing is under test, not the accuracy)
    torch.manual_seed(0)
    spec = InputSpec(size=64)
    model64 = tmp_path / "m64.pt"
    model64.write_bytes(model_bytes(build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
                                    encoder_kwargs={"width": 4}, spec=spec, threshold=0.6, method="toy"))
    data64 = write_generic(stripe_records(n_fingers=6, n_impressions=4, size=64, seed=7), tmp_path / "d64")
    out = tmp_path / "fused.pt"
    assert fedprint_cli.main(["calibrate", "--model", str(model64), "--data", str(data64), "--score", "fused",
                              "--eer", "-o", str(out)]) == 0
    assert "fused score" in capsys.readouterr().out
    m = load_model(out)
    assert m.meta["score_fusion"]["pairs"] == 6 * 6 + 15 * 16 and m.threshold == 0.6  # embedding threshold kept
    assert fedprint_cli.main(["evaluate", "--model", str(out), "--data", str(data64), "--protocol", "all",
                              "--score", "fused", "--out", str(tmp_path / "ev")]) == 0
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert metrics["score"] == "fused" and metrics["threshold"] == -m.meta["score_fusion"]["threshold"]
    # verify and identify with the fused score agree with evaluate's fused distances on the same pairs
    from fedprint.data.datasets import load_dataset
    from fedprint.recognition.matching import fused_distances, verify

    recs = load_dataset("generic", data64, dpi=None)
    ref = fused_distances(m, recs, protocol_pairs(recs, "all"))
    res = verify(m, recs[0].image, recs[1].image, dpi_a=None, dpi_b=None, score="fused")
    assert res["distance"] == pytest.approx(ref[0], rel=1e-5) and res["score"] == pytest.approx(-ref[0], rel=1e-5)
    assert res["threshold"] == -m.meta["score_fusion"]["threshold"]
    assert res["match"] == (res["distance"] <= res["threshold"])
    found = identify(m, recs[2:], recs[:1], top_k=24, score="fused")[0]
    pair_k = {j: k for k, j in enumerate(range(1, len(recs)))}  # "all" pairs of record 0: (0, 1), (0, 2), ...
    best_ref = min(ref[pair_k[j]] for j in range(2, len(recs)) if recs[j].identity == recs[0].identity)
    own = dict(found.ranked)[recs[0].identity]
    assert own == pytest.approx(best_ref, rel=1e-5)
    a, b = (str(r.source) for r in recs[:2])
    capsys.readouterr()
    code = fedprint_cli.main(["verify", a, b, "--model", str(out), "--score", "fused", "--json"])
    got = json.loads(capsys.readouterr().out)
    assert got["score_kind"] == "fused" and got["distance"] == pytest.approx(ref[0], rel=1e-5)
    assert code == (0 if got["match"] else 1) and "fused" in got["threshold_source"]
    assert fedprint_cli.main(["identify", "--model", str(out), "--gallery", str(data64), "--probe", a,
                              "--score", "fused", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == "fused"
    assert fedprint_cli.main(["verify", a, b, "--model", str(model64), "--score", "fused"]) == 2
    assert "no score-fusion calibration" in capsys.readouterr().err


def test_cli_score_choices_are_the_matchers():
    from fedprint.cli import verify as cli
    from fedprint.recognition import identification, matching

    assert cli.SCORES == matching.SCORES and cli.SHORTLIST == identification.SHORTLIST
