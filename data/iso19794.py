"""ISO/IEC 19794-2:2005 finger minutiae records: what an AFIS reads and writes.

One record holds one finger view: a 24-byte record header (``"FMR\\0"``, version ``" 20\\0"``, record length,
capture equipment, image size in pixels, resolution in pixels per centimetre, number of views), a 4-byte view header
(finger position, view number and impression type, quality, number of minutiae), 6 bytes a minutia and a 2-byte
extended-data length (0 here). A minutia packs its type (2 bits: 01 ridge ending, 10 bifurcation) with ``x``
(14 bits), ``y`` (14 bits, 2 reserved), its angle in units of 360/256 degrees measured counter-clockwise from the
x axis, and its quality in [0, 100]. All integers are big-endian.

FedPrint's minutiae tables (:mod:`fedprint.data.minutiae_backends`: ``x, y, direction, type, quality``, direction
in radians with y down) are mirrored to the standard's counter-clockwise angle and back; positions and angles are
quantised (1 px, 1.4 degrees), which :func:`read` returns as stored.

Examples
--------
>>> import numpy as np
>>> from fedprint.data.iso19794 import read, write
>>> m = np.array([[10, 20, np.pi / 2, 1, 0.8], [30, 40, 0.0, 3, 0.5]])
>>> back, info = read(write(m, width=64, height=64, dpi=500))
>>> back[:, [0, 1, 3]].tolist(), info["width"], info["dpi"]
([[10.0, 20.0, 1.0], [30.0, 40.0, 3.0]], 64, 500.0)
"""

from __future__ import annotations

import struct

import numpy as np

from fedprint.data.record import BIFURCATION, ENDING

_HEADER = struct.Struct(">4s4sIHHHHHBB")
_VIEW = struct.Struct(">BBBB")
_MINUTIA = struct.Struct(">HHBB")
_TYPES = {ENDING: 1, BIFURCATION: 2}
_KINDS = {1: ENDING, 2: BIFURCATION}
#: Pixels per centimetre per dot per inch.
_PPCM = 1 / 2.54


def write(minutiae: np.ndarray, *, width: int, height: int, dpi: float = 500.0, finger_position: int = 0,
          quality: int = 100) -> bytes:
    """An ISO/IEC 19794-2:2005 record of one finger view.

    Parameters
    ----------
    minutiae : ndarray, shape (n, 4) or (n, 5)
        ``x, y, direction, type[, quality]`` (quality in [0, 1]; 1 when absent); at most 255 minutiae.
    width, height : int
        The image's size in pixels (``x < width``, ``y < height``).
    dpi : float, optional
        The image's resolution (stored in pixels per centimetre).
    finger_position : int, optional
        ISO finger code (0 unknown, 1-10 right thumb to left little).
    quality : int, optional
        The view's quality in [0, 100].

    Returns
    -------
    bytes
        The record.
    """
    m = np.asarray(minutiae, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] not in (4, 5):
        raise ValueError(f"minutiae: expected a table of shape (n, 4) or (n, 5), got {m.shape}")
    if len(m) > 255:
        raise ValueError(f"minutiae: an ISO/IEC 19794-2 view holds at most 255 minutiae, got {len(m)}")
    if not (0 < width < 2**14 and 0 < height < 2**14):
        raise ValueError(f"width, height: expected 1 to 16383 pixels, got {width} x {height}")
    if len(m) and (m[:, 0].min() < 0 or m[:, 0].max() >= width or m[:, 1].min() < 0 or m[:, 1].max() >= height):
        raise ValueError(f"minutiae: every position must lie inside the {width} x {height} image")
    bad = set(np.unique(m[:, 3]).tolist()) - set(_TYPES)
    if bad:
        raise ValueError(f"minutiae: type must be {ENDING} (ending) or {BIFURCATION} (bifurcation), got {sorted(bad)}")
    q = m[:, 4] if m.shape[1] == 5 else np.ones(len(m))
    body = b"".join(_MINUTIA.pack((_TYPES[int(t)] << 14) | int(round(x)), int(round(y)),
                                  int(round(np.mod(-d, 2 * np.pi) * 256 / (2 * np.pi))) % 256,
                                  int(round(100 * float(np.clip(qq, 0, 1)))))
                    for x, y, d, t, qq in zip(m[:, 0], m[:, 1], m[:, 2], m[:, 3], q, strict=True))
    ppcm = int(round(dpi * _PPCM))
    length = _HEADER.size + _VIEW.size + len(body) + 2
    return (_HEADER.pack(b"FMR\0", b" 20\0", length, 0, width, height, ppcm, ppcm, 1, 0)
            + _VIEW.pack(finger_position, 0, quality, len(m)) + body + b"\0\0")


def read(data: bytes) -> tuple[np.ndarray, dict]:
    """The first finger view of an ISO/IEC 19794-2:2005 record: its minutiae table (n, 5) and header facts.

    Raises
    ------
    ValueError
        If ``data`` is not such a record (magic, version, length, truncation).
    """
    if len(data) < _HEADER.size + _VIEW.size:
        raise ValueError(f"ISO/IEC 19794-2 record: {len(data)} bytes, shorter than its headers")
    magic, version, length, _, width, height, xres, _, views, _ = _HEADER.unpack_from(data)
    if magic != b"FMR\0" or version != b" 20\0":
        raise ValueError(f"ISO/IEC 19794-2 record: expected 'FMR' version ' 20', got {magic!r} {version!r}")
    if length != len(data) or views < 1:
        raise ValueError(f"ISO/IEC 19794-2 record: header says {length} bytes and {views} views, the data has "
                         f"{len(data)} bytes")
    position, _, quality, n = _VIEW.unpack_from(data, _HEADER.size)
    start = _HEADER.size + _VIEW.size
    if start + n * _MINUTIA.size > len(data):
        raise ValueError(f"ISO/IEC 19794-2 record: {n} minutiae do not fit in {len(data)} bytes")
    rows = []
    for k in range(n):
        tx, ry, a, q = _MINUTIA.unpack_from(data, start + k * _MINUTIA.size)
        kind = _KINDS.get(tx >> 14)
        if kind is None:
            raise ValueError(f"ISO/IEC 19794-2 record: minutia {k} has type {tx >> 14} (not an ending or "
                             "bifurcation)")
        rows.append((tx & 0x3FFF, ry & 0x3FFF, np.mod(-a * 2 * np.pi / 256, 2 * np.pi), kind, q / 100))
    info = {"width": width, "height": height, "dpi": round(xres / _PPCM, 0), "finger_position": position,
            "quality": quality}
    return np.array(rows, dtype=np.float64).reshape(-1, 5), info
