"""Entropy-loss and brute-force bounds of the template schemes (Fang's thesis Ch. 6–7), in bits (log base 2).

* :func:`interval_sketch_loss` — Lemma 5: the asymmetric interval sketch s2 loses at most 1 + 2 log q bits.
* :func:`weighted_vault_loss` — Sec. 6.3.2, corrected. The thesis's derivation is
  ``pq log p - (g - 2t' - 1) log p - (qp - g) log(p - 1)``; expanding gives
  ``(pq - g) log(p / (p - 1)) + (2t' + 1) log p`` — the thesis prints ``+ g log(p/(p-1))`` (sign error; see
  ``shared/notes/seeds-spec.md``). Its further step ``pq log(p/(p-1)) <= q log e`` is also slightly off
  (``p log(p/(p-1)) > log e``); the valid bound is ``q log e * p/(p-1)``. :func:`weighted_vault_loss_printed`
  keeps the printed form for comparison.
* :func:`vault_bruteforce_bits` — work of the attack that interpolates random (k+1)-subsets of the vault's points
  until one lies on F: log2(C(N, k+1) / C(g, k+1)) expected trials, N points of which g on F.
* :func:`code_offset_loss` — the Reed–Solomon code offset reveals at most its redundancy, ``(d - K) log2 |F|``.
* :func:`mixing_gain` — Theorem 7: mixing a key k into a deterministic, length-preserving sketch raises the
  residual-entropy bound of the biometric by at most H_inf(k) (e.g. a uniformly chosen 4-digit PIN: 13.3 bits).
"""

from __future__ import annotations

import math


def interval_sketch_loss(q: int) -> float:
    """Lemma 5 bound on the entropy loss of one coordinate's s2 sketch: 1 + 2 log2 q."""
    if q < 1:
        raise ValueError(f"q: expected >= 1, got {q}")
    return 1.0 + 2.0 * math.log2(q)


def weighted_vault_loss(p: int, q: int, g: int, t_prime: int) -> float:
    """Corrected Sec. 6.3.2 loss: (pq - g) log2(p/(p-1)) + (2t' + 1) log2 p (field size p, q slots, g = sum of
    weights, t' = g - t)."""
    if p < 2 or q < 1 or not 0 <= g <= p * q:
        raise ValueError(f"weighted vault: expected p >= 2, q >= 1, 0 <= g <= pq; got p={p}, q={q}, g={g}")
    return (p * q - g) * math.log2(p / (p - 1)) + (2 * t_prime + 1) * math.log2(p)


def weighted_vault_loss_derivation(p: int, q: int, g: int, t_prime: int) -> float:
    """The thesis's first line, sketch length minus recoverable randomness: pq log p - (g-2t'-1) log p -
    (qp-g) log(p-1) (equal to :func:`weighted_vault_loss`)."""
    return p * q * math.log2(p) - (g - 2 * t_prime - 1) * math.log2(p) - (q * p - g) * math.log2(p - 1)


def weighted_vault_loss_printed(p: int, q: int, g: int, t_prime: int) -> float:
    """The bound as printed in the thesis (with the sign error): pq log(p/(p-1)) + g log(p/(p-1)) + (2t'+1) log p."""
    r = math.log2(p / (p - 1))
    return p * q * r + g * r + (2 * t_prime + 1) * math.log2(p)


def weighted_vault_loss_upper(p: int, q: int, g: int, t_prime: int) -> float:
    """Closed upper bound of the corrected loss: q log2(e) p/(p-1) + (2t'+1) log2 p (g log(p/(p-1)) dropped)."""
    return q * math.log2(math.e) * p / (p - 1) + (2 * t_prime + 1) * math.log2(p)


def _log2_comb(n: int, k: int) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(2)


def vault_bruteforce_bits(n_points: int, n_on: int, degree: int) -> float:
    """log2 of the expected number of random (k+1)-subsets an attacker interpolates before hitting only points on
    F: log2 C(N, k+1) - log2 C(g, k+1)."""
    if n_on < degree + 1 or n_points < n_on:
        raise ValueError(f"vault: need degree + 1 <= points on F <= points; got {degree}, {n_on}, {n_points}")
    return _log2_comb(n_points, degree + 1) - _log2_comb(n_on, degree + 1)


def code_offset_loss(d: int, k: int, symbol_bits: int = 8) -> float:
    """Entropy loss bound of a code-offset sketch with an [d, K] code over 2^symbol_bits symbols: (d - K) bits."""
    if not 0 < k <= d:
        raise ValueError(f"code offset: expected 0 < K <= d, got K={k}, d={d}")
    return float((d - k) * symbol_bits)


def mixing_gain(n_keys: int) -> float:
    """Theorem 7: most a uniformly chosen key among ``n_keys`` can add to the biometric's residual entropy."""
    return math.log2(n_keys)
