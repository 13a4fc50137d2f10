"""studies/loso_table.py on a run folder, a real root and a classical CSV written here (an untrained toy model: the
plumbing is under test)."""

from __future__ import annotations

import json

import torch

from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.model_file import model_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder
from fedprint.recognition.matching import protocol_pairs
from studies.loso_table import main


def _setup(tmp_path, unseen=("sensor_b",)):
    torch.manual_seed(0)
    real = tmp_path / "real"
    recs = stripe_records(n_fingers=5, n_impressions=3, size=40, seed=2)
    write_generic(recs, real / "sensor_b")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": {"seed": 3}, "partition": {"unseen": list(unseen)}}))
    (run / "model_centralized.pt").write_bytes(model_bytes(
        build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16, encoder_kwargs={"width": 4},
        spec=InputSpec(size=32), threshold=0.6, method="toy"))
    fvc, every = protocol_pairs(recs, "fvc"), protocol_pairs(recs, "all")
    classical = tmp_path / "classical.csv"
    classical.write_text("set,protocol,genuine,impostor,EER %,FNMR@FMR1 %\n"
                         f"sensor_b,fvc,{int(fvc.label.sum())},{int((fvc.label == 0).sum())},0.0,\n"
                         f"sensor_b,all,{int(every.label.sum())},{int((every.label == 0).sum())},100.0,\n")
    return real, run, classical, fvc, every


def test_scores_the_unseen_sensor_beside_the_classical_matcher_on_the_same_pairs(tmp_path, capsys):
    real, run, classical, fvc, every = _setup(tmp_path)
    out = tmp_path / "t.md"
    assert main([str(run), "--classical", str(classical), "--real-samples", str(real), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()[2:]
    assert lines[0].startswith(f"| sensor_b | 3 | fvc | {int(fvc.label.sum())} / {int((fvc.label == 0).sum())} |")
    assert lines[0].endswith("| no |")  # nothing is at or below a classical EER of 0
    assert lines[1].startswith(f"| sensor_b | 3 | all | {int(every.label.sum())} / {int((every.label == 0).sum())}")
    assert lines[1].endswith("| yes |")  # everything is at or below 100 %


def test_refuses_other_pairs_a_missing_classical_row_and_several_unseen_sensors(tmp_path, capsys):
    real, run, classical, _, _ = _setup(tmp_path)
    classical.write_text(classical.read_text().replace("sensor_b,all,", "sensor_b,all,1"))
    assert main([str(run), "--classical", str(classical), "--real-samples", str(real)]) == 2
    assert "not the same pairs" in capsys.readouterr().err
    assert main([str(run), "--classical", str(classical), "--real-samples", str(real), "--protocols", "fvc"]) == 0
    classical.write_text("set,protocol,genuine,impostor,EER %,FNMR@FMR1 %\n")
    assert main([str(run), "--classical", str(classical), "--real-samples", str(real)]) == 2
    assert "studies/classical_folders.py" in capsys.readouterr().err
    (run / "config.json").write_text(json.dumps({"run": {"seed": 0}, "partition": {"unseen": ["a", "b"]}}))
    assert main([str(run), "--classical", str(classical), "--real-samples", str(real)]) == 2
    assert "one [partition] unseen sensor" in capsys.readouterr().err


def test_runs_of_several_seeds_are_summed_up_per_sensor_and_a_repeated_seed_is_refused(tmp_path, capsys):
    real, run, classical, _, every = _setup(tmp_path)
    run2 = tmp_path / "run2"
    run2.mkdir()
    (run2 / "model_centralized.pt").write_bytes((run / "model_centralized.pt").read_bytes())
    (run2 / "config.json").write_text(json.dumps({"run": {"seed": 4}, "partition": {"unseen": ["sensor_b"]}}))
    args = ["--classical", str(classical), "--real-samples", str(real), "--protocols", "all"]
    assert main([str(run), *args]) == 0
    assert "seeds at or below" not in capsys.readouterr().out  # one seed: no summary
    assert main([str(run2), str(run), *args]) == 0
    summary = capsys.readouterr().out.split("\n\n")[1]
    row = [ln for ln in summary.splitlines() if ln.startswith("| sensor_b")]
    assert len(row) == 1
    cells = [c.strip() for c in row[0].strip("|").split("|")]
    n_gen = int(every.label.sum())
    # the same model twice: the same EER on both seeds, sd 0; the classical EER of 100 % is beaten on both
    assert cells[2].startswith(f"{n_gen:,} / ") and cells[3] == "3, 4" and cells[7] == "2 of 2" and cells[8] == "yes"
    eer = cells[4].split(", ")
    assert eer[0] == eer[1] and cells[5] == f"{float(eer[0]):.1f} (0.0)"
    assert main([str(run), str(run), *args]) == 2
    assert "seed(s) [3] given more than once" in capsys.readouterr().err
