"""fedprint.recognition.calibration: what `fedprint calibrate` does, called from Python."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprint.data.stripes import stripe_records
from fedprint.models.metrics import threshold_at_fmr
from fedprint.models.model_file import load_model, model_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder
from fedprint.recognition.calibration import calibrate, operating_point


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("cal") / "m.pt"
    path.write_bytes(model_bytes(build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
                                 encoder_kwargs={"width": 4}, spec=InputSpec(size=32), threshold=0.6, method="toy"))
    return path


def test_operating_point_refuses_an_fmr_the_impostors_cannot_resolve():
    d, lab = np.linspace(0, 1, 60), np.r_[np.ones(10), np.zeros(50)].astype(int)
    with pytest.raises(ValueError, match="50 impostor pairs cannot resolve FMR 1 %"):
        operating_point(d, lab, fmr=0.01)
    point, what = operating_point(d, lab, fmr=0.1)
    assert what == "FMR <= 10 %" and point == threshold_at_fmr(d, lab, 0.1, False)


def test_calibrate_returns_a_model_whose_threshold_is_the_chosen_one(model_path, tmp_path):
    records = stripe_records(n_fingers=6, n_impressions=4, size=40, seed=3)
    cal = calibrate(model_path, records, at_eer=True, protocol="all", data=tmp_path)
    assert cal.score == "global" and cal.n_genuine == 6 * 6 and cal.n_impostor == 15 * 16
    out = tmp_path / "cal.pt"
    out.write_bytes(cal.model_bytes)
    m = load_model(out)
    assert m.threshold == pytest.approx(cal.threshold) and m.threshold != 0.6
    assert m.meta["calibration"]["n_impostor"] == cal.n_impostor and str(tmp_path) in cal.source
    assert load_model(model_path).threshold == 0.6  # the input file is never written
    with pytest.raises(ValueError, match="--score"):
        calibrate(model_path, records, score="dense")
