"""Optional DP-SGD for the local Siamese trainer (Opacus): one *pair* is one record.

Differential privacy here protects one training pair, not one finger or one person: a finger with k
impressions appears in k-1 genuine pairs per impression and in many impostor pairs, so it is protected only
through group privacy (see :data:`GROUP_PRIVACY_NOTE`).

Design (what makes the accounting valid):

* **Fixed dataset.** The non-DP trainer (:func:`client.trainer.train_siamese`) resamples impostor pairs every
  epoch; that changes the dataset between epochs and breaks the accountant's assumption of one fixed dataset
  sampled at rate q. DP-SGD therefore draws its pair set *once* (:func:`dp_pair_set`: every genuine pair plus a
  seeded impostor sample at ``impostor_ratio``, capped at ``max_pairs_per_epoch``) and trains on it for all
  epochs.
* **Poisson sampling.** The pairs ``(a, b, label)`` sit in a ``TensorDataset``; Opacus's ``DPDataLoader``
  includes each pair in a step independently with probability q = 1 / ceil(n / batch_size) (the sampled
  Gaussian mechanism the RDP / PRV accountants analyse). Batches vary in size and can be empty; an empty batch
  still takes a noise-only step, so every accounted step releases a noised update.
* **Per-pair gradients.** :class:`PairDistance` wraps the encoder so that one forward call maps the two image
  batches of a batch of pairs to their distances: the batch axis is the pair axis, and Opacus's per-sample
  gradient of the contrastive loss (Yan et al. 2025 Eq. 1) is the gradient of one pair's loss, with both encoder calls
  (shared weights) summed into it. We use ``grad_sample_mode="functorch"``: with two encoder calls per sample
  and a channels-last :class:`~models.siamese.CompactEncoder`, Opacus 1.6's "hooks" mode returns wrong
  per-sample conv gradients (measured max error 4.5 against a per-pair loop), while functorch mode matches to
  float precision (``tests/test_dp_sgd.py``) at about the same speed.
* **Optimiser.** Adam, lr 3e-4 (Yan et al. 2025, Sec. 5.2), wrapped by Opacus's ``DPOptimizer`` (flat clipping to
  ``max_grad_norm``, Gaussian noise of std ``noise_multiplier * max_grad_norm`` on the sum, divided by the
  expected batch size). Adam only post-processes the privatised gradient, so it costs no privacy.

In-place ReLUs are switched off for the duration of training: Opacus's backward hooks forbid in-place
modification of a hooked module's output. The result is numerically identical; the flag is restored after.
"""

from __future__ import annotations

import math
import secrets
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from opacus import GradSampleModule, PrivacyEngine
from opacus.optimizers import DPOptimizer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

from data.pairs import PairSet, sample_epoch_pairs
from fedprint_config import TrainConfig
from models.loss import contrastive_loss_from_distance
from models.siamese import distance
from privacy.group_privacy import group_privacy

#: Per-sample gradient implementation (see module docstring for why not "hooks").
GRAD_SAMPLE_MODE = "functorch"

#: Privacy accountants understood by :func:`make_dp_trainer`.
ACCOUNTANTS = ("rdp", "prv")

#: Accounting fields repeated in every history row of :func:`train_siamese_dp` (cumulative at that epoch).
HISTORY_KEYS = ("epsilon", "delta", "noise_multiplier", "max_grad_norm", "sample_rate", "steps", "accountant",
                "pairs_per_finger", "finger_epsilon", "finger_delta")

#: Statement every DP run report must carry.
GROUP_PRIVACY_NOTE = (
    "DP-SGD protects one training *pair* (record = pair). A finger appears in g pairs of the DP pair set "
    "(its genuine pairs and its impostor pairs), so it is protected only through group privacy: an (ε, δ)-DP "
    "mechanism is (g·ε, g·e^{(g−1)ε}·δ)-DP for a group of g records. The finger-level (ε, δ) below uses the "
    "largest g of any finger; it is vacuous (no guarantee) when that δ reaches 1."
)


