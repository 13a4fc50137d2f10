"""The one FedPrint model file: weights, encoder, input pipeline, decision threshold and provenance.

Written by ``fedprint train`` and by every federated method (the final global model of ``simulate``, ``demo``
and deployment runs); read by ``fedprint verify / evaluate / identify`` and the audits. A model file is a
``torch.save`` of plain Python values and tensors only, so :func:`load_model` reads it with
``torch.load(weights_only=True)`` — opening a model file never runs code from it.

Contents (``FORMAT`` = ``"fedprint-model/1"``):

* ``encoder``, ``embedding_dim``, ``encoder_kwargs`` — rebuilt with :func:`fedprint.models.siamese.build_encoder`;
* ``state_dict`` — the weights;
* ``input_pipeline`` — :func:`fedprint.models.preprocess.describe` of the :class:`~fedprint.models.preprocess.InputSpec`
  the model was trained with (inputs must be prepared the same way);
* ``threshold`` — the match decision (Eq. 2: match iff distance <= threshold), chosen on validation pairs
  (never on test pairs), with ``threshold_source`` saying which; None when no validation pairs were available;
  ``calibration`` (optional) — written by ``fedprint calibrate`` (:func:`recalibrated_bytes`): the data, protocol,
  target FMR, pair counts and the FMR / FNMR the stored threshold reached on them;
* ``score_fusion`` (optional) — how to score ``global + dense`` (:func:`fedprint.models.dense_match.fusion_calibration`:
  search radius, the two scores' means and standard deviations and a fused threshold, all from validation pairs);
  written by ``fedprint train`` / ``simulate`` for the compact encoder, absent from deployment runs and older files;
* ``minutiae_fusion`` (optional) — how to fuse the embedding with a classical minutiae matcher (the z-score sum:
  each score's mean and standard deviation on calibration pairs and a fused threshold); written only by
  ``fedprint calibrate --score minutiae`` (:mod:`fedprint.recognition.minutiae_fusion`);
* ``privacy`` (optional) — written for a DP-SGD model (``fedprint train`` with ``[dp]``,
  :func:`fedprint.training.dp_sgd.release_scope`): the guarantee, what it covers (``covered_by_dp``: the weights) and
  ``outside_dp_guarantee``, every other entry of the file that was computed from data without DP (threshold,
  score fusion, test metrics, exact counts) and why;
* ``method``, ``metrics`` (test metrics of the run that wrote it), ``data`` (what it was trained on),
  ``provenance`` (command, FedPrint version, git commit, package versions; see
  :mod:`fedprint.config.provenance`).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import io
import json
import math
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from fedprint.models.preprocess import InputSpec, describe
from fedprint.models.score_range import FUSION_KEYS, GLOBAL_RANGE, check_fusion, check_threshold
from fedprint.models.siamese import build_encoder

FORMAT = "fedprint-model/1"
#: File name of the shipped model (trained on synthetic prints only; see ``models/pretrained/MODEL_CARD.md``).
PRETRAINED = "fedprint-synthetic.pt"
_REQUIRED = ("format", "encoder", "embedding_dim", "state_dict", "input_pipeline", "threshold")


@dataclass
class VerifierModel:
    """A loaded model: the encoder (eval mode), how to prepare its inputs, its threshold and metadata."""

    encoder: nn.Module
    spec: InputSpec
    threshold: float | None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.meta.get("method", "model"))

    @property
    def threshold_source(self) -> str:
        """Where the stored threshold comes from (which pairs, which criterion); "" if the file does not say."""
        return str(self.meta.get("threshold_source") or "")


def model_bytes(encoder: nn.Module, *, encoder_name: str, embedding_dim: int, spec: InputSpec,
                threshold: float | None, threshold_source: str = "", method: str = "",
                metrics: dict | None = None, data: dict | None = None, provenance: dict | None = None,
                encoder_kwargs: dict | None = None, score_fusion: dict | None = None,
                privacy: dict | None = None) -> bytes:
    """Serialise a model file (write it with :func:`fedprint.data.atomic_io.atomic_write_bytes`).

    Parameters
    ----------
    encoder : nn.Module
        The trained encoder (its ``state_dict`` is stored).
    encoder_name, embedding_dim, encoder_kwargs
        How to rebuild it (:func:`fedprint.models.siamese.build_encoder`).
    spec : InputSpec
        The input pipeline it was trained with.
    threshold : float or None
        Distance threshold of the match decision, chosen on validation pairs; None if there were none.
    threshold_source : str
        Where the threshold comes from, e.g. ``"validation pairs of 3 clients (accuracy-optimal)"``.
    method, metrics, data, provenance
        Free-form, JSON-like descriptions (see module docstring).
    score_fusion : dict or None
        :func:`fedprint.models.dense_match.fusion_calibration` of the model's validation pairs (None: none stored).
    privacy : dict or None
        A DP model's release scope (module docstring, ``privacy``); None: none stored.
    """
    if threshold is not None and not math.isfinite(float(threshold)):
        raise ValueError(f"threshold: expected a finite distance or None, got {threshold!r}")
    payload = {
        "format": FORMAT, "encoder": str(encoder_name), "embedding_dim": int(embedding_dim),
        "encoder_kwargs": dict(encoder_kwargs or {}),
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in encoder.state_dict().items()},
        "input_pipeline": describe(spec), "threshold": None if threshold is None else float(threshold),
        "threshold_source": str(threshold_source), "method": str(method), "metrics": dict(metrics or {}),
        "data": dict(data or {}), "provenance": dict(provenance or {}),
    }
    if score_fusion is not None:
        payload["score_fusion"] = dict(score_fusion)
    if privacy is not None:
        payload["privacy"] = dict(privacy)
    buf = io.BytesIO()
    torch.save(payload, buf)
    return buf.getvalue()


def _installed_pretrained() -> list[Path]:
    """Where the installed ``fedprint`` distribution keeps the shipped model (wheel install, editable install)."""
    try:
        dist = importlib.metadata.distribution("fedprint")
    except importlib.metadata.PackageNotFoundError:
        return []
    rel = f"models/pretrained/{PRETRAINED}"  # of the source tree; a wheel puts it under fedprint/
    found = [Path(str(dist.locate_file(f"fedprint/{rel}"))), Path(str(dist.locate_file(rel)))]
    try:  # editable install: the source folder (PEP 610 direct_url.json)
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    url = urllib.parse.urlparse(str(direct.get("url", "")))
    if direct.get("dir_info", {}).get("editable") and url.scheme == "file":
        found.append(Path(urllib.request.url2pathname(url.path)) / rel)
    return found


def pretrained_path() -> Path:
    """Path of the shipped model file (package data of :mod:`fedprint.models`).

    Looked for next to this module (a checkout, an installed package), then in the installed ``fedprint``
    distribution. The second is the deployment route: a Flower app bundle (FAB) carries only ``*.py, *.toml,
    *.md, *.yaml, *.json, LICENSE``, and Flower imports the ServerApp / ClientApp from the FAB's folder, where
    the model file is not; the SuperExec image (docker/Dockerfile) has FedPrint installed, model included.

    Raises
    ------
    FileNotFoundError
        Naming every place looked in, if none holds the file.
    """
    candidates = [Path(__file__).resolve().parent / "pretrained" / PRETRAINED, *_installed_pretrained()]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"shipped model {PRETRAINED} not found in {', '.join(map(str, candidates))}: install "
                            "FedPrint (pip install .) where the ServerApp and ClientApps run, or set model.init to "
                            "a model file")


def weighted_threshold(thresholds: Sequence[float], weights: Sequence[float]) -> float | None:
    """Mean of per-client validation thresholds weighted by their validation-pair counts (None if none usable).

    What a federated server, which holds no data, can store as the global model's decision threshold: each
    client chose its threshold on its own validation pairs.
    """
    t, w = np.asarray(thresholds, float), np.asarray(weights, float)
    ok = np.isfinite(t) & np.isfinite(w) & (w > 0)
    return float(np.sum(t[ok] * w[ok]) / np.sum(w[ok])) if ok.any() else None


def recalibrated_bytes(path: str | Path, threshold: float, threshold_source: str, calibration: dict) -> bytes:
    """The model file ``path`` with a new decision threshold, its source and the calibration record.

    Everything else (weights, input pipeline, provenance, training metrics) is kept as it was; the previous
    threshold and its source are kept under ``calibration["previous_threshold"]`` / ``["previous_source"]``.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not math.isfinite(threshold):
        raise ValueError(f"threshold: expected a finite distance, got {threshold!r}")
    return _rewritten(path, lambda model: {
        "threshold": float(threshold), "threshold_source": str(threshold_source),
        "calibration": {**dict(calibration), "previous_threshold": model.threshold,
                        "previous_source": model.threshold_source}})


