"""Issue 24 items 12 and 13: outputs are checked before anything is charged, nothing is overwritten without
--force (the input never), and the ledger identifies the input by a content hash, not its path."""

from __future__ import annotations

import hashlib
import json

import cv2
import numpy as np
import pytest
from scipy import ndimage

from fedprint.cli.main import main
from fedprint.privacy.ledger import Ledger
from fedprint.privacy.publish.release import content_digest


def _print(size=160, seed=0):
    rng = np.random.default_rng(seed)
    xx = np.mgrid[:size, :size][1].astype(float)
    phase = ndimage.gaussian_filter(rng.normal(size=(size, size)), 12) * 600
    return np.clip(128 + 100 * np.cos(2 * np.pi * xx / 9 + phase), 0, 255).astype(np.uint8)


@pytest.fixture
def setup(tmp_path):
    # a SOCOFing-style name: subject, sex, hand and finger in the file name
    image = tmp_path / "101__M_Left_thumb_finger.png"
    cv2.imwrite(str(image), _print())
    ledger = tmp_path / "ledger.json"
    led = Ledger(ledger, 10.0)
    led.commit(led.reserve(1.0, "finger-1"))
    return tmp_path, image, ledger


def _publish(image, out, ledger, *extra):
    return main(["publish", "--mechanism", "pointset", "--protect", "finger", "--epsilon", "1", str(image), "-o",
                 str(out), "--ledger", str(ledger), "--unit", "finger-1", *extra])


@pytest.mark.parametrize("case", ["existing-directory", "the-input", "the-input-forced", "existing-file",
                                  "existing-sidecar", "symlink-to-input"])
def test_unwritable_or_occupied_outputs_are_refused_before_any_charge(setup, case, capsys):
    d, image, ledger = setup
    before_ledger, before_image = ledger.read_text(), image.read_bytes()
    extra = []
    if case == "existing-directory":
        out = d / "dir.json"
        out.mkdir()
        extra = ["--force"]  # not even --force writes over a directory
    elif case in ("the-input", "the-input-forced"):
        out = d / "input.json"  # a point set written over the input (renamed so the suffix check passes)
        image = image.rename(out)
        extra = ["--force"] if case == "the-input-forced" else []
    elif case == "symlink-to-input":
        out = d / "link.json"
        out.symlink_to(image)
        extra = ["--force"]
    elif case == "existing-file":
        out = d / "old.json"
        out.write_text("precious")
    else:
        out = d / "new.json"
        (d / "new.json.guarantee.json").write_text("precious")
    assert _publish(image, out, ledger, *extra) == 2
    err = capsys.readouterr().err
    expected = {"existing-directory": "is a directory", "the-input": "is the input image",
                "the-input-forced": "is the input image", "symlink-to-input": "is the input image",
                "existing-file": "already exists (pass --force", "existing-sidecar": "already exists (pass --force"}
    assert expected[case] in err and len(err.strip().splitlines()) == 1
    assert ledger.read_text() == before_ledger  # nothing charged
    assert image.read_bytes() == before_image
    if case == "existing-file":
        assert out.read_text() == "precious"
    if case == "existing-sidecar":
        assert not out.exists() and (d / "new.json.guarantee.json").read_text() == "precious"


def test_force_overwrites_an_existing_output_and_charges_once(setup):
    d, image, ledger = setup
    out = d / "old.json"
    out.write_text("stale")
    assert _publish(image, out, ledger, "--force") == 0
    assert json.loads(out.read_text())["columns"] == ["x", "y", "direction"]
    assert Ledger.open(ledger).spent("finger-1")[0] == pytest.approx(2.0)


def test_ledger_stores_a_content_hash_not_the_input_path(setup):
    d, image, ledger = setup
    assert _publish(image, d / "out.json", ledger) == 0
    text = ledger.read_text()
    assert image.name not in text and "101__M" not in text and str(d) not in text
    entry = Ledger.open(ledger).history()[-1]
    assert "image_id" not in entry
    pixels = cv2.imread(str(image), cv2.IMREAD_GRAYSCALE)
    assert entry["content_sha256"] == content_digest(pixels)
    expected = hashlib.sha256(b"160x160:" + np.ascontiguousarray(pixels).tobytes()).hexdigest()
    assert entry["content_sha256"] == expected  # the documented recipe, so a holder can recompute it
    side = (d / "out.json.guarantee.json").read_text()
    assert image.name not in side and entry["content_sha256"] not in side  # the sidecar names neither
