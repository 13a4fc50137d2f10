"""studies/print_coverage.py: how much of the input window is print, per source and input size."""

from __future__ import annotations

import numpy as np

from studies.print_coverage import coverage_table, main


def _disc(radius: int, side: int = 400) -> np.ndarray:
    """A ridged disc of ``radius`` px on a flat background (a print the segmentation finds)."""
    yy, xx = np.mgrid[:side, :side]
    img = np.full((side, side), 200, np.uint8)
    ridges = (127 + 100 * np.sin(xx / 1.5)).astype(np.uint8)
    inside = (yy - side // 2) ** 2 + (xx - side // 2) ** 2 < radius ** 2
    img[inside] = ridges[inside]
    return img


def test_a_larger_window_holds_less_print_and_captures_more_of_it():
    rows = coverage_table({"small": [(_disc(60), 250.0)], "large": [(_disc(150), 250.0)]}, [64, 192], 250.0)
    cells = {r["source"]: [(r[f"{s} px on print"], r[f"{s} px captured"]) for s in (64, 192)] for r in rows}
    (on64, cap64), (on192, cap192) = cells["small"]
    assert on64 > 0.9 and on192 < 0.4  # a 120 px print fills a 64 px window, not a 192 px one
    assert cap64 < 0.5 < 0.9 < cap192
    assert cells["large"][1][0] > on192  # the larger print fills more of the same window


def test_bad_sizes_are_named(capsys):
    assert main(["--sizes", "12x"]) == 2
    assert "--sizes" in capsys.readouterr().err
