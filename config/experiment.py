"""Experiment configuration: one TOML file per experiment, validated into frozen dataclasses.

Every section and key is optional (defaults below); an unknown section or key, or a value of the wrong type, is
an error naming the file, the key and what was expected — a typo must never silently fall back to a default.
The resolved configuration (defaults filled in) is written into every run directory.

Example::

    [run]
    name = "centralized_casia"
    seed = 0

    [[data.sources]]
    kind = "synth"          # or "dataset" with layout = "fvc" and root = "/data/FVC2004/DB1_A"
    profile = "casia"
    fingers = 200
    impressions = 8

    [train]
    epochs = 20
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import torch
from torch import nn

from fedprint.config.federation import FederationConfig
from fedprint.config.minutiae import MinutiaeSection
from fedprint.config.train import TrainConfig
from fedprint.data.synth.limits import check_size
from fedprint.models.preprocess import NORMALIZATIONS, InputSpec
from fedprint.models.siamese import ENCODERS, POOLINGS, new_encoder

#: A run name: one plain path component (run directories are ``<run.out>/<name>-<UTC time>``).
#: Largest [model] width of the compact encoder (its weights grow with width²; see ModelSection).
MAX_WIDTH = 256
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class RunSection:
    """``[run]``: name of the run, parent directory of run directories, master seed."""

    name: str = "run"
    out: str = "runs"
    seed: int = 0

    def __post_init__(self) -> None:
        if not _RUN_NAME.fullmatch(self.name) or ".." in self.name:
            raise ValueError(f"run.name: expected a plain folder name (letters, digits, '.', '_', '-'; at most 100 "
                             f"characters; no '/' or '..'), got {self.name!r}; the run is written under run.out")


@dataclass(frozen=True)
class SourceSection:
    """One ``[[data.sources]]`` entry: a synthetic profile or a real database on disk.

    ``kind = "synth"`` uses ``profile``, ``fingers``, ``impressions`` and ``seed`` (generated once into
    ``cache``, then reused); ``kind = "dataset"`` uses ``layout`` (see ``data.datasets.LAYOUTS``, or ``"auto"``)
    and ``root``; ``kind = "real"`` uses ``name``, a set (sub-folder) under the real-set root
    (``$FEDPRINT_REAL_SAMPLES`` / ``--real-samples``, default ``../shared/data/real``; see
    :mod:`fedprint.data.real_sets`), with ``layout`` "auto" unless given. ``domain``: the tag of the source's records
    (one institution per domain under ``[partition] mode = "domain"``; default: the loader's, and ``name`` for a
    real set). ``dpi``: resolution of the images (default: the layout's, ``data.datasets.LAYOUT_DPI``, or the
    synthetic profile's).
    """

    kind: str = "synth"
    dpi: float | None = None
    profile: str = "casia"
    fingers: int = 100
    impressions: int = 8
    seed: int = 0
    cache: str = "runs/.cache/synth"
    layout: str = ""
    root: str = ""
    name: str = ""
    domain: str = ""
    skip_bad: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("synth", "dataset", "real"):
            raise ValueError(f"data.sources.kind: expected 'synth', 'dataset' or 'real', got {self.kind!r}")
        if self.kind == "dataset" and not (self.layout and self.root):
            raise ValueError("data.sources: kind = 'dataset' needs both 'layout' and 'root'")
        if self.kind == "real" and (not self.name or "/" in self.name or self.root):
            raise ValueError("data.sources: kind = 'real' needs 'name' (a folder under the real-set root, e.g. "
                             f"'fcj2020_dev') and no 'root'; got name={self.name!r}, root={self.root!r}")
        if self.kind == "synth" and (self.fingers < 2 or self.impressions < 2):
            raise ValueError("data.sources: a synthetic source needs fingers >= 2 and impressions >= 2")
        if self.kind == "synth":
            check_size(self.fingers, self.impressions, "data.sources.")


@dataclass(frozen=True)
class DataSection:
    """``[data]``: sources and the Yan et al. 2025 split / pair protocol (Sec. 5.2)."""

    sources: tuple[SourceSection, ...] = (SourceSection(),)
    protocol: str = "open"
    test_fraction: float = 0.2
    val_fraction: float = 0.2
    max_impostors: int = 10_000
    folds: int = 0
    fold: int = 0

    def __post_init__(self) -> None:
        if self.protocol not in ("open", "closed"):
            raise ValueError(f"data.protocol: expected 'open' or 'closed', got {self.protocol!r}")
        if self.folds:  # K-fold cross-validation by finger: the K runs of one seed test every finger once
            if isinstance(self.folds, bool) or not isinstance(self.folds, int) or self.folds < 2:
                raise ValueError(f"data.folds: expected 0 (off) or an integer >= 2, got {self.folds!r}")
            if isinstance(self.fold, bool) or not isinstance(self.fold, int) or not 0 <= self.fold < self.folds:
                raise ValueError(f"data.fold: expected an integer in [0, {self.folds - 1}] (data.folds = "
                                 f"{self.folds}), got {self.fold!r}")
            if self.protocol != "open":
                raise ValueError(f"data.folds: K-fold splits by finger need protocol = 'open', got "
                                 f"{self.protocol!r}")
        elif self.fold:
            raise ValueError(f"data.fold = {self.fold!r} needs data.folds >= 2 (K-fold splits by finger)")
        if not self.sources:
            raise ValueError("data.sources: at least one source is needed")
        for name in ("test_fraction", "val_fraction"):  # both > 0: the gaps and thresholds need validation pairs
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"data.{name}: expected a fraction in (0, 1), got {getattr(self, name)}")
        if self.max_impostors < 1:
            raise ValueError(f"data.max_impostors: expected an integer >= 1, got {self.max_impostors}")

    @property
    def fold_spec(self) -> tuple[int, int] | None:
        """``(fold, folds)`` for :func:`fedprint.data.pairs.split_records`, or None when K-fold splitting is off."""
        return (self.fold, self.folds) if self.folds else None


@dataclass(frozen=True)
class PartitionSection:
    """``[partition]``: how records are spread over clients (local-only and federated modes).

    ``mode = "domain"``: one client per source domain; ``"iid"`` / ``"niid"``: the fingers of the (single)
    domain split over ``n_clients`` (NIID: ``min_fingers`` each — default 6, what the open-set split needs: two
    fingers with two images for each of train, validation and test — plus Dirichlet(``alpha``) shares of the
    rest). ``betas``: FP-DFSN β per client
    (empty: every client uses ``fpdfsn.beta``). ``unseen``: domain tags held out of training altogether
    (no client holds them; every method's model is scored on them afterwards — the unseen-domain setting of
    FedDG-GA).
    """

    mode: str = "domain"
    n_clients: int = 3
    alpha: float = 0.5
    min_fingers: int = 6
    betas: tuple[float, ...] = ()
    unseen: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in ("domain", "iid", "niid"):
            raise ValueError(f"partition.mode: expected 'domain', 'iid' or 'niid', got {self.mode!r}")
        for key, lo in (("n_clients", 1), ("min_fingers", 1)):
            if getattr(self, key) < lo:
                raise ValueError(f"partition.{key}: expected an integer >= {lo}, got {getattr(self, key)}")
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"partition.alpha: expected a Dirichlet concentration > 0, got {self.alpha}")


@dataclass(frozen=True)
class ModelSection:
    """``[model]``: encoder architecture and the network input (see :mod:`fedprint.models.preprocess`).

    ``input_size``: side S of the square input in pixels at the working resolution ``input_dpi`` (default
    128 px at 250 dpi, i.e. 13 mm of skin); ``crop``: ``"print"`` (default: resample every image to
    ``input_dpi`` and crop on the print) or ``"full"`` (legacy: the whole image shrunk to S — ridges alias away).
    ``width``: channels of the compact encoder's first block (default 16: ~3x faster to train than 32, and
    better per minute of CPU in our measurements).
    ``pool_grid``: side g of the compact encoder's pooling grid (default 1: global average pooling; g > 1 keeps
    the print's coarse layout, see :class:`fedprint.models.siamese.CompactEncoder`).
    ``pooling``: how the compact encoder pools its last feature map: ``"avg"`` (default) or ``"gem"`` (a
    generalised mean whose exponent is learned, :class:`fedprint.models.pooling.GeM`). A ``"gem"`` experiment may start
    from
    an ``"avg"`` model: the exponent is then added at its initial value 3.
    ``align``: put a learned rotation-and-shift aligner in front of the compact encoder (default false;
    DeepPrint's localisation network, :class:`fedprint.models.alignment.RigidAligner`). It starts as the identity, so
    ``init`` may name a model without one.
    ``init``: initial weights of every method — ``"random"`` (default, seeded by ``run.seed``), ``"pretrained"``
    (the shipped model trained on synthetic prints only, ``models/pretrained/fedprint-synthetic.pt``; see its
    model card) or the path of a FedPrint model file. The architecture must match it; the input size may differ
    (every encoder pools globally), and so may the normalisation (the weights are only a starting point then).
    ``normalization``: ``"standardize"`` (default), ``"unit_range"``, ``"ridge"`` (band-pass + local contrast:
    :func:`fedprint.models.preprocess.ridge_normalize`) or ``"gabor"`` (the ridge pattern redrawn by oriented Gabor
    filters: :func:`fedprint.models.preprocess.gabor_normalize`).
    """

    encoder: str = "compact"
    embedding_dim: int = 128
    input_size: int = 128
    input_dpi: float = 250.0
    crop: str = "print"
    normalization: str = "standardize"
    width: int = 16
    pool_grid: int = 1
    pooling: str = "avg"
    align: bool = False
    init: str = "random"

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"model.encoder: expected one of {ENCODERS}, got {self.encoder!r}")
        if self.embedding_dim < 1 or self.width < 1:
            raise ValueError(f"model.embedding_dim / model.width: expected integers >= 1, got {self.embedding_dim} / "
                             f"{self.width}")
        if self.width > MAX_WIDTH:
            raise ValueError(f"model.width: expected at most {MAX_WIDTH} (the compact encoder has about 522·width² "
                             f"weights: {522 * MAX_WIDTH ** 2 / 1e6:.0f} M at {MAX_WIDTH}, three times ResNet-18), "
                             f"got {self.width}")
        if not 1 <= self.pool_grid <= 8:
            raise ValueError(f"model.pool_grid: expected an integer in [1, 8] (1 = global average pooling), got "
                             f"{self.pool_grid}")
        if self.pool_grid != 1 and self.encoder != "compact":
            raise ValueError(f"model.pool_grid: only the 'compact' encoder has a pooling grid; {self.encoder!r} "
                             f"pools globally (leave pool_grid = 1)")
        if self.pooling not in POOLINGS:
            raise ValueError(f"model.pooling: expected one of {POOLINGS}, got {self.pooling!r}")
        if self.pooling != "avg" and self.encoder != "compact":
            raise ValueError(f"model.pooling: only the 'compact' encoder has a choice of pooling; {self.encoder!r} "
                             f"averages (leave pooling = \"avg\")")
        if self.align and self.encoder != "compact":
            raise ValueError(f"model.align: only the 'compact' encoder has an aligner; leave align = false with "
                             f"{self.encoder!r}")
        if self.crop not in ("print", "full"):
            raise ValueError(f"model.crop: expected 'print' or 'full', got {self.crop!r}")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"model.normalization: expected one of {NORMALIZATIONS}, got {self.normalization!r}")
        if not 50 <= self.input_dpi <= 2000:
            raise ValueError(f"model.input_dpi: expected a resolution in [50, 2000] dots per inch, got "
                             f"{self.input_dpi}")
        if self.input_size < 8:
            raise ValueError(f"model.input_size: expected an integer >= 8 (pixels), got {self.input_size}")

    def encoder_kwargs(self) -> dict[str, Any]:
        """Extra arguments of :func:`fedprint.models.siamese.build_encoder` (``width``, ``grid``, ``align``, ``pooling``
        of
        the compact encoder).

        ``grid``, ``align`` and ``pooling`` are left out at their defaults, so model files written before the
        options existed still match.
        """
        if self.encoder != "compact":
            return {}
        return ({"width": int(self.width)} | ({"grid": int(self.pool_grid)} if self.pool_grid != 1 else {})
                | ({"align": True} if self.align else {})
                | ({"pooling": self.pooling} if self.pooling != "avg" else {}))

    def init_state(self) -> dict[str, Any] | None:
        """The initial weights named by ``init`` (None for ``"random"``), checked against these settings."""
        if self.init == "random":
            return None
        from fedprint.models.model_file import load_model, pretrained_path

        path = pretrained_path() if self.init == "pretrained" else Path(self.init)
        m = load_model(path)
        want = {"encoder": self.encoder, "embedding_dim": self.embedding_dim, "encoder_kwargs": self.encoder_kwargs()}
        got = {k: m.meta.get(k) for k in want}
        # An aligner starts as the identity: a model without one is a valid start, its aligner added fresh.
        add_aligner = self.align and not (got["encoder_kwargs"] or {}).get("align")
        if add_aligner:
            got["encoder_kwargs"] = dict(got["encoder_kwargs"] or {}) | {"align": True}
        # Likewise GeM pooling from an averaging model: the exponent starts at its initial value.
        add_gem = self.pooling == "gem" and (got["encoder_kwargs"] or {}).get("pooling", "avg") == "avg"
        if add_gem:
            got["encoder_kwargs"] = dict(got["encoder_kwargs"] or {}) | {"pooling": "gem"}
        # The input side may differ (every encoder pools globally: weights learned on 128 px crops apply to the
        # whole print), and so may the normalisation and the working resolution (a fine-tuning start: the filters
        # adapt to the new ridge period); the crop must not.
        mine = self.input_spec()
        if got != want or replace(m.spec, size=mine.size, normalization=mine.normalization, dpi=mine.dpi) != mine:
            raise ValueError(f"model.init: {path} is {got} with input {m.spec}, but the experiment asks for {want} "
                             f"with input {self.input_spec()} (only the input size, resolution and normalisation "
                             "may differ)")
        state = m.encoder.state_dict()
        if add_aligner:
            from fedprint.models.alignment import RigidAligner

            with torch.random.fork_rng(devices=[]):  # the fresh aligner's weights do not depend on the caller
                torch.manual_seed(0)
                state |= {f"align.{k}": v for k, v in RigidAligner().state_dict().items()}
        if add_gem:
            from fedprint.models.pooling import GeM

            state |= {f"pool.{k}": v for k, v in GeM().state_dict().items()}  # its exponent at the initial value
        return state

    def new_encoder(self, seed: int) -> nn.Module:
        """An encoder of these settings: random weights fixed by ``seed``, or the weights of ``init``."""
        net = new_encoder(self.encoder, self.embedding_dim, seed, **self.encoder_kwargs())
        state = self.init_state()
        if state is not None:
            net.load_state_dict(state)
        return net

    def input_spec(self, size: int | None = None) -> InputSpec:
        """The network input pipeline of these settings (``size`` overrides ``input_size``)."""
        return InputSpec(size=int(size or self.input_size), crop=self.crop, dpi=float(self.input_dpi),
                         normalization=self.normalization)


@dataclass(frozen=True)
class FPDFSNSection:
    """``[fpdfsn]``: the FP-DFSN perturbation applied to training images (Yan et al. 2025 Eqs. 8-10).

    Parameters left at ``None`` take the defaults documented in ``privacy.fpdfsn.FPDFSNParams``.
    """

    enabled: bool = False
    beta: float = 0.5
    d0: float | None = None
    border: int | None = None
    radius: int | None = None
    sigma2: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"fpdfsn.beta: expected a number in [0, 1], got {self.beta}")
        for name in ("d0", "radius"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"fpdfsn.{name}: expected a number > 0 (or leave it out), got {v}")
        # σ² = 0 is a point of the paper's noise sweep (Fig. 10: sharpen and subtract, no noise), as in FPDFSNParams.
        if self.sigma2 is not None and not self.sigma2 >= 0:
            raise ValueError(f"fpdfsn.sigma2: expected a number >= 0 (or leave it out), got {self.sigma2}")
        if self.border is not None and self.border < 0:
            raise ValueError(f"fpdfsn.border: expected an integer >= 0 (or leave it out), got {self.border}")


@dataclass(frozen=True)
class DPSection:
    """``[dp]``: differential privacy. ``level = "sample"`` (default): DP-SGD on local training
    (``fedprint.training.dp_sgd``, Opacus, ``fedprint train`` only); one *pair* is one record. ``level = "client"``:
    client-level
    DP of the federated aggregation (``server.dp_affr``, FedAvg and AFFR in ``simulate`` / the Flower apps); one
    *institution* is the unit; ``client_clip`` bounds each update, ``alpha_cap`` = c caps every weight at c/m,
    ``gap_noise_ratio`` = z_g / z for AFFR's released gaps; ``delta`` defaults to 1e-5. ``"both"`` is refused (the
    combination is not implemented).

    ``noise_multiplier`` (σ) and ``target_epsilon`` are alternatives: give at most one. With neither, σ = 1.0;
    with ``target_epsilon``, σ is calibrated so that ``train.epochs`` epochs spend that ε at δ. ``delta`` left
    unset is the largest power of ten at most 1 / (10 · DP training pairs) of each trained model (client level:
    1e-5; both printed with their n). ``impostor_rate`` (sample level): the public probability that a pair of
    images of two different fingers is an impostor pair of the DP pair set (``fedprint.training.dp_sgd.dp_pair_set``:
    built
    finger by finger, so removing a finger removes exactly its own pairs; default 0.02).
    ``accountant``: "rdp" or "prv" (``fedprint.training.dp_sgd.ACCOUNTANTS``).

    ``threshold`` (client level): the decision threshold the released model file carries — a public value the
    user chooses; left unset, a client-level DP model file carries none (a threshold averaged from the clients'
    validation data would be a release without DP).
    """

    enabled: bool = False
    noise_multiplier: float | None = None
    max_grad_norm: float = 1.0
    delta: float | None = None
    target_epsilon: float | None = None
    accountant: str = "rdp"
    level: str = "sample"
    client_clip: float = 1.0
    alpha_cap: float = 2.0
    gap_noise_ratio: float = 1.0
    threshold: float | None = None
    impostor_rate: float = 0.02

    def __post_init__(self) -> None:
        def bad(key: str, expected: str) -> ValueError:
            return ValueError(f"dp.{key}: expected {expected}, got {getattr(self, key)!r}")

        if self.noise_multiplier is not None and self.target_epsilon is not None:
            raise ValueError("dp.noise_multiplier / dp.target_epsilon: give at most one (target_epsilon "
                             f"calibrates the noise), got {self.noise_multiplier!r} and {self.target_epsilon!r}")
        if self.noise_multiplier is not None and not (math.isfinite(self.noise_multiplier)
                                                      and self.noise_multiplier >= 0):
            raise bad("noise_multiplier", "a finite number >= 0")
        if not (math.isfinite(self.max_grad_norm) and self.max_grad_norm > 0):
            raise bad("max_grad_norm", "a finite number > 0")
        if self.delta is not None and not (0.0 < self.delta < 1.0):
            raise bad("delta", "a number in (0, 1)")
        if self.target_epsilon is not None and not (math.isfinite(self.target_epsilon)
                                                    and self.target_epsilon > 0):
            raise bad("target_epsilon", "a finite number > 0")
        if self.accountant not in ("rdp", "prv"):
            raise bad("accountant", "'rdp' or 'prv'")
        if self.level not in ("sample", "client", "both"):
            raise bad("level", "'sample', 'client' or 'both'")
        if not (math.isfinite(self.client_clip) and self.client_clip > 0):
            raise bad("client_clip", "a finite number > 0")
        if not (math.isfinite(self.alpha_cap) and self.alpha_cap >= 1):
            raise bad("alpha_cap", "a number >= 1 (weights may reach alpha_cap / m)")
        if not (math.isfinite(self.gap_noise_ratio) and self.gap_noise_ratio > 0):
            raise bad("gap_noise_ratio", "a finite number > 0")
        if not (math.isfinite(self.impostor_rate) and 0 < self.impostor_rate <= 1):
            raise bad("impostor_rate", "a probability in (0, 1]")
        if self.threshold is not None and not (math.isfinite(self.threshold) and self.threshold > 0):
            raise bad("threshold", "a finite distance > 0 (the public decision threshold of the released model)")

    def trainer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``training.dp_sgd.train_siamese_dp`` (σ = 1.0 when neither σ nor ε is given)."""
        sigma = self.noise_multiplier
        if sigma is None and self.target_epsilon is None:
            sigma = 1.0
        return {"noise_multiplier": sigma, "max_grad_norm": self.max_grad_norm, "delta": self.delta,
                "target_epsilon": self.target_epsilon, "accountant": self.accountant,
                "impostor_rate": self.impostor_rate}


