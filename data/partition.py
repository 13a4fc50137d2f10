"""Institution partitions: which records each federated client holds (Yan et al. 2025, Sec. 5.2).

Yan et al. 2025 evaluates two heterogeneity settings:

* **one dataset per client** -- :func:`partition_by_domain`, one client per domain tag;
* **one dataset split over N clients** -- :func:`partition_split`, IID (equal sizes) or NIID (unequal sizes),
  with a per-client FP-DFSN coefficient β from :func:`beta_schedule` (10 clients, β = 0, 0.1, ..., 0.9).

The unit of a split is the *finger*: every impression of a finger, including altered copies of those
impressions, stays on one client, because a person enrols at one institution. A finger is identified by
``(domain, identity)`` since identities are only unique within a dataset.

Partitions hold int64 indices into the caller's list of :class:`~fedprint.data.record.FingerprintRecord`; images are
never copied.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedprint.data.record import FingerprintRecord

#: FP-DFSN coefficient β used when none is given (Yan et al. 2025, Sec. 5.2: "a coefficient of 0.5").
DEFAULT_BETA = 0.5

#: Split modes understood by :func:`partition_split`.
MODES = ("iid", "niid")


@dataclass(frozen=True, eq=False)
class ClientPartition:
    """The records one federated client (institution) holds.

    Attributes
    ----------
    client_id : int
        0-based client number, also its position in the list returned by the partition functions.
    name : str
        Human-readable client name (the domain tag, or ``"<domain>-c<id>"`` for a split domain).
    domain : str
        Domain tag of the client's records.
    indices : ndarray of int64, shape (n,)
        Sorted indices into the records list the partition was built from (read-only).
    beta : float
        The client's FP-DFSN coefficient β in [0, 1] (Yan et al. 2025, Eq. 10: I_diff = I - β·I_noisy).
    """

    client_id: int
    name: str
    domain: str
    indices: np.ndarray
    beta: float

    def __post_init__(self) -> None:
        idx = np.asarray(self.indices)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"ClientPartition {self.name!r}: indices must be a 1-D integer array, "
                             f"got {idx.dtype}")
        idx = idx.astype(np.int64, copy=True)
        idx.setflags(write=False)  # shared by reference; nobody should reorder a client's data in place
        object.__setattr__(self, "indices", idx)
        _check_beta(self.beta, f"ClientPartition {self.name!r}: beta")

    def __len__(self) -> int:
        return int(self.indices.size)


# ---------------------------------------------------------------------------------------------- helpers


def check_indices(records: Sequence[FingerprintRecord], indices, *, name: str = "indices") -> np.ndarray:
    """Validate record indices and return them as a sorted int64 array.

    Parameters
    ----------
    records : sequence of FingerprintRecord
        The records the indices point into.
    indices : array_like of int or None
        Indices into ``records``; ``None`` means all records. Must be unique and in range.
    name : str
        Parameter name used in error messages.

    Raises
    ------
    ValueError
        If the indices are not 1-D integers, are out of range or contain duplicates.
    """
    n = len(records)
    if indices is None:
        return np.arange(n, dtype=np.int64)
    idx = np.asarray(indices)
    if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        raise ValueError(f"{name}: expected a 1-D array of integer record indices, got dtype {idx.dtype} "
                         f"shape {idx.shape}")
    idx = np.sort(idx.astype(np.int64))
    if idx.size and (idx[0] < 0 or idx[-1] >= n):
        raise ValueError(f"{name}: indices must lie in [0, {n}) for {n} records, "
                         f"got range [{idx[0]}, {idx[-1]}]")
    if idx.size > 1 and np.any(idx[1:] == idx[:-1]):
        dup = idx[1:][idx[1:] == idx[:-1]][0]
        raise ValueError(f"{name}: duplicate record index {dup}")
    return idx


def finger_codes(records: Sequence[FingerprintRecord], indices: np.ndarray) -> tuple[np.ndarray, int]:
    """Integer finger code of each indexed record.

    Two records share a code iff they share ``(domain, identity)`` -- i.e. they are impressions (or altered
    copies of impressions) of the same finger. Codes are ranks of the sorted finger keys, so they do not
    depend on the order of ``indices``.

    Returns
    -------
    codes : ndarray of int64, shape (len(indices),)
    n_fingers : int
    """
    if len(indices) == 0:
        return np.zeros(0, dtype=np.int64), 0
    keys = np.array([f"{records[i].domain}\x00{records[i].identity}" for i in np.asarray(indices).tolist()])
    uniq, codes = np.unique(keys, return_inverse=True)
    return codes.astype(np.int64).reshape(-1), int(uniq.size)


def _check_beta(beta, what: str) -> None:
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.floating, np.integer)):
        raise ValueError(f"{what} must be a number in [0, 1], got {beta!r}")
    if not (math.isfinite(float(beta)) and 0.0 <= float(beta) <= 1.0):
        raise ValueError(f"{what} must lie in [0, 1], got {beta!r}")


def _resolve_betas(betas, n_clients: int) -> list[float]:
    if betas is None:
        return [DEFAULT_BETA] * n_clients
    if isinstance(betas, (int, float, np.floating, np.integer)) and not isinstance(betas, bool):
        _check_beta(betas, "betas")
        return [float(betas)] * n_clients
    betas = list(betas)
    if len(betas) != n_clients:
        raise ValueError(f"betas: expected {n_clients} values (one per client), got {len(betas)}")
    for i, b in enumerate(betas):
        _check_beta(b, f"betas[{i}]")
    return [float(b) for b in betas]


def _largest_remainder(total: int, fractions: np.ndarray) -> np.ndarray:
    """Integer counts summing to ``total``, proportional to ``fractions`` (Hamilton's method)."""
    raw = total * fractions / fractions.sum()
    counts = np.floor(raw).astype(np.int64)
    short = total - int(counts.sum())
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[:short]] += 1
    return counts


