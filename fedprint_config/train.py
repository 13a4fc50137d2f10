"""``[train]``: hyper-parameters of local training, shared by every way FedPrint trains."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of local training (defaults: seed 003 Sec. 5.2, except epochs which the run sets).

    Attributes
    ----------
    epochs : int
        Local epochs E (one epoch = one pass over that epoch's pair sample).
    lr : float
        Adam learning rate (3e-4).
    batch_size : int
        Pairs per optimisation step (32).
    margin : float
        Contrastive margin m of Eq. 1 (embeddings are unit-norm, so distances lie in [0, 2]).
    impostor_ratio : float
        Impostor pairs drawn per genuine pair in each epoch's sample.
    max_pairs_per_epoch : int or None
        Cap on the pairs of one epoch (None: no cap), to bound epoch time on big clients.
    seed : int
        Seed of pair sampling and batch order.
    """

    epochs: int = 5
    lr: float = 3e-4
    batch_size: int = 32
    margin: float = 1.0
    impostor_ratio: float = 1.0
    max_pairs_per_epoch: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "epochs": self.epochs >= 1,
            "lr": self.lr > 0,
            "batch_size": self.batch_size >= 1,
            "margin": self.margin > 0,
            "impostor_ratio": self.impostor_ratio > 0,
            "max_pairs_per_epoch": self.max_pairs_per_epoch is None or self.max_pairs_per_epoch >= 2,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"TrainConfig: invalid value for {', '.join(bad)}: {asdict(self)}")
