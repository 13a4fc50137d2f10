"""A per-institution privacy ledger: every release recorded, releases beyond the budget refused.

Budget unit. The budget is **per finger identity** (``unit``, e.g. ``"casia-00017"``) and is a **finger-level**
guarantee: every finger of the institution may spend up to ``total_epsilon`` (and ``total_delta``) where ε is
measured under "two datasets differing in everything this finger contributes". A mechanism whose own
neighbouring relation is smaller (one pixel, one minutia) is charged its finger-level ε by group privacy — the
caller converts (see :mod:`fedprint.privacy.publish.finger_level`) and records both the stated and the finger-level ε
with
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
serialised between processes by an ``fcntl`` lock on the ledger's directory (no lock file is left behind).

The cap is fixed once. The configuration (``total_epsilon``, ``total_delta``, window) is written by whoever
creates the file — the first commit, under the lock — and every later reservation and commit compares its own
configuration with the stored one *under the lock* and refuses a difference, naming both values
(:class:`ConfigMismatch`): two processes that create one ledger at once with different budgets cannot both
spend, each against its own cap.

Nothing read is trusted. A file that is not a complete, self-consistent ledger is refused with its path and the
first problem, never half-read (:func:`_problem`): a known ``version``; every number finite and >= 0 (ε > 0),
never a boolean; ids and rounds 1, 2, 3, ... (a release removed from the middle is noticed); each release's
``costs`` equal to what its ε, δ, units and ``disjoint`` give (they are recomputed, and the recomputed values
are what the budget checks add up — sums are never read from the file); a finger-level ε equal to
``group`` × ``stated_epsilon`` where the release records them (group 1 for ``relation = "finger"``); and no unit
over the stored cap. What validation cannot catch: a holder who rewrites the whole file consistently (a larger
cap, a release deleted at the end) — the ledger is the data holder's own record, not a proof to a third party.

No personal data from file names. Releases made through :mod:`fedprint.privacy.publish.release` record
``content_sha256``, the SHA-256 of the released image's pixels
(:func:`fedprint.privacy.publish.release.content_digest`),
not the input path (SOCOFing-style names encode subject, sex, hand and finger): the holder recomputes the digest
of a file to find the releases that read it. The ``units`` are the finger identities the holder chose; use
pseudonyms there too.
"""

from __future__ import annotations

import fcntl
import json
import logging
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


class ConfigMismatch(ValueError):
    """The ledger on disk was created with another configuration (budget, window) than the one requested.

    Attributes ``stored`` and ``requested`` are the two configurations (dicts of :meth:`Ledger._config`).
    """

    def __init__(self, path: Path, stored: dict, requested: dict) -> None:
        self.stored, self.requested = stored, requested
        diff = ", ".join(f"{k} {_show(stored[k])} (requested {_show(requested[k])})"
                         for k in stored if stored[k] != requested[k])
        super().__init__(f"{path}: this ledger was created with {diff}; a ledger's budget is fixed by whoever "
                         f"creates it — omit the budget options to use the stored ones, or start a new ledger")


def _show(value: Any) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


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
    problem = _number(value, name, positive=not allow_zero)  # the rule the file's numbers are read with
    if problem:
        raise ValueError(problem)
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

    #: Seconds a reservation or commit waits for another process's lock on the ledger before it gives up
    #: (:class:`LedgerBusy`); set it on the instance to change it.
    lock_timeout: float = 60.0

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
        problem = window is not None and _number(window, "window (releases)", positive=True, integer=True)
        if problem:
            raise ValueError(problem)
        self.window = window
        self.window_epsilon = _positive(window_epsilon, "window_epsilon", allow_none=True)
        self._same_config(self._read())  # early, friendly refusal; re-checked under the lock before every use

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

    def _same_config(self, data: dict | None) -> None:
        if data is not None and data["config"] != self._config():
            raise ConfigMismatch(self.path, data["config"], self._config())

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
            _acquire(dir_fd, self.path, self.lock_timeout)
            data = self._read()
            self._same_config(data)  # the stored cap, fixed by the creator, is the one every check uses
            yield data or {"format": FORMAT, "version": VERSION, "config": self._config(), "releases": []}
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
            mine = [(r["round"], c) for r in releases for u, c in _recomputed(r).items() if u == unit]
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
        """(ε, δ) spent so far by ``unit`` (recomputed from each release's ε, δ and units)."""
        return _spent(self.history()).get(unit, (0.0, 0.0))

    def balances(self) -> dict[str, dict[str, float]]:
        """Per unit: ``epsilon`` and ``delta`` spent, ``remaining`` ε, ``releases`` (count), sorted by unit."""
        history = self.history()
        spent = _spent(history)
        count = {u: sum(u in r["units"] for r in history) for u in spent}
        return {u: {"epsilon": e, "delta": d, "remaining": max(self.total_epsilon - e, 0.0), "releases": count[u]}
                for u, (e, d) in sorted(spent.items())}

    def remaining(self, unit: str) -> float:
        """Finger-level ε ``unit`` may still spend under the total budget."""
        return max(self.total_epsilon - self.spent(unit)[0], 0.0)


