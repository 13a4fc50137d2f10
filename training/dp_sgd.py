"""Optional DP-SGD for the local Siamese trainer (Opacus): one *pair* is one record, one *finger* is the unit.

Unit and neighbouring relation. The accountant protects one training pair (add/remove one pair, Poisson
sampling). The unit a user cares about is a finger: two pools are neighbours when one finger (all its images) is
removed. :func:`dp_pair_set` builds the DP pair set so that removing finger f removes exactly the g_f pairs that
involve f and changes no other pair:

* genuine pairs: every pair of two images of the same finger (a function of that finger's images only);
* impostor pairs: the pair of images i, j of different fingers is included iff U(k_i, k_j) < p, where k is a
  64-bit hash of the image's pixels, U a keyed hash of the unordered pair (salted with ``cfg.seed``) mapped to
  [0, 1), and p = ``impostor_rate`` a public constant. Whether a pair is in the set depends on its two images only
  — never on the pool's size, on other fingers or on a random draw over the pool (the old seeded sample re-drew
  other fingers' impostors when one finger was removed: 326 of 340 changed pairs did not involve it).

Which pool. The pool is the client's training part, and the split that makes it is part of the mechanism:
``fedprint train`` under ``[dp]`` splits with a keyed hash per finger (:mod:`fedprint.data.hash_split`), so for
the data set the user gives, removing finger f either removes it from the pool (f hashed to training) or leaves
the pool unchanged (f hashed to validation / test: the weights do not depend on it at all). The seeded split
(:func:`fedprint.data.pairs.split_records`) would move other fingers in or out of the pool. Outside the
guarantee: everything fitted on or measured with validation / test fingers (threshold, score fusion, test
metrics) and the exact counts — a DP run's model file lists them under ``outside_dp_guarantee``
(:func:`release_scope`).

Proof. Let D' be D without finger f. By construction P(D') = P(D) minus the g_f pairs that involve f. DP-SGD with
Poisson sampling at rate q is (ε, δ)-DP for add/remove of one pair (Opacus's accountant; Abadi et al. 2016,
Mironov et al. 2019); removing g_f pairs is a path of g_f such steps, so by group privacy the mechanism is
(g·ε, g·e^{(g−1)ε}·δ)-DP for one finger with g = max_f g_f (Dwork & Roth 2014, Thm 2.2; the δ form by applying the
definition g times), and g is exact: it is counted on the very pair set trained on (:func:`max_pairs_per_finger`).
Assumptions stated: the pair-set size n — hence q = 1/ceil(n / batch_size) — and the fingers' images are those of
the client's pool; q is computed from n as in Opacus (n treated as public). A pair cap
(``max_pairs_per_epoch``) limits the steps per epoch, never the pair set, so it cannot break the relation. The
finger-level guarantee is vacuous (δ_f ≥ 1) once g·ε is large — the report says so.

Design (what makes the accounting valid):

* **Fixed dataset.** The non-DP trainer (:func:`fedprint.training.trainer.train_siamese`) resamples impostor pairs every
  epoch; that changes the dataset between epochs and breaks the accountant's assumption of one fixed dataset
  sampled at rate q. DP-SGD therefore builds its pair set once (:func:`dp_pair_set`) and trains on it for all
  epochs.
* **Poisson sampling.** The pairs ``(a, b, label)`` sit in a ``TensorDataset``; Opacus's ``DPDataLoader``
  includes each pair in a step independently with probability q = 1 / ceil(n / batch_size) (the sampled
  Gaussian mechanism the RDP / PRV accountants analyse). Batches vary in size and can be empty; an empty batch
  still takes a noise-only step, so every accounted step releases a noised update. With ``max_pairs_per_epoch``
  an epoch stops after ceil(cap / batch_size) steps; the accountant counts the steps taken.
* **Per-pair gradients.** :class:`PairDistance` wraps the encoder so that one forward call maps the two image
  batches of a batch of pairs to their distances: the batch axis is the pair axis, and Opacus's per-sample
  gradient of the contrastive loss (Yan et al. 2025 Eq. 1) is the gradient of one pair's loss, with both encoder calls
  (shared weights) summed into it. We use ``grad_sample_mode="functorch"``: with two encoder calls per sample
  and a channels-last :class:`~fedprint.models.siamese.CompactEncoder`, Opacus 1.6's "hooks" mode returns wrong
  per-sample conv gradients (measured max error 4.5 against a per-pair loop), while functorch mode matches to
  float precision (``tests/test_dp_sgd.py``) at about the same speed.
* **Optimiser.** Adam, lr 3e-4 (Yan et al. 2025, Sec. 5.2), wrapped by Opacus's ``DPOptimizer`` (flat clipping to
  ``max_grad_norm``, Gaussian noise of std ``noise_multiplier * max_grad_norm`` on the sum, divided by the
  expected batch size). Adam only post-processes the privatised gradient, so it costs no privacy.
* **δ.** Default :func:`fedprint.privacy.delta.default_delta` of the number of pairs: n·δ ≤ 0.1, printed with n.

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

from fedprint.config import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.models.loss import contrastive_loss_from_distance
from fedprint.models.siamese import distance
from fedprint.privacy.delta import default_delta as _default_delta
from fedprint.privacy.delta import delta_rule
from fedprint.privacy.group_privacy import group_privacy

#: Per-sample gradient implementation (see module docstring for why not "hooks").
GRAD_SAMPLE_MODE = "functorch"

#: Privacy accountants understood by :func:`make_dp_trainer`.
ACCOUNTANTS = ("rdp", "prv")

#: Accounting fields repeated in every history row of :func:`train_siamese_dp` (cumulative at that epoch).
HISTORY_KEYS = ("epsilon", "delta", "noise_multiplier", "max_grad_norm", "sample_rate", "steps", "accountant",
                "pairs_per_finger", "finger_epsilon", "finger_delta")

#: Public default rate p of an impostor pair in the DP pair set (:func:`dp_pair_set`).
DEFAULT_IMPOSTOR_RATE = 0.02

#: Statement every DP run report must carry.
GROUP_PRIVACY_NOTE = (
    "Unit: one finger (all its images removed). DP-SGD's accountant protects one training pair; the DP pair set is "
    "built finger by finger (all genuine pairs of a finger, and each impostor pair kept iff a keyed hash of its two "
    "images falls below a public rate), so removing a finger removes exactly its own g pairs and changes no other. "
    "By group privacy an (ε, δ)-DP mechanism is (g·ε, g·e^{(g−1)ε}·δ)-DP for that finger; g below is the exact "
    "largest number of pairs of any finger in the set trained on. The finger-level guarantee is vacuous (no "
    "guarantee) when its δ reaches 1. The train / val / test split is a keyed hash per finger, so removing a finger "
    "from the data given moves no other finger: the guarantee is for one finger of that data set (per client). "
    "It covers the weights only: the threshold and score fusion fitted on validation pairs, the test metrics and "
    "the exact finger / image / pair counts are released without DP (model file: outside_dp_guarantee)."
)


def release_scope(accounting: dict) -> dict:
    """What a DP-SGD model file releases under the guarantee and what it releases outside it (issue 59 §2).

    ``accounting`` is :meth:`DPSiameseTrainer.accounting` (or a run's final history row). The weights are the only
    output of the DP mechanism; every entry listed in ``outside_dp_guarantee`` is computed from the data without
    noise (validation and test fingers are not in the DP training set at all).
    """
    return {
        "mechanism": "DP-SGD (Opacus), sample level: record = one training pair, unit = one finger",
        "guarantee": dict(accounting),
        "covered_by_dp": {"state_dict": "the weights (the only output of DP-SGD)"},
        "outside_dp_guarantee": {
            "threshold": "accuracy-optimal distance on the raw validation pairs (validation fingers are not in the "
                         "DP training set)",
            "score_fusion": "global + dense score means, standard deviations and fused threshold fitted on the same "
                            "validation pairs",
            "metrics.test": "per-client test metrics (EER, accuracy, thresholds, pair counts) on test fingers",
            "data.clients": "exact finger and training-image counts per client",
            "guarantee": "the accounting itself: DP pair count n, sample rate q = 1/ceil(n / batch) and g (treated "
                         "as public)",
        },
    }


def max_pairs_per_finger(pairs: PairSet) -> int:
    """The largest number of pairs any one finger takes part in (fingers = components of the genuine pairs)."""
    return int(pairs_per_finger(pairs).max())


def pairs_per_finger(pairs: PairSet) -> np.ndarray:
    """Pairs involving each finger (a genuine pair counts once for its finger); fingers = genuine components."""
    from fedprint.training.trainer import identities_from_pairs

    used, labels = identities_from_pairs(pairs)
    fa = labels[np.searchsorted(used, pairs.a)]
    fb = labels[np.searchsorted(used, pairs.b)]
    counts = np.bincount(fa, minlength=labels.max() + 1) + np.bincount(fb, minlength=labels.max() + 1)
    counts -= np.bincount(fa[fa == fb], minlength=labels.max() + 1)  # a genuine pair counts once for its finger
    return counts


_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (a bijective 64-bit mixer)."""
    x = np.asarray(x, np.uint64)
    with np.errstate(over="ignore"):  # multiplication modulo 2^64 is the point
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def image_keys(images: torch.Tensor) -> np.ndarray:
    """A 64-bit key per image from a hash of its pixels (stable whatever else is in the pool)."""
    import hashlib

    arr = images.detach().cpu().numpy()
    return np.array([int.from_bytes(hashlib.sha256(np.ascontiguousarray(x).tobytes()).digest()[:8], "little")
                     for x in arr], dtype=np.uint64)

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


def dp_pair_set(pairs: PairSet, images: torch.Tensor, cfg: TrainConfig,
                impostor_rate: float = DEFAULT_IMPOSTOR_RATE) -> PairSet:
    """The fixed DP training dataset, built finger by finger (module docstring, *unit and neighbouring relation*).

    Every genuine pair of ``pairs`` (all pairs of two images of one finger), plus every pair of images i < j of
    different fingers whose keyed hash U(k_i, k_j) (salted with ``cfg.seed``) is below ``impostor_rate``. The
    pool's own impostor pairs (a seeded sample over the whole pool) are not used. Genuine pairs first, then
    impostors in ascending (a, b).
    """
    if len(pairs) == 0 or pairs.n_genuine == 0:
        raise ValueError("dp_pair_set: the training pairs contain no genuine pair; nothing to learn from")
    if not (math.isfinite(impostor_rate) and 0 <= impostor_rate <= 1):
        raise ValueError(f"impostor_rate: expected a probability in [0, 1], got {impostor_rate!r}")
    from fedprint.training.trainer import identities_from_pairs

    gen = pairs.label == 1
    genuine = pairs.take(gen)
    used, labels = identities_from_pairs(genuine)
    keys = image_keys(images[torch.from_numpy(used)])
    salt = _mix(np.uint64(cfg.seed & 0xFFFFFFFFFFFFFFFF))
    threshold = np.uint64(min(int(impostor_rate * 2.0 ** 64), 2 ** 64 - 1))
    ia, ib = [], []
    for i in range(len(used) - 1):
        j = np.arange(i + 1, len(used))
        j = j[labels[j] != labels[i]]
        lo, hi = np.minimum(keys[i], keys[j]), np.maximum(keys[i], keys[j])
        keep = _mix(_mix(lo ^ salt) ^ hi) < threshold if impostor_rate < 1 else np.ones(len(j), bool)
        ia.append(np.full(int(keep.sum()), used[i]))
        ib.append(used[j[keep]])
    a = np.concatenate([genuine.a, *ia]).astype(np.int64)
    b = np.concatenate([genuine.b, *ib]).astype(np.int64)
    label = np.concatenate([genuine.label, np.zeros(len(a) - len(genuine), genuine.label.dtype)])
    return PairSet(a, b, label)


def default_delta(n_records: int) -> float:
    """δ for ``n_records`` records: the largest power of ten ≤ 1/(10·n)
    (:func:`fedprint.privacy.delta.default_delta`)."""
    if n_records < 1:
        raise ValueError(f"default_delta: n_records must be >= 1, got {n_records}")
    return _default_delta(int(n_records))


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
    steps_per_epoch: int
    impostor_rate: float
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
        for a, b, y in tqdm(self.loader, desc=desc, disable=not progress, leave=False, unit="batch",
                            total=self.steps_per_epoch):
            if steps == self.steps_per_epoch:  # the pair cap limits the work per epoch, not the pair set
                break
            loss = self.step(a, b, y)
            steps += 1
            seen += len(y)
            if loss is not None:
                total, n_loss = total + loss, n_loss + 1
        return {"loss": total / max(n_loss, 1), "steps": steps, "pairs_seen": seen, "epsilon": self.epsilon()}

    def accounting(self) -> dict:
        """What a run must report: ε at δ, δ, σ, C, q, steps, dataset size, accountant, record unit."""
        eps = self.epsilon()
        per_finger = pairs_per_finger(self.pairs)
        g = int(per_finger.max())
        f_eps, f_delta = group_privacy(eps, self.delta, g)
        return {"record": "pair", "unit": "finger", "epsilon": eps, "delta": self.delta,
                "delta_rule": delta_rule(self.delta, len(self.pairs), "pairs"), "fingers": len(per_finger),
                "pairs_per_finger": g, "impostor_rate": self.impostor_rate,
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
    impostor_rate: float = DEFAULT_IMPOSTOR_RATE,
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
        ``max_pairs_per_epoch`` (steps per epoch <= ceil(cap / batch_size)), ``seed`` (salt of the pair set's
        hash), ``epochs`` (only used to calibrate σ when ``target_epsilon`` is given). ``impostor_ratio`` is not
        used: the impostor share is the public ``impostor_rate``.
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
    impostor_rate : float
        Public probability p that a pair of images of two different fingers is an impostor pair of the DP set
        (:func:`dp_pair_set`). Default :data:`DEFAULT_IMPOSTOR_RATE`.
    """
    _check_dp(noise_multiplier, max_grad_norm, delta, target_epsilon, accountant)
    extra = {k: getattr(cfg, k) for k in ("dense_weight", "minutiae_weight", "proxy_weight", "ema",
                                          "flip_identities", "l2sp", "freeze_blocks") if getattr(cfg, k) > 0}
    if cfg.loss != "contrastive":
        extra["loss"] = cfg.loss
    if extra:  # per-pair clipping is defined for Eq. 1 on a pair; the losses couple a batch, EMA is not built here
        raise ValueError(f"DP-SGD trains Eq. 1 on a fixed pair set only; [train] {extra} is not supported with "
                         "[dp] (set loss = \"contrastive\", dense_weight = 0, minutiae_weight = 0, proxy_weight = 0, "
                         "ema = 0, flip_identities = 0, l2sp = 0, freeze_blocks = 0)")
    fixed = dp_pair_set(pairs, images, cfg, impostor_rate)
    delta = default_delta(len(fixed)) if delta is None else float(delta)
    batches = math.ceil(len(fixed) / cfg.batch_size)  # q = 1 / batches, as Opacus's DPDataLoader
    cap = cfg.max_pairs_per_epoch
    steps_per_epoch = batches if cap is None else min(batches, math.ceil(cap / cfg.batch_size))
    dataset = TensorDataset(torch.from_numpy(fixed.a), torch.from_numpy(fixed.b),
                            torch.from_numpy(fixed.label.astype(np.float32)))
    # Poisson sampling and Gaussian noise: generators seeded from the OS CSPRNG, never stored, so no run seed or
    # file can regenerate them (Opacus's secure_mode needs torchcsprng, which cannot be installed here).
    # Tests pass their own generators through ``generators``.
    sample_gen, noise_gen = generators if generators is not None else (entropy_generator(), entropy_generator())
    loader = DataLoader(dataset, batch_size=cfg.batch_size, generator=sample_gen)
    inplace = _set_inplace(encoder, False)
    module = PairDistance(encoder)
    from fedprint.training.trainer import adam

    optimizer = adam(module.parameters(), cfg)
    engine = PrivacyEngine(accountant=accountant)
    common = {"module": module, "optimizer": optimizer, "data_loader": loader, "max_grad_norm": max_grad_norm,
              "grad_sample_mode": GRAD_SAMPLE_MODE, "poisson_sampling": True,
              "noise_generator": noise_gen}
    if target_epsilon is not None:
        # σ for the steps actually taken (epochs x steps_per_epoch at q). Opacus's bisection over σ starts from a
        # large σ whose best RDP order is the largest one it tries, and warns "Optimal order is the largest alpha"
        # for those trial points; at the calibrated σ the best order lies inside the range (tests/test_dp_sgd.py),
        # so the warning says nothing about the result. The ε reported after training is computed unfiltered.
        from opacus.accountants.utils import get_noise_multiplier

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
            noise_multiplier = get_noise_multiplier(target_epsilon=target_epsilon, target_delta=delta,
                                                    sample_rate=1.0 / batches, steps=cfg.epochs * steps_per_epoch,
                                                    accountant=accountant)
    gsm, dp_opt, dp_loader = engine.make_private(**common, noise_multiplier=noise_multiplier)
    return DPSiameseTrainer(encoder=encoder, images=images, pairs=fixed, module=gsm, optimizer=dp_opt,
                            loader=dp_loader, engine=engine, delta=delta, margin=cfg.margin,
                            accountant=accountant, target_epsilon=target_epsilon, steps_per_epoch=steps_per_epoch,
                            impostor_rate=float(impostor_rate), _inplace=inplace)


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
    impostor_rate: float = DEFAULT_IMPOSTOR_RATE,
    progress: bool = True,
    desc: str = "dp-train",
) -> tuple[list[dict], dict]:
    """DP-SGD counterpart of :func:`fedprint.training.trainer.train_siamese`: trains ``encoder`` in place for
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
                              accountant=accountant, generators=generators, impostor_rate=impostor_rate)
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