# ---------------------------------------------------------------------------------------------- public API


def beta_schedule(n_clients: int, start: float = 0.0, step: float = 0.1) -> list[float]:
    """Per-client FP-DFSN coefficients ``start + i·step`` for ``i = 0 .. n_clients-1``.

    Yan et al. 2025, Sec. 5.2: one dataset split over 10 clients with β = 0, 0.1, ..., 0.9 is
    ``beta_schedule(10)``. Values are rounded to 12 decimals so that 0.1·3 prints as 0.3.

    Raises
    ------
    ValueError
        If ``n_clients < 1`` or any β falls outside [0, 1].
    """
    if isinstance(n_clients, bool) or not isinstance(n_clients, (int, np.integer)) or n_clients < 1:
        raise ValueError(f"n_clients must be an integer >= 1, got {n_clients!r}")
    betas = np.round(float(start) + float(step) * np.arange(n_clients), 12)
    bad = np.flatnonzero(~np.isfinite(betas) | (betas < 0.0) | (betas > 1.0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"beta_schedule(n_clients={n_clients}, start={start}, step={step}): β of client {i} "
                         f"is {betas[i]:g}, outside [0, 1]")
    return [float(b) for b in betas]


def partition_by_domain(
    records: Sequence[FingerprintRecord], *, betas: float | Sequence[float] | None = None
) -> list[ClientPartition]:
    """One client per dataset ("one dataset per client" setting of Yan et al. 2025, Sec. 5.2).

    Parameters
    ----------
    records : sequence of FingerprintRecord
        All records of all institutions.
    betas : float or sequence of float, optional
        FP-DFSN coefficient per client, in the order of the sorted domain tags; a single number applies to
        every client. Default :data:`DEFAULT_BETA` (0.5).

    Returns
    -------
    list of ClientPartition
        Sorted by domain tag; ``client_id`` is the position in that order.
    """
    if len(records) == 0:
        raise ValueError("records: cannot partition an empty record list")
    domains = np.array([r.domain for r in records], dtype=str)
    names, inverse = np.unique(domains, return_inverse=True)
    bs = _resolve_betas(betas, names.size)
    return [
        ClientPartition(client_id=c, name=str(d), domain=str(d), indices=np.flatnonzero(inverse == c),
                        beta=bs[c])
        for c, d in enumerate(names)
    ]


def partition_split(
    records: Sequence[FingerprintRecord],
    n_clients: int,
    *,
    mode: str = "iid",
    alpha: float = 0.5,
    sizes: Sequence[float] | None = None,
    seed: int | np.random.Generator,
    betas: float | Sequence[float] | None = None,
    min_fingers: int = 2,
    domain: str | None = None,
) -> list[ClientPartition]:
    """Split one dataset's fingers over ``n_clients`` institutions (Yan et al. 2025, Sec. 5.2).

    Every image of a finger (all impressions and their altered copies) goes to the same client.

    Parameters
    ----------
    records : sequence of FingerprintRecord
        Records of one domain, or of several if ``domain`` selects one of them.
    n_clients : int
        Number of clients, >= 1.
    mode : {"iid", "niid"}
        ``"iid"``: equal numbers of fingers per client (sizes differ by at most 1).
        ``"niid"``: unequal sizes -- explicit ``sizes`` fractions, or fractions drawn from a symmetric
        Dirichlet(``alpha``) over the clients.
    alpha : float
        Dirichlet concentration for ``mode="niid"`` without ``sizes`` (> 0; smaller = more unequal).
    sizes : sequence of float, optional
        ``mode="niid"`` only: fraction of fingers per client, non-negative, summing to 1. Counts are rounded
        by largest remainder; a client whose count falls below ``min_fingers`` is an error (not silently
        grown).
    seed : int or numpy.random.Generator
        Randomness of the finger shuffle and of the Dirichlet draw.
    betas : float or sequence of float, optional
        FP-DFSN coefficient per client (see :func:`beta_schedule`); default :data:`DEFAULT_BETA` for all.
    min_fingers : int
        Minimum number of fingers per client (>= 1), default 2. With a Dirichlet draw each client first gets
        ``min_fingers`` and the remaining fingers are shared by the drawn fractions.
    domain : str, optional
        Use only the records of this domain. Required when ``records`` holds several domains.

    Returns
    -------
    list of ClientPartition
        ``client_id`` 0..n_clients-1, named ``"<domain>-c<id>"``.
    """
    if isinstance(n_clients, bool) or not isinstance(n_clients, (int, np.integer)) or n_clients < 1:
        raise ValueError(f"n_clients must be an integer >= 1, got {n_clients!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if isinstance(min_fingers, bool) or not isinstance(min_fingers, (int, np.integer)) or min_fingers < 1:
        raise ValueError(f"min_fingers must be an integer >= 1, got {min_fingers!r}")
    if sizes is not None and mode != "niid":
        raise ValueError(f"sizes is only used with mode='niid' (got mode={mode!r}); IID sizes are equal")
    if mode == "niid" and sizes is None and not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a finite Dirichlet concentration > 0, got {alpha!r}")
    bs = _resolve_betas(betas, n_clients)
    rng = np.random.default_rng(seed)

    if len(records) == 0:
        raise ValueError("records: cannot partition an empty record list")
    domains = np.array([r.domain for r in records], dtype=str)
    present = np.unique(domains)
    if domain is None:
        if present.size != 1:
            raise ValueError(f"records hold {present.size} domains {present.tolist()}; partition_split "
                             "splits ONE domain -- pass domain=... or use partition_by_domain")
        domain = str(present[0])
    elif domain not in present:
        raise ValueError(f"domain {domain!r} not among the records' domains {present.tolist()}")
    pool = np.flatnonzero(domains == domain)
    codes, n_fingers = finger_codes(records, pool)

    if n_clients > n_fingers:
        raise ValueError(f"n_clients={n_clients} is more clients than fingers: domain {domain!r} has "
                         f"{n_fingers} fingers")
    if n_clients * min_fingers > n_fingers:
        raise ValueError(f"cannot give each of {n_clients} clients min_fingers={min_fingers} fingers: domain "
                         f"{domain!r} has only {n_fingers} fingers (need {n_clients * min_fingers})")

    if mode == "iid":
        counts = _largest_remainder(n_fingers, np.ones(n_clients))
    elif sizes is not None:
        frac = np.asarray(sizes, dtype=np.float64)
        if frac.shape != (n_clients,):
            raise ValueError(f"sizes: expected {n_clients} fractions (one per client), "
                             f"got shape {frac.shape}")
        if (not np.all(np.isfinite(frac)) or np.any(frac < 0)
                or not math.isclose(frac.sum(), 1.0, abs_tol=1e-6)):
            raise ValueError(f"sizes must be non-negative fractions summing to 1, got {frac.tolist()}")
        counts = _largest_remainder(n_fingers, frac)
        small = np.flatnonzero(counts < min_fingers)
        if small.size:
            c = int(small[0])
            raise ValueError(f"sizes[{c}]={frac[c]:g} gives client {c} {counts[c]} of {n_fingers} fingers, "
                             f"fewer than min_fingers={min_fingers}")
    else:
        frac = rng.dirichlet(np.full(n_clients, float(alpha)))
        counts = min_fingers + _largest_remainder(n_fingers - n_clients * min_fingers, frac)

    # Shuffle fingers, cut into consecutive blocks of the chosen sizes.
    client_of_finger = np.empty(n_fingers, dtype=np.int64)
    client_of_finger[rng.permutation(n_fingers)] = np.repeat(np.arange(n_clients), counts)
    client_of_record = client_of_finger[codes]
    return [
        ClientPartition(client_id=c, name=f"{domain}-c{c:02d}", domain=domain,
                        indices=pool[client_of_record == c], beta=bs[c])
        for c in range(n_clients)
    ]


def summary(partitions: Sequence[ClientPartition], records: Sequence[FingerprintRecord]) -> list[dict]:
    """Per-client counts for reports.

    Returns
    -------
    list of dict
        One dict per partition with keys ``client_id, name, domain, beta, fingers`` (distinct fingers),
        ``impressions`` (distinct ``(finger, impression)`` pairs, altered copies not counted again),
        ``altered`` (altered images) and ``images`` (all records).
    """
    rows = []
    for p in partitions:
        idx = check_indices(records, p.indices, name=f"partition {p.name!r} indices")
        codes, n_fingers = finger_codes(records, idx)
        imp = np.array([records[i].impression for i in idx.tolist()], dtype=np.int64)
        altered = sum(records[i].alteration is not None for i in idx.tolist())
        n_units = int(np.unique(np.stack([codes, imp]), axis=1).shape[1]) if idx.size else 0
        rows.append({
            "client_id": p.client_id, "name": p.name, "domain": p.domain, "beta": p.beta,
            "fingers": n_fingers, "impressions": n_units, "altered": int(altered), "images": int(idx.size),
        })
    return rows
