"""studies/study_synthetic_transfer.py: variant TOMLs are the shipped recipe plus one lever; the doc pairs each
lever with the baseline of the same seed and leaves out sets too small to resolve an EER."""

from __future__ import annotations

import tomllib

import pytest

from fedprint.config.experiment import parse_experiment
from studies import doc_tail
from studies.study_synthetic_transfer import (
    BASE_TOML,
    SCRIPT,
    VARIANTS,
    describe,
    main,
    render,
    scored_at,
    summarise,
    variant_toml,
)


def test_variant_toml_is_the_shipped_recipe_plus_the_lever():
    base = tomllib.loads(BASE_TOML.read_text())
    for name, v in VARIANTS.items():
        cfg = tomllib.loads(variant_toml(name, 1001))
        assert cfg["run"] == {"name": f"{name}-s1001", "seed": 1001}
        assert cfg["train"] == {**base["train"], **v.train}
        strip = lambda d: {k: x for k, x in d.items() if k != "sources"}  # noqa: E731
        assert cfg["model"] == {**base["model"], **v.model} and strip(cfg["data"]) == strip(base["data"])
        assert [s["profile"] for s in cfg["data"]["sources"]] == [v.profiles.get(s["profile"], s["profile"])
                                                                 for s in base["data"]["sources"]]
        assert all(s["seed"] == 1000 and s["cache"].endswith("runs/.cache/synth") for s in cfg["data"]["sources"])
        parse_experiment(cfg, source=name)  # the experiment loader accepts every lever's keys and values
    assert tomllib.loads(variant_toml("whole_print", 1000))["model"]["input_size"] == 192  # replaced, not added
    assert tomllib.loads(variant_toml("gem", 1000))["model"]["pooling"] == "gem"  # added to [model]
    assert tomllib.loads(variant_toml("window_gem_e110", 1000))["train"]["epochs"] == 110  # [train] key replaced
    assert "casia_whole" in [s["profile"] for s in tomllib.loads(variant_toml("casia_whole", 1000))["data"]["sources"]]


def _rows(eers: dict[str, float], fused: float | None = None) -> list[dict]:
    rows = [{"institution": s, "genuine": 200, "impostor": 2000, "global EER": e, "global FNMR@FMR1%": 0.5,
             **({"global + dense (stored calibration) EER": fused, "global + dense (stored calibration) FNMR@FMR1%":
                 0.4} if fused is not None else {})} for s, e in eers.items()]
    return rows + [{"institution": "tiny", "genuine": 1, "impostor": 27, "global EER": 0.0,
                    "global FNMR@FMR1%": None}]


def test_summary_and_paired_differences():
    base = {1000: summarise(_rows({"a": 0.20, "b": 0.10})), 1001: summarise(_rows({"a": 0.22, "b": 0.12}))}
    tex = {1000: summarise(_rows({"a": 0.16, "b": 0.08})), 1001: summarise(_rows({"a": 0.20, "b": 0.10}))}
    assert set(base[1000]["embedding"]["sets"]) == {"a", "b"}  # "tiny" (27 impostor pairs) left out
    assert base[1000]["embedding"]["mean"] == pytest.approx(0.15) and "fused" not in base[1000]
    results = {("baseline", s): base[s] for s in base} | {("texture", s): tex[s] for s in tex}
    doc = render(results, {"a": (200, 2000), "b": (200, 2000)}, {}, "python -m studies.study_synthetic_transfer")
    assert "| texture |" in doc and "-3.0, -2.0" in doc and "-2.5 [" in doc
    assert "a 200 / 2,000" in doc and "tiny" not in doc


def test_a_model_scored_at_another_size_is_paired_with_the_baseline():
    base = {1000: summarise(_rows({"a": 0.20, "b": 0.10}))}
    big = {1000: summarise(_rows({"a": 0.18, "b": 0.09}))}
    results = {("baseline", 1000): base[1000], (scored_at("baseline", 160), 1000): big[1000]}
    doc = render(results, {"a": (200, 2000), "b": (200, 2000)}, {}, "cmd")
    assert "| baseline@160 | scored with 160 px inputs (trained at 128 px) | embedding | 1 | -1.5 |" in doc
    assert describe("whole_print@160").endswith("; scored with 160 px inputs (trained at 192 px)")


def test_a_stacked_lever_is_paired_with_its_reference_at_the_same_size():
    r = lambda a, b: summarise(_rows({"a": a, "b": b}))  # noqa: E731
    results = {("baseline", 1000): r(0.20, 0.10), ("window_gem_rot35", 1000): r(0.16, 0.08),
               ("window_gem_rot35@192", 1000): r(0.14, 0.06), ("window_gem_rot50", 1000): r(0.15, 0.07),
               ("window_gem_rot50@192", 1000): r(0.15, 0.09)}
    doc = render(results, {"a": (200, 2000), "b": (200, 2000)}, {}, "cmd", reference="window_gem_rot35")
    ref_table = doc.split("minus window_gem_rot35 of the same seed")[1]
    assert "| window_gem_rot50 | " in ref_table and "| embedding | 1 | -1.0 |" in ref_table  # 11 - 12
    assert "| embedding | 1 | +2.0 |" in ref_table  # @192: 12 - 10, not against the model as trained
    assert "| window_gem_rot35" not in ref_table and "| baseline" not in ref_table
    assert "minus window_gem_rot35" not in render(results, {"a": (200, 2000)}, {}, "cmd")  # only when asked


def test_an_unknown_reference_is_named(tmp_path, capsys):
    assert main(["--real-samples", str(tmp_path), "--no-train", "--only", "gem", "--reference", "window"]) == 2
    assert "--reference: expected one of the variants studied" in capsys.readouterr().err


def test_bad_test_sizes_are_named(tmp_path, capsys):
    assert main(["--real-samples", str(tmp_path), "--test-sizes", "160,x", "--no-train"]) == 2
    assert "--test-sizes: expected comma-separated input sizes" in capsys.readouterr().err


def test_a_doc_without_the_marker_is_refused_before_any_training(tmp_path, capsys):
    out = tmp_path / "doc.md"
    out.write_text("## Reading\n\ntext this script did not write\n")
    code = main(["--real-samples", str(tmp_path), "--only", "gem", "--runs", str(tmp_path / "runs"),
                 "--out", str(out)])
    assert code == 2 and "exists without the line" in capsys.readouterr().err
    assert out.read_text() == "## Reading\n\ntext this script did not write\n" and not (tmp_path / "runs").exists()


def test_a_regeneration_keeps_the_reading(tmp_path):
    """Nothing trained or scored (no run folders): the doc is rewritten above the marker, the Reading kept."""
    out = tmp_path / "doc.md"
    tail = doc_tail.marker(SCRIPT) + "\n\n## Reading\n\nprose\n"
    out.write_text("an old table\n\n" + tail)
    assert main(["--real-samples", str(tmp_path), "--no-train", "--only", "gem", "--runs", str(tmp_path / "runs"),
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert text.endswith("\n\n" + tail) and "an old table" not in text


@pytest.mark.parametrize("doc", sorted((BASE_TOML.parents[1] / "docs" / "studies").glob("synthetic_transfer*.md")),
                         ids=lambda p: p.name)
def test_every_doc_of_this_script_can_be_regenerated(doc):
    """Each doc the script wrote carries its marker: a regeneration keeps the hand-written text instead of
    refusing (or, before the marker, dropping it)."""
    assert doc_tail.marker(SCRIPT) in doc.read_text()
