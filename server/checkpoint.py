"""Per-round checkpoints of a federated run: global arrays + strategy state + round log, resumable.

Layout inside a method's run directory::

    checkpoint/arrays-r0007.npz     global model after round 7 (numpy arrays, Flower ArrayRecord keys)
    checkpoint/state.json           {"format", "round", "arrays", "strategy", "strategy_state", "rounds"}

``state.json`` is written (atomically) *after* its arrays file and names it, so whatever instant a run is
killed at, ``state.json`` points to a complete model; older arrays files are deleted afterwards.
"""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord

from data.atomic_io import atomic_write_bytes, write_json

FORMAT = "fedprint-checkpoint/1"


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
