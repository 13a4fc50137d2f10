"""``[train]``: hyper-parameters of local training, shared by every way FedPrint trains."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from fedprint.config.minutiae import CHOICES as MINUTIAE_BACKENDS

SAMPLERS = ("pk", "pairs")
SCHEDULES = ("cosine", "constant")
MINUTIAE_LAYERS = ("last", "middle")
LOSSES = ("contrastive", "supcon")
FLIP_IDENTITIES = (0, 1, 3)
#: Conv blocks of the compact encoder that ``freeze_blocks`` may hold fixed (models.siamese.CompactEncoder has 5).
FREEZABLE_BLOCKS = 5


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of local training (Yan et al. 2025 Sec. 5.2 where it gives them; the recipe is FedPrint's).

    Attributes
    ----------
    epochs : int
        Local epochs E. ``sampler = "pk"``: one epoch = as many P x K batches as it takes to show every training
        image once on average; ``"pairs"``: one pass over that epoch's balanced pair sample.
    lr : float
        Adam learning rate (default 1e-3; Yan et al. 2025 uses 3e-4 with one pair per step).
    sampler : str
        ``"pk"`` (default): identity-balanced batches of P fingers x K impressions, Eq. 1 over every pair in
        the batch (:func:`fedprint.models.loss.batch_contrastive_loss`); ``"pairs"``: Yan et al. 2025's one pair per two
        forward passes (batches of ``batch_size`` pairs).
    p, k : int
        Fingers per batch and impressions per finger (defaults 16 and 4) of the ``"pk"`` sampler.
    augment : bool
        Random placement, plastic distortion, contrast/dryness and partial-contact augmentation of every training
        batch (:mod:`fedprint.models.augment`; default True).
    scale_jitter : float
        Maximum relative scale change of the placement augmentation (default 0.05: factors in [0.95, 1.05]); a
        wider range also randomises the ridge period (synthetic profiles draw coarser ridges than most sensors).
    translation : float
        Maximum shift per axis of the placement augmentation as a fraction of the input side (default 0.1); a
        larger one shows the network impressions that caught another part of the finger (put down higher or
        lower on the sensor window), where FCJ2020's failing genuine pairs cluster; 0.2 measured no gain there
        (docs/studies/real_prints_recipe.md).
    rotation : float
        Largest rotation of the placement augmentation in degrees, either way (default 20).
    elastic : float
        RMS of the plastic-distortion augmentation's smooth displacement field as a fraction of the input side
        (default 0.015, about 3 px at 192 px; :mod:`fedprint.models.augment`, after Cappelli et al. 2001): a larger one
        shows the network the non-linear stretch of skin pressed harder or sideways.
    window : float
        Probability in [0, 1] that a training image keeps only a random capture window of 50-90 % of each side,
        the rest blanked (default 0: off; :mod:`fedprint.models.augment`): a sensor window smaller than the finger
        (FVC2000 DB1's 15 mm square), where the print's outline is the window's edge and two impressions share
        only part of the skin; screened at 0.25 / 0.5: FCJ2020's held-out EER +1.7 to +2.4 points, FVC2000 DB1
        unchanged (docs/studies/real_prints_recipe.md). Needs ``augment``.
    flip_identities : int
        Mirrored twins added as extra training fingers (default 0: none): 1 adds every training finger's
        left-right mirror image as a new finger, 3 also its upside-down and rotated-by-180 degrees images.
        A mirrored print is not any impression of the same finger (its ridge flow turns the other way) and looks
        like a plausible finger of the other hand, so the fingers the loss tells apart grow (1 + f)-fold at no
        labelling cost. The step count stays that of the real prints (an epoch shows each real image
        1 / (1 + f) times on average). Needs ``sampler = "pk"``; refused with DP-SGD (one print would give
        several records of the privacy unit).
    domain_batches : bool
        Draw every P x K batch of a centralized run from one institution's fingers (default False: from all of
        them). With several sensors in one batch, an impostor of another sensor is told apart by the sensor alone,
        and the loss rewards embeddings that cluster by sensor; with one sensor a batch, every impostor is of the
        same sensor. A batch's institution is drawn in proportion to its training images, so each image is seen
        as often as without it. Needs ``sampler = "pk"``; a run with one institution (local, federated) is
        unchanged.
    texture : float
        Strength in [0, 1] of the sensor-texture randomisation (pores, broken ridges, uneven ridge width, creases,
        blur, ink response; :func:`fedprint.models.augment.sensor_texture`; default 0: off). Needs ``augment``.
    dense_weight : float
        Weight of the dense-match loss (:mod:`fedprint.models.dense_loss`) added to the embedding's contrastive loss,
        which
        trains the last feature map for ``--score fused`` too (default 0: off; needs ``sampler = "pk"`` and the
        compact encoder).
    minutiae_weight : float
        Weight of the minutiae-map loss (:mod:`fedprint.models.minutiae_map`, DeepPrint's multi-task branch: a head on a
        feature map predicts where the extractor finds ridge endings and bifurcations; the head is dropped after
        training; default 0: off, as measured it did not help; needs ``sampler = "pk"`` and the compact encoder).
    minutiae_layer : str
        Which feature map the minutiae head reads: ``"last"`` (default; the map the embedding pools, S/16) or
        ``"middle"`` (the end of block 3, S/8: the branch leaves the shared trunk earlier, as in DeepPrint).
    minutiae_backend : str
        The extractor of the minutiae-map targets (:mod:`fedprint.training.minutiae_targets`): in an experiment a
        copy of ``[minutiae] backend``, set from it (leave it out of ``[train]``); ``"auto"`` (default) where a
        TrainConfig is built without one.
    loss : str
        The embedding's loss: ``"contrastive"`` (default; Eq. 1 over every pair of the batch,
        :func:`fedprint.models.loss.batch_contrastive_loss`) or ``"supcon"`` (the supervised contrastive loss of Khosla
        et
        al. 2020, :func:`fedprint.models.supcon.batch_supcon_loss`: a softmax over the batch that weighs the hardest
        impostors most; needs ``sampler = "pk"``).
    temperature : float
        Temperature tau of ``loss = "supcon"`` (default 0.1).
    supcon_margin : float
        Additive cosine margin in [0, 1) on the positive pairs of ``loss = "supcon"`` (CosFace-style; default 0:
        Khosla's loss; see :func:`fedprint.models.supcon.batch_supcon_loss`).
    proxy_weight : float
        Weight of a proxy loss added to the embedding's loss (default 0: off): one learned unit vector per
        training finger (started at the finger's mean embedding, trained at 10 x ``lr``, dropped after the call)
        and CosFace's large-margin cosine loss of every batch image against all of them, scale 1 / ``temperature``
        (:func:`fedprint.models.proxy_loss.proxy_cosface_loss`). Needs ``sampler = "pk"``; refused with DP-SGD.
    proxy_margin : float
        CosFace's cosine margin m in [0, 1) on the true finger's proxy (default 0.2); used with ``proxy_weight``.
    ema : float
        Decay of an exponential moving average of the weights, updated after every step; the average replaces the
        weights when the call ends (default 0: off). The average forgets with a horizon of about
        ``1 / (1 - ema)`` steps and starts at the first step's weights (Polyak & Juditsky 1992; torch's
        ``AveragedModel``). One call of the trainer is one federated round: the average does not cross rounds.
    l2sp : float
        Weight μ >= 0 of the L2-SP term (μ/2)·‖w − w₀‖² added to the loss, w₀ the weights the call starts from
        (Li, Grandvalet & Davoine 2018, Eq. 3: fine-tuning pulled toward the pre-trained model instead of toward
        zero; default 0: off). One call of the trainer is one federated round, so there w₀ is the round's global
        model and the term is FedProx's (Li et al. 2020) with μ = ``l2sp``, on top of any ``proximal-mu``.
        Refused with DP-SGD. The reported loss excludes it.
    freeze_blocks : int
        The first n of the compact encoder's 5 conv blocks (conv + GroupNorm) are not trained (default 0: all
        trained); their pre-trained low-level ridge filters are kept as they are. Refused with DP-SGD.
    weight_decay : float
        Decoupled weight decay λ of Adam (AdamW: every step shrinks each weight by ``lr_t * λ`` apart from the
        gradient; Loshchilov & Hutter 2019; default 0: plain Adam, as before the option existed).
    schedule : str
        ``"cosine"`` (default: linear warm-up over the first 5 % of steps, cosine decay to 5 % of ``lr`` over
        one call of the trainer, i.e. one federated round) or ``"constant"``.
    balance : bool
        Average the genuine and impostor terms of Eq. 1 with equal weight (default True; see
        :func:`fedprint.models.loss.batch_contrastive_loss`).
    batch_size : int
        Pairs per optimisation step of the ``"pairs"`` sampler (32).
    margin : float
        Contrastive margin m of Eq. 1 (embeddings are unit-norm, so distances lie in [0, 2]).
    impostor_ratio : float
        ``"pairs"``: impostor pairs drawn per genuine pair in each epoch's sample.
    max_pairs_per_epoch : int or None
        ``"pairs"``: cap on the pairs of one epoch (None: no cap), to bound epoch time on big clients.
    seed : int
        Seed of sampling, batch order and augmentation.
    """

    epochs: int = 5
    lr: float = 1e-3
    sampler: str = "pk"
    p: int = 16
    k: int = 4
    augment: bool = True
    scale_jitter: float = 0.05
    translation: float = 0.1
    rotation: float = 20.0
    elastic: float = 0.015
    window: float = 0.0
    flip_identities: int = 0
    domain_batches: bool = False
    texture: float = 0.0
    dense_weight: float = 0.0
    minutiae_weight: float = 0.0
    minutiae_layer: str = "last"
    minutiae_backend: str = "auto"
    loss: str = "contrastive"
    temperature: float = 0.1
    supcon_margin: float = 0.0
    proxy_weight: float = 0.0
    proxy_margin: float = 0.2
    ema: float = 0.0
    l2sp: float = 0.0
    freeze_blocks: int = 0
    weight_decay: float = 0.0
    schedule: str = "cosine"
    balance: bool = True
    batch_size: int = 32
    margin: float = 1.0
    impostor_ratio: float = 1.0
    max_pairs_per_epoch: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "epochs": self.epochs >= 1,
            "lr": self.lr > 0,
            "sampler": self.sampler in SAMPLERS,
            "p": self.p >= 2,
            "k": self.k >= 2,
            "schedule": self.schedule in SCHEDULES,
            "scale_jitter": 0 <= self.scale_jitter < 1,
            "translation": 0 <= self.translation < 1,
            "rotation": 0 <= self.rotation <= 180,
            "elastic": 0 <= self.elastic < 0.2,
            "window": 0 <= self.window <= 1,
            "flip_identities": self.flip_identities in FLIP_IDENTITIES and (self.flip_identities == 0
                                                                            or self.sampler == "pk"),
            "domain_batches": not self.domain_batches or self.sampler == "pk",
            "texture": 0 <= self.texture <= 1,
            "dense_weight": self.dense_weight >= 0 and (self.dense_weight == 0 or self.sampler == "pk"),
            "minutiae_weight": self.minutiae_weight >= 0 and (self.minutiae_weight == 0 or self.sampler == "pk"),
            "minutiae_layer": self.minutiae_layer in MINUTIAE_LAYERS,
            "minutiae_backend": self.minutiae_backend in MINUTIAE_BACKENDS,
            "loss": self.loss in LOSSES and (self.loss == "contrastive" or self.sampler == "pk"),
            "temperature": self.temperature > 0,
            "supcon_margin": 0 <= self.supcon_margin < 1 and (self.supcon_margin == 0 or self.loss == "supcon"),
            "proxy_weight": self.proxy_weight >= 0 and (self.proxy_weight == 0 or self.sampler == "pk"),
            "proxy_margin": 0 <= self.proxy_margin < 1,
            "ema": 0 <= self.ema < 1,
            "l2sp": self.l2sp >= 0,
            "freeze_blocks": type(self.freeze_blocks) is int and 0 <= self.freeze_blocks <= FREEZABLE_BLOCKS,
            "weight_decay": 0 <= self.weight_decay < 1,
            "batch_size": self.batch_size >= 1,
            "margin": self.margin > 0,
            "impostor_ratio": self.impostor_ratio > 0,
            "max_pairs_per_epoch": self.max_pairs_per_epoch is None or self.max_pairs_per_epoch >= 2,
        }
        bad = [k for k, ok in checks.items() if not ok]
        # inf passes every "> 0" above (lr = inf trains NaN weights): no number of [train] may be infinite or NaN
        bad += [k for k, v in asdict(self).items() if isinstance(v, float) and not math.isfinite(v) and k not in bad]
        if bad:
            raise ValueError(f"train: invalid value for {', '.join(bad)} (sampler one of {SAMPLERS}, schedule one "
                             f"of {SCHEDULES}, minutiae_layer one of {MINUTIAE_LAYERS}, minutiae_backend one of "
                             f"{MINUTIAE_BACKENDS}, loss one of {LOSSES} (not "
                             f"contrastive only with sampler = \"pk\"), p and k >= 2, scale_jitter and "
                             f"translation in [0, 1), rotation in [0, 180], elastic in [0, 0.2), flip_identities in "
                             f"{FLIP_IDENTITIES} (not 0 only with sampler = \"pk\"), texture and window in [0, 1], "
                             f"ema and weight_decay in [0, 1), l2sp >= 0, freeze_blocks in 0..{FREEZABLE_BLOCKS}, "
                             f"supcon_margin in [0, 1) and > 0 only with loss = \"supcon\", proxy_margin in [0, 1), "
                             f"dense_weight, minutiae_weight and proxy_weight > 0 and domain_batches only with "
                             f"sampler = \"pk\", finite positive numbers elsewhere): "
                             f"{asdict(self)}")
