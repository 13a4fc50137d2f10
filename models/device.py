"""Which device networks train and embed on: ``auto`` (CUDA when available), ``cpu`` or ``cuda``.

One setting per process: the command line (``--device``), a ClientApp's run config or a SuperNode's node config
(``device``) choose it with :func:`set_device` / :func:`use_device`; :func:`fedprint.training.trainer.train_siamese`,
:func:`fedprint.training.trainer.embed` and :func:`fedprint.recognition.matching.embed_images` read it
(:func:`current_device`). The
choice is also exported as ``$FEDPRINT_DEVICE`` so processes started afterwards (Flower simulation's workers)
inherit it. Tensors stay on the CPU between calls: a network is moved to the device for a training or embedding
call and back afterwards, so model files, Flower messages and aggregation never see a device tensor, and model
files load on either device (``map_location="cpu"``).

Mixed precision (:func:`autocast`): on CUDA only, bfloat16 where the GPU supports it (no loss scaling needed),
else float16 with a :class:`torch.amp.GradScaler`; never under DP-SGD (per-sample gradient clipping in reduced
precision is not something Opacus documents as supported) — :func:`fedprint.training.dp_sgd.train_siamese_dp` does not
read
the device at all and trains on the CPU in float32. On the CPU nothing changes: no autocast, the same
float32 computation as before, so CPU results are identical whatever ``--device`` says.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

#: Accepted device names.
DEVICES = ("auto", "cpu", "cuda")
#: Environment variable carrying the device to processes started later (simulation workers).
DEVICE_ENV = "FEDPRINT_DEVICE"

_current: torch.device | None = None


def resolve_device(name: str | None) -> torch.device:
    """The torch device meant by ``name`` (``auto``/None: CUDA when available, else CPU).

    Raises
    ------
    ValueError
        One line: an unknown name, or ``cuda`` on a machine where CUDA is not available.
    """
    text = "auto" if name is None else str(name).strip().lower()
    if text not in DEVICES:
        raise ValueError(f"--device: expected one of {', '.join(DEVICES)}, got {name!r}")
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if text == "cuda" and not torch.cuda.is_available():
        why = "this PyTorch build has no CUDA support" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise ValueError(f"--device cuda: CUDA is not available ({why}; torch {torch.__version__}); use --device cpu "
                         "or auto")
    return torch.device(text)


def set_device(name: str | None) -> torch.device:
    """Make ``name`` the device of this process and of processes it starts; returns the resolved device."""
    global _current
    dev = resolve_device(name)
    _current = dev
    os.environ[DEVICE_ENV] = dev.type
    return dev


def current_device() -> torch.device:
    """The device networks train and embed on: the one set last, else ``$FEDPRINT_DEVICE``, else the CPU.

    The fallback is the CPU (not ``auto``) so that library calls that never chose a device behave as before.
    """
    if _current is not None:
        return _current
    env = os.environ.get(DEVICE_ENV, "").strip()
    return resolve_device(env) if env else torch.device("cpu")


@contextlib.contextmanager
def use_device(name: str | None) -> Iterator[torch.device]:
    """Within the block, :func:`current_device` is ``name`` (None: leave it as it is)."""
    global _current
    if name is None or str(name).strip() == "":
        yield current_device()
        return
    before = _current
    _current = resolve_device(name)
    try:
        yield _current
    finally:
        _current = before


def amp_dtype(device: torch.device) -> torch.dtype | None:
    """Reduced precision for autocast on ``device``: bfloat16 / float16 on CUDA, None on the CPU (off)."""
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def autocast(device: torch.device, enabled: bool = True) -> contextlib.AbstractContextManager:
    """``torch.autocast`` on CUDA with :func:`amp_dtype`; a no-op context on the CPU or when not ``enabled``."""
    dtype = amp_dtype(device) if enabled else None
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device, enabled: bool = True) -> torch.amp.GradScaler | None:
    """A gradient scaler when autocast runs in float16 (bfloat16 needs none); None otherwise."""
    if enabled and amp_dtype(device) == torch.float16:
        return torch.amp.GradScaler("cuda")
    return None


@contextlib.contextmanager
def on_device(module: torch.nn.Module, device: torch.device) -> Iterator[torch.nn.Module]:
    """``module`` moved to ``device`` for the block and back to where its parameters were afterwards."""
    params = next(iter(module.parameters()), None)
    home = params.device if params is not None else torch.device("cpu")
    if home == device:
        yield module
        return
    module.to(device)
    try:
        yield module
    finally:
        module.to(home)
