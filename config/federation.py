"""``[federation]``: how the federated methods of an experiment run (rounds, methods, AFFR step, FedProx μ, ...).

It is one section of :class:`fedprint.config.ExperimentConfig`, validated by the same reader as every other
section (:func:`fedprint.config.experiment.parse_config`); ``fedprint train`` reads and ignores it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

#: Methods the runner knows: local-only and centralized baselines, and the three Flower strategies.
METHODS = ("local", "centralized", "fedavg", "fedprox", "affr", "fedala", "feddbe", "fedas")
FEDERATED = ("fedavg", "fedprox", "affr", "fedala", "feddbe", "fedas")
#: Personalised methods: each client evaluates its own personalised model (the others: the global model).
PERSONALIZED = ("fedala", "feddbe", "fedas")


@dataclass(frozen=True)
class FederationConfig:
    """``[federation]``: how the federated methods run.

    Attributes
    ----------
    rounds : int
        Server rounds T (Yan et al. 2025: 20; cross-dataset 40). Local-only and centralized baselines train for
        ``rounds * train.epochs`` epochs, the same number of passes a federated client makes.
    methods : tuple of str
        Methods `fedprint simulate` runs by default (subset of :data:`METHODS`; default: the five of the
        paper's own comparison, without the personalised baselines).
    step : float
        AFFR base step size d (Table 7 best: 0.8).
    steps : tuple of float
        Step-size ablation: when non-empty, "affr" runs once per value (method names ``affr-d0.2`` ...).
    proximal_mu : float
        FedProx proximal weight μ.
    fraction_train, fraction_evaluate : float
        Fraction of nodes sampled per round (1.0: all).
    timeout : float
        Seconds the server waits for replies in one round (always finite: a crashed client pool must not
        block the run for an hour).
    client_threads : int
        torch threads per client process.
    gap_noise_floor : float
        AFFR variant: a round whose centred gaps max|G − μ| stay below ``gap_noise_floor`` × the largest gap
        standard error the clients report leaves the weights unchanged (0 = the paper's rule, always update).
        Every AFFR round records whether its update was inside the validation noise (2 SE), whatever this is.
    ala_layers, ala_eta, ala_percent : int, float, float
        FedALA: top parameter tensors adapted (2 = the head's weight and bias), weight learning rate η, and the
        percentage s of local training images used to learn the weights (reference defaults 2, 1.0, 80).
    dbe_kappa, dbe_momentum : float
        FedDBE: mean-regularisation weight κ and running-mean momentum (reference momentum 0.1).
    as_align_lr : float
        FedAS: SGD learning rate of the parameter alignment (reference 0.01).
    secure_aggregation : bool
        SecAgg+ (Bell et al. 2020, :mod:`fedprint.server.secure_strategy`): the server learns only the weighted sum
        of the updates of at least t clients (fedavg, fedprox, affr; the personalised methods are refused). With
        ``[dp] level = "client"`` the DP becomes distributed: each client adds its share of the noise.
    secagg_num_shares : int
        Shares k of each client's secrets = its neighbourhood (itself included): 0 = the whole cohort (SecAgg's
        complete graph), else an odd number >= 3 (capped at the cohort).
    secagg_reconstruction_threshold : int
        t shares reconstruct a secret; 0 = a majority ⌊k/2⌋ + 1. Must be > k/2 and <= k (a smaller t lets a
        malicious server collect shares of both of a client's secrets and unmask it; t <= 1 would hand one client's
        mask to anyone).
    secagg_clipping_range : float
        c: each coordinate of a client's weighted update is clipped to [−c, c] before quantisation (> 0).
    secagg_quantization_range : int
        R: values are rounded onto {0 … R−1}; the sum lives in Z_{2^32}, so cohort × (R − 1) < 2^32 (checked each
        round). Default 2^24 (step 2c/(R−1) ≈ 1.2e-7 at c = 1; up to 256 clients).
    """

    rounds: int = 20
    methods: tuple[str, ...] = ("local", "centralized", "fedavg", "fedprox", "affr")
    step: float = 0.8
    steps: tuple[float, ...] = ()
    proximal_mu: float = 0.01
    fraction_train: float = 1.0
    fraction_evaluate: float = 1.0
    timeout: float = 600.0
    client_threads: int = 1
    gap_noise_floor: float = 0.0
    ala_layers: int = 2
    ala_eta: float = 1.0
    ala_percent: float = 80.0
    dbe_kappa: float = 0.1
    dbe_momentum: float = 0.1
    as_align_lr: float = 0.01
    secure_aggregation: bool = False
    secagg_num_shares: int = 0
    secagg_reconstruction_threshold: int = 0
    secagg_clipping_range: float = 1.0
    secagg_quantization_range: int = 2 ** 24

    def __post_init__(self) -> None:
        check_rounds(self.rounds, "federation.rounds")
        check_methods(self.methods, "federation.methods")
        for name, value in [("step", self.step), *[(f"steps[{i}]", s) for i, s in enumerate(self.steps)],
                            ("proximal_mu", self.proximal_mu)]:
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"federation.{name}: expected a finite number >= 0, got {value}")
        for name in ("fraction_train", "fraction_evaluate"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"federation.{name}: expected a value in (0, 1], got {getattr(self, name)}")
        if not self.timeout > 0 or not math.isfinite(self.timeout):
            raise ValueError(f"federation.timeout: expected finite seconds > 0, got {self.timeout}")
        if self.client_threads < 1:
            raise ValueError(f"federation.client_threads: expected >= 1, got {self.client_threads}")
        if not (math.isfinite(self.gap_noise_floor) and self.gap_noise_floor >= 0):
            raise ValueError(f"federation.gap_noise_floor: expected a finite number >= 0, got {self.gap_noise_floor}")

        if self.ala_layers < 1:
            raise ValueError(f"federation.ala_layers: expected an integer >= 1, got {self.ala_layers}")
        if not 0 < self.ala_percent <= 100:
            raise ValueError(f"federation.ala_percent: expected a percentage in (0, 100], got {self.ala_percent}")
        if not 0 < self.dbe_momentum <= 1:
            raise ValueError(f"federation.dbe_momentum: expected a value in (0, 1], got {self.dbe_momentum}")
        for name in ("ala_eta", "dbe_kappa", "as_align_lr"):
            v = getattr(self, name)
            bound = ">= 0" if name == "dbe_kappa" else "> 0"
            if not (math.isfinite(v) and v >= 0) or (bound == "> 0" and v == 0):
                raise ValueError(f"federation.{name}: expected a finite number {bound}, got {v}")

        self._check_secagg()

    def _check_secagg(self) -> None:
        k, t = self.secagg_num_shares, self.secagg_reconstruction_threshold
        if not (k == 0 or (k >= 3 and k % 2 == 1)):
            raise ValueError(f"federation.secagg_num_shares: expected 0 (the whole cohort) or an odd integer >= 3, "
                             f"got {k}")
        if t != 0 and (t <= 1 or (k and not (2 * t > k and t <= k))):
            raise ValueError(f"federation.secagg_reconstruction_threshold: expected 0 (a majority) or t with "
                             f"k/2 < t <= k (k = secagg_num_shares = {k or 'the cohort'}); t <= 1 or t <= k/2 would "
                             f"let the server unmask a single client, t > k could never unmask; got {t}")
        if not (math.isfinite(self.secagg_clipping_range) and self.secagg_clipping_range > 0):
            raise ValueError(f"federation.secagg_clipping_range: expected a finite number > 0, got "
                             f"{self.secagg_clipping_range}")
        if not 2 ** 8 <= self.secagg_quantization_range <= 2 ** 31:
            raise ValueError(f"federation.secagg_quantization_range: expected an integer in [2^8, 2^31], got "
                             f"{self.secagg_quantization_range}")
        personal = [m for m in self.methods if m in PERSONALIZED]
        if self.secure_aggregation and personal:
            raise ValueError(f"federation.secure_aggregation: {personal} need every client's own arrays on the "
                             "server (personalised aggregation), which secure aggregation hides; remove them from "
                             "federation.methods or turn secure_aggregation off")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Most server rounds a run may ask for (the papers run 20-40; 10,000 rounds of the smallest experiment take days).
MAX_ROUNDS = 10_000


def check_rounds(value, where: str = "--rounds") -> int:
    """``value`` if it is an integer in [1, :data:`MAX_ROUNDS`], else ValueError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ROUNDS:
        raise ValueError(f"{where}: expected an integer in [1, {MAX_ROUNDS:,}], got {value!r}")
    return value


def check_methods(methods, where: str = "--methods") -> list[str]:
    """``methods`` if it is a non-empty list of distinct known method names, else ValueError naming ``where`` (a
    method named twice would be trained twice into one folder)."""
    names = list(methods)
    bad = [m for m in names if m not in METHODS]
    if bad or not names:
        raise ValueError(f"{where}: expected a non-empty subset of {METHODS}, got {names}")
    twice = sorted({m for m in names if names.count(m) > 1})
    if twice:
        raise ValueError(f"{where}: {', '.join(twice)} named more than once; name each method once")
    return names
