"""studies/study_recipe.py: the TOML of a variant (FCJ copy, width), where a run trained, the split table."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from studies import study_recipe as sr


@pytest.fixture(autouse=True)
def _fcj_default():
    saved = dict(sr.FCJ)
    yield
    sr.FCJ.update(saved)


def test_variant_toml_reads_fcj_from_real_samples_at_the_loader_resolution(tmp_path):
    cfg = tomllib.loads(sr.variant_toml("fcj_rr192_w32_e120", tmp_path / "real", tmp_path / "runs", seed=2))
    (src,) = cfg["data"]["sources"]
    assert src["root"] == str(tmp_path / "real" / "fcj2020_dev") and "dpi" not in src
    assert cfg["model"]["width"] == 32 and cfg["run"]["seed"] == 2
    assert cfg["model"]["init"] == str(tmp_path / "runs" / "pretrain_ridge_w32" / "model_centralized.pt")


def test_variant_toml_with_a_resampled_fcj_copy(tmp_path):
    sr.FCJ.update(root=tmp_path / "fcj250", dpi=250.0)
    cfg = tomllib.loads(sr.variant_toml("fcj_rr192_e120", tmp_path / "real", tmp_path / "runs"))
    (src,) = cfg["data"]["sources"]
    assert src["root"] == str(tmp_path / "fcj250") and src["dpi"] == 250.0
    assert cfg["model"]["width"] == 16


def test_a_synthetic_pretraining_takes_its_training_seed_and_keeps_the_generator_seed(tmp_path):
    one, two = (tomllib.loads(sr.variant_toml(n, tmp_path / "real", tmp_path / "runs", seed=3))
                for n in ("pretrain_window_gem_rot35", "pretrain_window_gem_rot35_s1001"))
    assert one["run"]["seed"] == 1000 and two["run"]["seed"] == 1001  # no split: the split seed is ignored
    assert all(s["seed"] == 1000 for c in (one, two) for s in c["data"]["sources"])
    assert one["train"] == two["train"] and one["model"] == two["model"]


def test_every_variant_toml_is_a_valid_experiment(tmp_path):
    """Booleans (``align = true``) and every other value are written as TOML the config parser accepts."""
    from fedprint.config.experiment import parse_config

    for name in sr.VARIANTS:
        cfg = parse_config(tomllib.loads(sr.variant_toml(name, tmp_path / "real", tmp_path / "runs")), source=name)
        assert cfg.run.name == name
    assert parse_config(tomllib.loads(sr.variant_toml("fcj_rr128_align_e40", tmp_path, tmp_path))).model.align


def _run(runs: Path, folder: str, eer: float, fnmr: float, wall: dict | None) -> None:
    (runs / folder).mkdir(parents=True)
    (runs / folder / "model_centralized.pt").write_bytes(b"")
    (runs / folder / "metrics.json").write_text(json.dumps({"per_client": [{"eer": eer, "fmr100": fnmr}]}))
    if wall is not None:
        (runs / f"{folder}.wall.json").write_text(json.dumps(wall))


def test_split_table_pairs_with_the_base_and_says_where_runs_trained(tmp_path):
    runs = tmp_path / "runs"
    for s, (b, v) in enumerate([(0.08, 0.06), (0.06, 0.05), (0.07, 0.05)]):
        _run(runs, sr.folder_name(sr.FULL_BASE, s), b, 0.3, {"seconds": 1500.0})
        _run(runs, sr.folder_name("fcj_rr192_w32_e120", s), v, 0.2,
             {"seconds": 90.0, "device": "NVIDIA H100 80GB HBM3"})
    text = sr.render_splits(sr.screen_rows(runs, names=(sr.FULL_BASE, "fcj_rr192_w32_e120")), runs)
    base_row = next(line for line in text.splitlines() if line.startswith(f"| {sr.FULL_BASE} |"))
    row = next(line for line in text.splitlines() if line.startswith("| fcj_rr192_w32_e120 |"))
    assert "cpu (2 cores) (25.0)" in base_row  # runs from before the device was recorded
    assert "NVIDIA H100 80GB HBM3 (1.5)" in row
    assert "| -1.7 [" in row and "| -10.0 [" in row  # paired differences, EER and FNMR points


def test_screen_table_pairs_a_stacked_lever_with_its_own_baseline():
    row = lambda eer, fnmr: {"eer": eer, "fmr100": fnmr}  # noqa: E731
    rows = {sr.SCREEN_BASE: {0: row(0.10, 0.40), 1: row(0.12, 0.44)},
            "fcj_rr128_supcon_t005_e40": {0: row(0.08, 0.30), 1: row(0.09, 0.32)},
            "fcj_rr128_supcon_t005_p32_e40": {0: row(0.07, 0.30), 1: row(0.10, 0.30)}}
    table = [ln for ln in sr.render_screen(rows).splitlines() if ln.startswith("| fcj")]
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in table}
    # against fcj_rr128_supcon_t005_e40: -1 and +1 points; against the plain baseline it would be -3 and -2
    p32 = lines["fcj_rr128_supcon_t005_p32_e40"]
    assert "| fcj_rr128_supcon_t005_e40 | 2 |" in p32 and "| -1.0, +1.0 |" in p32
    assert "| -2.0, -3.0 |" in lines["fcj_rr128_supcon_t005_e40"]


def test_a_regeneration_keeps_the_hand_written_tail(tmp_path):
    out = tmp_path / "doc.md"
    assert sr.hand_written(out) == sr.HAND_WRITTEN + "\n"  # a new doc gets the marker
    out.write_text("old generated table\n\n" + sr.HAND_WRITTEN + "\n\n## A section someone wrote\n")
    assert sr.hand_written(out) == sr.HAND_WRITTEN + "\n\n## A section someone wrote\n"


def test_a_doc_without_the_marker_is_refused_before_any_training(tmp_path, capsys):
    out = tmp_path / "doc.md"
    out.write_text("text this script did not write\n")
    (tmp_path / "real").mkdir()
    code = sr.main(["--only", "fcj_ft128", "--runs", str(tmp_path / "runs"), "--real-samples",
                    str(tmp_path / "real"), "--out", str(out)])
    assert code == 2 and "exists without the line" in capsys.readouterr().err
    assert out.read_text() == "text this script did not write\n" and not (tmp_path / "runs").exists()
