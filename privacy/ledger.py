"""A per-institution privacy ledger: every release recorded, releases beyond the budget refused.

Budget unit. The budget is **per finger identity** (``unit``, e.g. ``"casia-00017"``): every finger of the
institution may spend up to ``total_epsilon`` (and ``total_delta``). A release names the unit(s) whose data it
reads.

Composition rules applied when charging a release of (ε, δ) that names ``units`` (one entry per part):

* Sequential composition (Dwork & Roth Thm 3.16): the ε of all releases that read a unit's data add up.
  ε and δ are each mechanism's own ε under its own neighbouring relation (``Publication.spent_epsilon``); the
  guarantee statement stored with each entry says which relation that is.
* Parallel composition (McSherry 2009): a release whose parts act on *disjoint* data, one part per unit
  (``disjoint=True``, e.g. one image each of different fingers, each published with ε), costs each unit only
  the ε of its own part(s): a unit named twice pays twice. A release that does not declare disjointness
  (``disjoint=False``) may mix its parts' data, so every unit named pays ε × (number of parts).
* Windowed ("sustainable") budget, Fang 2013 Ch. 5 Thm 4: with ``window = w`` and ``window_epsilon = ε_w``,
  every w consecutive rounds spend at most ε_w per unit. A round is the ledger's release counter (each release
  its own round) unless the caller passes ``round`` (e.g. the federated round). By Thm 4 the whole, unbounded
  sequence of releases is then ε_w-DP under w-neighbourhood (a finger's data differing only within w
  consecutive rounds); under the standard neighbourhood only ``total_epsilon`` bounds it (None = no total cap,
  only allowed together with a window).

Two-phase use, so a mechanism that fails charges nothing::

    with ledger.charge(0.5, units="f1", mechanism="pointset", variant="sound") as c:
        pub = publish_pointset(...)          # raises -> nothing recorded
        c.describe(pub)                      # optional: dp flag / guarantee / spent ε from the Publication
    # leaving the block normally commits (re-checked under the file lock)

or ``r = ledger.reserve(...)`` (checks, raises :class:`BudgetExceeded`) → run → ``ledger.commit(r)``.

Persistence: one JSON file, rewritten atomically (temporary file in the same directory, flush + fsync,
``os.replace``, fsync of the directory), so a crash mid-write leaves the previous complete ledger; updates are
serialised between processes by an ``fcntl`` lock on ``<path>.lock``.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "fedprint-privacy-ledger"
VERSION = 1
_TOL = 1e-12  # floating-point slack when comparing sums of ε with a budget


class BudgetExceeded(ValueError):
    """A release would exceed the ledger's total or windowed budget; nothing was charged."""


@dataclass
class Reservation:
    """A checked, not yet committed release (see :meth:`Ledger.reserve`)."""

    epsilon: float
    delta: float
    units: list[str]
    disjoint: bool
    round: int | None
    info: dict[str, Any] = field(default_factory=dict)

    def describe(self, publication: Any) -> None:
        """Take dp flag, guarantee and spent ε/δ (which may not exceed the reserved ones) from a Publication."""
        eps, delta = float(publication.spent_epsilon), float(publication.spent_delta)
        if eps > self.epsilon + _TOL or delta > self.delta + _TOL:
            raise BudgetExceeded(f"the release spent (epsilon={eps}, delta={delta}) but only "
                                 f"(epsilon={self.epsilon}, delta={self.delta}) was reserved")
        self.epsilon, self.delta = eps, delta
        g = publication.guarantee
        self.info.update(mechanism=publication.mechanism, variant=publication.variant, dp=bool(g.dp),
                         guarantee=g.statement())


