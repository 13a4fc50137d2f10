"""studies/repro_003_fig11.py: counts from verification metrics, pooled over institutions and seeds."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.models.metrics import verification_metrics
from studies.repro_003_fig11 import counts_of, plot, pool


def test_counts_read_back_from_metrics_and_pooled(tmp_path):
    rng = np.random.default_rng(0)
    d = np.concatenate([rng.normal(0.5, 0.2, 30), rng.normal(1.2, 0.2, 200)])
    y = np.r_[np.ones(30), np.zeros(200)].astype(int)
    c = counts_of(verification_metrics(d, y, 0.8))
    assert c == {"tp": int((d[:30] <= 0.8).sum()), "fn": int((d[:30] > 0.8).sum()),
                 "fp": int((d[30:] <= 0.8).sum()), "tn": int((d[30:] > 0.8).sum())}
    p = pool([("fedavg", c), ("fedavg", c), ("affr", c), ("local", c)], ["fedavg", "affr"])
    assert p["fedavg"]["tp"] == 2 * c["tp"] and p["fedavg"]["rows"] == 2 and p["affr"]["rows"] == 1
    assert p["affr"]["accuracy"] == pytest.approx((c["tp"] + c["tn"]) / 230)
    plot(p, tmp_path / "f.png", "t")
    assert (tmp_path / "f.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="method 'fedprox'"):
        pool([("fedavg", c)], ["fedprox"])