class LedgerBusy(TimeoutError):
    """Another process held the ledger's lock for longer than the wait allowed (nothing was reserved or charged)."""


def lock_holders(folder: Path) -> list[int]:
    """Process ids holding an ``flock`` on ``folder`` (from Linux's ``/proc/locks``; empty where it cannot tell)."""
    try:
        st = os.stat(folder)
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want and parts[4].isdigit():
            pids.append(int(parts[4]))
    return [p for p in dict.fromkeys(pids) if p != os.getpid()]


def _describe(pids: list[int]) -> str:
    """``process 123 (fedprint publish ...)`` for each holder, or "another process"."""
    out = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = ""
        out.append(f"process {pid}" + (f" ({cmd[:80]})" if cmd else ""))
    return ", ".join(out) or "another process"


def _acquire(dir_fd: int, path: Path, timeout: float) -> None:
    """Lock the ledger's folder; while another process holds it, say (once, on the log) whom this one waits for and
    give up with :class:`LedgerBusy` after ``timeout`` seconds."""
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    who = _describe(lock_holders(path.parent))
    logging.getLogger(__name__).warning("ledger %s is locked by %s; waiting up to %g s for it", path, who, timeout)
    deadline = time.monotonic() + timeout
    while True:
        time.sleep(0.05)
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LedgerBusy(f"ledger {path}: still locked by {who} after {timeout:g} s; nothing was charged. "
                                 "Run again when it has finished (or raise --lock-timeout)") from None


_CONFIG_KEYS = {"total_epsilon", "total_delta", "window", "window_epsilon"}
_RELATIONS = ("finger", "minutia", "pixel")
_REL_TOL = 1e-9  # relative slack when comparing a stored cost with its recomputed value


def _recomputed(entry: dict) -> dict[str, tuple[float, float]]:
    """Per-unit (ε, δ) of one release, recomputed from its ε, δ, units and disjointness (never read)."""
    return Ledger._costs(entry["units"], entry["disjoint"], float(entry["epsilon"]), float(entry["delta"]))


def _spent(releases: list[dict]) -> dict[str, tuple[float, float]]:
    """Per-unit sums of the recomputed costs of ``releases``."""
    total: dict[str, tuple[float, float]] = {}
    for r in releases:
        for u, (e, d) in _recomputed(r).items():
            e0, d0 = total.get(u, (0.0, 0.0))
            total[u] = (e0 + e, d0 + d)
    return total


def _number(value: Any, name: str, *, positive: bool = False, integer: bool = False,
            maximum: float | None = None) -> str | None:
    """Why ``value`` is not a valid ledger number (finite, >= 0 or > 0, optionally an integer), or None."""
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        return f"{name} must be {'an integer' if integer else 'a number'}, got {json.dumps(value)}"
    if not math.isfinite(value) or value < 0 or (positive and value == 0) \
            or (maximum is not None and value > maximum):
        bound = f"in {'(0' if positive else '[0'}, {maximum:g}]" if maximum is not None \
            else "> 0" if positive else ">= 0"
        return f"{name} must be a finite number {bound}, got {value!r}"
    return None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _REL_TOL * max(1.0, abs(a), abs(b))


def _config_problem(config: Any) -> str | None:
    if not isinstance(config, dict) or set(config) != _CONFIG_KEYS:
        got = sorted(config) if isinstance(config, dict) else type(config).__name__
        return f"'config' must have exactly the keys {sorted(_CONFIG_KEYS)}, got {got}"
    problem = _number(config["total_epsilon"], "config total_epsilon", positive=True) \
        or _number(config["total_delta"], "config total_delta", maximum=1.0)
    if problem:
        return problem
    if (config["window"] is None) != (config["window_epsilon"] is None):
        return "config window and window_epsilon: both or neither must be null"
    if config["window"] is not None:
        return _number(config["window"], "config window", positive=True, integer=True) \
            or _number(config["window_epsilon"], "config window_epsilon", positive=True)
    return None


