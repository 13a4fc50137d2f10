"""The finished parts of one audit directory, each saved atomically the moment it finishes, so an interrupted
audit keeps everything it finished and a re-run with the same ``--out`` resumes where it stopped."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from fedprint.data.atomic_io import write_json

STATE = "audit_state.json"
FORMAT = "fedprint-audit-state/1"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


class AuditStore:
    """Parts saved under ``<out>/parts/`` plus ``<out>/audit_state.json`` (what was audited, with what settings,
    which parts are finished and how long each took).

    Parameters
    ----------
    out_dir : path
        The audit directory (created if missing).
    identity : dict
        What this audit is (run path and content hash, attacks, settings). An existing directory is only resumed
        when its identity is the same; otherwise it is refused, naming the first difference.
    """

    def __init__(self, out_dir: str | Path, identity: dict[str, Any]) -> None:
        self.out = Path(out_dir)
        self.identity = identity
        path = self.out / STATE
        if path.is_file():

            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ValueError(f"--out {self.out}: unreadable {STATE} ({exc}); use another --out") from None
            if state.get("format") != FORMAT or not isinstance(state.get("parts"), list):
                raise ValueError(f"--out {self.out}: {STATE} is not a FedPrint audit state; use another --out")
            old = state.get("identity", {})
            diff = sorted(k for k in set(old) | set(identity) if old.get(k) != identity.get(k))
            if diff:
                raise ValueError(f"--out {self.out}: holds an audit with a different {', '.join(diff)}; "
                                 f"resume only with the same run, attacks and settings, or use another --out")
            self.parts: list[dict[str, Any]] = state["parts"]
        elif self.out.exists() and any(f.name != "provenance.json" for f in self.out.iterdir()):
            # provenance.json alone: the folder new_run_dir just made for the default --out
            raise ValueError(f"--out {self.out}: exists, is not empty and is not an audit directory")
        else:
            self.out.mkdir(parents=True, exist_ok=True)
            self.parts = []
            self._write_state()

    @property
    def resumed(self) -> bool:
        return bool(self.parts)

    def done(self, name: str) -> bool:
        return any(p["name"] == name for p in self.parts)

    def result(self, name: str) -> Any:

        return json.loads((self.out / "parts" / f"{_slug(name)}.json").read_text())

    def save(self, name: str, result: Any, seconds: float) -> None:
        """Record a finished part: its result file first, then the state naming it (both atomic)."""
        write_json(self.out / "parts" / f"{_slug(name)}.json", result)
        self.parts = [p for p in self.parts if p["name"] != name]
        self.parts.append({"name": name, "seconds": float(seconds),
                           "finished": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())})
        self._write_state()

    def _write_state(self) -> None:
        write_json(self.out / STATE, {"format": FORMAT, "identity": self.identity, "parts": self.parts})
