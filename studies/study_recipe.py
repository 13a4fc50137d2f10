"""The verifier recipe on real prints: which levers pay (issue 22 §2) -> docs/studies/real_prints_recipe.md (+ figure).

Each variant is one ``fedprint train --mode centralized`` run on FCJ2020 (160 fingers x 6 impressions, optical,
500 dpi) split by finger (open set: 40 test fingers never trained on), fine-tuned from the shipped model
(synthetic prints only) or from a synthetic-only model of another input pipeline. Every model is then scored on
the held-out FCJ fingers (600 genuine / 20,000 impostor pairs, from the run) and on every OTHER real set, which
no variant ever trains on (FVC protocol and all pairs, pair counts in the table), beside the classical matcher's
figures of ``../shared/data/real/README`` (afis Gabor + Bozorth3, FVC protocol).

    python -m studies.study_recipe                      # runs what is missing (hours on 2 cores), writes the doc
    python -m studies.study_recipe --only fcj_ft128     # one variant
    python -m studies.study_recipe --runs runs/recipe --no-train   # the doc from existing run folders only

Run folders: ``<runs>/<variant>/`` (the train run directory); the variant's TOML is written beside it as
``<runs>/<variant>.toml``. Real sets: ``--real-samples DIR`` or ``$FEDPRINT_REAL_SAMPLES`` (default
``../shared/data/real``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fedprint.config.arg_types import add_device_arg
from fedprint.data.atomic_io import write_text
from fedprint.lab.multi_seed import ci95, signed_interval
from studies import doc_tail

ROOT = Path(__file__).resolve().parents[1]

#: Transfer sets (never trained on by any variant) and their layouts.
OTHER_SETS = {"fvc_300x300_b": "fvc", "fvc2002_db1_b": "fvc", "fvc2002_db3_b": "fvc", "pyfnprint_16x8": "generic"}
#: Classical matcher (afis Gabor + Bozorth3), FVC protocol, from the real sets' README — quoted, not rerun here.
CLASSICAL_FVC_EER = {"fvc_300x300_b": 0.08, "fvc2002_db1_b": 0.129, "fvc2002_db3_b": 0.439, "pyfnprint_16x8": 0.038,
                     "fcj2020_dev": 0.113}

def synth_sources(fingers: int = 150) -> str:
    """The ``[[data.sources]]`` blocks of the shipped model's synthetic set (3 profiles, generator seed 1000) with
    ``fingers`` per profile; 50 of them are mixed into real training by ``mix_synthetic`` variants."""
    return "\n".join(f'[[data.sources]]\nkind = "synth"\nprofile = "{p}"\nfingers = {fingers}\nimpressions = 8\n'
                     f'seed = 1000\n' for p in ("socofing", "casia", "nist_sd10"))


#: Where FCJ2020 is read from and at which resolution (None: the loader's 500 dpi); ``--fcj-root`` / ``--fcj-dpi``
#: point the study at a copy, e.g. one resampled to 250 dpi to move it to another machine.
FCJ: dict = {"root": None, "dpi": None}


def _fcj(real: Path) -> str:
    root = FCJ["root"] or real / "fcj2020_dev"
    dpi = f"dpi = {float(FCJ['dpi'])}\n" if FCJ["dpi"] else ""
    return f'[[data.sources]]\nkind = "dataset"\nlayout = "generic"\nroot = "{root}"\n{dpi}'


def _screen(what: str, *, train: dict | None = None, model: dict | None = None, **extra) -> dict:
    """A screening variant: the 40-epoch ridge baseline (fcj_rr128_e40) with one setting changed; ``base=NAME``
    pairs it with another screening variant instead (a lever on top of an adopted one)."""
    return {"what": what, "model": {"input_size": 128, "normalization": "ridge", **(model or {})},
            "init": "pretrain_ridge", "train": {"epochs": 40, "lr": 5e-4, **(train or {})}, **extra}


def _on_supcon(what: str, model: dict | None = None, base: str = "fcj_rr128_supcon_t005_e40", **train) -> dict:
    """A screening lever stacked on a SupCon τ 0.05 screening variant ``base`` (by default
    ``fcj_rr128_supcon_t005_e40``), paired with it."""
    return _screen(f"{base} with {what}", train={"loss": "supcon", "temperature": 0.05, **train},
                   model=model, base=base)


def _on_gem(what: str, model: dict | None = None, **train) -> dict:
    """A screening lever stacked on SupCon τ 0.05 with GeM pooling (``fcj_rr128_supcon_t005_gem_e40``), paired
    with that variant."""
    return _on_supcon(what, model={"pooling": "gem", **(model or {})}, base="fcj_rr128_supcon_t005_gem_e40", **train)


def _on_shipped_gem(what: str, model: dict | None = None, **train) -> dict:
    """A screening lever on the shipped experiment's recipe (``experiments/real_sensors_fcj.toml``: from the shipped
    model, SupCon τ 0.05, GeM pooling) at 40 epochs / 128 px, paired with ``fcj_r128_supcon_t005_gem_e40``."""
    return _screen(what, train={"loss": "supcon", "temperature": 0.05, **train}, model={"pooling": "gem",
                                                                                        **(model or {})},
                   init=None, base="fcj_r128_supcon_t005_gem_e40")


def _on_twins(what: str, **train) -> dict:
    """A screening lever on the mirrored twins (``fcj_r128_supcon_t005_gem_fl1_e40``: the shipped experiment's recipe
    with ``flip_identities = 1`` at 40 epochs / 128 px), paired with that variant."""
    return _screen(f"fcj_r128_supcon_t005_gem_fl1_e40 with {what}",
                   train={"loss": "supcon", "temperature": 0.05, "flip_identities": 1, **train},
                   model={"pooling": "gem"}, init=None, base="fcj_r128_supcon_t005_gem_fl1_e40")


def _full_supcon(what: str, *, base: str | None = None, init: str | None = "pretrain_ridge",
                 model: dict | None = None, **extra) -> dict:
    """A full-budget variant (192 px, ridge normalisation, 120 epochs, lr 5e-4) with SupCon τ 0.05; ``init`` None
    starts from the shipped model; ``train={...}`` overrides training keys; ``base=NAME`` pairs it in the tables."""
    train = {"epochs": 120, "lr": 5e-4, "loss": "supcon", "temperature": 0.05, **extra.pop("train", {})}
    return {"what": what, "model": {"input_size": 192, "normalization": "ridge", **(model or {})},
            **({"init": init} if init else {}), **({"base": base} if base else {}), "train": train, **extra}


def _on_recipe(what: str, *, base: str = "fcj_r192_supcon_t005_gem_e120", model: dict | None = None,
               **extra) -> dict:
    """A full-budget lever on the shipped experiment's recipe (``experiments/real_sensors_fcj.toml``: from the shipped
    model, 192 px, ridge normalisation, SupCon τ 0.05, GeM pooling, 120 epochs), paired with ``base``."""
    return _full_supcon(what, base=base, init=None, model={"pooling": "gem", **(model or {})}, **extra)


def _wide(width: int, times: str) -> dict[str, dict]:
    """Synthetic ridge pre-training, the full FCJ recipe, and that recipe with SupCon τ 0.05, at ``width``."""
    pre, model = f"pretrain_ridge_w{width}", {"input_size": 192, "normalization": "ridge", "width": width}
    full = {"epochs": 120, "lr": 5e-4}
    return {
        pre: {"what": f"synthetic-only ridge pre-training of a {times}-as-wide encoder (width {width})",
              "synthetic": True, "model": {**model, "input_size": 128}, "train": {"epochs": 55, "lr": 1e-3}},
        f"fcj_rr192_w{width}_e120": {"what": f"fcj_rr192_e120 with a {times}-as-wide encoder (width {width}, from "
                                             f"{pre})", "model": model, "init": pre, "train": full},
        f"fcj_rr192_w{width}_supcon_t005_e120": {
            "what": f"fcj_rr192_w{width}_e120 with the supervised contrastive loss, temperature 0.05",
            "model": model, "init": pre, "train": {**full, "loss": "supcon", "temperature": 0.05}},
    }


def _shipped_pretrain(what: str, model: dict | None = None, **train) -> dict:
    """A synthetic-only pre-training with the shipped model's recipe (experiments/pretrain_synthetic.toml: 128 px,
    55 epochs, lr 1e-3) plus ``model`` and ``train`` keys; no real print."""
    return {"what": what, "synthetic": True, "model": {"input_size": 128, **(model or {})},
            "train": {"epochs": 55, "lr": 1e-3, **train}}


def _twins118_from(init: str, what: str) -> dict:
    """fcj_r192_supcon_t005_gem_fl1_v02_e120 (mirrored twins, 118 fingers) started from the pre-training ``init``
    instead of the shipped model, paired with it in the tables."""
    return _full_supcon(what, base="fcj_r192_supcon_t005_gem_fl1_v02_e120", init=init, model={"pooling": "gem"},
                        train={"flip_identities": 1}, val_fraction=0.02)


#: The best synthetic-only transfer (studies/study_synthetic_transfer.py lever "window_gem_rot35") as a start.
_PWGR = _shipped_pretrain("the shipped model's recipe (experiments/pretrain_synthetic.toml) with the capture window "
                          "(0.5), GeM pooling and rotations up to 35 degrees (no real print)", {"pooling": "gem"},
                          window=0.5, rotation=35.0)


#: name -> (what it tests, data block, [data] block, [model] keys, [train] keys, init variant or None)
VARIANTS: dict[str, dict] = {
    "fcj_ft128": {"what": "today's recipe: 128 px crop, per-image standardisation, 40 epochs",
                  "model": {"input_size": 128}, "train": {"epochs": 40, "lr": 3e-4}},
    "fcj_ft192": {"what": "whole print: 192 px at 250 dpi (~19.5 mm)",
                  "model": {"input_size": 192}, "train": {"epochs": 40, "lr": 3e-4}},
    "fcj_ridge128": {"what": "ridge normalisation (band-pass + local contrast)",
                     "model": {"input_size": 128, "normalization": "ridge"}, "train": {"epochs": 40, "lr": 3e-4}},
    "pretrain_ridge": {"what": "synthetic-only pre-training with ridge normalisation (no real print)",
                       "synthetic": True, "model": {"input_size": 128, "normalization": "ridge"},
                       "train": {"epochs": 55, "lr": 1e-3}},
    "fcj_rr128_e120": {"what": "ridge pre-training + ridge fine-tuning, 120 epochs",
                       "model": {"input_size": 128, "normalization": "ridge"}, "init": "pretrain_ridge",
                       "train": {"epochs": 120, "lr": 5e-4}},
    "fcj_rr192_e120": {"what": "ridge pre-training + whole print + ridge fine-tuning, 120 epochs",
                       "model": {"input_size": 192, "normalization": "ridge"}, "init": "pretrain_ridge",
                       "train": {"epochs": 120, "lr": 5e-4}},
    "fcj_r192_e120": {"what": "whole print + ridge fine-tuning from the shipped model, 120 epochs",
                      "model": {"input_size": 192, "normalization": "ridge"}, "train": {"epochs": 120, "lr": 5e-4}},
    "fcj_rr192_lr1e3_e120": {"what": "the best recipe (fcj_rr192_e120) with learning rate 1e-3, the one screened "
                                     "lever beyond the noise", "model": {"input_size": 192, "normalization": "ridge"},
                             "init": "pretrain_ridge", "train": {"epochs": 120, "lr": 1e-3}},
    # Screening at 40 epochs (128 px, ridge): each lever against the same-budget baseline fcj_rr128_e40, over
    # several finger splits with --splits (SCREEN lists them).
    "fcj_rr128_e40": _screen("screening baseline: ridge pre-training + ridge fine-tuning, 40 epochs"),
    "fcj_rr128_m14_e40": _screen("contrastive margin 1.4 instead of 1.0 (impostor pairs stay active longer)",
                                 train={"margin": 1.4}),
    "fcj_rr128_lr1e3_e40": _screen("learning rate 1e-3 instead of 5e-4", train={"lr": 1e-3}),
    "fcj_rr128_p32_e40": _screen("32 fingers per batch instead of 16 (more impostor pairs per step)",
                                 train={"p": 32}),
    "fcj_rr128_mix_e40": _screen("FCJ mixed with 150 synthetic fingers (50 per profile) in every epoch",
                                 mix_synthetic=True),
    "pretrain_ridge_g3": {"what": "synthetic-only ridge pre-training, 3 x 3 pooling grid (keeps the print's layout)",
                          "synthetic": True, "model": {"input_size": 128, "normalization": "ridge", "pool_grid": 3},
                          "train": {"epochs": 55, "lr": 1e-3}},
    "fcj_rr128g3_e40": _screen("3 x 3 pooling grid: grid pre-training + ridge fine-tuning, 40 epochs",
                               model={"pool_grid": 3}, init="pretrain_ridge_g3"),
    "fcj_rr128_dense_e40": _screen("dense-match loss (models.dense_loss, weight 1) added to the embedding's loss",
                                   train={"dense_weight": 1.0}),
    "fcj_rr128_min_e40": _screen("minutiae-map multi-task loss (models.minutiae_map, weight 1; DeepPrint's branch)",
                                 train={"minutiae_weight": 1.0}),
    "fcj_rr128_minmid_e40": _screen("minutiae-map loss (weight 1) on the block-3 map (S/8) instead of the last one",
                                    train={"minutiae_weight": 1.0, "minutiae_layer": "middle"}),
    "pretrain_ridge_f500": {"what": "synthetic-only ridge pre-training on 500 fingers per profile (3.3x more), 20 "
                                    "epochs (about the steps of pretrain_ridge's 55)", "synthetic": True,
                            "synth_fingers": 500, "model": {"input_size": 128, "normalization": "ridge"},
                            "train": {"epochs": 20, "lr": 1e-3}},
    "fcj_rr128f500_e40": _screen("ridge pre-training on 3.3x more synthetic fingers (pretrain_ridge_f500)",
                                 init="pretrain_ridge_f500"),
    "fcj_rr128_min01_e40": _screen("minutiae-map multi-task loss with weight 0.1 (the aid, not the task)",
                                   train={"minutiae_weight": 0.1}),
    "fcj_rr128_supcon_e40": _screen("supervised contrastive loss (Khosla et al. 2020, temperature 0.1) instead of "
                                    "Eq. 1: a softmax over the batch weighs the hardest impostors most",
                                    train={"loss": "supcon"}),
    "fcj_rr128_supcon_lr1e3_e40": _screen("supervised contrastive loss with learning rate 1e-3 (both screened "
                                          "levers together)", train={"loss": "supcon", "lr": 1e-3}),
    "fcj_rr128_supcon_t005_e40": _screen("supervised contrastive loss with temperature 0.05 (sharper: the hardest "
                                         "impostors weigh more)", train={"loss": "supcon", "temperature": 0.05}),
    "fcj_rr128_supcon_t02_e40": _screen("supervised contrastive loss with temperature 0.2 (softer)",
                                        train={"loss": "supcon", "temperature": 0.2}),
    "fcj_rr128_align_e40": _screen("learned alignment in front of the encoder (models.alignment: DeepPrint's "
                                   "rotation-and-shift localisation network, starting as the identity)",
                                   model={"align": True}),
    # SupCon's softmax is over the batch: more fingers (impostors) or more impressions (positives) per batch.
    # Compute per epoch is unchanged (an epoch is one pass over the training images), the steps are fewer.
    "fcj_rr128_supcon_t005_p32_e40": _on_supcon("32 fingers per batch instead of 16 (twice the impostors in each "
                                                "softmax)", p=32),
    "fcj_rr128_supcon_t005_k6_e40": _on_supcon("all 6 impressions of a finger per batch instead of 4 (more positives "
                                               "per anchor)", k=6),
    "fcj_rr128_supcon_t003_e40": _on_supcon("temperature 0.03 (sharper still)", temperature=0.03),
    "fcj_rr128_supcon_t005_lr1e3_e40": _on_supcon("learning rate 1e-3 instead of 5e-4", lr=1e-3),
    **{f"fcj_rr128_supcon_t005_ema{tag}_e40": _on_supcon(
        f"its weights averaged over training (EMA decay {decay}, a horizon of about {round(1 / (1 - decay))} "
        "steps; about 11 steps an epoch)", ema=decay) for tag, decay in (("99", 0.99), ("995", 0.995))},
    "fcj_rr128_supcon_t005_gem_e40": _on_supcon("GeM pooling (a learned generalised mean, exponent from 3) instead "
                                                "of the average", model={"pooling": "gem"}),
    # Decoupled weight decay: ~440 steps at lr <= 5e-4 shrink a weight by about 440 x 2.5e-4 x λ in all.
    **{f"fcj_rr128_supcon_t005_wd{tag}_e40": _on_supcon(
        f"decoupled weight decay {wd} (AdamW instead of Adam)", weight_decay=wd) for tag, wd in (("01", 0.1),
                                                                                                  ("05", 0.5))},
    # Levers on top of GeM: sensor-texture domain randomisation (made for the shipped model, models/augment.py) and
    # a larger scale jitter (FCJ2020's impressions differ in pressure, hence in ridge spacing).
    "fcj_rr128_supcon_t005_gem_tex05_e40": _on_gem("sensor-texture augmentation at strength 0.5", texture=0.5),
    "fcj_rr128_supcon_t005_gem_sj10_e40": _on_gem("scale jitter 0.10 instead of 0.05", scale_jitter=0.10),
    # The working resolution: every variant above sees 250 dpi (a ridge period of ~4.5 px, ~2 px after the stride-2
    # stem). The same skin (13 mm) at a finer resolution, from the shipped model (the recipe of
    # experiments/real_sensors_fcj.toml), paired with the same recipe at 250 dpi. Compute grows with the pixels.
    "fcj_r128_supcon_t005_gem_e40": _screen("supervised contrastive loss (τ 0.05) with GeM pooling, from the shipped "
                                            "model (no pre-training of our own), 40 epochs",
                                            train={"loss": "supcon", "temperature": 0.05}, model={"pooling": "gem"},
                                            init=None, base="fcj_rr128_supcon_t005_gem_e40"),
    **{f"fcj_r{size}d{round(dpi)}_supcon_t005_gem_e40": _on_shipped_gem(
        f"the same 13 mm of skin at {dpi:g} dpi ({size} px) instead of 250 dpi (128 px)",
        model={"input_size": size, "input_dpi": dpi}) for size, dpi in ((176, 343.75), (208, 406.25))},
    # An additive cosine margin on SupCon's positives (CosFace-style, models.supcon), on the shipped-model screen.
    **{f"fcj_r128_supcon_t005_gem_m{tag}_e40": _on_shipped_gem(
        f"fcj_r128_supcon_t005_gem_e40 with a cosine margin {m:g} on every positive pair (a genuine pair must beat "
        "the batch's impostors by about m)", supcon_margin=m) for tag, m in (("10", 0.1), ("25", 0.25), ("40", 0.4))},
    # More fingers at no labelling cost (the recipe looks limited by its 108 training fingers): every training
    # finger's flips added as new fingers ([train] flip_identities), at the real prints' step count.
    **{f"fcj_r128_supcon_t005_gem_fl{f}_e40": _on_shipped_gem(
        f"fcj_r128_supcon_t005_gem_e40 with every training finger's {what} added as new fingers (same steps)",
        flip_identities=f) for f, what in ((1, "left-right mirror"),
                                           (3, "three flips (left-right, upside-down, both)"))},
    # A proxy per training finger (CosFace, models.proxy_loss) beside SupCon: every image ranked against all 108
    # training fingers each step, not only the 15 others of its batch.
    **{f"fcj_r128_supcon_t005_gem_px{tag}_e40": _on_shipped_gem(
        f"fcj_r128_supcon_t005_gem_e40 with a CosFace proxy loss (margin 0.2) of weight {w:g} added",
        proxy_weight=w, proxy_margin=0.2) for tag, w in (("1", 1.0), ("03", 0.3))},
    # Placement augmentation on top of the twins, each strength either way of its default: plastic distortion
    # ([train] elastic, default 0.015 of the side: ~3 px at 192 px; impressions of one finger differ by the skin's
    # non-linear stretch, Cappelli et al. 2001) and rotation ([train] rotation, default ±20°; FCJ2020's prints are
    # taken upright).
    **{f"fcj_r128_supcon_t005_gem_fl1_el{tag}_e40": _on_twins(
        f"plastic distortion of rms {e:g} of the side instead of 0.015" if e else "no plastic distortion (rms 0 "
        "instead of 0.015 of the side)", elastic=e)
       for tag, e in (("0", 0.0), ("03", 0.03), ("05", 0.05))},
    **{f"fcj_r128_supcon_t005_gem_fl1_rot{r}_e40": _on_twins(f"rotations of up to ±{r}° instead of ±20°", rotation=r)
       for r in (10, 30)},
    # A capture window smaller than the finger ([train] window: with that probability only a random rectangle of
    # 50-90 % of each side is kept): FVC2000 DB1's prints fill its 15 mm window, whose edge is every print's outline.
    **{f"fcj_r128_supcon_t005_gem_fl1_win{tag}_e40": _on_twins(
        f"a random capture window (50-90 % of each side kept) on {int(100 * p)} % of the training images", window=p)
       for tag, p in (("25", 0.25), ("50", 0.5))},
    # Fine-tuning held near the synthetic start (118 fingers are few): L2-SP's pull toward the initial weights
    # ([train] l2sp, Li et al. 2018) and the first conv blocks frozen ([train] freeze_blocks).
    **{f"fcj_r128_supcon_t005_gem_fl1_sp{tag}_e40": _on_twins(
        f"L2-SP: (μ/2)·‖w − w₀‖² toward the shipped model's weights, μ = {mu:g}", l2sp=mu)
       for tag, mu in (("01", 0.1), ("1", 1.0))},
    "fcj_r128_supcon_t005_gem_fl1_fz2_e40": _on_twins("the first 2 of the 5 conv blocks frozen at the shipped "
                                                      "model's weights", freeze_blocks=2),
    "fcj_rr192_supcon_e120": {"what": "ridge pre-training + whole print + ridge fine-tuning, 120 epochs "
                                      "(fcj_rr192_e120) with the supervised contrastive loss",
                              "model": {"input_size": 192, "normalization": "ridge"}, "init": "pretrain_ridge",
                              "train": {"epochs": 120, "lr": 5e-4, "loss": "supcon"}},
    # Wider encoders (width 32: twice the channels, ~4x the multiply-adds; width 64): the lever for a GPU.
    **_wide(32, "twice"), **_wide(64, "four-times"),
    "fcj_rr192_supcon_t005_e120": _full_supcon("fcj_rr192_supcon_e120 with temperature 0.05"),
    "fcj_rr192_supcon_t005_lr1e3_e120": _full_supcon("fcj_rr192_supcon_t005_e120 with learning rate 1e-3 (the "
                                                     "screened lever fcj_rr128_supcon_t005_lr1e3_e40 at the full "
                                                     "budget)", train={"lr": 1e-3}),
    # The issue allows 120 training fingers; val_fraction 0.1 keeps 12 of them for validation pairs only.
    "fcj_rr192_supcon_t005_v02_e120": _full_supcon("fcj_rr192_supcon_t005_e120 trained on 118 of the 120 non-test "
                                                   "fingers instead of 108 (val_fraction 0.02: 2 validation "
                                                   "fingers, not 12; the test fingers are the same)",
                                                   base="fcj_rr192_supcon_t005_e120", val_fraction=0.02),
    "fcj_rr192_supcon_t005_gem_e120": _full_supcon("fcj_rr192_supcon_t005_e120 with GeM pooling (the screened "
                                                   "fcj_rr128_supcon_t005_gem_e40 at the full budget)",
                                                   base="fcj_rr192_supcon_t005_e120", model={"pooling": "gem"}),
    # The target-1 recipe with GeM: 42 min a split on 2 CPU cores after a 29 min pre-training; 2 splits: no gain.
    "fcj_rr192_w32_supcon_t005_gem_e120": _full_supcon("fcj_rr192_w32_supcon_t005_e120 with GeM pooling",
                                                       base="fcj_rr192_w32_supcon_t005_e120",
                                                       init="pretrain_ridge_w32",
                                                       model={"width": 32, "pooling": "gem"}),
    # The recipe a user can run with no pre-training of their own: from the shipped model (experiments/
    # real_sensors_fcj.toml).
    "fcj_r192_supcon_t005_gem_e120": _full_supcon("fcj_rr192_supcon_t005_gem_e120 started from the shipped model "
                                                  "(synthetic pre-training with per-image standardisation) instead "
                                                  "of pretrain_ridge", base="fcj_rr192_supcon_t005_gem_e120",
                                                  init=None, model={"pooling": "gem"}),
    # The screened SupCon margin at the full budget (m 0.25: every screened split at or below the baseline).
    "fcj_r192_supcon_t005_gem_m25_e120": _on_recipe(
        "fcj_r192_supcon_t005_gem_e120 with a cosine margin 0.25 on SupCon's positive pairs (the screened "
        "fcj_r128_supcon_t005_gem_m25_e40 at the full budget)", train={"supcon_margin": 0.25}),
    # Placement: the worst genuine FCJ2020 pairs of fcj_r192_supcon_t005_gem_e120 are impressions that caught another
    # part of the finger (placed higher or lower on the window); a shift of up to 20 % of the side, not 10 %
    # (3 splits: -0.06 EER points, not adopted).
    "fcj_r192_supcon_t005_gem_tr20_e120": _on_recipe(
        "fcj_r192_supcon_t005_gem_e120 with placement shifts of up to 20 % of the input side per axis instead of "
        "10 %", train={"translation": 0.2}),
    # Twice the epochs (29-32 min a split on 2 CPU cores, inside the hour; 2 splits: no gain).
    "fcj_r192_supcon_t005_gem_e240": _on_recipe(
        "fcj_r192_supcon_t005_gem_e120 trained for 240 epochs instead of 120 (the cosine schedule stretched to match)",
        train={"epochs": 240}),
    # The screened flipped twins at the full budget ([train] flip_identities; same steps as the recipe).
    **{f"fcj_r192_supcon_t005_gem_fl{f}_e120": _on_recipe(
        f"fcj_r192_supcon_t005_gem_e120 with every training finger's {what} added as new fingers (the screened "
        f"fcj_r128_supcon_t005_gem_fl{f}_e40 at the full budget)", train={"flip_identities": f})
       for f, what in ((1, "left-right mirror"), (3, "three flips (left-right, upside-down, both)"))},
    # The two levers on FCJ's own held-out fingers together: mirrored twins and the 10 validation fingers trained on.
    "fcj_r192_supcon_t005_gem_fl1_v02_e120": _on_recipe(
        "fcj_r192_supcon_t005_gem_fl1_e120 trained on 118 of the 120 non-test fingers instead of 108 (val_fraction "
        "0.02, as fcj_rr192_supcon_t005_v02_e120)", base="fcj_r192_supcon_t005_gem_fl1_e120",
        train={"flip_identities": 1}, val_fraction=0.02),
    # ... and the screened proxy loss on top (fcj_r128_supcon_t005_gem_px03_e40: EER -0.1, FNMR -2.9 points).
    "fcj_r192_supcon_t005_gem_fl1_v02_px03_e120": _on_recipe(
        "fcj_r192_supcon_t005_gem_fl1_v02_e120 with a CosFace proxy loss (weight 0.3, margin 0.2; the screened "
        "fcj_r128_supcon_t005_gem_px03_e40 at the full budget)", base="fcj_r192_supcon_t005_gem_fl1_v02_e120",
        train={"flip_identities": 1, "proxy_weight": 0.3, "proxy_margin": 0.2}, val_fraction=0.02),
    # The synthetic-only model retrained with the capture-window augmentation (studies/study_synthetic_transfer.py
    # lever "window": -2.0 [-2.7, -1.3] EER points on the five real sets over 3 seeds), and the FCJ recipe from it.
    "pretrain_window": _shipped_pretrain("the shipped model's recipe (experiments/pretrain_synthetic.toml) with half "
                                         "of the training prints seen through a random capture window (window 0.5; "
                                         "no real print)", window=0.5),
    "fcj_r192_supcon_t005_gem_fl1_v02_pw_e120": _twins118_from(
        "pretrain_window",
        "fcj_r192_supcon_t005_gem_fl1_v02_e120 started from pretrain_window instead of the shipped model"),
    # The best synthetic-only transfer so far (studies/study_synthetic_transfer.py lever "window_gem_rot35": window,
    # GeM pooling, rotations up to 35 degrees; -3.8 [-6.7, -0.9] points over 3 seeds), and the FCJ recipe from it.
    "pretrain_window_gem_rot35": _PWGR,
    **{f"pretrain_window_gem_rot35_s{seed}": {**_PWGR, "run_seed": seed, "what": "pretrain_window_gem_rot35 with "
       f"training seed {seed} (the window_gem_rot35-s{seed} run)"} for seed in (1001, 1002)},
    "fcj_r192_supcon_t005_gem_fl1_v02_pwgr_e120": _twins118_from(
        "pretrain_window_gem_rot35",
        "fcj_r192_supcon_t005_gem_fl1_v02_e120 started from pretrain_window_gem_rot35 instead of the shipped model"),
    # ... and from its training seeds 1001 and 1002: is the gain the recipe's or seed 1000's?
    **{f"fcj_r192_supcon_t005_gem_fl1_v02_pwgr{seed}_e120": _twins118_from(
        f"pretrain_window_gem_rot35_s{seed}", f"fcj_r192_supcon_t005_gem_fl1_v02_pwgr_e120 started from "
        f"pretrain_window_gem_rot35_s{seed} (another training seed of the same synthetic recipe)")
       for seed in (1001, 1002)},
    # Creases, pores and dry breaks bridged before the network sees the print (the top impostors of
    # fcj_r192_supcon_t005_gem_e120 share a crease at the same height): oriented Gabor enhancement as the input
    # normalisation (models.preprocess.gabor_normalize).
    "fcj_r192g_supcon_t005_gem_e120": _on_recipe(
        "fcj_r192_supcon_t005_gem_e120 with the Gabor-enhanced ridge map as input (normalization gabor) instead "
        "of the band-passed print", model={"normalization": "gabor"}),
}


#: The screening variants (40 epochs, 128 px) and their common baseline, compared split by split.
SCREEN_BASE = "fcj_rr128_e40"
SCREEN = ("fcj_rr128_e40", "fcj_rr128_m14_e40", "fcj_rr128_lr1e3_e40", "fcj_rr128_p32_e40", "fcj_rr128g3_e40",
          "fcj_rr128_mix_e40", "fcj_rr128_dense_e40", "fcj_rr128_min_e40",
          "fcj_rr128_min01_e40", "fcj_rr128_minmid_e40", "fcj_rr128f500_e40", "fcj_rr128_supcon_e40",
          "fcj_rr128_supcon_lr1e3_e40", "fcj_rr128_supcon_t005_e40", "fcj_rr128_supcon_t02_e40",
          "fcj_rr128_align_e40", "fcj_rr128_supcon_t005_p32_e40", "fcj_rr128_supcon_t005_k6_e40",
          "fcj_rr128_supcon_t003_e40", "fcj_rr128_supcon_t005_lr1e3_e40",
          "fcj_rr128_supcon_t005_ema99_e40", "fcj_rr128_supcon_t005_ema995_e40", "fcj_rr128_supcon_t005_gem_e40",
          "fcj_rr128_supcon_t005_wd01_e40", "fcj_rr128_supcon_t005_wd05_e40", "fcj_rr128_supcon_t005_gem_tex05_e40",
          "fcj_rr128_supcon_t005_gem_sj10_e40", "fcj_r128_supcon_t005_gem_e40", "fcj_r176d344_supcon_t005_gem_e40",
          "fcj_r208d406_supcon_t005_gem_e40", "fcj_r128_supcon_t005_gem_m10_e40", "fcj_r128_supcon_t005_gem_m25_e40",
          "fcj_r128_supcon_t005_gem_m40_e40", "fcj_r128_supcon_t005_gem_fl1_e40", "fcj_r128_supcon_t005_gem_fl3_e40",
          "fcj_r128_supcon_t005_gem_px1_e40", "fcj_r128_supcon_t005_gem_px03_e40",
          "fcj_r128_supcon_t005_gem_fl1_el0_e40", "fcj_r128_supcon_t005_gem_fl1_el03_e40",
          "fcj_r128_supcon_t005_gem_fl1_el05_e40", "fcj_r128_supcon_t005_gem_fl1_rot10_e40",
          "fcj_r128_supcon_t005_gem_fl1_rot30_e40")


def toml_value(v) -> str:
    """A TOML literal of a str, bool, int or float (repr would write Python's True)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'"{v}"' if isinstance(v, str) else repr(v)


def variant_toml(name: str, real: Path, runs: Path, seed: int = 0) -> str:
    """The experiment TOML of one variant (written beside its run folder); ``seed`` > 0 draws another FCJ split."""
    v = VARIANTS[name]
    model = {"encoder": "compact", "width": 16, "input_dpi": 250.0, "embedding_dim": 128, **v["model"]}
    run_name = folder_name(name, seed)
    if v.get("synthetic"):
        sources = synth_sources(v.get("synth_fingers", 150))
        data = '[data]\nprotocol = "open"\nmax_impostors = 5000\n'
        seed = v.get("run_seed", 1000)  # the generator's seed stays 1000 (synth_sources)
    else:
        init = v.get("init")
        model["init"] = str(runs / init / "model_centralized.pt") if init else "pretrained"
        sources = _fcj(real) + ("\n" + synth_sources(50) if v.get("mix_synthetic") else "")
        data = ('[data]\nprotocol = "open"\ntest_fraction = 0.25\n'
                f'val_fraction = {v.get("val_fraction", 0.1)}\nmax_impostors = 20000\n')
    train = {"p": 16, "k": 4, **v["train"]}
    lines = [f'[run]\nname = "{run_name}"\nseed = {seed}\n', sources, data, '[partition]\nmode = "domain"\n',
             "[model]\n" + "".join(f"{k} = {toml_value(x)}\n" for k, x in model.items()),
             "[train]\n" + "".join(f"{k} = {toml_value(x)}\n" for k, x in train.items())]
    return f"# {v['what']} (studies/study_recipe.py)\n" + "\n".join(lines)


def folder_name(name: str, seed: int = 0) -> str:
    """Run folder of a variant on split ``seed`` (seed 0 keeps the plain name)."""
    return name if seed == 0 else f"{name}-s{seed}"


def run_variant(name: str, real: Path, runs: Path, seed: int = 0) -> None:
    out = runs / folder_name(name, seed)
    if (out / "model_centralized.pt").exists():
        return
    init = VARIANTS[name].get("init")
    if init:
        run_variant(init, real, runs)  # pre-training is on synthetic prints: one model serves every split
    cfg = runs / f"{out.name}.toml"
    runs.mkdir(parents=True, exist_ok=True)
    cfg.write_text(variant_toml(name, real, runs, seed))
    train_timed(cfg, out)


def train_splits(names: list[str], real: Path, runs: Path, splits: int) -> None:
    """Run every variant in ``names`` on splits 0..splits-1 (synthetic pre-trainings once: they have no split)."""
    for seed in range(splits):
        for name in names:
            if seed == 0 or not VARIANTS[name].get("synthetic"):
                run_variant(name, real, runs, seed)


#: ``fedprint train --device`` of every run (``--device``; auto: CUDA when available).
DEVICE = {"name": "auto"}


def train_timed(cfg: Path, out: Path) -> None:
    """``fedprint train --mode centralized`` of ``cfg`` into ``out``; its wall time and device in
    ``<out>.wall.json``."""
    import torch

    from fedprint.models.device import resolve_device

    dev = resolve_device(DEVICE["name"])
    where = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fedprint", "train", "--mode", "centralized", "--config",
                    str(cfg), "--out", str(out), "--quiet", "--device", dev.type], check=True, cwd=ROOT)
    out.with_name(f"{out.name}.wall.json").write_text(json.dumps({"seconds": time.perf_counter() - t,
                                                                  "device": where}))


