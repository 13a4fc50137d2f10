"""studies/study_real_sensors.py on a small fabricated multi-seed folder: per-institution and pooled cells with
their pair counts, AFFR − FedAvg paired by seed with a verdict that refuses to over-read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studies.study_real_sensors import build, cell_values, paired_affr

INSTITUTIONS = {"fcj2020_dev": (600, 9000), "fvc2002_db1_b": (84, 216)}


def _common(seed: int, eer: dict[str, float]) -> list[dict]:
    rows = []
    for model, base in eer.items():
        for k, (inst, (g, i)) in enumerate(INSTITUTIONS.items()):
            rows.append({"model": model, "test set": inst, "images": 10, "genuine": g, "impostor": i,
                         "EER": base + 0.01 * k + 0.001 * seed, "FNMR@FMR1%": None if i < 100 else 0.3,
                         "ROC AUC": 0.9})
        rows.append({"model": model, "test set": "pooled (2 institutions)", "images": 20, "genuine": 684,
                     "impostor": 9216, "EER": base + 0.005, "FNMR@FMR1%": 0.3, "ROC AUC": 0.9})
    return rows


def _folder(tmp_path: Path, affr_shift: list[float]) -> Path:
    root = tmp_path / "real_sensors-seeds"
    runs, per_seed = {}, {}
    for s, shift in enumerate(affr_shift):
        run = root / f"seed-{s}"
        run.mkdir(parents=True)
        eer = {"local (own models)": 0.2, "centralized": 0.1, "fedavg": 0.12, "affr": 0.12 + shift}
        (run / "results.json").write_text(json.dumps({"common_test": _common(s, eer)}))
        (run / "config.json").write_text(json.dumps({"rounds": 3, "federation": {"gap_noise_floor": 0.0}}))
        (run / "partitions.json").write_text(json.dumps([{"name": n} for n in INSTITUTIONS]))
        runs[str(s)] = run.name
        per_seed[str(s)] = {m: [{"client": n, "eer": e, "fmr100": 0.3, "accuracy": 0.9} for n in INSTITUTIONS]
                            for m, e in (("fedavg", 0.12), ("affr", 0.12 + shift), ("centralized", 0.1))}
    (root / "summary.json").write_text(json.dumps({"seeds": list(range(len(affr_shift))), "runs": runs,
                                                   "per_seed": per_seed, "unseen": {},
                                                   "timings_s": {str(s): {"fedavg": 60.0} for s in runs}}))
    (root / "provenance.json").write_text(json.dumps({"utc": "2026-01-01T00:00:00Z",
                                                      "command": "fedprint simulate --config real_sensors --seeds 3"}))
    return root


def test_study_tables_carry_pair_counts_and_honest_verdicts(tmp_path):
    folder = _folder(tmp_path, [0.001, -0.002, 0.0005])  # AFFR − FedAvg straddles 0
    md = build(folder, None, None, tmp_path / "study")
    text = md.read_text()
    assert "fcj2020_dev (600 g / 9000 i)" in text and "pooled (684 g / 9216 i)" in text
    assert "fvc2002_db1_b (84 g / 216 i)" in text
    assert "too few fingers to tell" in text
    assert (tmp_path / "study.png").is_file()
    assert "| local |" in text  # local's pooled cell is each institution's own model


def test_paired_verdicts():
    common = {s: _common(s, {"fedavg": 0.12, "affr": 0.12 - 0.03 - 0.001 * s}) for s in range(3)}
    eer, pairs = cell_values(common, "EER")
    rows = paired_affr(eer, pairs)
    assert [r["test set"].split(" (")[0] for r in rows] == ["fcj2020_dev", "fvc2002_db1_b", "pooled"]
    assert all(r["verdict"] == "AFFR better beyond the seed-to-seed noise" for r in rows)
    near = {s: _common(s, {"fedavg": 0.45, "affr": 0.40 - 0.001 * s}) for s in range(3)}
    eer, pairs = cell_values(near, "EER")
    assert all(r["verdict"].startswith("no verdict: EER near chance") for r in paired_affr(eer, pairs))
    with pytest.raises(KeyError):
        cell_values({0: [{"model": "x"}]}, "EER")


def test_classical_heldout_summary_says_who_wins_and_keeps_fusion_apart():
    from studies.classical_heldout import summary

    rows = [{"seed": s, "institution": "a", "genuine": 10, "impostor": 20, "classical": 0.10, "fedavg": e,
             "fedavg + classical": 0.05} for s, e in ((0, 0.08), (1, 0.12))]
    (out,) = summary(rows)
    assert out["genuine / impostor pairs"] == "20 / 40" and out["seeds"] == 2
    assert out["fedavg"] == "0.100" and out["classical"] == "0.100"
    # the fused column never counts as the "best deep" model
    assert out["best deep − classical"] == "+0.000 (fedavg)"


def test_pooled_rows_compare_on_the_same_pairs_and_hide_unresolvable_fnmr(tmp_path):
    import json

    from studies.study_real_sensors import pooled_rows

    (tmp_path / "metrics.json").write_text(json.dumps({"per_client": [
        {"client": "a", "eer": 0.05, "fmr100": 0.2, "n_genuine": 50, "n_impostor": 500},
        {"client": "b", "eer": 0.0, "fmr100": 0.0, "n_genuine": 56, "n_impostor": 64}]}))
    (tmp_path / "classical_comparison.csv").write_text(
        "model,client,pairs,genuine,deep_eer,deep_roc_auc,classical_eer,classical_roc_auc,fused_eer\n"
        "centralized,a,400,200,0.105,0.9,0.085,0.9,0.07\ncentralized,b,120,56,0.0,1.0,0.053,0.97,0.031\n")
    a, b = pooled_rows(tmp_path)
    assert a["deep at or below classical"] == "no (+0.020)" and a["FNMR@FMR1%"] == "0.200"
    assert a["same-pairs subset (g / i)"] == "200 / 200"
    assert b["deep at or below classical"] == "yes" and b["FNMR@FMR1%"] == "—"  # 64 impostors cannot resolve 1 %
