"""Primitives of secure aggregation (SecAgg+, Bell et al. CCS 2020; SecAgg, Bonawitz et al. CCS 2017).

Both Flower apps use them: the ClientApp masks its quantised update, the ServerApp sums masked vectors and removes
the masks (:mod:`fedprint.server.secagg`, :mod:`fedprint.client.secagg_client`).

* **Key agreement**: X25519 (``cryptography``); every client makes two fresh key pairs per round, ``c`` to encrypt
  the shares it sends to its neighbours and ``s`` for the pairwise masks.
* **PRG**: AES-256 in counter mode keyed by HKDF-SHA256 of the seed, read as uint32 words: the mask is uniform on the
  ring Z_{2^32}. (Flower 1.41's ``pseudo_rand_gen`` XOR-folds the 32-byte seed to a 32-bit ``RandomState`` seed, so
  its masks have 32 bits of entropy; this PRG keeps all 256.)
* **Ring**: masked vectors live in Z_{2^32} as numpy ``uint32``, whose wrap-around *is* the modular reduction.
* **Quantisation**: a value v in [−c, c] (clipped) maps to ``(v + c)·(R−1)/(2c)`` rounded stochastically
  (unbiased) to {0 … R−1}; a sum of n such integers needs n·(R−1) < 2^32 (:func:`check_ring`).
* **Shamir**: t-of-k sharing of 32-byte secrets over GF(2^521 − 1) (a Mersenne prime > 2^256).
* **Share encryption**: AES-256-GCM keyed by HKDF of the X25519 secret of (c_i, c_j), with the round id, source and
  destination as associated data (the server forwards ciphertexts it cannot read or alter undetected).

Mask randomness, key pairs, seeds and Shamir coefficients come from OS entropy (``secrets`` / ``os.urandom``); only
stochastic rounding takes an optional generator (tests).
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

#: The ring of the masked vectors: Z_{2^32} (numpy uint32 arithmetic wraps around).
MODULUS = 2 ** 32
#: Prime field of the Shamir shares (2^521 − 1 is prime; larger than every 32-byte secret).
PRIME = 2 ** 521 - 1
SHARE_BYTES = 66

#: Flower query actions of stages 1–3 (``query.<action>`` messages; stage 0 rides on the train message).
ACTION_SHARE, ACTION_MASK, ACTION_UNMASK = "secagg_share", "secagg_mask", "secagg_unmask"
#: Train-config key that makes a train round secure (its value: the round id all stages carry).
ROUND_KEY = "secagg-round"


def share_point(node: int) -> int:
    """The Shamir evaluation point of the share a node holds (its node id + 1: distinct, never 0)."""
    return int(node) + 1


# ------------------------------------------------------------------------------------------------ keys
def new_key_pair() -> tuple[bytes, bytes]:
    """A fresh X25519 key pair ``(private, public)``, 32 raw bytes each (OS entropy)."""
    sk = X25519PrivateKey.generate()
    return (sk.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()),
            sk.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def public_of(private: bytes) -> bytes:
    """The public key of an X25519 private key (raw bytes)."""
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def agree(private: bytes, peer_public: bytes, info: bytes) -> bytes:
    """32-byte key shared by two parties: HKDF-SHA256(X25519(private, peer_public), info)."""
    secret = X25519PrivateKey.from_private_bytes(private).exchange(X25519PublicKey.from_public_bytes(peer_public))
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)


# ------------------------------------------------------------------------------------------------ PRG and masks
def prg(seed: bytes, size: int) -> np.ndarray:
    """``size`` uniform uint32 words from a 32-byte seed (AES-256-CTR keystream, zero nonce: one key, one stream)."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"fedprint-secagg-prg").derive(seed)
    enc = Cipher(algorithms.AES(key), modes.CTR(b"\0" * 16)).encryptor()
    return np.frombuffer(enc.update(b"\0" * (4 * size)) + enc.finalize(), dtype="<u4").astype(np.uint32)


def pair_seed(own_private: bytes, peer_public: bytes, round_id: str) -> bytes:
    """The seed of the pairwise mask of two clients (the same on both sides)."""
    return agree(own_private, peer_public, b"fedprint-secagg-mask|" + round_id.encode())


def mask(q: np.ndarray, self_seed: bytes, own_private: bytes, own_id: int, peers: dict[int, bytes],
         round_id: str) -> np.ndarray:
    """y = q + PRG(b) + Σ_{j > i} PRG(s_ij) − Σ_{j < i} PRG(s_ij) in Z_{2^32} (Bonawitz et al. 2017, Sec. 4).

    ``peers``: node id -> public mask key of every neighbour this client masks with (ids differ from ``own_id``).
    """
    y = q.astype(np.uint32) + prg(self_seed, q.size)
    for peer, pk in sorted(peers.items()):
        m = prg(pair_seed(own_private, pk, round_id), q.size)
        y = y + m if own_id < peer else y - m
    return y


def pair_sign(i: int, j: int) -> int:
    """+1 when client i added the pairwise mask of (i, j), −1 when it subtracted it (see :func:`mask`)."""
    return 1 if i < j else -1


# ------------------------------------------------------------------------------------------------ quantisation
def check_ring(n: int, quantization_range: int) -> None:
    """Refuse a sum of ``n`` quantised vectors that could wrap around the ring (the sum would be wrong)."""
    if n * (quantization_range - 1) >= MODULUS:
        raise ValueError(f"secure aggregation: {n} clients x quantization_range {quantization_range} overflow the "
                         f"ring 2^32; lower [federation] secagg_quantization_range below {MODULUS // n}")


