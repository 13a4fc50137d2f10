"""Per-round checkpoints of a federated run: global arrays + strategy state + round log, resumable.

Layout inside a method's run directory::

    checkpoint/arrays-r0007.npz     global model after round 7 (numpy arrays, Flower ArrayRecord keys)
    checkpoint/state.json           {"format", "round", "arrays", "strategy", "strategy_state", "rounds"}

    checkpoint/dp_releases.json     client-level DP runs: every model release, written when it is made

``state.json`` is written (atomically) *after* its arrays file and names it, so whatever instant a run is
killed at, ``state.json`` points to a complete model; older arrays files are deleted afterwards.

``dp_releases.json`` is not rolled back by a resume: Flower sends round t's model to the clients (evaluation)
before round t's checkpoint exists, so a run killed in that window re-runs round t with fresh noise — a second
release of the same data. Each release is appended here (atomically) before its model leaves the server, and the
accountant composes every entry (:meth:`fedprint.server.dp_affr.DPAFFR.accounting`). The log is trusted only as far
as the checkpoint vouches for it: a DP strategy's state records ``releases_logged`` and its rounds done, and a
resume whose log holds fewer releases, or none for a round done, is refused naming the gap
(:meth:`fedprint.server.dp_affr.DPAFFR.load_state_dict`).
"""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord

from fedprint.data.atomic_io import atomic_write_bytes, write_json

FORMAT = "fedprint-checkpoint/1"
RELEASES_FORMAT = "fedprint-dp-releases/1"
RELEASES = "dp_releases.json"


def save_checkpoint(run_dir: str | Path, round_done: int, arrays: ArrayRecord, *, strategy: str,
                    strategy_state: dict[str, Any] | None, rounds: list[dict[str, Any]]) -> Path:
    """Write the checkpoint of round ``round_done``; returns the path of ``state.json``."""
    ckpt = Path(run_dir) / "checkpoint"
    name = f"arrays-r{round_done:04d}.npz"
    buf = io.BytesIO()
    np.savez(buf, **{f"a{i:04d}": arr.numpy() for i, arr in enumerate(arrays.values())})
    atomic_write_bytes(ckpt / name, buf.getvalue())
    state = {"format": FORMAT, "round": int(round_done), "arrays": name, "keys": list(arrays.keys()),
             "strategy": strategy, "strategy_state": strategy_state, "rounds": rounds}
    path = write_json(ckpt / "state.json", state)
    for old in ckpt.glob("arrays-r*.npz"):
        if old.name != name:
            old.unlink(missing_ok=True)
    return path


def load_checkpoint(run_dir: str | Path) -> tuple[dict[str, Any], ArrayRecord] | None:
    """The last checkpoint of ``run_dir`` (state dict, global arrays), or None when there is none."""
    ckpt = Path(run_dir) / "checkpoint"
    path = ckpt / "state.json"
    if not path.is_file():
        return None
    state = json.loads(path.read_text())
    if state.get("format") != FORMAT:
        raise ValueError(f"{path}: expected format {FORMAT!r}, got {state.get('format')!r}")
    with np.load(ckpt / state["arrays"]) as npz:
        values = [npz[f"a{i:04d}"] for i in range(len(state["keys"]))]
    arrays = ArrayRecord(OrderedDict((k, Array(v)) for k, v in zip(state["keys"], values, strict=True)))
    return state, arrays


def load_releases(run_dir: str | Path) -> list[dict[str, Any]]:
    """The client-level DP releases logged in ``run_dir`` (empty list when none)."""
    path = Path(run_dir) / "checkpoint" / RELEASES
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    ok = isinstance(data, dict) and data.get("format") == RELEASES_FORMAT and isinstance(data.get("releases"), list)
    if not ok:
        raise ValueError(f"{path}: expected a {RELEASES_FORMAT!r} release log")
    return list(data["releases"])


def append_release(run_dir: str | Path, release: dict[str, Any]) -> Path:
    """Append one release to ``run_dir``'s DP release log (atomic rewrite); returns its path."""
    releases = [*load_releases(run_dir), release]
    return write_json(Path(run_dir) / "checkpoint" / RELEASES, {"format": RELEASES_FORMAT, "releases": releases})