def _entry_problem(entry: Any, i: int) -> str | None:
    """The first problem of release ``i`` (1-based, its expected id and round), or None."""
    where = f"release {i}"
    if not isinstance(entry, dict):
        return f"{where}: expected an object"
    for key in ("id", "round"):
        problem = _number(entry.get(key), f"{where}: {key!r}", positive=True, integer=True)
        if problem:
            return problem
        if entry[key] != i:
            return f"{where}: {key!r} is {entry[key]}, expected {i} (releases are numbered 1, 2, 3, ... and never " \
                   f"removed)"
    problem = _number(entry.get("epsilon"), f"{where}: 'epsilon'", positive=True) \
        or _number(entry.get("delta"), f"{where}: 'delta'", maximum=1.0) \
        or ("time" in entry and _number(entry["time"], f"{where}: 'time'")) or None
    if problem:
        return problem
    units = entry.get("units")
    if not isinstance(units, list) or not units or not all(isinstance(u, str) and u for u in units):
        return f"{where}: 'units' must be a non-empty list of non-empty names, got {json.dumps(units)}"
    if not isinstance(entry.get("disjoint"), bool):
        return f"{where}: 'disjoint' must be true or false, got {json.dumps(entry.get('disjoint'))}"
    costs, expected = entry.get("costs"), _recomputed(entry)
    if not isinstance(costs, dict) or set(costs) != set(expected):
        got = sorted(costs) if isinstance(costs, dict) else json.dumps(costs)
        return f"{where}: 'costs' must name exactly its units {sorted(expected)}, got {got}"
    for unit, (e, d) in expected.items():
        c = costs[unit]
        if not isinstance(c, list) or len(c) != 2:
            return f"{where}: cost of {unit!r} must be [epsilon, delta], got {json.dumps(c)}"
        problem = _number(c[0], f"{where}: epsilon cost of {unit!r}") \
            or _number(c[1], f"{where}: delta cost of {unit!r}")
        if problem:
            return problem
        if not (_close(c[0], e) and _close(c[1], d)):
            return f"{where}: cost of {unit!r} is {c}, but its epsilon, delta and units give [{e:g}, {d:g}]"
    if "relation" in entry and entry["relation"] not in _RELATIONS:
        return f"{where}: 'relation' must be one of {list(_RELATIONS)}, got {json.dumps(entry['relation'])}"
    if "group" in entry:
        problem = _number(entry["group"], f"{where}: 'group'", positive=True, integer=True)
        if problem:
            return problem
        if entry.get("relation") == "finger" and entry["group"] != 1:
            return f"{where}: 'group' of a finger-level release must be 1, got {entry['group']}"
    if "stated_epsilon" in entry:
        problem = _number(entry["stated_epsilon"], f"{where}: 'stated_epsilon'", positive=True)
        if problem:
            return problem
        if "group" in entry and not _close(entry["epsilon"], entry["group"] * entry["stated_epsilon"]):
            return (f"{where}: finger-level epsilon {entry['epsilon']:g} is not group {entry['group']} x stated "
                    f"epsilon {entry['stated_epsilon']:g}")
    return None


def _problem(data: Any) -> str | None:
    """The first reason ``data`` is not a complete, self-consistent ledger document, or None."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return f"expected a JSON object with format {FORMAT!r}"
    if data.get("version") != VERSION:
        return f"unknown version {json.dumps(data.get('version'))} (this FedPrint reads version {VERSION})"
    unknown = sorted(set(data) - {"format", "version", "config", "releases"})
    if unknown:
        return f"unknown top-level key(s) {unknown}"
    problem = _config_problem(data.get("config"))
    if problem:
        return problem
    if not isinstance(data.get("releases"), list):
        return "'releases' must be a list"
    for i, entry in enumerate(data["releases"], start=1):
        problem = _entry_problem(entry, i)
        if problem:
            return problem
    cap, cap_delta = data["config"]["total_epsilon"], data["config"]["total_delta"]
    for unit, (e, d) in _spent(data["releases"]).items():
        if e > cap + _TOL or d > cap_delta + _TOL:
            return f"unit {unit!r} has spent epsilon {e:g}, delta {d:g}, over the cap ({cap:g}, {cap_delta:g})"
    return None
