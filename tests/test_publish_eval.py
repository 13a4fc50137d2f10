"""Tiny end-to-end run of the publication usability benchmark (privacy.publish_eval, `fedprint publish-eval`)."""

from __future__ import annotations

import csv

import pytest

from data.synth.generate import finger_records
from data.synth.profiles import get_profile
from fedprint_cli import main
from privacy.publish_eval import NOT_RUN, publish_eval


@pytest.fixture(scope="module")
def records():
    profile = get_profile("socofing")
    return [r for f in range(3) for r in finger_records(profile, f, 2, seed=0)]


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_tiny_run_rows_refusal_and_not_run(records, tmp_path):
    # lap/paper refuses eps = 2 (documented minimum far above 2 at 96x103); fip releases; pointset is a point set.
    path = publish_eval(records, mechanisms=["lap", "fip", "pointset"], epsilons=[2.0], seed=1, out_dir=tmp_path,
                        progress=False)
    rows = _rows(path)
    got = {(r["mechanism"], r["variant"]) for r in rows}
    assert got == {("unprotected", "")} | {(m, v) for m in ("lap", "fip", "pointset") for v in ("paper", "sound")}
    assert len(rows) == 7
    by = {(r["mechanism"], r["variant"]): r for r in rows}
    refused = by[("lap", "paper")]
    assert refused["status"].startswith("refused: ") and "minimum" in refused["status"]
    assert refused["n_released"] == "0" and refused["n_refused"] == "3"
    for key in [("lap", "sound"), ("fip", "paper"), ("fip", "sound"), ("unprotected", "")]:
        assert by[key]["eer_siamese"] == NOT_RUN and by[key]["eer_classical"] == NOT_RUN
    for key in [("lap", "sound"), ("fip", "sound"), ("pointset", "sound")]:
        r = by[key]
        assert r["status"] == "ok" and r["n_released"] == "3"
        assert 0.0 <= float(r["minutiae_retained"]) <= 1.0
    assert 0.0 < float(by[("fip", "sound")]["ssim"]) < 1.0
    assert by[("pointset", "sound")]["psnr"] == "n/a"
    assert by[("fip", "paper")]["dp"] == "False" and by[("fip", "sound")]["dp"] == "True"
    for name in ["report.md", "releases.csv", "table_paper.md", "table_sound.md", "plot_paper.png", "plot_sound.png"]:
        assert (tmp_path / name).stat().st_size > 0
    report = (tmp_path / "report.md").read_text()
    assert "NOT differentially private" in report and "lap / paper**: no release" in report
    assert len(_rows(tmp_path / "releases.csv")) == 3 * 2 * 3


def test_cli_publish_eval(tmp_path):
    rc = main(["publish-eval", "--profile", "socofing", "--fingers", "3", "--impressions", "2",
               "--mechanisms", "swp", "--epsilons", "4", "--variants", "sound", "--out", str(tmp_path)])
    assert rc == 0
    rows = _rows(tmp_path / "results.csv")
    assert [(r["mechanism"], r["variant"], r["epsilon"]) for r in rows] == [("unprotected", "", "inf"),
                                                                             ("swp", "sound", "4")]


def test_cli_rejects_bad_epsilon_grid(tmp_path, capsys):
    assert main(["publish-eval", "--profile", "socofing", "--epsilons", "x", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "results.csv").exists()


def test_checkpoint_gives_siamese_eer(records, tmp_path):
    """The Siamese EER column really scores the model file: a model whose embedding ignores its input (all
    weights 0: every pair at distance 0) must give EER exactly 0.5, a random one something else."""
    torch = pytest.importorskip("torch")
    from models.model_file import model_bytes
    from models.preprocess import InputSpec
    from models.siamese import build_encoder

    eers = {}
    for name in ("constant", "random"):
        torch.manual_seed(0)
        enc = build_encoder("compact", 16)
        if name == "constant":
            with torch.no_grad():
                for p in enc.parameters():
                    p.zero_()
        ckpt = tmp_path / f"model_{name}.pt"
        ckpt.write_bytes(model_bytes(enc, encoder_name="compact", embedding_dim=16, spec=InputSpec(size=32),
                                     threshold=0.5))
        path = publish_eval(records, mechanisms=["fip"], variants=["sound"], epsilons=[8.0], checkpoint=ckpt,
                            out_dir=tmp_path / f"out_{name}", progress=False)
        rows = _rows(path)
        assert all(r["eer_classical"] == NOT_RUN for r in rows)
        eers[name] = [float(r["eer_siamese"]) for r in rows]
    assert eers["constant"] == pytest.approx([0.5] * len(eers["constant"]))
    assert eers["random"] != pytest.approx(eers["constant"])
