"""A protected template for the deep verifier: the interval sketch of each embedding coordinate, then a
Reed–Solomon code offset (fuzzy commitment, Juels & Wattenberg 1999) over the recovered coordinates.

Enrolment (several impressions, the asymmetric setting of Fang Ch. 6): each coordinate of the unit-norm
embedding is quantised to ``levels`` integer levels (:func:`.quantise.embedding_levels`); b = rounded mean level
of the impressions, v = clip(ceil(max deviation) + margin, 1, q). Per coordinate the interval sketch s2 stores
(b, v) hidden among random intervals (:mod:`.interval_sketch`). A random message of K symbols of GF(2^8) is
Reed–Solomon encoded to a codeword c of length d (the embedding dimension, shortened RS(255, 255 - (d - K))); the
template stores delta = c XOR b (b as 8-bit symbols), a salt and SHA-256(salt || message).

Verification: decode every coordinate of the probe through its interval sketch -> b'; c' = delta XOR b'; RS
decoding corrects up to t = (d - K) // 2 coordinates whose probe fell outside the enrolled interval; the
template matches iff the recovered message has the stored digest.

Entropy loss (bounds, any distribution): interval sketches <= d (1 + 2 log2 q); code offset <= 8 (d - K) (its
redundancy). The sum is an upper bound on what the template reveals about b (see :mod:`.entropy`).
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from fedprint.privacy.templates import interval_sketch
from fedprint.privacy.templates.field import gf
from fedprint.privacy.templates.quantise import embedding_levels

#: Quantisation levels per coordinate (8-bit symbols) and default q, margin.
LEVELS = 256
Q = 8
MARGIN = 2


@functools.cache
def _rs(redundancy: int):
    import galois

    return galois.ReedSolomon(255, 255 - redundancy, field=gf(8))


def enrol(embeddings: np.ndarray, *, k_message: int, q: int = Q, margin: int = MARGIN,
          rng: np.random.Generator | None = None) -> tuple[dict, dict]:
    """Template data (public) and info (in memory only: centres, tolerances) from (n_impressions, d) embeddings."""
    e = np.atleast_2d(np.asarray(embeddings, dtype=np.float64))
    d = e.shape[1]
    if not 1 <= k_message < d <= 255:
        raise ValueError(f"sketch: expected 1 <= K < d <= 255, got K={k_message}, d={d}")
    rng = np.random.default_rng() if rng is None else rng
    lv = embedding_levels(e, LEVELS)
    b = np.clip(np.round(lv.mean(0)).astype(np.int64), 0, LEVELS - 1)
    v = np.clip(np.ceil(np.abs(lv - b).max(0)).astype(np.int64) + margin, 1, q)
    values, lengths = interval_sketch.encode_many(b, v, LEVELS, q, rng)
    msg = rng.integers(0, 256, size=k_message)
    code = _rs(d - k_message).encode(gf(8)(msg)).view(np.ndarray).astype(np.int64)
    salt = rng.bytes(16)
    data = {"sketch": values.astype(np.int16), "lengths": lengths.astype(np.int16),
            "offset": (code ^ b).astype(np.uint8), "salt": salt,
            "digest": hashlib.sha256(salt + msg.astype(np.uint8).tobytes()).digest()}
    return data, {"b": b, "v": v}


def verify(data: dict, params: dict, probe_embedding: np.ndarray) -> dict:
    """Open an embedding-sketch template with a probe embedding; also the number of coordinates outside."""
    k = int(params["k_message"])
    lv = embedding_levels(np.asarray(probe_embedding, dtype=np.float64).ravel(), LEVELS)
    b, _ = interval_sketch.decode_many(lv, data["sketch"].astype(np.int64), data["lengths"].astype(np.int64))
    b = np.clip(b, 0, LEVELS - 1)
    word = gf(8)(data["offset"].astype(np.int64) ^ b)
    msg, n_err = _rs(len(word) - k).decode(word, errors=True)
    ok = n_err >= 0 and hashlib.sha256(data["salt"] + msg.view(np.ndarray).astype(np.uint8).tobytes()).digest() \
        == data["digest"]
    return {"match": bool(ok), "corrected": int(n_err)}


def symbol_errors(info: dict, data: dict, probe_embedding: np.ndarray) -> int:
    """Evaluation only (needs the enrolment ``info``): coordinates the probe decodes wrongly (RS must fix them)."""
    lv = embedding_levels(np.asarray(probe_embedding, dtype=np.float64).ravel(), LEVELS)
    b, _ = interval_sketch.decode_many(lv, data["sketch"].astype(np.int64), data["lengths"].astype(np.int64))
    return int(np.sum(b != info["b"]))
