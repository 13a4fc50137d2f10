"""studies/study_dense_match.py: a lever is compared with its baseline split by split, on every score."""

from __future__ import annotations

from studies.study_dense_match import SCORES, _lever_lines


def _row(variant: str, split: int, eer: float) -> dict:
    return {"variant": variant, "split": split, "institution": "generic", "genuine": 600, "impostor": 20000,
            **{f"{k} EER": eer + 0.01 * j for j, k in enumerate(SCORES)},
            **{f"{k} FNMR@FMR1%": 0.3 for k in SCORES}}


def test_levers_are_paired_by_split_and_unpaired_splits_left_out():
    rows = [_row("fcj_rr128_e40", s, 0.10) for s in range(3)]
    rows += [_row("fcj_rr128_dense_e40", s, 0.10 - 0.01 * (s + 1)) for s in range(2)]  # split 2 not run
    rows += [{"variant": "shipped", "split": 0, "institution": "fcj", "global EER": 0.2}]  # transfer row: ignored
    lines = _lever_lines(rows)
    body = [ln for ln in lines if ln.startswith("| fcj_rr128_dense_e40")]
    assert len(body) == len(SCORES) and all("| 2 |" in ln for ln in body)
    assert "-1.0, -2.0" in body[0] and "+0.0 [+0.0, +0.0]" in body[0].split("|")[-2]
    assert _lever_lines([_row("fcj_rr128_e40", 0, 0.1)]) == []


def test_scores_are_cached_until_an_input_changes(tmp_path):
    from studies.study_dense_match import cached_rows

    model = tmp_path / "model.pt"
    model.write_bytes(b"weights 1")
    calls = []

    def compute():
        calls.append(1)
        return [{"run": "r", "global EER": 0.1 * len(calls), "split": 0}]

    first = cached_rows(tmp_path / "scores.json", [model], compute)
    assert cached_rows(tmp_path / "scores.json", [model], compute) == first and len(calls) == 1
    model.write_bytes(b"weights 2")  # a retrained model is rescored
    assert cached_rows(tmp_path / "scores.json", [model], compute)[0]["global EER"] == 0.2 and len(calls) == 2
    assert cached_rows(tmp_path / "scores.json", [model], compute, note="/other/real/root")  # another root
    assert len(calls) == 3
