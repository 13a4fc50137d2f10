"""fedprint.recognition.peers: the free matchers scored beside every model on the same pairs, and fused with it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedprint.cli import main as fedprint_cli
from fedprint.data.minutiae_matchers import available
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.lab.common_test import common_test_rows
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import new_encoder
from fedprint.recognition.matching import evaluate
from fedprint.recognition.peers import PEERS_ENV, fused_name, fused_with_peer, peer_name, resolve_peers
from fedprint.recognition.real_samples import dataset_rows
from fedprint.training.local_data import build_client_data

needs_nbis = pytest.mark.skipif(not available("nbis"), reason="nbis-py (the classical extra) is not installed")


def test_resolve_peers_reads_the_option_then_the_environment(monkeypatch):
    assert resolve_peers("none") == [] and resolve_peers("") == []
    with pytest.raises(ValueError, match=r"--peers: expected 'auto', 'none' or a comma list .* got 'bozorth'"):
        resolve_peers("nbis,bozorth")
    monkeypatch.setenv(PEERS_ENV, "nope")
    with pytest.raises(ValueError, match=r"\$FEDPRINT_PEERS: .* got 'nope'"):
        resolve_peers()
    monkeypatch.setenv(PEERS_ENV, "auto")
    assert resolve_peers() == (["nbis"] if available("nbis") else [])


@needs_nbis
def test_resolve_peers_keeps_order_and_drops_repeats():
    assert resolve_peers("nbis, NBIS") == ["nbis"]


def test_fused_with_peer_is_a_label_free_z_sum_and_nan_on_a_constant_score():
    d = np.array([0.2, 0.4, 1.0, 1.2])
    s = np.array([40.0, 10.0, 30.0, 0.0])
    fused = fused_with_peer(d, s)
    z_d, z_s = (-d - (-d).mean()) / (-d).std(), (s - s.mean()) / s.std()
    np.testing.assert_allclose(fused, -(z_d + z_s))
    assert np.isnan(fused_with_peer(d, np.full(4, 7.0))).all()


@needs_nbis
def test_dataset_rows_score_peer_and_fusions_on_the_models_pairs(fake_matcher, tmp_path):
    records = stripe_records(n_fingers=6, n_impressions=3, size=64)
    path = pretrained_path()  # stores an NBIS fusion: its fused row is the model file's own calibrated one
    rows = dataset_rows({"shipped": path}, records, "toy", "fvc", peers=["nbis"], cache=tmp_path / "c")
    names = [r["model"] for r in rows]
    assert names == ["shipped", fused_name("shipped", "nbis", calibrated=True), peer_name("nbis")]
    assert len({(r["genuine"], r["impostor"]) for r in rows}) == 1  # the same pairs behind every row
    by = {r["model"]: r for r in rows}
    assert by[peer_name("nbis")]["EER"] == 0.0  # the stand-in matcher separates fingers perfectly
    metrics, _, _ = evaluate(load_model(path), records, "fvc", score="minutiae", minutiae_cache=tmp_path / "c")
    assert by[fused_name("shipped", "nbis", True)]["EER"] == pytest.approx(metrics["eer"])
    first = fake_matcher["pairs"]
    dataset_rows({"shipped": path}, records, "toy", "fvc", peers=["nbis"], cache=tmp_path / "c")
    assert fake_matcher["pairs"] == first  # a second report reads the cached scores


@needs_nbis
def test_common_test_rows_add_peer_and_z_fusion_per_institution(fake_matcher, tmp_path):
    clients = [build_client_data(stripe_records(n_fingers=8, n_impressions=3, size=32, domain=n, seed=k), name=n,
                                 spec=InputSpec(size=32, crop="full"), test_fraction=0.3, seed=k, progress=False)
               for k, n in enumerate("ab")]
    rows = common_test_rows({"fedavg": new_encoder("compact", 8, 0, width=4)}, clients, ["nbis"],
                            cache=tmp_path / "c")
    got = {(r["model"], r["test set"]) for r in rows}
    for name in ("fedavg", fused_name("fedavg", "nbis", False), peer_name("nbis")):
        assert {(name, "a"), (name, "b"), (name, "pooled (2 institutions)")} <= got
    assert [r["model"] for r in rows][-1] == peer_name("nbis")  # the peers come last
    peer = [r for r in rows if r["model"] == peer_name("nbis") and r["test set"] == "a"][0]
    assert (peer["genuine"], peer["impostor"]) == (clients[0].test_pairs.n_genuine, clients[0].test_pairs.n_impostor)


@needs_nbis
def test_evaluate_prints_and_stores_the_peers(fake_matcher, tmp_path, capsys):
    data = write_generic(stripe_records(n_fingers=5, n_impressions=3, size=64), tmp_path / "d")
    code = fedprint_cli.main(["evaluate", "--data", str(data), "--score", "global", "--peers", "nbis",
                              "--out", str(tmp_path / "ev")])
    out = capsys.readouterr().out
    assert code == 0 and "beside the peers on the same pairs" in out and peer_name("nbis") in out
    peers = json.loads((tmp_path / "ev" / "metrics.json").read_text())["peers"]
    assert [p["name"] for p in peers] == [peer_name("nbis"), fused_name("fedprint-synthetic", "nbis", False)]
    assert peers[0]["EER"] == 0.0 and all("distances" not in p for p in peers)


def test_a_bad_peers_option_is_one_line(capsys):
    code = fedprint_cli.main(["evaluate", "--data", "nowhere", "--peers", "bozorth"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--peers" in err
