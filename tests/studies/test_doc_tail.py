"""studies.doc_tail: the hand-written tail a regenerated doc keeps."""

from __future__ import annotations

import pytest

from studies.doc_tail import hand_written, marker, with_tail


def test_the_marker_names_the_script():
    assert "studies/study_x.py regenerates only the part above" in marker("studies/study_x.py")
    assert marker("studies/a.py") != marker("studies/b.py")


def test_a_new_doc_gets_the_marker_and_an_old_one_keeps_its_tail(tmp_path):
    out = tmp_path / "doc.md"
    assert hand_written(out, "studies/s.py") == marker("studies/s.py") + "\n"
    out.write_text("old table\n\n" + marker("studies/s.py") + "\n\n## Notes\n")
    tail = hand_written(out, "studies/s.py")
    assert tail == marker("studies/s.py") + "\n\n## Notes\n"
    assert with_tail("new table\n\n\n", tail) == "new table\n\n" + tail


def test_a_doc_without_its_scripts_marker_is_refused(tmp_path):
    out = tmp_path / "doc.md"
    out.write_text("old table\n\n" + marker("studies/other.py") + "\n")
    with pytest.raises(ValueError, match="doc.md: exists without the line"):
        hand_written(out, "studies/s.py")