def max_pairs_per_finger(pairs: PairSet) -> int:
    """The largest number of pairs any one finger takes part in (fingers = components of the genuine pairs)."""
    from client.trainer import identities_from_pairs

    used, labels = identities_from_pairs(pairs)
    fa = labels[np.searchsorted(used, pairs.a)]
    fb = labels[np.searchsorted(used, pairs.b)]
    counts = np.bincount(fa, minlength=labels.max() + 1) + np.bincount(fb, minlength=labels.max() + 1)
    counts -= np.bincount(fa[fa == fb], minlength=labels.max() + 1)  # a genuine pair counts once for its finger
    return int(counts.max())


class PairDistance(nn.Module):
    """Siamese distance module: ``forward(x1, x2)`` (or ``forward(x)`` with x of shape (N, 2, C, S, S)) returns
    the Euclidean embedding distance d of each pair, shape (N,) (Yan et al. 2025 Eq. 1).

    Both branches call the same ``encoder`` (shared weights); the batch axis is the pair axis, so per-sample
    gradients of a per-pair loss are per-pair gradients.
    """

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, x1: torch.Tensor, x2: torch.Tensor | None = None) -> torch.Tensor:
        if x2 is None:
            if x1.ndim != 5 or x1.shape[1] != 2:
                raise ValueError(f"PairDistance: a single input must have shape (N, 2, C, S, S), "
                                 f"got {tuple(x1.shape)}")
            x1, x2 = x1[:, 0], x1[:, 1]
        if x1.shape[0] != x2.shape[0]:
            raise ValueError(f"PairDistance: x1 and x2 must hold the same number of images, got {x1.shape[0]} "
                             f"and {x2.shape[0]}")
        return distance(self.encoder(x1), self.encoder(x2))


def dp_pair_set(pairs: PairSet, cfg: TrainConfig) -> PairSet:
    """The fixed DP training dataset: every genuine pair plus one seeded impostor sample (drawn once).

    ``round(cfg.impostor_ratio * n_genuine)`` impostors (or all of them), shuffled, then capped uniformly at
    ``cfg.max_pairs_per_epoch``; randomness from ``cfg.seed``. Kept fixed over all epochs so that the privacy
    accountant's single-dataset assumption holds.
    """
    if len(pairs) == 0 or pairs.n_genuine == 0:
        raise ValueError("dp_pair_set: the training pairs contain no genuine pair; nothing to learn from")
    rng = np.random.default_rng(cfg.seed)
    fixed = sample_epoch_pairs(pairs, n_impostor_per_genuine=cfg.impostor_ratio, rng=rng)
    cap = cfg.max_pairs_per_epoch
    if cap is not None and len(fixed) > cap:
        keep = np.sort(rng.choice(len(fixed), size=cap, replace=False))
        fixed = PairSet(fixed.a[keep], fixed.b[keep], fixed.label[keep])
    return fixed


def default_delta(n_records: int) -> float:
    """δ for ``n_records`` records: the largest power of ten strictly below 1 / n (e.g. 3,000 pairs -> 1e-4,
    1,000 pairs -> 1e-4), the usual "δ << 1/n" rule made concrete."""
    if n_records < 1:
        raise ValueError(f"default_delta: n_records must be >= 1, got {n_records}")
    return 10.0 ** -(math.floor(math.log10(n_records)) + 1)


def _set_inplace(module: nn.Module, flag: dict[nn.Module, bool] | bool) -> dict[nn.Module, bool]:
    """Set ``inplace`` on every submodule that has it; returns the previous values."""
    old = {}
    for m in module.modules():
        if isinstance(getattr(m, "inplace", None), bool):
            old[m] = m.inplace
            m.inplace = flag[m] if isinstance(flag, dict) else flag
    return old