def _positive(value: float | None, name: str, *, allow_zero: bool = False, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}: expected a finite number {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


class Ledger:
    """Privacy ledger persisted at ``path`` (see the module docstring).

    Parameters
    ----------
    path : path
        JSON file; created on the first commit. An existing file must have the same configuration.
    total_epsilon : float or None
        Budget per unit under sequential composition; None only together with a window.
    total_delta : float, default 0
        δ budget per unit (δ adds up sequentially).
    window : int, optional
        Window length w in rounds for the sustainable budget (Fang 2013 Thm 4).
    window_epsilon : float, optional
        ε_w: at most this much per unit in every w consecutive rounds.
    """

    def __init__(self, path: str | Path, total_epsilon: float | None, total_delta: float = 0.0,
                 window: int | None = None, window_epsilon: float | None = None) -> None:
        self.path = Path(path)
        self.total_epsilon = _positive(total_epsilon, "total_epsilon", allow_none=True)
        self.total_delta = _positive(total_delta, "total_delta", allow_zero=True)
        if (window is None) != (window_epsilon is None):
            raise ValueError("window and window_epsilon: give both or neither")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window: expected an integer >= 1 (rounds), got {window!r}")
        self.window = window
        self.window_epsilon = _positive(window_epsilon, "window_epsilon", allow_none=True)
        if self.total_epsilon is None and window is None:
            raise ValueError("total_epsilon: None (no total cap) is only allowed with a window budget")
        data = self._read()
        if data is not None and data["config"] != self._config():
            raise ValueError(f"{self.path}: ledger was created with {data['config']}, not {self._config()}")

    @classmethod
    def open(cls, path: str | Path) -> Ledger:
        """An existing ledger with the configuration stored in its file."""
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such privacy ledger (create one by giving its budget)")
        probe = cls.__new__(cls)
        probe.path = p
        data = probe._read()
        return cls(p, **data["config"])

    # ------------------------------------------------------------------------------------------- storage
    def _config(self) -> dict:
        return {"total_epsilon": self.total_epsilon, "total_delta": self.total_delta, "window": self.window,
                "window_epsilon": self.window_epsilon}

    def _read(self) -> dict | None:
        if not self.path.exists():
            return None
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{self.path}: not a readable privacy ledger ({exc})") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("releases"), list):
            raise ValueError(f"{self.path}: not a {FORMAT} file")
        return data

    def _write(self, data: dict) -> None:
        """Atomic replace: a crash at any point leaves either the old or the new complete file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            if tmp.exists():
                tmp.unlink()
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    @contextmanager
    def _locked(self) -> Iterator[dict]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self._read() or {"format": FORMAT, "version": VERSION, "config": self._config(),
                                       "releases": []}
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # ---------------------------------------------------------------------------------------- accounting
    @staticmethod
    def _costs(units: list[str], disjoint: bool, epsilon: float, delta: float) -> dict[str, tuple[float, float]]:
        if disjoint:
            return {u: (epsilon * units.count(u), delta * units.count(u)) for u in dict.fromkeys(units)}
        return {u: (epsilon * len(units), delta * len(units)) for u in dict.fromkeys(units)}

    def _check(self, data: dict, res: Reservation) -> int:
        """Raise BudgetExceeded if ``res`` does not fit; return the round it will be recorded in."""
        releases = data["releases"]
        rnd = res.round if res.round is not None else 1 + max((r["round"] for r in releases), default=0)
        for unit, (eps, delta) in self._costs(res.units, res.disjoint, res.epsilon, res.delta).items():
            mine = [(r["round"], r["costs"][unit]) for r in releases if unit in r["costs"]]
            spent_e = sum(c[0] for _, c in mine)
            spent_d = sum(c[1] for _, c in mine)
            if self.total_epsilon is not None and spent_e + eps > self.total_epsilon + _TOL:
                raise BudgetExceeded(f"unit {unit!r}: release of epsilon={eps:g} refused, {spent_e:g} of "
                                     f"{self.total_epsilon:g} already spent (remaining "
                                     f"{max(self.total_epsilon - spent_e, 0):g})")
            if spent_d + delta > self.total_delta + _TOL:
                raise BudgetExceeded(f"unit {unit!r}: release of delta={delta:g} refused, {spent_d:g} of "
                                     f"{self.total_delta:g} already spent")
            if self.window is not None:
                for start in range(rnd - self.window + 1, rnd + 1):  # every window containing this round
                    used = sum(c[0] for r, c in mine if start <= r < start + self.window)
                    if used + eps > self.window_epsilon + _TOL:
                        raise BudgetExceeded(
                            f"unit {unit!r}: release of epsilon={eps:g} in round {rnd} refused, rounds "
                            f"{start}..{start + self.window - 1} already spend {used:g} of the window budget "
                            f"{self.window_epsilon:g} (Fang 2013 Thm 4)")
        return rnd

    def reserve(self, epsilon: float, units: str | Sequence[str], *, delta: float = 0.0, disjoint: bool = True,
                round: int | None = None, mechanism: str = "", variant: str = "", dp: bool = True,
                guarantee: str = "", image_id: str = "") -> Reservation:
        """Phase 1: check that a release fits the budget (raises :class:`BudgetExceeded`); records nothing.

        Parameters
        ----------
        epsilon, delta : float
            What the release spends (its ε > 0 and δ >= 0).
        units : str or sequence of str
            Finger identities the release reads, one entry per part (see the module docstring).
        disjoint : bool, default True
            The parts act on disjoint data (parallel composition across units).
        round : int, optional
            Round number for the windowed budget (default: the next release counter).
        mechanism, variant, dp, guarantee, image_id : recorded with the release.
        """
        eps = _positive(epsilon, "epsilon")
        dlt = _positive(delta, "delta", allow_zero=True)
        units = [units] if isinstance(units, str) else [str(u) for u in units]
        if not units or any(not u for u in units):
            raise ValueError(f"units: expected one or more non-empty unit names, got {units!r}")
        if round is not None and (isinstance(round, bool) or not isinstance(round, int) or round < 1):
            raise ValueError(f"round: expected an integer >= 1, got {round!r}")
        res = Reservation(eps, dlt, units, bool(disjoint), round,
                          {"mechanism": mechanism, "variant": variant, "dp": bool(dp), "guarantee": guarantee,
                           "image_id": image_id})
        with self._locked() as data:
            self._check(data, res)
        return res

    def commit(self, res: Reservation) -> dict:
        """Phase 2: re-check under the lock (another process may have spent meanwhile) and record atomically."""
        with self._locked() as data:
            rnd = self._check(data, res)
            costs = self._costs(res.units, res.disjoint, res.epsilon, res.delta)
            entry = {"id": 1 + max((r["id"] for r in data["releases"]), default=0), "time": time.time(),
                     "round": rnd, "epsilon": res.epsilon, "delta": res.delta, "units": res.units,
                     "disjoint": res.disjoint, "costs": {u: list(c) for u, c in costs.items()}, **res.info}
            data["releases"].append(entry)
            self._write(data)
        return entry

    @contextmanager
    def charge(self, epsilon: float, units: str | Sequence[str], **kwargs: Any) -> Iterator[Reservation]:
        """Reserve, run the body, commit only if the body did not raise (same arguments as :meth:`reserve`)."""
        res = self.reserve(epsilon, units, **kwargs)
        yield res
        self.commit(res)

    # ------------------------------------------------------------------------------------------- queries
    def history(self) -> list[dict]:
        """All committed releases, oldest first."""
        data = self._read()
        return list(data["releases"]) if data else []

    def spent(self, unit: str) -> tuple[float, float]:
        """(ε, δ) spent so far by ``unit``."""
        costs = [r["costs"][unit] for r in self.history() if unit in r["costs"]]
        return sum(c[0] for c in costs), sum(c[1] for c in costs)

    def remaining(self, unit: str) -> float:
        """ε ``unit`` may still spend under the total budget (inf without a total cap)."""
        if self.total_epsilon is None:
            return math.inf
        return max(self.total_epsilon - self.spent(unit)[0], 0.0)