def score(model_path: Path, real: Path, cache: Path | None = None) -> dict[str, dict]:
    """FVC-protocol and all-pairs EER / FNMR@FMR1% of one model on every transfer set.

    ``cache``: a JSON file that keeps the figures for re-renders, keyed by the model file's SHA-256 and the
    real-sets folder (:func:`studies.study_dense_match.cached_rows`).
    """
    if cache is None:
        return _score_sets(model_path, real)
    from studies.study_dense_match import cached_rows

    return cached_rows(cache, [model_path], lambda: _score_sets(model_path, real), note=str(real))


def _score_sets(model_path: Path, real: Path) -> dict[str, dict]:
    from fedprint.data.datasets import load_dataset
    from fedprint.models.model_file import load_model
    from fedprint.recognition.matching import evaluate

    model = load_model(model_path)
    rows = {}
    for name, layout in OTHER_SETS.items():
        recs = load_dataset(layout, real / name)
        fvc, _, _ = evaluate(model, recs, "fvc")
        every, _, _ = evaluate(model, recs, "all")
        rows[name] = {"fvc": fvc, "all": every}
    return rows


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def render(results: dict[str, dict], runs: Path) -> str:
    head = ("| variant | lever | FCJ held-out EER % | FCJ FNMR@FMR1 % | "
            + " | ".join(f"{s} EER % (FVC / all)" for s in OTHER_SETS) + " | mean FVC EER % (4 sets) |")
    lines = ["# The verifier on real prints: what each lever gives", "",
             "Generated by `python -m studies.study_recipe` from the run folders in "
             f"`{runs.as_posix()}`; each variant's TOML is written beside its folder.", "",
             "FCJ held-out: 40 fingers never trained on (open split, seed 0): **600 genuine / 20,000 impostor "
             "pairs**. Transfer sets: never trained on by any variant; FVC protocol pairs (genuine / impostor): "
             "fvc_300x300_b 252 / 36, fvc2002_db1_b 280 / 45, fvc2002_db3_b 280 / 45, pyfnprint_16x8 448 / 120; "
             "all pairs: 252 / 2,304, 280 / 2,880, 280 / 2,880, 448 / 7,680. With 36-45 impostor pairs an FVC-protocol "
             "EER moves in steps of ~2.5 points: read the all-pairs column first.", "", head,
             "|" + "---|" * (5 + len(OTHER_SETS))]
    for name, r in results.items():
        fcj = r.get("fcj") or {}
        cells = [f"{_pct(r['sets'][s]['fvc']['eer'])} / {_pct(r['sets'][s]['all']['eer'])}" for s in OTHER_SETS]
        mean = sum(r["sets"][s]["fvc"]["eer"] for s in OTHER_SETS) / len(OTHER_SETS)
        lines.append(f"| {name} | {r['what']} | {_pct(fcj.get('eer'))} | {_pct(fcj.get('fmr100'))} | "
                     + " | ".join(cells) + f" | {_pct(mean)} |")
    classical = " | ".join(f"{_pct(CLASSICAL_FVC_EER[s])} / —" for s in OTHER_SETS)
    lines += [f"| classical (afis + Bozorth3, README) | minutiae matcher | {_pct(CLASSICAL_FVC_EER['fcj2020_dev'])}"
              f" (first 50 fingers, FVC protocol) | — | {classical} | "
              f"{_pct(sum(CLASSICAL_FVC_EER[s] for s in OTHER_SETS) / len(OTHER_SETS))} |", ""]
    walls = {n: wall(runs, n) for n in results if (runs / f"{n}.wall.json").exists()}
    if walls:
        lines += ["Wall time of each run (CPU runs: 2 cores, shared with other jobs while measured): "
                  + ", ".join(f"{n} {s / 60:.1f} min on {d}" for n, (s, d) in walls.items()) + ".", ""]
    return "\n".join(lines)