@dataclass
class DPSiameseTrainer:
    """An Opacus-wrapped Siamese trainer over a fixed pair set; build with :func:`make_dp_trainer`.

    Attributes
    ----------
    module : GradSampleModule
        :class:`PairDistance` of the encoder, with per-sample gradient hooks.
    optimizer : DPOptimizer
        Clips per-pair gradients to ``max_grad_norm`` and adds noise before the Adam step.
    loader : DataLoader
        Poisson-sampled loader over ``(a, b, label)`` of :attr:`pairs`.
    engine : PrivacyEngine
        Holds the accountant (:meth:`epsilon`).
    """

    encoder: nn.Module
    images: torch.Tensor
    pairs: PairSet
    module: GradSampleModule
    optimizer: DPOptimizer
    loader: DataLoader
    engine: PrivacyEngine
    delta: float
    margin: float
    accountant: str
    target_epsilon: float | None
    steps: int = 0
    _inplace: dict = field(default_factory=dict, repr=False)

    @property
    def noise_multiplier(self) -> float:
        return float(self.optimizer.noise_multiplier)

    @property
    def max_grad_norm(self) -> float:
        return float(self.optimizer.max_grad_norm)

    @property
    def sample_rate(self) -> float:
        return float(self.loader.sample_rate)

    def epsilon(self, delta: float | None = None) -> float:
        """ε spent so far at ``delta`` (default: the trainer's δ), from Opacus's accountant; 0 before any step."""
        if self.steps == 0:
            return 0.0
        return float(self.engine.get_epsilon(self.delta if delta is None else delta))

    def step(self, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> float | None:
        """One DP-SGD step on a sampled batch of pairs; returns its mean loss (None for an empty batch)."""
        self.optimizer.zero_grad(set_to_none=True)
        if len(y) == 0:
            # Poisson sampling drew no pair: release a noise-only update (zero clipped sum + noise) so the
            # step the accountant counts really happened.
            for p in self.module.parameters():
                if p.requires_grad:
                    p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
            self.optimizer.step()
            self.steps += 1
            return None
        d = self.module(self.images[a], self.images[b])
        loss = contrastive_loss_from_distance(d, y.to(d.dtype), self.margin)
        with warnings.catch_warnings():  # the images need no gradient; Opacus only needs the output grads
            warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)
            loss.backward()
        self.optimizer.step()
        self.steps += 1
        return float(loss.detach())

    def run_epoch(self, *, progress: bool = False, desc: str = "dp-train") -> dict:
        """One pass of the Poisson loader (1 / q steps); returns ``loss`` (mean over non-empty steps), ``steps``,
        ``pairs_seen`` and ``epsilon`` (cumulative, at δ)."""
        self.module.train()
        total, n_loss, steps, seen = 0.0, 0, 0, 0
        for a, b, y in tqdm(self.loader, desc=desc, disable=not progress, leave=False, unit="batch"):
            loss = self.step(a, b, y)
            steps += 1
            seen += len(y)
            if loss is not None:
                total, n_loss = total + loss, n_loss + 1
        return {"loss": total / max(n_loss, 1), "steps": steps, "pairs_seen": seen, "epsilon": self.epsilon()}

    def accounting(self) -> dict:
        """What a run must report: ε at δ, δ, σ, C, q, steps, dataset size, accountant, record unit."""
        eps = self.epsilon()
        g = max_pairs_per_finger(self.pairs)
        f_eps, f_delta = group_privacy(eps, self.delta, g)
        return {"record": "pair", "epsilon": eps, "delta": self.delta, "pairs_per_finger": g,
                "finger_epsilon": f_eps, "finger_delta": f_delta, "finger_vacuous": f_delta >= 1.0,
                "noise_multiplier": self.noise_multiplier, "max_grad_norm": self.max_grad_norm,
                "sample_rate": self.sample_rate, "steps": self.steps, "pairs": len(self.pairs),
                "genuine_pairs": self.pairs.n_genuine, "accountant": self.accountant,
                "target_epsilon": self.target_epsilon}

    def close(self) -> nn.Module:
        """Remove Opacus hooks and per-sample buffers, restore in-place flags; returns the plain encoder."""
        self.module.to_standard_module()
        for p in self.encoder.parameters():
            for attr in ("grad_sample", "summed_grad"):
                if hasattr(p, attr):
                    delattr(p, attr)
        _set_inplace(self.encoder, self._inplace)
        self.encoder.eval()
        return self.encoder


