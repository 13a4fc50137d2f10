"""Construction 2 of the minutiae vault (issue 59): chaff directions follow the helper like genuine ones, no pair of
elements violates the spacing rule, under a PIN the stored points keep the rule too, and prints larger than the
frame are refused."""

import numpy as np
import pytest

from fedprint.data.synth.generate import finger_records
from fedprint.data.synth.profiles import get_profile
from fedprint.privacy.templates.alignment import helper_field
from fedprint.privacy.templates.chaff import MIN_ANGLE, MIN_DISTANCE, helper_orientation, spaced, too_close
from fedprint.privacy.templates.quantise import code_points
from fedprint.privacy.templates.vault_template import VaultParams, enrol, template_params, vault_of


@pytest.fixture(scope="module")
def print_and_minutiae():
    img = finger_records(get_profile("casia"), 1, 1, seed=0)[0].image
    helper = helper_field(img)
    rng = np.random.default_rng(1)
    fg = np.argwhere(helper != 255)
    xy = (fg[rng.choice(len(fg), 45, replace=False)][:, ::-1] + rng.random((45, 2))) * 8
    d = np.mod(helper_orientation(helper, xy) + rng.normal(0, 0.1, 45), 2 * np.pi)
    return img, np.column_stack([xy, d, np.ones(45)])


@pytest.mark.parametrize("pin", [None, "1357"])
def test_no_pair_of_elements_violates_the_spacing_rule(print_and_minutiae, pin):
    img, m = print_and_minutiae
    data, info = enrol([m], [img], VaultParams(), pin=pin, rng=np.random.default_rng(2))
    pts = code_points(vault_of(data, template_params(VaultParams(), 1)).codes)
    close = too_close(pts, pts, min_distance=MIN_DISTANCE, min_angle=MIN_ANGLE)
    np.fill_diagonal(close, False)
    assert not close.any()
    assert info["points"] == info["genuine"] + 200 and info["construction"] == 2
    assert template_params(VaultParams(), 1, backend="nbis")["minutiae_backend"] == "nbis"


def test_spaced_keeps_the_first_of_a_close_pair():
    from fedprint.privacy.templates.quantise import minutia_codes

    codes = minutia_codes(np.array([[100.0, 100, 1.0], [104, 100, 1.0], [300, 300, 1.0], [104, 100, 3.0]]))
    assert spaced(code_points(codes)).tolist() == [True, False, True, True]  # opposite direction: kept


def test_prints_larger_than_the_frame_are_refused(print_and_minutiae):
    _, m = print_and_minutiae
    big = np.full((560, 296), 128, np.uint8)  # FVC2002 DB2's size, rotated: 560 rows
    with pytest.raises(ValueError, match=r"IMG 1: print 296 x 560 px exceeds the vault's 512 x 512 px frame"):
        enrol([m], [big], VaultParams(), rng=np.random.default_rng(0))


def test_construction_must_be_known(print_and_minutiae):
    img, m = print_and_minutiae
    with pytest.raises(ValueError, match="construction"):
        enrol([m], [img], VaultParams(), construction=3)
