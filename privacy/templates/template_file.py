"""The protected-template file: versioned JSON, integrity-checked, never the secret or a minutia in clear.

Layout (``format`` = ``"fedprint-protected-template"``, ``version`` = 1)::

    {"format": ..., "version": 1, "scheme": "vault" | "sketch", "hardened": bool,
     "params": {...}, "data": {name: {"dtype", "shape", "b64"}}, "sha256": <hex of everything above>}

``data`` holds public sketch material only: vault points (genuine indistinguishable from chaff), salts,
the polynomial / secret digest, the (masked, under a PIN) helper field, interval sketches and code offsets.
A file whose checksum, format, version or fields do not check out is refused with one line naming the file.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np

from fedprint.data.atomic_io import atomic_write_bytes

FORMAT = "fedprint-protected-template"
VERSION = 1
SCHEMES = ("vault", "sketch")


def _encode(value) -> dict:
    if isinstance(value, bytes | bytearray):
        return {"dtype": "bytes", "shape": [len(value)], "b64": base64.b64encode(bytes(value)).decode()}
    a = np.ascontiguousarray(value)
    return {"dtype": a.dtype.str, "shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode()}


def _decode(item: dict, path: Path, name: str):
    try:
        raw = base64.b64decode(item["b64"], validate=True)
        if item["dtype"] == "bytes":
            return raw
        return np.frombuffer(raw, dtype=np.dtype(item["dtype"])).reshape(item["shape"]).copy()
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: damaged template (field {name!r} unreadable: {exc})") from None


def _digest(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_template(path: str | Path, scheme: str, params: dict, data: dict, *, hardened: bool) -> Path:
    """Write a template atomically (refuses to overwrite an existing file)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: expected one of {SCHEMES}, got {scheme!r}")
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"--out: {path} exists; templates are never overwritten (give a new name)")
    doc = {"format": FORMAT, "version": VERSION, "scheme": scheme, "hardened": bool(hardened),
           "params": params, "data": {k: _encode(v) for k, v in data.items()}}
    doc["sha256"] = _digest(doc)
    return atomic_write_bytes(path, json.dumps(doc, sort_keys=True, indent=1).encode())


def read_template(path: str | Path) -> tuple[str, dict, dict, bool]:
    """(scheme, params, data, hardened) of a template file; ValueError with one clear line when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--template: no such file: {path}")
    try:
        doc = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{path}: not a FedPrint protected template (not JSON; damaged or another file)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not a FedPrint protected template (format field missing or wrong)")
    if doc.get("version") != VERSION:
        raise ValueError(f"{path}: template version {doc.get('version')!r} is not supported (expected {VERSION})")
    if doc.get("sha256") != _digest(doc):
        raise ValueError(f"{path}: damaged template (checksum mismatch)")
    if doc.get("scheme") not in SCHEMES or not isinstance(doc.get("data"), dict):
        raise ValueError(f"{path}: damaged template (scheme or data missing)")
    data = {k: _decode(v, path, k) for k, v in doc["data"].items()}
    return doc["scheme"], dict(doc.get("params", {})), data, bool(doc.get("hardened"))