def _check_dp(noise_multiplier, max_grad_norm, delta, target_epsilon, accountant) -> None:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant: expected one of {ACCOUNTANTS}, got {accountant!r}")
    if not (isinstance(max_grad_norm, (int, float)) and math.isfinite(max_grad_norm) and max_grad_norm > 0):
        raise ValueError(f"max_grad_norm: expected a finite number > 0, got {max_grad_norm!r}")
    if delta is not None and not (0.0 < delta < 1.0):
        raise ValueError(f"delta: expected a number in (0, 1), got {delta!r}")
    if (noise_multiplier is None) == (target_epsilon is None):
        raise ValueError("noise_multiplier / target_epsilon: give exactly one (the other is derived), got "
                         f"noise_multiplier={noise_multiplier!r}, target_epsilon={target_epsilon!r}")
    if noise_multiplier is not None and not (math.isfinite(noise_multiplier) and noise_multiplier >= 0):
        raise ValueError(f"noise_multiplier: expected a finite number >= 0, got {noise_multiplier!r}")
    if target_epsilon is not None and not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(f"target_epsilon: expected a finite number > 0, got {target_epsilon!r}")


def entropy_generator() -> torch.Generator:
    """A torch generator seeded with 63 bits from the OS CSPRNG (``secrets``); the seed is never stored.

    Used for DP-SGD's Poisson sampling and Gaussian noise: nothing a run writes (its seed, config or files) can
    regenerate the noise. torch's generator itself is not a CSPRNG (Opacus's ``secure_mode`` would need
    torchcsprng, which cannot be installed here); its state is never exposed, only the noisy model is.
    """
    return torch.Generator().manual_seed(secrets.randbits(63))


def make_dp_trainer(
    encoder: nn.Module,
    images: torch.Tensor,
    pairs: PairSet,
    cfg: TrainConfig,
    *,
    noise_multiplier: float | None = 1.0,
    max_grad_norm: float = 1.0,
    delta: float | None = None,
    target_epsilon: float | None = None,
    accountant: str = "rdp",
    generators: tuple[torch.Generator, torch.Generator] | None = None,
) -> DPSiameseTrainer:
    """Wrap ``encoder`` for DP-SGD on the fixed pair set drawn from ``pairs`` (see module docstring).

    Parameters
    ----------
    encoder : nn.Module
        Trained in place; must contain no BatchNorm (FedPrint encoders use GroupNorm only).
    images : Tensor, shape (N, 1, S, S)
        Preprocessed images indexed by ``pairs``.
    pairs : PairSet
        The client's training pair pool; the DP dataset is :func:`dp_pair_set` of it.
    cfg : TrainConfig
        ``lr`` (Adam), ``batch_size`` (expected pairs per step, q = 1 / ceil(n / batch_size)), ``margin``,
        ``impostor_ratio``, ``max_pairs_per_epoch``, ``seed`` (the fixed pair set only), ``epochs``
        (only used to calibrate σ when ``target_epsilon`` is given).
    noise_multiplier : float or None
        σ, noise std relative to ``max_grad_norm`` (default 1.0). None iff ``target_epsilon`` is given.
    max_grad_norm : float
        Per-pair clipping norm C (L2 over all parameters), > 0. Default 1.0.
    delta : float or None
        δ of the (ε, δ) guarantee; None: :func:`default_delta` of the DP pair-set size.
    target_epsilon : float or None
        Calibrate σ so that ``cfg.epochs`` epochs spend exactly this ε at δ (Opacus
        ``make_private_with_epsilon``).
    accountant : {"rdp", "prv"}
        Opacus accountant (default "rdp").
    generators : (torch.Generator, torch.Generator), optional
        Poisson-sampling and noise generators, for tests only. Default: two generators seeded from OS entropy
        (:func:`entropy_generator`), so every run, and every client of a run, draws independent noise.
    """
    _check_dp(noise_multiplier, max_grad_norm, delta, target_epsilon, accountant)
    fixed = dp_pair_set(pairs, cfg)
    delta = default_delta(len(fixed)) if delta is None else float(delta)
    dataset = TensorDataset(torch.from_numpy(fixed.a), torch.from_numpy(fixed.b),
                            torch.from_numpy(fixed.label.astype(np.float32)))
    # Poisson sampling and Gaussian noise: generators seeded from the OS CSPRNG, never stored, so no run seed or
    # file can regenerate them (Opacus's secure_mode needs torchcsprng, which cannot be installed here).
    # Tests pass their own generators through ``generators``.
    sample_gen, noise_gen = generators if generators is not None else (entropy_generator(), entropy_generator())
    loader = DataLoader(dataset, batch_size=cfg.batch_size, generator=sample_gen)
    inplace = _set_inplace(encoder, False)
    module = PairDistance(encoder)
    optimizer = torch.optim.Adam(module.parameters(), lr=cfg.lr)
    engine = PrivacyEngine(accountant=accountant)
    common = {"module": module, "optimizer": optimizer, "data_loader": loader, "max_grad_norm": max_grad_norm,
              "grad_sample_mode": GRAD_SAMPLE_MODE, "poisson_sampling": True,
              "noise_generator": noise_gen}
    if target_epsilon is not None:
        # Opacus's bisection over σ starts from a large σ whose best RDP order is the largest one it tries, and
        # warns "Optimal order is the largest alpha" for those trial points; at the calibrated σ the best order
        # lies inside the range (tests/test_dp_sgd.py), so the warning says nothing about the result. The ε
        # reported after training (``epsilon``) is computed without this filter.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
            gsm, dp_opt, dp_loader = engine.make_private_with_epsilon(
                **common, target_epsilon=target_epsilon, target_delta=delta, epochs=cfg.epochs)
    else:
        gsm, dp_opt, dp_loader = engine.make_private(**common, noise_multiplier=noise_multiplier)
    return DPSiameseTrainer(encoder=encoder, images=images, pairs=fixed, module=gsm, optimizer=dp_opt,
                            loader=dp_loader, engine=engine, delta=delta, margin=cfg.margin,
                            accountant=accountant, target_epsilon=target_epsilon, _inplace=inplace)


