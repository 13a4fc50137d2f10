"""studies/reproduction_doc.py renders docs/studies/reproduction.md from run folders: a tiny fake run folder (no real
data)."""

from __future__ import annotations

import csv
import json

import pytest

from fedprint.privacy.publish_eval import RESULT_COLUMNS
from studies import reproduce_seeds as rs
from studies.reproduction_doc import NOT_YET, render


def _write_results(folder, rows):
    folder.mkdir(parents=True)
    with open(folder / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS, restval="")
        w.writeheader()
        w.writerows(rows)
    (folder / "wall.json").write_text(json.dumps({"command": "x", "seconds": 90.0, "cpus": 2}))


@pytest.fixture
def fake_runs(tmp_path):
    runs = tmp_path / "runs"
    rows = [{"mechanism": "unprotected", "variant": "", "epsilon": "inf", "status": "ok", "eer_siamese": "0.25",
             "rank1_siamese": "0.5", "minutiae_retained": "1"}]
    for m, rate in (("lap", 0.0612), ("dp-rklap", 0.7345)):
        rows.append({"mechanism": m, "variant": "paper", "epsilon": "1", "status": "ok", "minutiae_retained": rate,
                     "minutiae_precision": "0.5", "eer_siamese": "0.3", "rank1_siamese": "0.4"})
    rows.append({"mechanism": "klap", "variant": "paper", "epsilon": "1", "status": "refused: too few minutiae"})
    _write_results(runs / "000-paper-eps", rows)
    (runs / rs.TABLE41).mkdir(parents=True)
    with open(runs / rs.TABLE41 / "table41.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["n", "epsilon", "k_paper", "err_paper", "k_best", "err_best"])
        from fedprint.privacy.publish.pointset import PAPER_TABLE_EPS, PAPER_TABLE_K, PAPER_TABLE_N

        for i, n in enumerate(PAPER_TABLE_N):
            for j, e in enumerate(PAPER_TABLE_EPS):
                w.writerow([n, e, PAPER_TABLE_K[i][j], 0.02, 4 * PAPER_TABLE_K[i][j], 0.01])
    (runs / rs.TABLE41 / "table41_curve.csv").write_text("k,error\n10,0.02\n51,0.015\n200,0.01\n400,0.012\n")
    return runs


def test_render_from_fake_runs(fake_runs, tmp_path):
    doc = render(fake_runs, [], tmp_path / "docs" / "reproduction.md")
    text = doc.read_text()
    # ours beside the paper's, formatted from the run folder
    assert "6.1 %" in text and "73.5 %" in text and "62.65 %" in text and "10.32 %" in text
    assert "refused" in text
    # missing runs: "not yet run" with the exact command
    assert f"*{NOT_YET}*: `python -m studies.reproduce_seeds --run 000-sound-eps`" in text
    assert "--epsilon-unit mn/256" in text  # the fedprint command behind 000-paper-eps is printed
    # Table 4.1: every cell ours better (error ratio 0.50), the thesis's k and ours
    assert "51 → 204 (0.50)" in text and "in 24 of 24 cells" in text
    # AFFR: nothing run -> not yet run, with the commands and the PSNR remark
    assert "real_sensors" in text and "not an 8-bit PSNR" in text
    # wall time of the runs that exist: 90 s + 90 s
    assert "wall time" in text and "1.5 min" in text
    for png in ("000_matching_rate.png", "002_table41.png"):
        assert (doc.parent / "reproduction" / png).stat().st_size > 0
    assert not (doc.parent / "reproduction" / "001_fourier.png").exists()


def test_affr_section_reads_run_folders(fake_runs, tmp_path):
    affr = tmp_path / "runs" / "real_sensors-x"
    affr.mkdir(parents=True)
    (affr / "results.csv").write_text("method,client,accuracy,eer,extra\naffr,fvc2002_db1_b,0.9123,0.081,z\n")
    (affr / "audit").mkdir()
    (affr / "audit" / "mia.csv").write_text("condition,attack,AUC,members\nwith FP-DFSN,loss,0.5612,40\n")
    text = render(fake_runs, [affr], tmp_path / "doc.md").read_text()
    assert "| affr | 1 | 0.912 / 0.081 | 0.912 | 0.081 |" in text and "extra" not in text.split("## 003")[1]
    # a second seed of the same run folder is averaged, and counted
    (affr / "seed-1").mkdir()
    (affr / "seed-1" / "results.csv").write_text("method,client,accuracy,eer\naffr,fvc2002_db1_b,0.8123,0.121\n")
    text = render(fake_runs, [affr], tmp_path / "doc.md").read_text()
    assert "| affr | 2 | 0.862 / 0.101 | 0.862 | 0.101 |" in text
    assert "| with FP-DFSN | loss | 0.5612 | 40 |" in text
    assert f"*{NOT_YET}* (no `sweep.csv`" in text and "fedprint sweep --config" in text
    assert not (tmp_path / "reproduction" / "003_sweep_0.png").exists()
    sweep = affr.with_name("real_sensors-sweep")
    sweep.mkdir()
    (sweep / "sweep.csv").write_text("sweep,beta,sigma2,accuracy,eer,roc_auc\nbeta,0.0,default,0.91,0.09,0.95\n"
                                     "beta,0.5,default,0.87,0.12,0.93\nsigma2,0.5,650.25,0.86,0.13,0.92\n")
    text = render(fake_runs, [affr, sweep], tmp_path / "doc.md").read_text()
    assert "| beta | 0.5 | default | 0.87 | 0.12 | 0.93 |" in text
    assert (tmp_path / "reproduction" / "003_sweep_0.png").stat().st_size > 0


def test_runner_rejects_unknown_run_and_names_the_known_ones(capsys):
    with pytest.raises(SystemExit) as exc:
        rs.main(["--run", "000-nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "000-nope" in err and "000-paper-eps" in err and "002-table41" in err


def test_every_run_is_a_valid_publish_eval_command():
    """The commands the document prints parse as `fedprint publish-eval` arguments (ε grids, units, options)."""
    import argparse

    from fedprint.cli import publish as publish_cli

    parser = argparse.ArgumentParser()
    publish_cli.register(parser.add_subparsers())
    for name, args in rs.RUNS.items():
        ns = parser.parse_args([*args, "--out", f"runs/reproduction/{name}"])
        assert ns.func is publish_cli.run_eval and len(ns.data) == 3


def test_rebuilds_give_median_and_range_not_a_ranking(fake_runs, tmp_path):
    """000-paper-eps over rebuilds: median [min–max] per cell; the k = 1 ranking is reported as a count of builds."""
    rb = tmp_path / "rebuilds"
    for i, (lap, dp) in enumerate(((0.0812, 0.7001), (0.0412, 0.7999))):
        rows = [{"mechanism": "unprotected", "variant": "", "epsilon": "inf", "status": "ok", "eer_siamese": "0.25",
                 "rank1_siamese": "0.5", "minutiae_retained": "1"}]
        for m, rate in (("lap", lap), ("dp-rklap", dp), ("rklap", 0.75)):
            rows.append({"mechanism": m, "variant": "paper", "epsilon": "1", "status": "ok", "minutiae_retained": rate,
                         "minutiae_precision": "0.5", "eer_siamese": "0.3", "rank1_siamese": "0.4"})
        _write_results(rb / str(i) / "000-paper-eps", rows)
    text = render(fake_runs, [], tmp_path / "doc.md", rebuilds=[rb / "0", rb / "1"]).read_text()
    assert "6.1 % [4.1–8.1]" in text  # LAP k = 1: median of 6.12, 8.12, 4.12
    assert "over 3 build(s)" in text
    assert "ranges overlap — no ranking" in text and "of 3 build(s)" in text  # rklap 0.75 inside dp-rklap's range


def test_table41_over_seeds(fake_runs, tmp_path):
    """Table 4.1 over simulation seeds: median [min–max] of the best k; a same-seed rebuild is checked identical."""
    from fedprint.privacy.publish.pointset import PAPER_TABLE_EPS, PAPER_TABLE_K, PAPER_TABLE_N

    rb = tmp_path / "rebuilds"
    for tag, seed, factor in (("s1", 1, 2), ("s2", 2, 6), ("again", 0, 4)):
        d = rb / tag / rs.TABLE41
        d.mkdir(parents=True)
        with open(d / "table41.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["n", "epsilon", "k_paper", "err_paper", "k_best", "err_best"])
            for i, n in enumerate(PAPER_TABLE_N):
                for j, e in enumerate(PAPER_TABLE_EPS):
                    w.writerow([n, e, PAPER_TABLE_K[i][j], 0.02, factor * PAPER_TABLE_K[i][j], 0.01])
        (d / "wall.json").write_text(json.dumps({"command": "x", "seconds": 1.0, "seed": seed}))
    text = render(fake_runs, [], tmp_path / "doc.md", rebuilds=sorted(rb.iterdir())).read_text()
    assert "Seeds built: 0, 1, 2 (3)" in text
    assert "51 → 204 [102–306] (0.50 [0.50–0.50])" in text
    assert "in 24 of 24 cells per seed" in text
    same = text.split("Same-seed rebuilds: ")[1].split("\n")[0]
    assert "seed 0 in" in same and "identical to" in same and "DIFFERENT" not in same


def test_coverage_has_a_row_for_every_papers_items(fake_runs, tmp_path):
    from studies.reproduction_coverage import ROWS

    text = render(fake_runs, [], tmp_path / "doc.md").read_text()
    cov = text.split("## Every table and figure")[1].split("\n## ")[0]
    for paper in ("000", "001", "002", "003", "004"):
        assert sum(r[0] == paper for r in ROWS) >= 5
    for item in ("Tables 4–7", "Table 10", "Table 11", "Fig. 17", "Fig. 18", "Table 1, Yale / YaleB",
                 "Table 3 (F1)", "Table 4.2", "Table 5 (imprint)", "Tables 4–6 (Yale"):
        assert item in cov, item
    # a row standing on a missing run says so, with the command
    assert "| 004 | Table 1 (ORL precision) | not yet run |" in cov and "--run 004-swp" in cov
    assert "/tmp" not in text


def test_table5_imprint_and_inversion_rows_with_verdict(fake_runs, tmp_path):
    audit = tmp_path / "runs" / "real_sensors-imprint"
    audit.mkdir(parents=True)
    (audit / "inversion.csv").write_text(
        "condition,attack,batch_pairs,bins,steps,optimizer,reference,attacker,images,exact_fraction,mse,psnr_median,"
        "ssim,lpips\n"
        "without FP-DFSN,imprint,4,256,1,-,raw,naive,8,1.0,0.0,inf,1.0,0.0\n"
        "with FP-DFSN β = 0.5,imprint,4,256,1,-,raw,naive,8,0.0,6502.5,10.0,0.3,0.4\n"
        "without FP-DFSN,dlg,1,,1,-,raw,naive,2,0.0,14300,6.6,0.01,\n")
    text = render(fake_runs, [audit], tmp_path / "doc.md").read_text()
    assert "the paper's attack: malicious-server imprint module" in text
    assert "a different attack: DLG / IG" in text
    assert "| 0.1 |" in text  # 6502.5 / 255² on the paper's [0, 1] scale
    assert "**the attack succeeds without FP-DFSN**" in text
    assert "**no evidence either way**" in text


def test_recorded_commands_are_made_relative():
    from studies.reproduction_common import ROOT, real_root
    from studies.reproduction_doc import clean_command

    cmd = f"{ROOT}/cli/main.py sweep --config {ROOT}/runs/x/sweep.toml --data {real_root()}/fvc2002_db1_b"
    assert clean_command(cmd) == "fedprint sweep --config runs/x/sweep.toml --data $FEDPRINT_REAL_SAMPLES/fvc2002_db1_b"