def wall(runs: Path, folder: str) -> tuple[float, str]:
    """Training wall time (s) of a run folder and where it ran (runs from before the device was recorded: the
    2-core CPU)."""
    w = json.loads((runs / f"{folder}.wall.json").read_text())
    return float(w["seconds"]), w.get("device", "cpu (2 cores)")


def screen_rows(runs: Path, max_splits: int = 10, names=SCREEN) -> dict[str, dict[int, dict]]:
    """FCJ held-out metrics of each variant in ``names`` on every split it was run on: {variant: {seed: row}}."""
    out: dict[str, dict[int, dict]] = {}
    for name in names:
        for seed in range(max_splits):
            f = runs / folder_name(name, seed) / "metrics.json"
            if f.exists():
                out.setdefault(name, {})[seed] = json.loads(f.read_text())["per_client"][0]
    return out


def render_screen(rows: dict[str, dict[int, dict]]) -> str:
    """The screening table: each lever minus the baseline, split by split (paired), with a Student-t 95 % interval."""
    lines = ["## Screening: cheap levers at 40 epochs, over several finger splits", "",
             f"Each lever changes one setting of `{SCREEN_BASE}` (ridge pre-training + ridge fine-tuning, 128 px, 40 "
             "epochs, about 3 min each). Split *s* draws another 40 held-out FCJ fingers (`[run] seed = s`: split, "
             "initial order and augmentation); every split has 600 genuine / 20,000 impostor held-out pairs. "
             "Differences are paired by split; an interval that contains 0 means the lever's effect is inside the "
             "noise of 40 test fingers. A lever stacked on an adopted one is paired with that one (its baseline "
             "column).", "",
             "| variant | lever | baseline | splits | EER % (mean) | FNMR@FMR1 % (mean) | EER − baseline, points "
             "[95 % CI] | FNMR − baseline, points [95 % CI] | per split EER − baseline |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, per in rows.items():
        seeds = sorted(per)
        eer = [per[s]["eer"] for s in seeds]
        fnmr = [per[s]["fmr100"] for s in seeds]
        base_name = VARIANTS[name].get("base", SCREEN_BASE)
        base = rows.get(base_name, {})
        paired = [s for s in seeds if s in base] if name != SCREEN_BASE else []
        cells = ["—", "—", "—"]
        if paired:
            d_eer = [100 * (per[s]["eer"] - base[s]["eer"]) for s in paired]
            d_fnmr = [100 * (per[s]["fmr100"] - base[s]["fmr100"]) for s in paired]
            cells = [signed_interval(d_eer), signed_interval(d_fnmr), ", ".join(f"{d:+.1f}" for d in d_eer)]
        lines.append(f"| {name} | {VARIANTS[name]['what']} | {base_name if name != SCREEN_BASE else '—'} | "
                     f"{len(seeds)} | {100 * sum(eer) / len(eer):.1f} | "
                     f"{100 * sum(fnmr) / len(fnmr):.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [""])


#: The full-budget variant the others are paired with, split by split.
FULL_BASE = "fcj_rr192_e120"


def render_splits(rows: dict[str, dict[int, dict]], runs: Path) -> str:
    """Full-budget variants run on several finger splits: mean FCJ held-out EER / FNMR with a 95 % interval, and
    each minus :data:`FULL_BASE` on the same splits."""
    rows = {n: per for n, per in rows.items() if len(per) >= 2}
    if not rows:
        return ""
    base = rows.get(FULL_BASE, {})
    lines = ["## Full-budget variants on several finger splits", "",
             "Split *s* holds out another 40 FCJ fingers (`[run] seed = s`); 600 genuine / 20,000 impostor pairs each."
             f" Differences are paired by split with `{FULL_BASE}`. Runs trained on a GPU read FCJ from a copy"
             " resampled beforehand to 250 dpi with the loader's interpolation (`--fcj-root`, `--fcj-dpi 250`): the"
             " same input crops, pixel for pixel; GPU training is not bit-identical to the CPU's (cuDNN's TF32"
             " convolutions and algorithm choice).",
             "", "| variant | splits | EER % mean [95 % CI] | per split | FNMR@FMR1 % mean [95 % CI] | per split | "
             f"EER − {FULL_BASE}, points [95 % CI] | FNMR − {FULL_BASE}, points [95 % CI] | trained on "
             "(mean minutes per split) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, per in rows.items():
        seeds = sorted(per)
        paired = [s for s in seeds if s in base] if name != FULL_BASE else []
        cells, diffs = [], []
        for key in ("eer", "fmr100"):
            vals = [100 * per[k][key] for k in seeds]
            m, lo, hi = ci95(vals)
            cells += [f"{m:.1f} [{lo:.1f}, {hi:.1f}]", ", ".join(f"{v:.1f}" for v in vals)]
            diffs.append(signed_interval([100 * (per[s][key] - base[s][key]) for s in paired]) if paired else "—")
        folders = [folder_name(name, k) for k in seeds]
        walls = [wall(runs, f) for f in folders if (runs / f"{f}.wall.json").exists()]
        where = (f"{'; '.join(sorted({d for _, d in walls}))} ({sum(t for t, _ in walls) / len(walls) / 60:.1f})"
                 if walls else "—")
        lines.append(f"| {name} | {len(seeds)} | " + " | ".join(cells + diffs) + f" | {where} |")
    return "\n".join(lines + [""])


def figure(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / (len(OTHER_SETS) + 1)
    for j, s in enumerate(["fcj held-out", *OTHER_SETS]):
        vals = [(results[n].get("fcj") or {}).get("eer") if s == "fcj held-out"
                else results[n]["sets"][s]["all"]["eer"] for n in names]
        ax.bar([i + j * width for i in range(len(names))], [100 * (v or 0) for v in vals], width, label=s)
    ax.set_xticks([i + 0.4 for i in range(len(names))], names, rotation=20, ha="right")
    ax.set_ylabel("EER % (all pairs; FCJ: held-out fingers)")
    ax.legend(fontsize=7)
    ax.set_title("Recipe levers on real prints")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


#: The line from which ``--out`` is hand-written: a regeneration rewrites only the text above it and keeps the rest.
HAND_WRITTEN = doc_tail.marker("studies/study_recipe.py")


def hand_written(out: Path) -> str:
    """:func:`studies.doc_tail.hand_written` of this script."""
    return doc_tail.hand_written(out, "studies/study_recipe.py")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="runs/recipe", help="folder of the variants' run folders")
    ap.add_argument("--real-samples", default=os.environ.get("FEDPRINT_REAL_SAMPLES", "../shared/data/real"))
    ap.add_argument("--only", default="", help="comma-separated variants (default: all)")
    ap.add_argument("--no-train", action="store_true", help="only collect existing run folders")
    ap.add_argument("--splits", type=int, default=1,
                    help="run every selected FCJ variant on this many finger splits (seeds 0..N-1; default 1)")
    ap.add_argument("--out", default="docs/studies/real_prints_recipe.md")
    add_device_arg(ap)
    ap.add_argument("--train-only", action="store_true",
                    help="train the selected variants on every split, score nothing and write no doc (for a "
                         "machine without the other real sets)")
    ap.add_argument("--fcj-root", default=None,
                    help="FCJ2020 folder (generic layout; default <real-samples>/fcj2020_dev)")
    ap.add_argument("--fcj-dpi", type=float, default=None,
                    help="resolution of the --fcj-root images when it is not the sensor's 500 dpi (e.g. a copy "
                         "resampled to 250 dpi)")
    args = ap.parse_args(argv)
    DEVICE["name"] = args.device
    FCJ.update(root=Path(args.fcj_root).resolve() if args.fcj_root else None, dpi=args.fcj_dpi)
    real, runs = Path(args.real_samples).resolve(), Path(args.runs)
    if not real.is_dir():
        print(f"study_recipe: error: real sets folder not found: {real} (set --real-samples or "
              "$FEDPRINT_REAL_SAMPLES)", file=sys.stderr)
        return 2
    if args.splits < 1:
        print(f"study_recipe: error: --splits: expected a count >= 1, got {args.splits}", file=sys.stderr)
        return 2
    names = [n for n in args.only.split(",") if n] or list(VARIANTS)
    unknown = set(names) - set(VARIANTS)
    if unknown:
        print(f"study_recipe: error: --only: unknown variants {sorted(unknown)}; known: {list(VARIANTS)}",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        kept = "" if args.train_only else hand_written(out)  # checked before hours of training, not after
    except ValueError as exc:
        print(f"study_recipe: error: {exc}", file=sys.stderr)
        return 2
    runs.mkdir(parents=True, exist_ok=True)
    if not args.no_train:
        train_splits(names, real, runs, args.splits)
    if args.train_only:
        return 0
    results = {"shipped": {"what": "the shipped model (synthetic prints only), no real training", "fcj": None,
                           "sets": score(ROOT / "models" / "pretrained" / "fedprint-synthetic.pt", real,
                                         runs / "shipped.transfer.json")}}
    for name in names:
        folder = runs / name
        if not (folder / "model_centralized.pt").exists():
            print(f"study_recipe: {name}: no run folder at {folder} (skipped)", file=sys.stderr)
            continue
        fcj = None
        if not VARIANTS[name].get("synthetic"):
            fcj = json.loads((folder / "metrics.json").read_text())["per_client"][0]
        results[name] = {"what": VARIANTS[name]["what"], "fcj": fcj,
                         "sets": score(folder / "model_centralized.pt", real, folder / "transfer.json")}
    screen = render_screen(screen_rows(runs))
    full = [n for n in VARIANTS if n not in SCREEN and not VARIANTS[n].get("synthetic")]
    screen = (render_splits(screen_rows(runs, names=full), runs) + "\n" + screen
              + "\nThese models scored with a second deep score, the dense match of their feature maps, alone and "
              "fused with the embedding: [dense_matching.md](dense_matching.md) (`studies/study_dense_match.py`).\n")
    generated = render(results, runs) + f"\n![EER per variant]({out.with_suffix('.png').name})\n\n" + screen
    write_text(out, doc_tail.with_tail(generated, kept))
    figure(results, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
