"""A per-institution privacy ledger: every release recorded, releases beyond the budget refused.

Budget unit. The budget is **per finger identity** (``unit``, e.g. ``"casia-00017"``) and is a **finger-level**
guarantee: every finger of the institution may spend up to ``total_epsilon`` (and ``total_delta``) where ε is
measured under "two datasets differing in everything this finger contributes". A mechanism whose own
neighbouring relation is smaller (one pixel, one minutia) is charged its finger-level ε by group privacy — the
caller converts (see :mod:`privacy.publish.finger_level`) and records both the stated and the finger-level ε with
the relation; the ledger adds finger-level ε only, so it never adds per-pixel ε to per-minutia ε.

Composition rules applied when charging a release of (ε, δ) that names ``units`` (one entry per part):

* Sequential composition (Dwork & Roth Thm 3.16): the finger-level ε of all releases that read a unit's data add
  up, and so do their δ.
* Parallel composition (McSherry 2009): a release whose parts act on *disjoint* data, one part per unit
  (``disjoint=True``, e.g. one image each of different fingers, each published with ε), costs each unit only
  the ε of its own part(s): a unit named twice pays twice. A release that does not declare disjointness
  (``disjoint=False``) may mix its parts' data, so every unit named pays ε × (number of parts).
* A total cap is always required. Fang 2013 Ch. 5 Thm 4's windowed ("sustainable") budget bounds the ε of
  every w consecutive rounds and makes an unbounded sequence ε_w-DP under *w-neighbourhood*, which assumes each
  round's data is fresh. A fingerprint never changes: every release of one finger reads the same data, so
  repeated releases add up without limit (averaging 50 releases removes the noise). ``window`` /
  ``window_epsilon`` may still be set as a rate limit on top of the total cap; they add no guarantee.
* Rounds come from the ledger's own clock — the count of releases it has committed — never from a requester
  (a requester choosing round numbers could space its requests out to dodge the window).

Two-phase use, so a mechanism that fails charges nothing::

    with ledger.charge(0.5, units="f1", mechanism="pointset", variant="sound") as c:
        pub = publish_pointset(...)          # raises -> nothing recorded
    # leaving the block normally commits (re-checked under the lock)

or ``r = ledger.reserve(...)`` (checks, raises :class:`BudgetExceeded`) → run → ``ledger.commit(r)``.

Persistence: one JSON file, rewritten atomically (temporary file in the same directory, flush + fsync,
``os.replace``, fsync of the directory), so a crash mid-write leaves the previous complete ledger; updates are
serialised between processes by an ``fcntl`` lock on the ledger's directory (no lock file is left behind). A
file that is not a complete ledger (unknown or missing keys, malformed entries) is refused with its path and the
first problem, never half-read.
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
    """A checked, not yet committed release (see :meth:`Ledger.reserve`). ``epsilon``/``delta`` are what
    each named unit is charged per part (finger-level)."""

    epsilon: float
    delta: float
    units: list[str]
    disjoint: bool
    info: dict[str, Any] = field(default_factory=dict)


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
    total_epsilon : float
        Finger-level ε budget per unit under sequential composition, > 0. Required: a fingerprint never changes,
        so nothing else bounds what repeated releases of one finger reveal.
    total_delta : float, default 0
        δ budget per unit (δ adds up sequentially).
    window : int, optional
        Rate limit: window length w in releases of this ledger (its own clock).
    window_epsilon : float, optional
        At most this much ε per unit in every w consecutive releases (a rate limit, not a guarantee).
    """

    def __init__(self, path: str | Path, total_epsilon: float, total_delta: float = 0.0,
                 window: int | None = None, window_epsilon: float | None = None) -> None:
        self.path = Path(path)
        if total_epsilon is None:
            raise ValueError("total_epsilon: a total cap is required — a fingerprint never changes, so repeated "
                             "releases of one finger add up without limit (a windowed budget assumes fresh data "
                             "every round)")
        self.total_epsilon = _positive(total_epsilon, "total_epsilon")
        self.total_delta = _positive(total_delta, "total_delta", allow_zero=True)
        if (window is None) != (window_epsilon is None):
            raise ValueError("window and window_epsilon: give both or neither")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window: expected an integer >= 1 (releases), got {window!r}")
        self.window = window
        self.window_epsilon = _positive(window_epsilon, "window_epsilon", allow_none=True)
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
        return cls(p, **data["config"])  # keys validated by _read

    # ------------------------------------------------------------------------------------------- storage
    def _config(self) -> dict:
        return {"total_epsilon": self.total_epsilon, "total_delta": self.total_delta, "window": self.window,
                "window_epsilon": self.window_epsilon}

    def _read(self) -> dict | None:
        if not self.path.exists():
            return None
        try:
            data = json.loads(self.path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{self.path}: not a readable privacy ledger ({exc})") from exc
        problem = _problem(data)
        if problem:
            raise ValueError(f"{self.path}: not a valid {FORMAT} file: {problem}")
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
        dir_fd = os.open(self.path.parent, os.O_RDONLY)  # lock the directory: no lock file to leave behind
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX)
            yield self._read() or {"format": FORMAT, "version": VERSION, "config": self._config(),
                                   "releases": []}
        finally:
            fcntl.flock(dir_fd, fcntl.LOCK_UN)
            os.close(dir_fd)

    # ---------------------------------------------------------------------------------------- accounting
    @staticmethod
    def _costs(units: list[str], disjoint: bool, epsilon: float, delta: float) -> dict[str, tuple[float, float]]:
        if disjoint:
            return {u: (epsilon * units.count(u), delta * units.count(u)) for u in dict.fromkeys(units)}
        return {u: (epsilon * len(units), delta * len(units)) for u in dict.fromkeys(units)}

    def _check(self, data: dict, res: Reservation) -> int:
        """Raise BudgetExceeded if ``res`` does not fit; return the round it will be recorded in."""
        releases = data["releases"]
        rnd = 1 + max((r["round"] for r in releases), default=0)  # the ledger's own clock
        for unit, (eps, delta) in self._costs(res.units, res.disjoint, res.epsilon, res.delta).items():
            mine = [(r["round"], r["costs"][unit]) for r in releases if unit in r["costs"]]
            spent_e = sum(c[0] for _, c in mine)
            spent_d = sum(c[1] for _, c in mine)
            if spent_e + eps > self.total_epsilon + _TOL:
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
                            f"unit {unit!r}: release of epsilon={eps:g} at release {rnd} refused, releases "
                            f"{start}..{start + self.window - 1} already spend {used:g} of the rate limit "
                            f"{self.window_epsilon:g} per {self.window} releases")
        return rnd

    def reserve(self, epsilon: float, units: str | Sequence[str], *, delta: float = 0.0, disjoint: bool = True,
                **info: Any) -> Reservation:
        """Phase 1: check that a release fits the budget (raises :class:`BudgetExceeded`); records nothing.

        Parameters
        ----------
        epsilon, delta : float
            Finger-level ε > 0 and δ >= 0 of the release (per part).
        units : str or sequence of str
            Finger identities the release reads, one entry per part (see the module docstring).
        disjoint : bool, default True
            The parts act on disjoint data (parallel composition across units).
        **info
            Recorded with the release (JSON values): e.g. ``mechanism``, ``variant``, ``dp``, ``guarantee``,
            ``relation`` (the mechanism's own neighbouring relation), ``stated_epsilon``, ``group``.
        """
        eps = _positive(epsilon, "epsilon")
        dlt = _positive(delta, "delta", allow_zero=True)
        units = [units] if isinstance(units, str) else [str(u) for u in units]
        if not units or any(not u for u in units):
            raise ValueError(f"units: expected one or more non-empty unit names, got {units!r}")
        clash = sorted(set(info) & {"id", "time", "round", "epsilon", "delta", "units", "disjoint", "costs"})
        if clash:
            raise ValueError(f"info: {clash} are reserved ledger fields")
        res = Reservation(eps, dlt, units, bool(disjoint), dict(info))
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
        """Finger-level ε ``unit`` may still spend under the total budget."""
        return max(self.total_epsilon - self.spent(unit)[0], 0.0)


