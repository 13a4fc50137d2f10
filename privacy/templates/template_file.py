"""The protected-template file: versioned JSON, integrity-checked, never the secret or a minutia in clear.

Layout (``format`` = ``"fedprint-protected-template"``, ``version`` = 2)::

    {"format": ..., "version": 2, "scheme": "vault" | "sketch", "hardened": bool,
     "params": {...}, "data": {name: {"dtype", "shape", "b64"}}, "sha256": <hex of everything above>}

``data`` holds public sketch material only: vault points (genuine indistinguishable from chaff), salts,
the polynomial / secret digest, the (masked, under a PIN) helper field, interval sketches and code offsets.
A file whose checksum, format, version or fields do not check out is refused with one line naming the file, and so
is one whose parameters lie outside their meaningful range (:mod:`.parameters`, checked on writing too).

Version 2 (issue 59) is the vault construction whose chaff follows the helper field and whose genuine points keep
the chaff's spacing (:mod:`.chaff`). A version-1 *vault* file is the first construction, which opens from the file
alone (helper-guided ranking, :func:`fedprint.attacks.template_attacks.helper_guided_attack`): it is refused
with a line saying so (re-enrol). Version-1 *sketch* files are read as before (that scheme did not change).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np

from fedprint.data.atomic_io import atomic_write_bytes
from fedprint.privacy.templates.parameters import check_sketch, check_vault

FORMAT = "fedprint-protected-template"
VERSION = 2
#: Versions still read, per scheme (version-1 vaults are the weak construction: refused).
READABLE = {"vault": (2,), "sketch": (1, 2)}
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
    check_params(scheme, params)
    if path.exists():
        raise FileExistsError(f"{path} exists; templates are never overwritten (give a new name)")
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
    if doc.get("version") == 1 and doc.get("scheme") == "vault":
        raise ValueError(f"{path}: version-1 vault template: the first, weak construction (its chaff is told from "
                         "the genuine minutiae by direction vs the clear helper and by spacing, so it opens from "
                         "the file alone; issue 59) — re-enrol the finger with this FedPrint")
    if doc.get("version") not in READABLE.get(doc.get("scheme"), (VERSION,)):
        raise ValueError(f"{path}: template version {doc.get('version')!r} is not supported (expected {VERSION})")
    if doc.get("sha256") != _digest(doc):
        raise ValueError(f"{path}: damaged template (checksum mismatch)")
    if doc.get("scheme") not in SCHEMES or not isinstance(doc.get("data"), dict):
        raise ValueError(f"{path}: damaged template (scheme or data missing)")
    data = {k: _decode(v, path, k) for k, v in doc["data"].items()}
    params = doc.get("params")
    if not isinstance(params, dict):
        raise ValueError(f"{path}: damaged template (params missing)")
    check_params(doc["scheme"], params, f"{path}: damaged template: ", data)
    return doc["scheme"], dict(params), data, bool(doc.get("hardened"))


def check_params(scheme: str, params: dict, where: str = "", data: dict | None = None) -> dict:
    """The template parameters of ``scheme`` if each lies in its meaningful range (:mod:`.parameters`); ``data``
    (read from a file) gives the sketch's embedding dimension."""
    if scheme == "vault":
        return check_vault(params, where)
    offset = (data or {}).get("offset")
    return check_sketch(params, where, None if offset is None else int(np.size(offset)))
