"""studies.minutiae_consumers: FP-DFSN's minutiae and noise-mask figures per backend."""

from __future__ import annotations

from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from studies.minutiae_consumers import measure


def test_measure_reports_counts_and_mask_shares_of_the_backend():
    images = [r.image for r in finger_records(get_profile("casia"), finger=0, impressions=2, seed=0)]
    row = measure(images, "crossing")
    assert row["backend"] == "crossing" and row["prints"] == 2 and row["minutiae"] > 0
    assert 0 < row["mask_image"] <= row["mask_foreground"] <= 1 and row["minutiae_min"] <= row["minutiae_max"]
