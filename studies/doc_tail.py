"""A generated doc's hand-written tail: the part a regeneration keeps.

A study script writes its tables above a marker line naming it; everything from that line on is somebody's prose
("Reading", caveats) and is written back unchanged. A doc that exists without the marker is refused before any
training, so text the script did not write is never overwritten.
"""

from __future__ import annotations

from pathlib import Path


def marker(script: str) -> str:
    """The marker line of ``script`` (its path from the project root, e.g. ``studies/study_recipe.py``)."""
    return f"<!-- Hand-written from here on: {script} regenerates only the part above and keeps this. -->"


def hand_written(out: Path, script: str) -> str:
    """The hand-written tail of ``out`` (from ``script``'s :func:`marker` on; the marker alone when ``out`` does
    not exist yet). ValueError naming the file when it exists without the marker: regenerating would drop text
    ``script`` did not write."""
    line = marker(script)
    if not out.is_file():
        return line + "\n"
    text = out.read_text()
    at = text.find(line)
    if at < 0:
        raise ValueError(f"--out {out}: exists without the line {line!r}; put it above the hand-written text to "
                         "keep it, or remove the file")
    return text[at:]


def with_tail(generated: str, tail: str) -> str:
    """The doc to write: ``generated`` (trailing blank lines trimmed), a blank line, then ``tail``."""
    return generated.rstrip("\n") + "\n\n" + tail