@dataclass(frozen=True)
class ExperimentConfig:
    run: RunSection = field(default_factory=RunSection)
    data: DataSection = field(default_factory=DataSection)
    partition: PartitionSection = field(default_factory=PartitionSection)
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainConfig = field(default_factory=TrainConfig)
    fpdfsn: FPDFSNSection = field(default_factory=FPDFSNSection)
    dp: DPSection = field(default_factory=DPSection)
    federation: FederationConfig = field(default_factory=FederationConfig)
    minutiae: MinutiaeSection = field(default_factory=MinutiaeSection)

    def __post_init__(self) -> None:
        # [minutiae] backend is the one place the backend is chosen; the trainer sees only TrainConfig, so the
        # minutiae-map targets read a copy of it (always this one: also after dataclasses.replace of [minutiae]).
        if self.train.minutiae_backend != self.minutiae.backend:
            object.__setattr__(self, "train", replace(self.train, minutiae_backend=self.minutiae.backend))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def minutiae_uses(self) -> list[str]:
        """Which consumers of ``[minutiae] backend`` this experiment runs (FP-DFSN, the minutiae-map targets)."""
        uses = {"fpdfsn": self.fpdfsn.enabled, "minutiae_map_targets": self.train.minutiae_weight > 0}
        return [name for name, used in uses.items() if used]

    def data_summary(self) -> dict[str, Any]:
        """What this experiment trains on (sources without cache paths, protocol, partition), for model files;
        with ``minutiae`` (the backend as configured, what it resolved to here, and its uses) where FP-DFSN or the
        minutiae-map targets shaped the training data."""
        sources = [{k: v for k, v in dataclasses.asdict(s).items() if k != "cache"} for s in self.data.sources]
        out = {"sources": sources, "protocol": self.data.protocol, "partition": self.partition.mode}
        if self.minutiae_uses():
            out["minutiae"] = {"backend": self.minutiae.resolved(), "configured": self.minutiae.backend,
                               "used_by": self.minutiae_uses()}
        return out


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Check ``value`` against a simple type hint (int/float/str/bool, optional, tuples, nested dataclass)."""
    origin = get_origin(hint)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a table, got {type(value).__name__}")
        return _build(hint, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected an array, got {type(value).__name__}")
        (inner, _) = get_args(hint)
        return tuple(_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value))
    args = get_args(hint)
    if args and type(None) in args:  # X | None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner, where)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and (type(value) is not hint):
        raise ValueError(f"{where}: expected {hint.__name__}, got {type(value).__name__} {value!r}")
    return value


def _build(cls: type, table: dict[str, Any], where: str) -> Any:
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(known)}")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in table.items()}
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ValueError(f"{where or 'config'}: {exc}") from None


def _check_minutiae_copy(table: dict[str, Any]) -> None:
    """``[train] minutiae_backend`` is a copy of ``[minutiae] backend`` (a resolved config.json has both): refuse
    one that disagrees, so the backend is chosen in one place."""
    train, section = table.get("train"), table.get("minutiae")
    if not isinstance(train, dict) or "minutiae_backend" not in train:
        return
    chosen = section.get("backend", "auto") if isinstance(section, dict) else "auto"
    if train["minutiae_backend"] != chosen:
        raise ValueError(f"train.minutiae_backend: set by [minutiae] backend ({chosen!r}); leave it out of [train] "
                         f"(got {train['minutiae_backend']!r})")


def parse_config(table: dict[str, Any], *, source: str = "<config>") -> ExperimentConfig:
    """Validate a parsed TOML table into an :class:`ExperimentConfig` (errors name ``source`` and the key)."""
    try:
        _check_minutiae_copy(table)
        return _build(ExperimentConfig, table, "")
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed TOML table of an experiment file (clear errors for a missing file or bad TOML)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a TOML text file (byte {exc.start} is not UTF-8 text); expected an "
                         "experiment TOML") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # thousands of nested arrays or tables: the parser's recursion runs out
        raise ValueError(f"{path}: TOML nested too deeply to read (arrays or tables within each other hundreds of "
                         "levels deep); an experiment file nests a few levels at most") from None


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment TOML file (every section, ``[federation]`` included)."""
    return parse_config(read_toml(path), source=str(path))


def parse_experiment(table: dict[str, Any], *, source: str = "<config>"
                     ) -> tuple[ExperimentConfig, FederationConfig]:
    """Validate an experiment table; returns it and its ``[federation]`` section (for the federated runners)."""
    cfg = parse_config(table, source=source)
    return cfg, cfg.federation


def load_experiment(path: str | Path) -> tuple[ExperimentConfig, FederationConfig]:
    """Read an experiment TOML (see :func:`parse_experiment`)."""
    cfg = load_config(path)
    return cfg, cfg.federation