def train_siamese_dp(
    encoder: nn.Module,
    images: torch.Tensor,
    pairs: PairSet,
    cfg: TrainConfig,
    *,
    noise_multiplier: float | None = 1.0,
    max_grad_norm: float = 1.0,
    delta: float | None = None,
    target_epsilon: float | None = None,
    accountant: str = "rdp",
    generators: tuple[torch.Generator, torch.Generator] | None = None,
    progress: bool = True,
    desc: str = "dp-train",
) -> tuple[list[dict], dict]:
    """DP-SGD counterpart of :func:`client.trainer.train_siamese`: trains ``encoder`` in place for
    ``cfg.epochs`` epochs; parameters as in :func:`make_dp_trainer`.

    Returns
    -------
    history : list of dict
        Per epoch: ``epoch``, ``loss``, ``pairs`` (fixed DP set size), ``genuine``, ``pairs_seen`` (this epoch)
        and the accounting so far (:data:`HISTORY_KEYS`: cumulative ``epsilon`` at ``delta``, cumulative
        ``steps``, σ, C, q, accountant), so the last row is the run's accounting.
    accounting : dict
        :meth:`DPSiameseTrainer.accounting` after the last epoch (ε at δ, δ, σ, C, q, steps, ...).
    """
    trainer = make_dp_trainer(encoder, images, pairs, cfg, noise_multiplier=noise_multiplier,
                              max_grad_norm=max_grad_norm, delta=delta, target_epsilon=target_epsilon,
                              accountant=accountant, generators=generators)
    history = []
    try:
        for epoch in range(cfg.epochs):
            row = trainer.run_epoch(progress=progress, desc=f"{desc} epoch {epoch + 1}/{cfg.epochs}")
            accounting = trainer.accounting()
            history.append({"epoch": epoch + 1, "loss": row["loss"], "pairs": len(trainer.pairs),
                            "genuine": trainer.pairs.n_genuine, "pairs_seen": row["pairs_seen"],
                            **{k: accounting[k] for k in HISTORY_KEYS}})
    finally:
        trainer.close()
    return history, accounting
