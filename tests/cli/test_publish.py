"""``fedprint publish`` and the ClientApp ``query.publish`` handler: releases; refusals write and charge nothing."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from flwr.app import ConfigRecord, Context, Message, MessageType, Metadata, RecordDict
from scipy import ndimage

from fedprint.cli.main import main
from fedprint.privacy.ledger import Ledger
from fedprint.privacy.publish import pointset
from fedprint.privacy.publish.base import check_epsilon


def dislocation_print(size: int = 160, seed: int = 0) -> np.ndarray:
    """Stripes (period 9 px) with a smooth random phase field: dozens of endings and bifurcations."""
    rng = np.random.default_rng(seed)
    xx = np.mgrid[:size, :size][1].astype(float)
    phase = ndimage.gaussian_filter(rng.normal(size=(size, size)), 12) * 600
    return np.clip(128 + 100 * np.cos(2 * np.pi * xx / 9 + phase), 0, 255).astype(np.uint8)


@pytest.fixture
def files(tmp_path):
    good, blank, junk = tmp_path / "print.png", tmp_path / "blank.png", tmp_path / "junk.png"
    cv2.imwrite(str(good), dislocation_print())
    cv2.imwrite(str(blank), np.full((120, 120), 128, np.uint8))
    junk.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    return tmp_path, good, blank, junk


def _outputs(d: Path) -> set[str]:
    return {p.name for p in d.iterdir() if p.name.startswith("out")}


def test_publish_pointset_writes_points_sidecar_and_ledger(files, capsys):
    d, good, _, _ = files
    ledger = d / "ledger.json"
    args = ["publish", "--mechanism", "pointset", "--protect", "finger", "--epsilon", "2", str(good), "-o",
            str(d / "out.json"), "--ledger", str(ledger), "--budget", "3", "--unit", "finger-1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2-DP" in out and "whole finger (finger-level epsilon 2)" in out and "2, 1 left" in out
    pts = json.loads((d / "out.json").read_text())
    assert pts["columns"] == ["x", "y", "direction"] and len(pts["points"]) > 10
    side = json.loads((d / "out.json.guarantee.json").read_text())
    assert side["guarantee"]["dp"] is True and side["spent_epsilon"] == 2.0 and side["details"]["k"] >= 1
    hist = Ledger.open(ledger).history()
    assert len(hist) == 1 and hist[0]["units"] == ["finger-1"] and "2-DP" in hist[0]["guarantee"]
    assert hist[0]["relation"] == "finger" and hist[0]["stated_epsilon"] == 2.0 and hist[0]["epsilon"] == 2.0
    assert "seed" not in side and str(good) not in json.dumps(side)  # nothing that regenerates noise or names input
    # CSV output, twice the same request without a ledger, at an ε where the noise does not saturate: fresh
    # noise each time, so different releases
    for name in ("out1.csv", "out2.csv"):
        assert main([*args[:6], "200", str(good), "-o", str(d / name)]) == 0
    a, b = (np.loadtxt(d / n, delimiter=",", skiprows=1) for n in ("out1.csv", "out2.csv"))
    assert a.shape == np.array(pts["points"]).shape and not np.allclose(a, b, atol=1e-5)


def test_publish_refuses_a_chosen_seed(files, capsys):
    d, good, _, _ = files
    assert main(["publish", "--mechanism", "lap", "--variant", "sound", "--epsilon", "2", str(good), "-o",
                 str(d / "out.png"), "--seed", "0"]) == 2
    assert "OS entropy" in capsys.readouterr().err and _outputs(d) == set()


def test_same_image_published_twice_differs(files):
    d, good, _, _ = files
    for name in ("out1.png", "out2.png"):
        assert main(["publish", "--mechanism", "lap", "--variant", "sound", "--epsilon", "2", str(good), "-o",
                     str(d / name)]) == 0
    import cv2

    a, b = (cv2.imread(str(d / n), cv2.IMREAD_GRAYSCALE) for n in ("out1.png", "out2.png"))
    assert a.shape == b.shape and np.mean(a != b) > 0.5


@pytest.mark.parametrize("case", ["zero-eps", "negative-eps", "below-minimum", "unknown", "unreadable",
                                  "no-minutiae", "over-budget", "wrong-suffix", "missing-file", "minutia-level",
                                  "pixel-level", "masked", "paper"])
def test_bad_input_writes_and_charges_nothing(files, case, monkeypatch, capsys):
    d, good, blank, junk = files
    ledger = d / "ledger.json"
    Ledger(ledger, 1.0).commit(Ledger(ledger, 1.0).reserve(0.5, "finger-1"))  # an existing ledger
    before = ledger.read_text()
    mech, eps, image, out, protect = "pointset", "0.4", good, d / "out.json", ["--protect", "finger"]
    if case == "zero-eps":
        eps = "0"
    elif case == "negative-eps":
        eps = "-1"
    elif case == "below-minimum":  # a mechanism with a documented minimum ε (0.5) raises before any output
        original = pointset.publish_pointset
        monkeypatch.setattr(pointset, "publish_pointset",
                            lambda im, m, e, rng, v="sound", **o: original(im, m, check_epsilon(e, minimum=0.5),
                                                                           rng, v, **o))
    elif case == "unknown":
        mech, protect = "no-such-mechanism", []
    elif case == "minutia-level":
        protect = []
    elif case == "pixel-level":
        mech, out, protect = "lap", d / "out.png", []
    elif case == "masked":
        mech, out, protect = "klap", d / "out.png", []
    elif case == "paper":
        mech, out, protect = "lap", d / "out.png", ["--variant", "paper"]
    elif case == "unreadable":
        image = junk
    elif case == "no-minutiae":
        image = blank
    elif case == "over-budget":
        eps = "0.6"
    elif case == "wrong-suffix":
        out = d / "out.png"
    elif case == "missing-file":
        image = d / "absent.png"
    code = main(["publish", "--mechanism", mech, *protect, "--epsilon", eps, str(image), "-o", str(out),
                 "--ledger", str(ledger), "--unit", "finger-1"])
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err
    expected = {"zero-eps": "--epsilon: expected a finite number > 0", "negative-eps": "--epsilon: expected a",
                "below-minimum": "cannot be applied to this image", "unknown": "known mechanisms: ",
                "unreadable": "junk.png", "no-minutiae": "cannot be applied to this image",
                "over-budget": "refused", "wrong-suffix": ".json or .csv", "missing-file": "absent.png",
                "minutia-level": "protects one minutia, not the finger",
                "pixel-level": "by group privacy over g = 25600 pixels",
                "masked": "no finger-level guarantee", "paper": "not differentially private"}[case]
    assert expected in err
    if case in ("no-minutiae", "below-minimum"):  # data-dependent refusals describe nothing of the image
        assert "minutiae" not in err.split("cannot be applied")[1] and not any(ch.isdigit() for ch in err)
    assert _outputs(d) == set() and ledger.read_text() == before


# ------------------------------------------------------------------------------------------ query handler
def _experiment(tmp: Path) -> Path:
    root = tmp / "prints"
    for f in range(6):
        (root / f"f{f}").mkdir(parents=True)
        for i in range(2):
            cv2.imwrite(str(root / f"f{f}" / f"{i}.png"), dislocation_print(120, seed=10 * f + i))
    path = tmp / "exp.toml"
    path.write_text(f"""
