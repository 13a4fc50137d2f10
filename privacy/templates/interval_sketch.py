"""Fang's thesis Sec. 6.2: the asymmetric 1-D interval sketch s2 (auxiliary information mixed into the sketch).

Enrolment gives, per coordinate, an integer centre b in [0, n) and a tolerance v in [1, q] (from several
impressions). ``Enc2`` partitions the line into intervals: (b - v, b + v) and, outwards from it, intervals of
random even lengths 2r, r uniform in [1, q], until [0, n) is covered; the sketch is the first boundary g_1 and the
successive lengths. ``Dec2`` on a probe value d' returns the centre and half-length of the interval containing d':
(b, v) exactly when ``|d' - b| < v``. Because the genuine interval is one of many random-length intervals, v is not
revealed (scheme s1, equal intervals of length 2v - 1, would reveal it).

Entropy loss (Lemma 5): at most 1 + 2 log2 q bits per coordinate (see :func:`.entropy.interval_sketch_loss`).
Randomness: OS entropy unless a generator is injected (tests).
"""

from __future__ import annotations

import numpy as np


def encode(b: int, v: int, n: int, q: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """Sketch of one coordinate: int array ``[g_1, g_2 - g_1, ..., g_k - g_{k-1}]`` (g_1 <= 0, g_k >= n)."""
    if not (1 <= v <= q) or not (0 <= b < n):
        raise ValueError(f"interval sketch: expected 0 <= b < n and 1 <= v <= q, got b={b}, v={v}, n={n}, q={q}")
    rng = np.random.default_rng() if rng is None else rng
    left, right = [b - v], [b + v]
    while left[-1] > 0:
        left.append(left[-1] - 2 * int(rng.integers(1, q + 1)))
    while right[-1] < n:
        right.append(right[-1] + 2 * int(rng.integers(1, q + 1)))
    g = np.array(left[::-1] + right, dtype=np.int64)
    return np.concatenate([g[:1], np.diff(g)])


def decode(d: int, sketch: np.ndarray) -> tuple[int, int]:
    """(centre, half-length) of the sketch interval holding d (``Dec2``); the enrolled (b, v) iff ``|d - b| < v``.

    A probe value on a boundary is taken into the interval to its right (the thesis: first i with g_i > d').
    """
    g = np.cumsum(np.asarray(sketch, dtype=np.int64))
    i = int(np.searchsorted(g, d, side="right"))
    i = min(max(i, 1), len(g) - 1)
    return int((g[i - 1] + g[i]) // 2), int((g[i] - g[i - 1]) // 2)


def encode_many(b: np.ndarray, v: np.ndarray, n: int, q: int, rng: np.random.Generator | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Sketches of many coordinates, concatenated: (values, lengths) with lengths[i] the size of sketch i."""
    rng = np.random.default_rng() if rng is None else rng
    parts = [encode(int(bi), int(vi), n, q, rng) for bi, vi in zip(b, v, strict=True)]
    return np.concatenate(parts), np.array([len(p) for p in parts], dtype=np.int64)


def decode_many(d: np.ndarray, values: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centres and half-lengths decoded for every coordinate of d (see :func:`decode`)."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    out = [decode(int(di), values[s:e]) for di, s, e in zip(d, starts, ends, strict=True)]
    return np.array([o[0] for o in out], np.int64), np.array([o[1] for o in out], np.int64)
