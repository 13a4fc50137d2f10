"""Finite-field arithmetic for the fuzzy vault: GF(2^m) through the ``galois`` package [1]_.

The vault needs a real field (the thesis writes Z_{pq}, which is not a field for composite pq; see
``shared/notes/seeds-spec.md``). We use GF(2^16) for the plain vault (one 16-bit minutia code per element, as
Nandakumar et al. 2007) and GF(2^(16+s)) for the weighted vault (s bits of slot index, Ch. 6.3 ``H(j, x)``).
Element-wise arithmetic is ``galois``'s (lookup tables, vectorised); on top we add what the vault decoder needs
many times: Lagrange interpolation of a *batch* of (k+1)-point sets at once (Newton divided differences,
vectorised over trials), so thousands of unlock trials cost a few milliseconds.

Speed (measured here, galois 0.4.11, after its one-off JIT warm-up of a few seconds per process): element-wise
multiply/divide of 10^5 GF(2^16) elements ~7 ms; one ``galois.lagrange_poly`` of 9 points ~0.1 ms; the batched
interpolation below runs 4000 unlock trials of 9 points (interpolation + hash check) in ~30 ms. Hand-written field
arithmetic was not needed.

References
----------
.. [1] M. Hostetter, "galois: a performant NumPy extension for Galois fields", https://github.com/mhostetter/galois
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

#: Bits of a minutia code (Nandakumar, Jain & Pankanti 2007: 16-bit abscissae).
CODE_BITS = 16


@functools.cache
def gf(bits: int = CODE_BITS):
    """The field GF(2^bits) as a ``galois`` array class (cached; building it takes ~1 s once)."""
    if not 2 <= bits <= 24:
        raise ValueError(f"bits: expected 2..24 (lookup-table fields), got {bits}")
    import galois

    return galois.GF(2**bits)


def interpolate(xs: np.ndarray, ys: np.ndarray, bits: int = CODE_BITS) -> np.ndarray:
    """Coefficients of the degree-<=k polynomials through many (k+1)-point sets at once.

    Newton divided differences, then conversion to the monomial basis; every step is one vectorised field
    operation over all trials.

    Parameters
    ----------
    xs, ys : int arrays, shape (T, k+1)
        Abscissae (distinct within a row) and ordinates of T point sets, as integers in [0, 2^bits).
    bits : int
        Field size exponent.

    Returns
    -------
    coef : int array, shape (T, k+1)
        Coefficients c_0..c_k (lowest degree first) of each row's interpolating polynomial.
    """
    field = gf(bits)
    x = field(np.asarray(xs, dtype=np.int64))
    d = field(np.asarray(ys, dtype=np.int64)).copy()
    n = x.shape[1]
    raw = np.asarray(xs)
    if ((raw[:, :, None] == raw[:, None, :]).sum() > raw.shape[0] * n):
        raise ValueError("xs: abscissae must be distinct within each point set")
    for j in range(1, n):  # divided differences in place: d[:, i] = f[x_{i-j}..x_i]
        d[:, j:] = (d[:, j:] - d[:, j - 1:-1]) / (x[:, j:] - x[:, :n - j])
    # Horner in Newton form: p = d_{n-1}; p = p * (X - x_i) + d_i for i = n-2..0 (coefficients low->high)
    coef = field.Zeros((x.shape[0], n))
    coef[:, 0] = d[:, n - 1]
    for i in range(n - 2, -1, -1):
        shifted = field.Zeros(coef.shape)
        shifted[:, 1:] = coef[:, :-1]
        coef = shifted - coef * x[:, i:i + 1]
        coef[:, 0] += d[:, i]
    return coef.view(np.ndarray).astype(np.int64)


def evaluate(coef: np.ndarray, xs: np.ndarray, bits: int = CODE_BITS) -> np.ndarray:
    """Values of one polynomial (coefficients low->high) at points ``xs`` (Horner, vectorised over xs)."""
    field = gf(bits)
    x = field(np.asarray(xs, dtype=np.int64))
    c = field(np.asarray(coef, dtype=np.int64))
    out = field.Zeros(x.shape)
    for a in c[::-1]:
        out = out * x + a
    return out.view(np.ndarray).astype(np.int64)


def poly_digest(coef: np.ndarray, salt: bytes) -> bytes:
    """SHA-256 of a polynomial's coefficients (big-endian uint32 each) with a per-template salt.

    Stored in the template to recognise the right polynomial (the role of the CRC in Nandakumar et al. 2007;
    a salted hash instead of a CRC so the check does not itself narrow the secret by a linear relation).
    """
    c = np.asarray(coef, dtype=">u4").tobytes()
    return hashlib.sha256(salt + c).digest()
