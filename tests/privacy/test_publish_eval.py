"""Tiny end-to-end run of the publication usability benchmark (privacy.publish_eval, `fedprint publish-eval`)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from fedprint.cli.main import main
from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.privacy.publish_eval import (
    NOT_RUN,
    RESULT_COLUMNS,
    TIE,
    image_epsilon,
    macro_prf,
    publish_eval,
    rank1_accuracy,
    rank1_predictions,
    split_gallery_probes,
)


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
    from fedprint.models.model_file import model_bytes
    from fedprint.models.preprocess import InputSpec
    from fedprint.models.siamese import build_encoder

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


# --- real data, ε units, rank-1, OS-entropy noise (issue 27) ------------------------------------------------------

REAL = Path(os.environ.get("FEDPRINT_REAL_SAMPLES", "")
            or Path(__file__).parents[2].parent / "shared" / "data" / "real")
FVC_A, FVC_B = REAL / "fvc_300x300_b", REAL / "fvc2002_db1_b"


def test_rank1_accuracy_and_ties():
    labels = np.eye(3, dtype=int)
    assert rank1_accuracy(np.eye(3), labels, higher_is_genuine=True) == 1.0
    assert rank1_accuracy(1 - np.eye(3), labels, higher_is_genuine=False) == 1.0  # distances: lower is genuine
    assert rank1_accuracy(np.zeros((3, 3)), labels, higher_is_genuine=True) == 0.0  # all tied: a miss
    assert rank1_accuracy(np.array([[0.0, 1, 0], [0, 1, 0], [0, 0, 1]]), labels, True) == pytest.approx(2 / 3)


def test_image_epsilon_units():
    assert image_epsilon(2.0, (300, 300), "absolute") == 2.0
    assert image_epsilon(2.0, (374, 388), "mn/256") == pytest.approx(2 * 374 * 388 / 256)
    with pytest.raises(ValueError, match="epsilon_unit"):
        image_epsilon(1.0, (3, 3), "per-finger")


def test_noise_is_never_seeded(records, tmp_path):
    """Same seed, two runs: the releases differ (OS entropy); an injected generator makes them equal."""
    def psnrs(out, rng=None):
        publish_eval(records, mechanisms=["lap"], variants=["sound"], epsilons=[0.5], seed=3, out_dir=out,
                     rng=rng, progress=False)
        return [r["psnr"] for r in _rows(out / "releases.csv")]

    assert psnrs(tmp_path / "a") != psnrs(tmp_path / "b")
    assert psnrs(tmp_path / "c", np.random.default_rng(5)) == psnrs(tmp_path / "d", np.random.default_rng(5))
    assert "Noise: OS entropy" in (tmp_path / "a" / "report.md").read_text()


def test_n_images_seed_samples_probes(records):
    _, first = split_gallery_probes(records, 2)
    picks = {tuple(p.identity for p in split_gallery_probes(records, 2, seed=s)[1]) for s in range(8)}
    assert [p.identity for p in first] == sorted(p.identity for p in first)
    assert len(picks) > 1  # the seed really samples (3 fingers, 2 probes: 3 possible subsets)


def test_cli_data_rejects_synthetic_options_and_missing_folder(tmp_path):
    assert main(["publish-eval", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert main(["publish-eval", "--data", str(tmp_path), "--fingers", "3", "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o" / "results.csv").exists()


@pytest.mark.skipif(not (FVC_A.is_dir() and FVC_B.is_dir()), reason=f"real FVC sets not present under {REAL}")
def test_cli_real_data_pooled_mn256(tmp_path):
    rc = main(["publish-eval", "--data", str(FVC_A), str(FVC_B), "--layout", "fvc", "--mechanisms", "klap",
               "--variants", "paper", "--epsilons", "2", "--epsilon-unit", "mn/256", "--n-images", "4",
               "--seed", "1", "--out", str(tmp_path)])
    assert rc == 0
    rows = _rows(tmp_path / "results.csv")
    assert [r["mechanism"] for r in rows] == ["unprotected", "klap"]
    row = rows[1]
    assert row["n_probes"] == "4" and row["epsilon_unit"] == "mn/256"
    rel = _rows(tmp_path / "releases.csv")
    # pooled folders: identities carry the folder name (both sets number their fingers 101..110)
    assert all(r["identity"].split("/")[0] in (FVC_A.name, FVC_B.name) for r in rel)
    sizes = {FVC_A.name: 300 * 300, FVC_B.name: 374 * 388}
    for r in rel:
        assert float(r["image_epsilon"]) == pytest.approx(2 * sizes[r["identity"].split("/")[0]] / 256, rel=1e-3)
    assert 0 < float(row["minutiae_retained"]) <= 1 and 0 < float(row["minutiae_precision"]) <= 1
    assert "fvc2002_db1_b" in (tmp_path / "report.md").read_text()


def test_releases_above_the_meaningful_ceiling_are_counted_and_said(records, tmp_path):
    # lap / sound adds Lap(255 / ε_pixels) per pixel: at ε = 1e6 the noise is far below one grey level
    path = publish_eval(records, mechanisms=["lap"], variants=["sound"], epsilons=[2.0, 1e6], out_dir=tmp_path,
                        progress=False)
    by = {float(r["epsilon"]): r for r in _rows(path) if r["mechanism"] == "lap"}
    assert by[2.0]["above_ceiling"] == "0" and by[1e6]["above_ceiling"] == "3"
    report = (tmp_path / "report.md").read_text()
    assert "3 release(s) of this benchmark lie above it" in report and "--allow-large-epsilon" in report


# --- macro precision / recall / F1 of the rank-1 decision (issue 62) ----------------------------------------------

def test_macro_prf_hand_made_case():
    # 4 fingers, one probe each: a->a (hit), b->a (miss), c->c (hit), d->tie (no decision).
    # precision: a 1/2, b 0 (never predicted), c 1, d 0 (never predicted) -> 0.375
    # recall: 1, 0, 1, 0 -> 0.5 (= rank-1, one probe per finger); F1: 2/3, 0, 1, 0 -> 5/12
    p, r, f = macro_prf(["a", "b", "c", "d"], ["a", "a", "c", None])
    assert (p, r, f) == pytest.approx((0.375, 0.5, 5 / 12))
    # two probes of one finger, a prediction into a gallery finger with no probe ("z": a candidate, not a class)
    p, r, f = macro_prf(["a", "a", "b"], ["a", "z", "b"])
    assert (p, r, f) == pytest.approx((1.0, 0.75, (2 / 3 + 1) / 2))
    assert macro_prf(["a", "b"], ["a", "b"]) == (1.0, 1.0, 1.0)
    assert all(np.isnan(macro_prf([], [])))
    with pytest.raises(ValueError, match="predicted_ids"):
        macro_prf(["a"], [])


def test_rank1_predictions_follow_the_rank1_tie_rule():
    ids = ["a", "b", "c"]
    scores = np.array([[0.9, 0.1, 0.0], [0.5, 0.5, 0.0], [0.0, 0.2, 0.7]])
    pred = rank1_predictions(scores, ids, higher_is_genuine=True)
    assert pred == ["a", None, "c"]
    assert rank1_predictions(1 - scores, ids, higher_is_genuine=False) == pred  # distances: lower is better
    labels = np.eye(3, dtype=int)
    r1 = rank1_accuracy(scores, labels, higher_is_genuine=True)
    assert macro_prf(ids, pred)[1] == pytest.approx(r1) == pytest.approx(2 / 3)


def test_results_and_releases_have_the_f1_columns(records, tmp_path):
    """New columns appended after the old ones; with no matcher they are 'not run', point sets 'n/a'; with a model
    every release carries a predicted finger and macro recall equals rank-1 (one probe per finger)."""
    torch = pytest.importorskip("torch")
    from fedprint.models.model_file import model_bytes
    from fedprint.models.preprocess import InputSpec
    from fedprint.models.siamese import build_encoder

    new = ["macro_precision_siamese", "macro_recall_siamese", "f1_siamese", "macro_precision_classical",
           "macro_recall_classical", "f1_classical"]
    assert RESULT_COLUMNS[-len(new):] == new and RESULT_COLUMNS.index("rank1_classical") == 18
    path = publish_eval(records, mechanisms=["fip", "pointset"], variants=["sound"], epsilons=[8.0],
                        out_dir=tmp_path / "plain", progress=False)
    with open(path, newline="") as fh:
        assert next(csv.reader(fh)) == RESULT_COLUMNS
    by = {r["mechanism"]: r for r in _rows(path)}
    assert all(by["fip"][c] == NOT_RUN for c in new) and all(by["pointset"][c] == "n/a" for c in new)
    rel = _rows(tmp_path / "plain" / "releases.csv")
    assert {r["predicted_siamese"] for r in rel if r["mechanism"] == "fip"} == {NOT_RUN}

    torch.manual_seed(0)
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(model_bytes(build_encoder("compact", 16), encoder_name="compact", embedding_dim=16,
                                 spec=InputSpec(size=32), threshold=0.5))
    path = publish_eval(records, mechanisms=["fip"], variants=["sound"], epsilons=[8.0], checkpoint=ckpt,
                        out_dir=tmp_path / "model", progress=False)
    gallery = {r.identity for r in records}
    rel = _rows(tmp_path / "model" / "releases.csv")
    assert len(rel) == 3 and all(r["predicted_siamese"] in gallery | {TIE} for r in rel)
    for r in _rows(path):
        p, rec, f = (float(r[c]) for c in new[:3])
        assert rec == pytest.approx(float(r["rank1_siamese"]))
        assert 0 <= p <= 1 and 0 <= f <= 1 and r["f1_classical"] == NOT_RUN
    fip = next(r for r in _rows(path) if r["mechanism"] == "fip")
    hits = [r["predicted_siamese"] == r["identity"] for r in rel]
    assert float(fip["rank1_siamese"]) == pytest.approx(np.mean(hits))
    assert "F1-S" in (tmp_path / "model" / "report.md").read_text()
    assert "f1_siamese" in (tmp_path / "model" / "table_sound.md").read_text()
