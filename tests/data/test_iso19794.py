"""fedprint.data.iso19794: ISO/IEC 19794-2:2005 records written and read back, the layout byte by byte."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from fedprint.data.iso19794 import read, write
from fedprint.data.record import BIFURCATION, ENDING


def test_round_trip_keeps_positions_types_and_angles_within_the_quantum():
    rng = np.random.default_rng(0)
    m = np.column_stack([rng.integers(0, 300, 40), rng.integers(0, 400, 40), rng.uniform(0, 2 * np.pi, 40),
                         rng.choice([ENDING, BIFURCATION], 40), rng.uniform(0, 1, 40)]).astype(float)
    back, info = read(write(m, width=300, height=400, dpi=500, finger_position=2, quality=70))
    assert info == {"width": 300, "height": 400, "dpi": 500.0, "finger_position": 2, "quality": 70}
    np.testing.assert_array_equal(back[:, [0, 1, 3]], m[:, [0, 1, 3]])
    gap = np.abs(np.angle(np.exp(1j * (back[:, 2] - m[:, 2]))))
    assert gap.max() <= np.pi / 256 + 1e-9  # half of the 360/256-degree unit
    assert np.abs(back[:, 4] - m[:, 4]).max() <= 0.005 + 1e-9


def test_the_bytes_follow_the_standard_layout():
    b = write(np.array([[5.0, 6.0, np.pi / 2, BIFURCATION, 1.0]]), width=64, height=48, dpi=500)
    assert len(b) == 24 + 4 + 6 + 2
    assert struct.unpack(">4s4sIHHHHHBB", b[:24]) == (b"FMR\0", b" 20\0", len(b), 0, 64, 48, 197, 197, 1, 0)
    assert struct.unpack(">BBBB", b[24:28]) == (0, 0, 100, 1)
    tx, y, angle, q = struct.unpack(">HHBB", b[28:34])
    # bifurcation = 2 in the top bits; pi/2 in image axes (pointing down) is 270 degrees counter-clockwise
    assert (tx >> 14, tx & 0x3FFF, y, angle, q) == (2, 5, 6, 192, 100) and b[34:] == b"\0\0"


def test_bad_records_and_tables_are_refused_with_what_was_expected():
    with pytest.raises(ValueError, match="shorter than its headers"):
        read(b"FMR\0")
    good = write(np.zeros((1, 4)) + [1, 1, 0, ENDING], width=8, height=8)
    with pytest.raises(ValueError, match="expected 'FMR' version ' 20'"):
        read(b"XYZ\0" + good[4:])
    with pytest.raises(ValueError, match="header says"):
        read(good + b"\0")
    with pytest.raises(ValueError, match="inside the 8 x 8 image"):
        write(np.array([[9.0, 1, 0, ENDING]]), width=8, height=8)
    with pytest.raises(ValueError, match="type must be"):
        write(np.array([[1.0, 1, 0, 2]]), width=8, height=8)
    with pytest.raises(ValueError, match="at most 255"):
        write(np.tile([1.0, 1, 0, ENDING], (256, 1)), width=8, height=8)
