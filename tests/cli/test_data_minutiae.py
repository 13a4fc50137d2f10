"""`fedprint data minutiae`: a print's minutiae written as an ISO/IEC 19794-2 record (or CSV) and read back."""

from __future__ import annotations

import csv

import cv2
import numpy as np
import pytest

from fedprint.cli import main as fedprint_cli
from fedprint.data.iso19794 import read
from fedprint.data.minutiae_backends import extract
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile


@pytest.fixture(scope="module")
def print_png(tmp_path_factory):
    rec = finger_records(get_profile("casia"), 0, 1, seed=0)[0]
    path = tmp_path_factory.mktemp("p") / "finger.png"
    cv2.imwrite(str(path), rec.image)
    return path, rec.image


def run(capsys, *argv):
    code = fedprint_cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_image_to_iso_record_and_back(print_png, tmp_path, capsys):
    path, image = print_png
    fmr = tmp_path / "finger.fmr"
    code, out, _ = run(capsys, "data", "minutiae", path, "--minutiae-backend", "crossing", "--dpi", 500, "-o", fmr)
    assert code == 0 and "written:" in out
    want = extract(image, "crossing", dpi=500)
    table, info = read(fmr.read_bytes())
    assert len(table) == len(want) > 0 and (info["width"], info["height"]) == (image.shape[1], image.shape[0])
    np.testing.assert_allclose(table[:, :2], np.floor(want[:, :2]), atol=1)  # stored to 1 px
    code, out, _ = run(capsys, "data", "minutiae", fmr, "-o", tmp_path / "back.csv")
    rows = list(csv.DictReader(open(tmp_path / "back.csv")))
    assert code == 0 and len(rows) == len(want) and f"{len(want)} minutiae" in out
    code, out, _ = run(capsys, "data", "minutiae", fmr, "--show", 2)
    assert code == 0 and out.count("direction") == 2 and "more" in out


def test_bad_inputs_are_one_line(print_png, tmp_path, capsys):
    path, _ = print_png
    junk = tmp_path / "junk.fmr"
    junk.write_bytes(b"not a record at all, really")
    code, _, err = run(capsys, "data", "minutiae", junk)
    assert code == 2 and err.count("\n") == 1 and "junk.fmr: not an ISO/IEC 19794-2" in err
    code, _, err = run(capsys, "data", "minutiae", path, "--minutiae-backend", "crossing", "-o", tmp_path / "x.txt")
    assert code == 2 and "-o/--output: expected a .csv or an ISO/IEC 19794-2 file" in err
    (tmp_path / "taken.fmr").write_bytes(b"")
    code, _, err = run(capsys, "data", "minutiae", path, "-o", tmp_path / "taken.fmr")
    assert code == 2 and "exists (pass --force" in err
    code, _, err = run(capsys, "data", "minutiae", tmp_path / "absent.png")
    assert code == 2 and "INPUT: no such file" in err
