"""studies/study_tta.py: scoring a chosen pair set (a run's held-out pairs) equals scoring it among every pair."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.models.model_file import load_model, pretrained_path
from fedprint.recognition.matching import protocol_pairs
from studies import study_tta


def test_held_out_pairs_score_as_they_do_among_all_pairs(toy_records):
    model = load_model(pretrained_path())
    every = protocol_pairs(toy_records, "all")
    whole = study_tta.scored(model, toy_records, [-7.5, 0.0, 7.5])
    pick = np.arange(0, len(every), 3)  # a subset that leaves some records out
    sub = every.take(pick)
    part = study_tta.scored(model, toy_records, [-7.5, 0.0, 7.5], sub)
    for how in ("plain", "mean", "min"):
        np.testing.assert_allclose(part[how][0], whole[how][0][pick], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(part[how][1], every.label[pick])


def test_run_without_its_toml_is_named(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "model_centralized.pt").write_bytes(b"")
    with pytest.raises(SystemExit):
        study_tta.main(["--run", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    with pytest.raises(FileNotFoundError, match="r.toml"):
        study_tta.held_out(str(tmp_path / "r"))
