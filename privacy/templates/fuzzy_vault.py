"""Fuzzy vault for minutiae (Juels & Sudan 2006 [1]_; fingerprint realisation of Nandakumar, Jain & Pankanti 2007
[2]_),
with the weighted (asymmetric-setting) variant of Fang's thesis Sec. 6.3 [3]_.

Locking (:func:`lock`). A secret polynomial F of degree k over GF(2^m) is drawn from OS entropy. Each vault
*element* is a 16-bit minutia code c (see :mod:`.quantise`) carrying ``slots`` = q points with abscissae
``H(j, c) = j * 2^16 + c``, j = 0..q-1 (the thesis's ``H(x, y) = x + q y``, realised in the field GF(2^(16 +
ceil log2 q)) because Z_{pq} is not a field). A genuine element of weight v (1 <= v <= q) has v of its q slots,
chosen at random, ON the polynomial, (x, F(x)), and the other q - v OFF it, (x, y != F(x)); a chaff element has all
q slots off. With q = 1 and all weights 1 this is exactly the plain vault: genuine minutiae on F, chaff off F.
Chaff codes never collide with each other or with genuine codes and keep a minimum minutia distance from every
other element (NJP07's rule), so a query minutia matches at most one element. By default (:func:`chaff_codes`)
chaff codes are uniform over the code space — indistinguishable from genuine codes only if those are uniform
too. Real minutiae are not: their directions follow the ridge flow the helper field shows, and they do not keep
the chaff's spacing; the fingerprint construction (:mod:`.chaff`, used by :mod:`.vault_template`) therefore
draws the chaff itself and passes it as ``chaff=`` (issue 59: with uniform chaff the file alone opened every
real template).
The template stores all points (sorted by abscissa: the order reveals nothing), a random salt and
SHA-256(salt || coefficients) to recognise F — not F, the genuine codes or the weights as such; whether the
genuine points can be told from chaff depends on the chaff, and the security is the work of the best attack
(:mod:`fedprint.attacks.template_attacks`), not a count of subsets.

Unlocking (:func:`unlock`). The verifier finds the vault elements its aligned query minutiae match; all slots of
those elements are candidate points. It interpolates degree-k polynomials through k+1 candidate points (all
subsets when there are at most ``max_trials`` of them, else ``max_trials`` random subsets) and accepts the first
whose salted hash matches. Success needs at least k+1 on-polynomial points among the candidates.

References
----------
.. [1] A. Juels, M. Sudan, "A fuzzy vault scheme", Designs, Codes and Cryptography 38, 2006.
.. [2] K. Nandakumar, A. K. Jain, S. Pankanti, "Fingerprint-based fuzzy vault: implementation and performance",
   IEEE TIFS 2(4), 2007 (degree 8, 200 chaff, <= 24 genuine minutiae, GAR ~91 % at FAR ~0.13 % on FVC2002 DB2).
.. [3] C. Fang, "Privacy-preserving publishing and biometric authentication" (PhD thesis), Sec. 6.3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from fedprint.privacy.templates.field import CODE_BITS, evaluate, interpolate, poly_digest
from fedprint.privacy.templates.quantise import CELL, FRAME, SECTORS, code_points

#: Decoding trials per unlock attempt (bounded work; exhaustive below it).
MAX_TRIALS = 4000
_BATCH = 1024


@dataclass(frozen=True)
class Vault:
    """A locked vault: public points, salt and polynomial digest (nothing else).

    Attributes
    ----------
    degree : int
        Degree k of the secret polynomial.
    slots : int
        Points per element q (1: plain vault).
    xs, ys : int arrays, shape (n_elements * slots,)
        Abscissae ``j * 2^16 + code`` and ordinates, sorted by abscissa.
    salt, digest : bytes
        Per-template salt and SHA-256(salt || coefficients).
    """

    degree: int
    slots: int
    xs: np.ndarray
    ys: np.ndarray
    salt: bytes
    digest: bytes

    @property
    def bits(self) -> int:
        return field_bits(self.slots)

    @property
    def codes(self) -> np.ndarray:
        """Element codes (16-bit), one per element, sorted."""
        return np.unique(self.xs & ((1 << CODE_BITS) - 1))

    @property
    def n_points(self) -> int:
        return int(len(self.xs))


def field_bits(slots: int) -> int:
    """Field exponent m for q slots: 16 + ceil(log2 q)."""
    return CODE_BITS + max(0, math.ceil(math.log2(slots)))


def _os_rng(rng: np.random.Generator | None) -> np.random.Generator:
    return np.random.default_rng() if rng is None else rng  # default_rng() seeds itself from OS entropy


def chaff_codes(genuine: np.ndarray, n_chaff: int, *, min_distance: float = 2.5 * CELL,
                min_angle: float = 2 * np.pi / SECTORS * 1.5, rng: np.random.Generator | None = None,
                max_tries: int = 200, allowed: np.ndarray | None = None) -> np.ndarray:
    """Codes of ``n_chaff`` chaff elements, each at least ``min_distance`` px or ``min_angle`` away from every
    genuine element and every earlier chaff element (NJP07 Sec. 3; positions uniform over the frame).

    ``allowed`` (bool, shape (FRAME/CELL, FRAME/CELL), rows = y cells) restricts chaff to the cells where genuine
    minutiae can lie (the print's foreground), so position alone does not tell chaff from genuine.
    Raises ValueError when the frame cannot hold that many chaff points at that distance.
    """
    rng = _os_rng(rng)
    pts = code_points(genuine) if len(genuine) else np.zeros((0, 3))
    out: list[int] = []
    taken = set(int(c) for c in genuine)
    tries = 0
    while len(out) < n_chaff:
        cand = rng.integers(1, 1 << CODE_BITS, size=4 * (n_chaff - len(out)) + 16)
        cp = code_points(cand)
        if allowed is not None:
            keep = allowed[(cp[:, 1] // CELL).astype(int), (cp[:, 0] // CELL).astype(int)]
            cand, cp = cand[keep], cp[keep]
        for c, p in zip(cand, cp, strict=True):
            if int(c) in taken:
                continue
            if len(pts):
                d = np.hypot(pts[:, 0] - p[0], pts[:, 1] - p[1])
                da = np.abs(np.angle(np.exp(1j * (pts[:, 2] - p[2]))))
                if np.any((d < min_distance) & (da < min_angle)):
                    continue
            out.append(int(c))
            taken.add(int(c))
            pts = np.vstack([pts, p])
            if len(out) == n_chaff:
                break
        tries += 1
        if tries > max_tries:
            raise ValueError(f"chaff: could not place {n_chaff} chaff points {min_distance:.0f} px apart in a "
                             f"{FRAME} px frame; lower the chaff count")
    return np.asarray(out, dtype=np.int64)


def lock(genuine: np.ndarray, *, degree: int, n_chaff: int, weights: np.ndarray | None = None, slots: int = 1,
         rng: np.random.Generator | None = None, allowed: np.ndarray | None = None,
         chaff: np.ndarray | None = None) -> tuple[Vault, np.ndarray]:
    """Lock a secret polynomial with genuine element codes (the fuzzy vault [1]_ for minutiae [2]_).

    Parameters
    ----------
    genuine : int array, shape (r,)
        Distinct non-zero 16-bit codes of the genuine elements.
    degree : int
        Polynomial degree k (k+1 coefficients, the secret: (k+1) * m bits).
    n_chaff : int
        Number of chaff elements.
    weights : int array, shape (r,), optional
        Points on F per genuine element, in [1, slots] (default all 1).
    slots : int
        q, points per element.
    rng : numpy Generator, optional
        Tests only; by default OS entropy (never exposed on the command line, nothing stored regenerates it).
    allowed : bool array, optional
        Cells where chaff may lie (see :func:`chaff_codes`; default the whole frame).
    chaff : int array, optional
        Chaff element codes drawn by the caller (distinct, in [1, 2^16), none a genuine code), e.g. matched to
        the fingerprint's helper field (:func:`.chaff.draw_chaff`); then ``n_chaff`` must equal its length and
        ``allowed`` is not used. Default: :func:`chaff_codes`.

    Returns
    -------
    vault : Vault
        The public template: genuine and chaff points mixed, sorted by abscissa, with a salt and the salted
        digest of the polynomial.
    coef : int array, shape (k+1,)
        The secret coefficients (return value only: the caller may use them as a key; never stored).

    Raises
    ------
    ValueError
        If the genuine codes are not distinct codes in [1, 2^16), ``degree`` < 1, the weights do not fit
        ``slots``, there are fewer than k + 1 points on the polynomial, or the frame cannot hold the chaff.

    See Also
    --------
    unlock
    fedprint.privacy.templates.vault_template : enrolment and verification of a finger end to end.

    References
    ----------
    .. [1] A. Juels, M. Sudan, "A fuzzy vault scheme", Designs, Codes and Cryptography 38, 2006.
    .. [2] K. Nandakumar, A. K. Jain, S. Pankanti, "Fingerprint-based fuzzy vault: implementation and
       performance", IEEE TIFS 2(4), 2007.

    Examples
    --------
    Lock a degree-6 polynomial with twelve minutiae (codes of aligned minutiae, :mod:`.quantise`) among 100
    chaff elements; a seeded ``rng`` only makes the example reproducible (enrolment uses OS entropy):

    >>> import numpy as np
    >>> from fedprint.privacy.templates.quantise import minutia_codes
    >>> rng = np.random.default_rng(0)
    >>> minutiae = np.column_stack([rng.uniform(40, 470, 12), rng.uniform(40, 470, 12), rng.uniform(0, 6.28, 12)])
    >>> genuine = minutia_codes(minutiae)
    >>> vault, secret = lock(genuine, degree=6, n_chaff=100, rng=np.random.default_rng(1))
    >>> vault.n_points, len(secret)
    (112, 7)
    """
    rng = _os_rng(rng)
    genuine = np.asarray(genuine, dtype=np.int64)
    if genuine.ndim != 1 or len(np.unique(genuine)) != len(genuine) or np.any(genuine <= 0) \
            or np.any(genuine >= 1 << CODE_BITS):
        raise ValueError("genuine: expected distinct codes in [1, 2^16)")
    if degree < 1:
        raise ValueError(f"degree: expected >= 1, got {degree}")
    w = np.ones(len(genuine), np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
    if w.shape != genuine.shape or np.any(w < 1) or np.any(w > slots):
        raise ValueError(f"weights: expected {len(genuine)} integers in [1, {slots}]")
    if w.sum() < degree + 1:
        raise ValueError(f"genuine: {int(w.sum())} points on the polynomial cannot define degree {degree}")
    bits = field_bits(slots)
    coef = rng.integers(0, 1 << bits, size=degree + 1)
    if chaff is None:
        chaff = chaff_codes(genuine, n_chaff, rng=rng, allowed=allowed)
    else:
        chaff = np.asarray(chaff, dtype=np.int64)
        if chaff.ndim != 1 or len(chaff) != n_chaff or len(np.unique(chaff)) != n_chaff or np.any(chaff <= 0) \
                or np.any(chaff >= 1 << CODE_BITS) or np.isin(chaff, genuine).any():
            raise ValueError(f"chaff: expected {n_chaff} distinct codes in [1, 2^16), none a genuine code")
    codes = np.concatenate([genuine, chaff])
    xs = (np.arange(slots)[None, :] << CODE_BITS) | codes[:, None]  # (elements, q)
    on = np.zeros(xs.shape, bool)
    for i, v in enumerate(w):
        on[i, rng.choice(slots, size=int(v), replace=False)] = True
    fx = evaluate(coef, xs.ravel(), bits).reshape(xs.shape)
    # off points: uniform over the field minus F(x): draw from [1, 2^m) and add (XOR) to F(x), never 0
    off = fx ^ rng.integers(1, 1 << bits, size=xs.shape)
    ys = np.where(on, fx, off)
    order = np.argsort(xs.ravel())
    salt = rng.bytes(16)
    vault = Vault(degree, slots, xs.ravel()[order], ys.ravel()[order], salt, poly_digest(coef, salt))
    return vault, coef


def unlock(vault: Vault, matched_codes: np.ndarray, *, max_trials: int = MAX_TRIALS,
           rng: np.random.Generator | None = None) -> tuple[np.ndarray | None, int]:
    """Try to recover the secret polynomial from the vault elements a query matched (subset decoding [1]_).

    Parameters
    ----------
    vault : Vault
    matched_codes : int array
        16-bit codes of the vault elements the aligned query matched (each at most once).
    max_trials : int
        Bound on interpolations; all C(n, k+1) subsets are tried when that is not more.
    rng : numpy Generator, optional
        Order of the random subsets (not a secret; default seeded 0 for reproducible decisions).

    Returns
    -------
    coef : int array or None
        The secret coefficients, or None when no tried subset reproduces the digest.
    trials : int
        Interpolations performed.

    See Also
    --------
    lock

    References
    ----------
    .. [1] K. Nandakumar, A. K. Jain, S. Pankanti, "Fingerprint-based fuzzy vault: implementation and
       performance", IEEE TIFS 2(4), 2007 (decoding by subsets of k + 1 candidate points).

    Examples
    --------
    With the vault of :func:`lock`'s example: a query that matches nine genuine elements (at least k + 1 = 7)
    recovers the secret, one that matches six does not, and chaff matches do not help.

    >>> import numpy as np
    >>> from fedprint.privacy.templates.quantise import minutia_codes
    >>> rng = np.random.default_rng(0)
    >>> minutiae = np.column_stack([rng.uniform(40, 470, 12), rng.uniform(40, 470, 12), rng.uniform(0, 6.28, 12)])
    >>> genuine = minutia_codes(minutiae)
    >>> vault, secret = lock(genuine, degree=6, n_chaff=100, rng=np.random.default_rng(1))
    >>> coef, trials = unlock(vault, genuine[:9])
    >>> np.array_equal(coef, secret)
    True
    >>> unlock(vault, genuine[:6])  # too few points on the polynomial: nothing to try
    (None, 0)
    >>> chaff = np.setdiff1d(vault.codes, genuine)
    >>> unlock(vault, np.r_[genuine[:3], chaff[:10]])[0] is None
    True
    """
    rng = np.random.default_rng(0) if rng is None else rng
    k1 = vault.degree + 1
    cand = np.isin(vault.xs & ((1 << CODE_BITS) - 1), np.asarray(matched_codes, dtype=np.int64))
    xs, ys = vault.xs[cand], vault.ys[cand]
    n = len(xs)
    if n < k1:
        return None, 0
    if math.comb(n, k1) <= max_trials:
        subsets = np.array(list(combinations(range(n), k1)), dtype=np.int64)
    else:
        subsets = np.argsort(rng.random((max_trials, n)), axis=1)[:, :k1]
    done = 0
    for s in range(0, len(subsets), _BATCH):
        idx = subsets[s:s + _BATCH]
        coefs = interpolate(xs[idx], ys[idx], vault.bits)
        for c in coefs:
            done += 1
            if poly_digest(c, vault.salt) == vault.digest:
                return c, done
    return None, done