def quantize(v: np.ndarray, clipping_range: float, quantization_range: int,
             rng: np.random.Generator | None = None) -> tuple[np.ndarray, int]:
    """Clip ``v`` to [−c, c] and round stochastically onto {0 … R−1}; returns (uint32 vector, coordinates clipped).

    Stochastic rounding is unbiased: E[dequantize(quantize(v))] = clip(v), error below one step 2c/(R−1).
    """
    rng = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    c = float(clipping_range)
    clipped = int(np.count_nonzero(np.abs(v) > c))
    x = (np.clip(np.asarray(v, np.float64), -c, c) + c) * ((quantization_range - 1) / (2 * c))
    low = np.floor(x)
    q = low + (rng.random(x.shape) < (x - low))
    return np.clip(q, 0, quantization_range - 1).astype(np.uint32), clipped


def dequantize_sum(s: np.ndarray, n: int, clipping_range: float, quantization_range: int) -> np.ndarray:
    """Σ of n clipped values from the sum ``s`` of their quantisations (inverse of :func:`quantize`, summed)."""
    step = 2 * float(clipping_range) / (quantization_range - 1)
    return s.astype(np.float64) * step - n * float(clipping_range)


def quantization_step(clipping_range: float, quantization_range: int) -> float:
    """One quantisation step 2c/(R−1): the per-client, per-coordinate rounding error is below it."""
    return 2 * float(clipping_range) / (quantization_range - 1)


# ------------------------------------------------------------------------------------------------ Shamir
def _poly(coeffs: Sequence[int], x: int) -> int:
    y = 0
    for a in reversed(coeffs):
        y = (y * x + a) % PRIME
    return y


def share(secret: bytes, threshold: int, xs: Sequence[int]) -> dict[int, bytes]:
    """Shamir shares of a 32-byte ``secret`` at the points ``xs`` (distinct, in 1 … 2^32): any ``threshold`` of them
    reconstruct it, fewer reveal nothing (Shamir 1979). Returns x -> 66-byte share value."""
    if len(secret) != 32:
        raise ValueError(f"secret: expected 32 bytes, got {len(secret)}")
    if not 1 <= threshold <= len(xs) or len(set(xs)) != len(xs) or min(xs) < 1:
        raise ValueError(f"shares: threshold {threshold} of {len(xs)} distinct points >= 1 expected")
    coeffs = [int.from_bytes(secret, "big")] + [secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    return {int(x): _poly(coeffs, int(x)).to_bytes(SHARE_BYTES, "big") for x in xs}


def combine(shares: dict[int, bytes], threshold: int) -> bytes:
    """The secret from at least ``threshold`` shares (Lagrange interpolation at 0); fewer raise ValueError."""
    if len(shares) < threshold:
        raise ValueError(f"shares: {len(shares)} < threshold {threshold}, the secret cannot be reconstructed")
    pts = [(int(x), int.from_bytes(v, "big")) for x, v in sorted(shares.items())[:threshold]]
    acc = 0
    for i, (xi, yi) in enumerate(pts):
        num = den = 1
        for j, (xj, _) in enumerate(pts):
            if i != j:
                num = num * (-xj) % PRIME
                den = den * (xi - xj) % PRIME
        acc = (acc + yi * num * pow(den, PRIME - 2, PRIME)) % PRIME
    if acc >= 2 ** 256:
        raise ValueError("shares: inconsistent shares (the interpolated value is not a 32-byte secret)")
    return acc.to_bytes(32, "big")


# ------------------------------------------------------------------------------------------------ share transport
def _aad(round_id: str, src: int, dst: int) -> bytes:
    return f"fedprint-secagg|{round_id}|{src}|{dst}".encode()


def seal(key: bytes, round_id: str, src: int, dst: int, payload: bytes) -> bytes:
    """AES-256-GCM encryption of ``payload`` from ``src`` to ``dst`` (nonce prepended)."""
    nonce = os.urandom(12)
    return nonce + AESGCM(key).encrypt(nonce, payload, _aad(round_id, src, dst))


def unseal(key: bytes, round_id: str, src: int, dst: int, ciphertext: bytes) -> bytes:
    """Inverse of :func:`seal`; a ciphertext altered, replayed from another round or re-addressed raises."""
    return AESGCM(key).decrypt(ciphertext[:12], ciphertext[12:], _aad(round_id, src, dst))


def expected_clipped_fraction(clipping_range: float, std: float) -> float:
    """``P(|N(0, std²)| > c)``: the share of coordinates a Gaussian of that std loses to clipping (DP noise sizing)."""
    return math.erfc(clipping_range / (std * math.sqrt(2))) if std > 0 else 0.0


# ------------------------------------------------------------------------------------------------ model vectors
def float_keys(arrays: dict[str, np.ndarray]) -> list[str]:
    """The keys of the floating-point arrays, in the model's order: what secure aggregation sums (integer buffers
    keep the global model's value)."""
    return [k for k, a in arrays.items() if np.issubdtype(np.asarray(a).dtype, np.floating)]


def flat_delta(new: dict[str, np.ndarray], old: dict[str, np.ndarray]) -> np.ndarray:
    """θ_i − θ_g over :func:`float_keys` of ``old``, concatenated (float64)."""
    return np.concatenate([(np.asarray(new[k], np.float64) - np.asarray(old[k], np.float64)).ravel()
                           for k in float_keys(old)] or [np.zeros(0)])


def unflatten(vector: np.ndarray, like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Split a vector over :func:`float_keys` of ``like`` back into arrays of their shapes (float64)."""
    out, pos = {}, 0
    for k in float_keys(like):
        n = int(np.asarray(like[k]).size)
        out[k] = vector[pos:pos + n].reshape(np.asarray(like[k]).shape)
        pos += n
    if pos != vector.size:
        raise ValueError(f"vector: {vector.size} values for {pos} model coordinates")
    return out
