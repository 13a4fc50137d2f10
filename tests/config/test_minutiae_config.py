"""``[minutiae] backend``: one place, validated, copied to the trainer, recorded in model files and provenance."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace

import pytest

from fedprint.config import ExperimentConfig, MinutiaeSection, parse_config
from fedprint.config.minutiae import with_minutiae_backend
from fedprint.config.provenance import provenance
from fedprint.data.minutiae_backends import default_backend


def _uninstalled(monkeypatch, module: str) -> None:
    """Make ``module`` look not installed to the backend checks (they ask importlib.util.find_spec)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))


def test_default_is_auto_and_the_trainer_gets_a_copy():
    cfg = ExperimentConfig()
    assert cfg.minutiae.backend == "auto" and cfg.train.minutiae_backend == "auto"
    cfg = parse_config({"minutiae": {"backend": "crossing"}})
    assert cfg.train.minutiae_backend == "crossing"
    # replacing the section (what --minutiae-backend does) moves the copy with it
    assert replace(cfg, minutiae=MinutiaeSection("leader")).train.minutiae_backend == "leader"


def test_unknown_backend_is_one_line_naming_the_file_and_key():
    with pytest.raises(ValueError) as e:
        parse_config({"minutiae": {"backend": "mindtct"}}, source="exp.toml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("exp.toml:") and "minutiae.backend" in msg and "'mindtct'" in msg
    with pytest.raises(ValueError, match="minutiae: unknown key"):
        parse_config({"minutiae": {"extractor": "nbis"}}, source="exp.toml")


def test_a_train_copy_that_disagrees_is_refused_and_config_json_round_trips():
    with pytest.raises(ValueError, match=r"train.minutiae_backend: set by \[minutiae\] backend \('crossing'\)"):
        parse_config({"minutiae": {"backend": "crossing"}, "train": {"minutiae_backend": "nbis"}}, source="x")
    cfg = parse_config({"minutiae": {"backend": "crossing"}, "fpdfsn": {"enabled": True}})
    table = json.loads(json.dumps(cfg.to_dict()))  # what config.json holds (both keys)
    table = {k: {kk: vv for kk, vv in v.items() if vv is not None} if isinstance(v, dict) else v
             for k, v in table.items()}
    table["data"]["sources"] = [{k: v for k, v in s.items() if v is not None} for s in table["data"]["sources"]]
    assert parse_config(table) == cfg


def test_an_uninstalled_backend_is_refused_where_used_with_one_line(monkeypatch):
    _uninstalled(monkeypatch, "nbis")
    cfg = parse_config({"minutiae": {"backend": "nbis"}})  # reading the file does not need the package
    with pytest.raises(ValueError) as e:
        cfg.minutiae.resolved()
    assert "\n" not in str(e.value) and str(e.value).startswith("[minutiae] backend:") and "nbis" in str(e.value)
    with pytest.raises(ValueError, match="^--minutiae-backend:.*not installed"):
        with_minutiae_backend(ExperimentConfig(), "nbis")
    with pytest.raises(ValueError, match="^--minutiae-backend: expected one of auto"):
        with_minutiae_backend(ExperimentConfig(), "bogus")
    # a config that uses no minutiae is not refused for a backend it never runs
    assert with_minutiae_backend(cfg, None) is cfg
    with pytest.raises(ValueError, match=r"^\[minutiae\] backend:"):
        with_minutiae_backend(replace(cfg, fpdfsn=replace(cfg.fpdfsn, enabled=True)), None)
    # auto falls back to the crossing number without nbis-py
    assert MinutiaeSection().resolved() == "crossing"


def test_model_file_data_records_the_backend_where_minutiae_shaped_training():
    assert "minutiae" not in ExperimentConfig().data_summary()
    cfg = with_minutiae_backend(parse_config({"fpdfsn": {"enabled": True}}), "crossing")
    assert cfg.data_summary()["minutiae"] == {"backend": "crossing", "configured": "crossing", "used_by": ["fpdfsn"]}
    auto = parse_config({"train": {"minutiae_weight": 1.0}})
    assert auto.data_summary()["minutiae"] == {"backend": default_backend(), "configured": "auto",
                                               "used_by": ["minutiae_map_targets"]}


def test_provenance_says_what_auto_means_here(monkeypatch):
    assert provenance(["x"])["minutiae_auto"] == default_backend()
    _uninstalled(monkeypatch, "nbis")
    assert provenance(["x"])["minutiae_auto"] == "crossing"
