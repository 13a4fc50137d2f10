"""Quantisation of features to the integers the sketches work on.

* Minutiae (Nandakumar, Jain & Pankanti 2007, Sec. 3): an aligned minutia (x, y, direction) becomes one 16-bit
  code ``u | v | t`` — 6 bits for x and 6 for y (8-pixel cells of a 512 x 512 px frame at 500 dpi) and 4 bits for
  the direction (22.5 degree sectors). Code 0 is never used (a vault point at abscissa 0 would be F(0) = c_0).
* Embeddings: each coordinate of a unit-norm embedding becomes an integer level in [0, levels) on
  [-EMB_RANGE, EMB_RANGE] (values outside are clipped).
"""

from __future__ import annotations

import numpy as np

#: Frame (pixels) covered by the minutia codes, cell size (pixels) and direction sectors.
FRAME = 512
CELL = 8
SECTORS = 16
_XY_BITS = 6
_T_BITS = 4
#: Embedding coordinates are quantised on [-EMB_RANGE, EMB_RANGE].
EMB_RANGE = 0.5


def minutia_codes(minutiae: np.ndarray) -> np.ndarray:
    """16-bit codes (int64, shape (n,)) of minutiae rows ``x, y, direction, ...`` in the vault frame.

    Minutiae outside [0, FRAME) x [0, FRAME) get code -1 (callers drop them); code 0 is mapped to -1 too.
    """
    m = np.atleast_2d(np.asarray(minutiae, dtype=np.float64))
    if m.size == 0:
        return np.zeros(0, dtype=np.int64)
    u = np.floor(m[:, 0] / CELL).astype(np.int64)
    v = np.floor(m[:, 1] / CELL).astype(np.int64)
    t = np.floor(np.mod(m[:, 2], 2 * np.pi) / (2 * np.pi) * SECTORS).astype(np.int64) % SECTORS
    inside = (u >= 0) & (u < FRAME // CELL) & (v >= 0) & (v < FRAME // CELL)
    code = (u << (_XY_BITS + _T_BITS)) | (v << _T_BITS) | t
    return np.where(inside & (code != 0), code, -1)


def code_points(codes: np.ndarray) -> np.ndarray:
    """Cell centres (float64, shape (n, 3): x, y, direction) of 16-bit minutia codes."""
    c = np.asarray(codes, dtype=np.int64)
    u = c >> (_XY_BITS + _T_BITS)
    v = (c >> _T_BITS) & ((1 << _XY_BITS) - 1)
    t = c & ((1 << _T_BITS) - 1)
    return np.stack([(u + 0.5) * CELL, (v + 0.5) * CELL, (t + 0.5) * 2 * np.pi / SECTORS], axis=1)


def embedding_levels(embedding: np.ndarray, levels: int) -> np.ndarray:
    """Integer levels in [0, levels) of embedding coordinates (any shape)."""
    e = np.clip(np.asarray(embedding, dtype=np.float64), -EMB_RANGE, EMB_RANGE - 1e-12)
    return np.floor((e + EMB_RANGE) / (2 * EMB_RANGE) * levels).astype(np.int64)