_CONFIG_KEYS = {"total_epsilon", "total_delta", "window", "window_epsilon"}
_ENTRY_KEYS = {"id": int, "round": int, "epsilon": float, "delta": float, "units": list, "costs": dict}


def _problem(data: Any) -> str | None:
    """The first reason ``data`` is not a complete ledger document, or None."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return f"expected a JSON object with format {FORMAT!r}"
    config = data.get("config")
    if not isinstance(config, dict) or set(config) != _CONFIG_KEYS:
        got = sorted(config) if isinstance(config, dict) else type(config).__name__
        return f"'config' must have exactly the keys {sorted(_CONFIG_KEYS)}, got {got}"
    if not isinstance(data.get("releases"), list):
        return "'releases' must be a list"
    for i, entry in enumerate(data["releases"]):
        if not isinstance(entry, dict):
            return f"release {i}: expected an object"
        for key, kind in _ENTRY_KEYS.items():
            value = entry.get(key)
            ok = isinstance(value, int | float) and not isinstance(value, bool) if kind is float \
                else isinstance(value, kind) and not isinstance(value, bool)
            if not ok:
                return f"release {i}: {key!r} missing or not a {kind.__name__}"
        costs = entry["costs"]
        if not all(isinstance(c, list) and len(c) == 2 and all(isinstance(v, int | float) for v in c)
                   for c in costs.values()):
            return f"release {i}: 'costs' must map each unit to [epsilon, delta]"
    return None