[run]
name = "pub"
out = "{tmp / 'runs'}"
seed = 3

[[data.sources]]
kind = "dataset"
layout = "generic"
root = "{root}"

[partition]
mode = "iid"
n_clients = 1

[model]
embedding_dim = 8
input_size = 32
""")
    return path


def _query(**config) -> Message:
    meta = Metadata(run_id=1, message_id="q1", src_node_id=0, dst_node_id=7, reply_to_message_id="",
                    group_id="q", created_at=0.0, ttl=60.0, message_type=f"{MessageType.QUERY}.publish")
    return Message(content=RecordDict({"config": ConfigRecord(config)}), metadata=meta)


def test_query_handler_publishes_through_node_ledger(tmp_path):
    from fedprint.client.publish_handler import REFUSED, publish_handler

    exp = _experiment(tmp_path)
    ledger = tmp_path / "node-ledger.json"
    ctx = Context(run_id=1, node_id=7, state=RecordDict(), run_config={},
                  node_config={"partition-id": 0, "num-partitions": 1, "ledger-path": str(ledger),
                               "privacy-budget": 1.0})
    defaults = {"experiment": str(exp)}
    seeded = publish_handler(_query(mechanism="pointset", epsilon=0.6, **{"record-index": 0, "seed": 1}), ctx,
                             defaults=defaults)
    assert seeded.has_error() and "OS entropy" in seeded.error.reason and not ledger.exists()
    reply = publish_handler(_query(mechanism="pointset", protect="finger", epsilon=0.6, **{"record-index": 0}), ctx,
                            defaults=defaults)
    assert not reply.has_error()
    pts = reply.content["release"]["points"].numpy()
    g = reply.content["guarantee"]
    assert pts.ndim == 2 and pts.shape[1] == 3 and g["dp"] and g["spent-epsilon"] == 0.6
    assert g["remaining-epsilon"] == pytest.approx(0.4) and "0.6-DP" in g["statement"]
    assert g["relation"] == "finger" and g["finger-epsilon"] == 0.6 and g["group"] == 1
    unit = g["unit"]
    assert Ledger.open(ledger).history()[0]["units"] == [unit]

    before = ledger.read_text()
    refusals = [dict(mechanism="pointset", protect="finger", epsilon=0.6, **{"record-index": 0}),  # over budget
                dict(mechanism="pointset", epsilon=0.1, **{"record-index": 0}),  # per-minutia: no finger charge
                dict(mechanism="lap", epsilon=0.1, **{"record-index": 0}),  # per-pixel: 14,400 x 0.1 for the finger
                dict(mechanism="pointset", protect="finger", epsilon=0.1, round=7, **{"record-index": 0}),
                dict(mechanism="nope", epsilon=0.1, **{"record-index": 0}),
                dict(mechanism="pointset", epsilon=-1.0, **{"record-index": 0}),
                dict(mechanism="pointset", epsilon=0.1, **{"record-index": 999}),
                dict(mechanism="pointset", epsilon=0.1)]
    reasons = []
    for req in refusals:
        bad = publish_handler(_query(**req), ctx, defaults=defaults)
        assert bad.has_error() and bad.error.code == REFUSED and "refused" in bad.error.reason
        reasons.append(bad.error.reason)
    assert "protects one minutia" in reasons[1] and "protects one pixel" in reasons[2]
    assert "own clock" in reasons[3]
    assert ledger.read_text() == before
    # a different finger still has its own budget (the unit is the finger identity)
    key = next(k for k in (f"f{i}/0" for i in range(6)) if not k.startswith(unit + "/"))
    other = publish_handler(_query(mechanism="pointset", protect="finger", epsilon=0.6, **{"record-key": key}),
                            ctx, defaults=defaults)
    assert not other.has_error() and other.content["guarantee"]["unit"] != unit


def test_query_twice_with_the_same_request_gives_fresh_noise(tmp_path):
    from fedprint.client.publish_handler import publish_handler

    exp = _experiment(tmp_path)
    ctx = Context(run_id=1, node_id=7, state=RecordDict(), run_config={},
                  node_config={"partition-id": 0, "num-partitions": 1, "ledger-path": str(tmp_path / "l.json"),
                               "privacy-budget": 500.0})
    # a large ε, so the noise does not saturate the isotonic fit and two releases can be told apart
    req = dict(mechanism="pointset", protect="finger", epsilon=200.0, **{"record-index": 0})
    a, b = (publish_handler(_query(**req), ctx, defaults={"experiment": str(exp)}) for _ in range(2))
    assert not a.has_error() and not b.has_error()
    ia, ib = a.content["release"]["points"].numpy(), b.content["release"]["points"].numpy()
    assert ia.shape == ib.shape and not np.allclose(ia, ib)
    assert "seed" not in dict(a.content["guarantee"])
