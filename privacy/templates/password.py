"""Ch. 7 of Fang's thesis: mixing a PIN / password with the biometric sketch (password-hardened vault, Nandakumar,
Nagar & Jain 2007).

The PIN and a random 16-byte salt give a key (scrypt, N = 2^14, r = 8, p = 1: ~50 ms and 16 MiB per guess).
The key drives two keyed maps, so a template is the cascade ``Q = f(S_1, K)`` of Sec. 7.1.1:

* :func:`transform_minutiae` — before locking (and before matching a query), every aligned minutia is moved by the
  translation and rotation of its 128 x 128 px cell, drawn from the key stream (NNJ07). Two templates of one
  finger made with different salts (or PINs) place the genuine minutiae at unrelated positions: no cross-matching,
  and a new salt revokes a template.
* :func:`mask_helper` — the alignment helper field is masked by a key-stream one-time pad over its 17 symbols
  (16 orientation levels + background), so it no longer links templates either.

What the PIN adds, honestly (Theorem 7, Sec. 7.3.2): at most H_inf(PIN) bits (a 4-digit PIN: 13.3 bits) and only
against an attacker who cannot recognise the right PIN. The template stores no PIN check value (that would let
anyone test PINs offline), so a wrong PIN and a wrong finger look the same ("no match"). But the sketch has
redundancy: unmasked with the right PIN the helper field is a smooth ridge flow, with a wrong one it is noise;
an offline attacker can test all PINs that way (10^4 scrypt calls for 4 digits) and then link or attack the
template as if it were not hardened. Hardening buys revocability and unlinkability against a PIN-less attacker,
plus the PIN's entropy in work; not more.
"""

from __future__ import annotations

import hashlib

import numpy as np

from fedprint.privacy.templates.alignment import BACKGROUND, LEVELS
from fedprint.privacy.templates.quantise import FRAME

#: Cell (pixels) of the keyed per-cell transform and scrypt cost.
TRANSFORM_CELL = 128
SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def derive_key(pin: str, salt: bytes) -> bytes:
    """32-byte key from a PIN/password and a salt (scrypt)."""
    if not pin:
        raise ValueError("PIN: expected a non-empty PIN or password")
    return hashlib.scrypt(pin.encode("utf-8"), salt=salt, dklen=32, maxmem=64 * 2**20, **SCRYPT)


def _stream(key: bytes, label: bytes, n: int) -> np.ndarray:
    """n pseudo-random uint32 values from SHAKE-256(key || label)."""
    return np.frombuffer(hashlib.shake_256(key + label).digest(4 * n), dtype="<u4").astype(np.int64)


def transform_minutiae(minutiae: np.ndarray, key: bytes) -> np.ndarray:
    """Keyed per-cell translation (mod the frame) and rotation of aligned minutiae rows (x, y, direction, ...)."""
    m = np.array(minutiae, dtype=np.float64, copy=True)
    if m.size == 0:
        return m.reshape(0, 4)
    cells = FRAME // TRANSFORM_CELL
    c = cell_transforms(key)
    cx = np.clip(np.floor(m[:, 0] / TRANSFORM_CELL), 0, cells - 1).astype(np.int64)
    cy = np.clip(np.floor(m[:, 1] / TRANSFORM_CELL), 0, cells - 1).astype(np.int64)
    c = c[cy * cells + cx]
    m[:, 0] = np.mod(m[:, 0] + c[:, 0], FRAME)
    m[:, 1] = np.mod(m[:, 1] + c[:, 1], FRAME)
    m[:, 2] = np.mod(m[:, 2] + c[:, 2], 2 * np.pi)
    return m


def cell_transforms(key: bytes) -> np.ndarray:
    """(cells^2, 3) float: per transform cell (row-major, cell = y // 128 * cells + x // 128) the translation
    dx, dy (pixels, mod the frame) and rotation (radians) of :func:`transform_minutiae`. Whoever holds the key
    can invert the transform with it (an attacker who found the PIN: ``attacks.template_attacks``)."""
    cells = FRAME // TRANSFORM_CELL
    s = _stream(key, b"minutiae", 3 * cells * cells).reshape(cells * cells, 3)
    return np.column_stack([s[:, 0] % FRAME, s[:, 1] % FRAME, (s[:, 2] % 3600) / 3600 * 2 * np.pi]).astype(float)


def mask_helper(field: np.ndarray, key: bytes, *, inverse: bool = False) -> np.ndarray:
    """One-time-pad (mod 17) masking of a helper field's symbols (orientation level or background)."""
    sym = np.where(field == BACKGROUND, LEVELS, field.astype(np.int64))
    pad = _stream(key, b"helper", field.size).reshape(field.shape) % (LEVELS + 1)
    out = np.mod(sym - pad if inverse else sym + pad, LEVELS + 1)
    return np.where(out == LEVELS, BACKGROUND, out).astype(np.uint8)