def _rewritten(path: str | Path, changes: Callable[[VerifierModel], dict]) -> bytes:
    """The bytes of the model file ``path`` (read once and validated as :func:`load_model` does) with the top-level
    entries ``changes(model)`` applied."""
    payload = _read_payload(Path(path))
    payload.update(changes(_model_of(Path(path), payload)))
    buf = io.BytesIO()
    torch.save(payload, buf)
    return buf.getvalue()


def with_score_fusion_bytes(path: str | Path, score_fusion: dict) -> bytes:
    """The model file ``path`` with a new ``score_fusion`` calibration (:mod:`fedprint.models.dense_match`); everything
    else, the embedding threshold included, is kept as it was."""
    return _rewritten(path, lambda _: {"score_fusion": dict(score_fusion)})


def with_minutiae_fusion_bytes(path: str | Path, minutiae_fusion: dict) -> bytes:
    """The model file ``path`` with a new ``minutiae_fusion`` calibration (:mod:`fedprint.recognition.minutiae_fusion`);
    everything else is kept as it was."""
    return _rewritten(path, lambda _: {"minutiae_fusion": dict(minutiae_fusion)})


def with_input_size_bytes(path: str | Path, size: int) -> bytes:
    """The model file ``path`` scoring ``size`` x ``size`` px inputs instead of its trained size; weights,
    threshold and the rest of the input pipeline (resolution, crop, normalisation) are kept.

    Every encoder here pools its last feature map globally, so it embeds any input size; what the new size changes
    is how much of the print the input covers (at 250 dpi, 128 px is 13 mm). The stored threshold and score fusion
    were chosen at the trained size and are not re-fitted. ``provenance`` gains ``input_size_from`` (the trained
    size) so the file says it was resized.
    """
    def resized(model: VerifierModel) -> dict:
        spec = dataclasses.replace(model.spec, size=int(size))  # validates the size
        return {"input_pipeline": describe(spec),
                "provenance": {**dict(model.meta.get("provenance") or {}), "input_size_from": int(model.spec.size)}}

    return _rewritten(path, resized)


