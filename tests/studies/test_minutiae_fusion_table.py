"""studies/minutiae_fusion_table.py on evaluate folders written here."""

from __future__ import annotations

import json

from studies.minutiae_fusion_table import main


def _folder(tmp_path, name, data, n_imp, eer, score="minutiae"):
    f = tmp_path / name
    f.mkdir()
    m = {"model": "/m/shipped.pt", "data": f"/real/{data}", "score": score, "n_genuine": 10, "n_impostor": n_imp,
         "max_impostors": None, "eer": eer, "eer_cosine": eer + 0.1, "eer_minutiae": eer + 0.2,
         "fnmr_at_fmr_1%": 0.3 if n_imp >= 100 else None, "fnmr_at_fmr_1%_cosine": 0.5, "fnmr_at_fmr_1%_minutiae": 0.6}
    (f / "metrics.json").write_text(json.dumps(m))
    return f


def test_table_averages_the_folders_that_resolve_fmr_1_percent(tmp_path, capsys):
    a = _folder(tmp_path, "a", "fvc", 200, 0.10)
    b = _folder(tmp_path, "b", "pyf", 300, 0.04)
    c = _folder(tmp_path, "c", "tiny", 20, 0.50)
    out = tmp_path / "t.md"
    assert main([str(a), str(b), str(c), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| shipped | tiny | 10 / 20 | 50.0 | 60.0 | 70.0 | — |" in text
    assert "mean of 2 folders (>= 100 impostor pairs) | | 7.0 | 17.0 | 27.0 |" in text  # tiny left out
    bad = _folder(tmp_path, "d", "fvc", 200, 0.1, score="global")
    assert main([str(bad)]) == 2 and "expected minutiae" in capsys.readouterr().err
    assert main([str(tmp_path / "none")]) == 2
