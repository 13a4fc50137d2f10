"""Read a finished ``fedprint train`` / ``fedprint simulate`` run directory, read-only: config, model files,
checkpoints, and a hash of every file (so an audit can prove it changed nothing)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from fedprint.config import ExperimentConfig, parse_config
from fedprint.models.siamese import new_encoder


@dataclass
class RunInfo:
    """What an audit reads from a run directory."""

    run_dir: Path
    kind: str  # "train" (fedprint train) or "simulate" (fedprint simulate)
    cfg: ExperimentConfig
    epochs_per_client: int  # passes over its data a client made (epochs x rounds for federated runs)
    models: dict[str, tuple[nn.Module, list[str] | None]] = field(default_factory=dict)  # name -> (net, clients)


def hash_tree(root: str | Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (relative POSIX path -> hex digest)."""
    root = Path(root)
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h = hashlib.sha256()
            with p.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[p.relative_to(root).as_posix()] = h.hexdigest()
    return out


def _strip_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_strip_none(v) for v in obj]
    return obj


def _encoder_from_state(state: dict, encoder: str, embedding_dim: int, where: Path, **kwargs) -> nn.Module:
    net = new_encoder(encoder, embedding_dim, 0, **kwargs)
    try:
        net.load_state_dict(state)
    except RuntimeError as exc:
        raise ValueError(f"{where}: checkpoint does not fit encoder {encoder!r} (d = {embedding_dim}): {exc}") \
            from None
    return net.eval()


def load_run(run_dir: str | Path) -> RunInfo:
    """Read a ``fedprint train`` or ``fedprint simulate`` run directory (config and checkpoints), read-only.

    Train runs: model files ``model_centralized.pt`` (all clients) or ``model_local-<client>.pt`` (that
    client); ``checkpoint_*.pt`` of older runs are read too.
    Simulate runs: the global model of every federated method, ``<method>/checkpoint/state.json`` + arrays.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"--run: run directory not found: {run_dir}")
    cfg_path = run_dir / "config.json"
    if not cfg_path.is_file():
        raise ValueError(f"--run: {run_dir} is not a FedPrint run directory (no config.json)")
    try:
        raw = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cfg_path}: not valid JSON ({exc})") from None
    if "experiment" in raw:
        kind, table = "simulate", raw["experiment"]
    elif "mode" in raw:
        kind, table = "train", {k: v for k, v in raw.items() if k not in ("mode", "input_pipeline")}
    else:
        raise ValueError(f"{cfg_path}: neither a 'fedprint train' nor a 'fedprint simulate' config")
    cfg = parse_config(_strip_none(table), source=str(cfg_path))
    info = RunInfo(run_dir=run_dir, kind=kind, cfg=cfg, epochs_per_client=cfg.train.epochs)
    if kind == "train":
        for path in sorted([*run_dir.glob("model_*.pt"), *run_dir.glob("checkpoint_*.pt")]):
            try:
                ck = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:  # torch raises many types for corrupt / foreign files
                raise ValueError(f"{path}: not a readable model file ({type(exc).__name__})") from None
            name = path.stem.split("_", 1)[1]
            net = _encoder_from_state(ck["state_dict"], ck["encoder"], int(ck["embedding_dim"]), path,
                                      **dict(ck.get("encoder_kwargs") or {}))
            info.models[name] = (net, None if name == "centralized" else [name[len("local-"):]])
    else:
        info.epochs_per_client = cfg.train.epochs * int(raw.get("rounds", 1))
        for state_path in sorted(run_dir.glob("*/checkpoint/state.json")):
            state = json.loads(state_path.read_text())
            with np.load(state_path.parent / state["arrays"]) as npz:
                sd = {k: torch.from_numpy(np.array(npz[f"a{i:04d}"])) for i, k in enumerate(state["keys"])}
            net = _encoder_from_state(sd, cfg.model.encoder, cfg.model.embedding_dim, state_path,
                                      **cfg.model.encoder_kwargs())
            info.models[f"{state_path.parent.parent.name} (round {state['round']})"] = (net, None)
    if not info.models:
        raise ValueError(f"--run: {run_dir} holds no model (model_*.pt, checkpoint_*.pt or */checkpoint/)")
    return info