def load_model(path: str | Path) -> VerifierModel:
    """Read a model file; errors name the file and what was expected.

    The file is read with ``torch.load(weights_only=True)``: plain values and tensors only, so opening a model
    file never runs code from it (module docstring: what a model file holds).

    Parameters
    ----------
    path : str or Path
        A FedPrint model file (format ``"fedprint-model/1"``): written by ``fedprint train``, ``simulate``,
        ``demo`` or a deployment run; :func:`pretrained_path` is the shipped one.

    Returns
    -------
    VerifierModel
        The encoder with its weights (in eval mode), the input pipeline it was trained with (``spec``), the
        decision threshold (``threshold``, a distance, or None) and the file's other entries (``meta``:
        provenance, calibration, score fusion, ``path``).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If it is not a FedPrint model file (corrupt, another format, missing keys, weights that do not fit, NaN or
        infinite weights, a threshold that is not a finite number).

    See Also
    --------
    fedprint.recognition.matching.verify, fedprint.recognition.matching.evaluate : using the model.

    Examples
    --------
    >>> model = load_model(pretrained_path())  # the shipped model, trained on synthetic prints only
    >>> model.spec.size, model.meta["embedding_dim"]
    (128, 128)
    >>> model.threshold is not None and model.threshold > 0
    True

    Anything but a model file is refused with a message naming it:

    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     junk = Path(tmp) / "junk.pt"
    ...     _ = junk.write_bytes(b"not a model")
    ...     load_model(junk)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: ...junk.pt: not a readable FedPrint model file (...)
    """
    path = Path(path)
    return _model_of(path, _read_payload(path))


def _read_payload(path: Path) -> dict:
    """The model file's stored dict, with the required keys (errors as :func:`load_model` says)."""
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for corrupt / foreign files
        raise ValueError(f"{path}: not a readable FedPrint model file ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"{path}: expected a FedPrint model file of format {FORMAT!r}, got {got!r}")
    missing = [k for k in _REQUIRED if k not in payload]
    if missing:
        raise ValueError(f"{path}: model file lacks {missing}")
    return payload


def _check_thresholds(path: Path, payload: dict) -> None:
    """Every stored threshold within the range of its score, every stored fusion usable (:mod:`.score_range`)."""
    if payload["threshold"] is not None:
        check_threshold(payload["threshold"], *GLOBAL_RANGE, f"{path}: threshold")
    for kind, key in FUSION_KEYS.items():
        if payload.get(key) is not None:
            lo, hi = check_fusion(payload[key], kind, f"{path}: ")
            check_threshold(payload[key]["threshold"], lo, hi, f"{path}: {key}.threshold", f"{kind}-score")


def _model_of(path: Path, payload: dict) -> VerifierModel:
    """The model a read payload describes; raises ValueError naming ``path`` when it is unusable."""
    try:
        net = build_encoder(str(payload["encoder"]), int(payload["embedding_dim"]),
                            **dict(payload.get("encoder_kwargs") or {}))
        net.load_state_dict(payload["state_dict"])
        spec = InputSpec.from_description(payload["input_pipeline"])
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise ValueError(f"{path}: model file does not describe a usable encoder ({exc})") from None
    t = payload["threshold"]
    if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t)):
        raise ValueError(f"{path}: the model's threshold must be a finite distance or absent, got {t!r}")
    _check_thresholds(path, payload)
    bad = [k for k, v in payload["state_dict"].items()
           if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise ValueError(f"{path}: the model's weights hold NaN or infinite values ({len(bad)} tensor(s), first "
                         f"{bad[0]!r}); the file is unusable (a diverged or damaged training run)")
    meta = {k: v for k, v in payload.items() if k not in ("state_dict",)}
    meta["path"] = str(path)
    return VerifierModel(encoder=net.eval(), spec=spec, threshold=None if t is None else float(t), meta=meta)
