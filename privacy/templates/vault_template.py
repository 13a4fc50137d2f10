"""Enrol and verify a finger with the fuzzy vault, end to end (the API behind ``fedprint enroll / verify``).

Enrolment: helper field of the first impression (:mod:`~fedprint.privacy.templates.alignment`); clusters of
minutiae over all impressions with their consistency weights (:mod:`.consistency`); the ``max_genuine`` most
consistent clusters become the genuine elements — each one point on the polynomial (``weighted=False``,
Nandakumar et al. 2007) or as many of ``q`` = number of impressions slots as its weight (``weighted=True``, Fang
Sec. 6.3); optional PIN hardening (:mod:`.password`); chaff in the print's foreground cells; :func:`.fuzzy_vault.lock`.

Verification: register the probe's helper field against the stored one, refine the translation on the vault
points (not possible under a PIN: the points are scrambled), map the probe minutiae (then the PIN transform),
match each to the nearest vault element within ``tol_px`` / ``tol_angle`` and :func:`.fuzzy_vault.unlock`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from fedprint.privacy.templates.alignment import BACKGROUND, BLOCK, helper_field, refine, register
from fedprint.privacy.templates.consistency import consistent_minutiae, match_points
from fedprint.privacy.templates.fuzzy_vault import MAX_TRIALS, Vault, lock, unlock
from fedprint.privacy.templates.password import derive_key, mask_helper, transform_minutiae
from fedprint.privacy.templates.quantise import CELL, FRAME, code_points, minutia_codes


@dataclass(frozen=True)
class VaultParams:
    """Vault parameters (defaults: Nandakumar, Jain & Pankanti 2007 — degree 8, 200 chaff, <= 24 genuine)."""

    degree: int = 8
    n_chaff: int = 200
    max_genuine: int = 24
    weighted: bool = False
    tol_px: float = 12.0
    tol_angle: float = float(np.deg2rad(30))
    max_trials: int = MAX_TRIALS


def _foreground_cells(helper: np.ndarray | None) -> np.ndarray:
    """Cells (FRAME/CELL square) covered by the helper field's foreground; everything when there is none."""
    n = FRAME // CELL
    if helper is None:
        return np.ones((n, n), bool)
    fg = helper != BACKGROUND
    up = np.kron(fg, np.ones((BLOCK, BLOCK), bool))[:FRAME, :FRAME]
    out = np.zeros((FRAME, FRAME), bool)
    out[:up.shape[0], :up.shape[1]] = up
    return out.reshape(n, CELL, n, CELL).any(axis=(1, 3))


def enrol(minutiae: list[np.ndarray], images: list[np.ndarray], params: VaultParams = VaultParams(), *,
          pin: str | None = None, rng: np.random.Generator | None = None) -> tuple[dict, dict]:
    """Protected vault template of one finger from one or more impressions.

    Returns
    -------
    data : dict
        Public template material for :func:`.template_file.write_template` (vault points, salts, digest, helper).
    info : dict
        Enrolment facts for evaluation (genuine element codes, weights used, points); never written to the
        template — the study uses the codes as ground truth for the attacks.
    """
    if len(minutiae) != len(images) or not minutiae:
        raise ValueError("enrol: expected as many minutiae tables as images, at least one")
    fields = [helper_field(img) for img in images]
    points, weights = consistent_minutiae(minutiae, fields, tol_px=params.tol_px, tol_angle=params.tol_angle)
    kdf_salt = (rng.bytes(16) if rng is not None else os.urandom(16)) if pin else b""
    helper = fields[0]
    allowed = _foreground_cells(helper)
    if pin:
        key = derive_key(pin, kdf_salt)
        points = transform_minutiae(points, key)
        helper = mask_helper(helper, key)
        allowed = _foreground_cells(None)  # scrambled positions spread over the whole frame
    codes = minutia_codes(points)
    keep = codes > 0
    codes, weights = codes[keep], weights[keep]
    _, first = np.unique(codes, return_index=True)
    first = np.sort(first)[: params.max_genuine]
    codes, weights = codes[first], weights[first]
    slots = len(minutiae) if params.weighted else 1
    w = np.minimum(weights, slots) if params.weighted else np.ones(len(codes), np.int64)
    if w.sum() < params.degree + 1:
        raise ValueError(f"enrol: only {int(w.sum())} usable minutiae points, fewer than degree + 1 = "
                         f"{params.degree + 1}; use more or better impressions")
    vault, _ = lock(codes, degree=params.degree, n_chaff=params.n_chaff, weights=w, slots=slots, rng=rng,
                    allowed=allowed)
    data = {"xs": vault.xs.astype(np.uint32), "ys": vault.ys.astype(np.uint32), "salt": vault.salt,
            "digest": vault.digest, "helper": helper, "kdf_salt": kdf_salt}
    info = {"genuine": int(len(codes)), "codes": codes, "on_polynomial": int(w.sum()), "points": vault.n_points,
            "weights": np.bincount(w, minlength=slots + 1)[1:].tolist()}
    return data, info


def template_params(params: VaultParams, n_impressions: int) -> dict:
    """The parameters written beside the vault (public)."""
    return {"degree": params.degree, "n_chaff": params.n_chaff, "max_genuine": params.max_genuine,
            "weighted": params.weighted, "slots": n_impressions if params.weighted else 1,
            "tol_px": params.tol_px, "tol_angle": params.tol_angle, "max_trials": params.max_trials}


def vault_of(data: dict, params: dict) -> Vault:
    return Vault(int(params["degree"]), int(params["slots"]), data["xs"].astype(np.int64),
                 data["ys"].astype(np.int64), data["salt"], data["digest"])


def verify(data: dict, params: dict, probe_minutiae: np.ndarray, probe_image: np.ndarray, *,
           pin: str | None = None, hardened: bool = False, probe_field: np.ndarray | None = None) -> dict:
    """Try to open a vault template with a probe impression. ``match`` True iff the secret polynomial is recovered.

    A template made with a PIN needs it (``hardened``); a wrong PIN simply fails to open the vault.
    ``probe_field`` : the probe's :func:`.alignment.helper_field` when already computed.
    """
    if hardened and not pin:
        raise ValueError("--pin: this template was enrolled with a PIN; give it")
    vault = vault_of(data, params)
    helper = data["helper"]
    key = derive_key(pin, data["kdf_salt"]) if hardened else None
    if key is not None:
        helper = mask_helper(helper, key, inverse=True)
    pose = register(helper_field(probe_image) if probe_field is None else probe_field, helper)
    centres = code_points(vault.codes)
    if key is None:
        pose = refine(pose, probe_minutiae, centres)
    aligned = pose.apply(np.asarray(probe_minutiae, float)[:, :3]) if len(probe_minutiae) else np.zeros((0, 3))
    if key is not None:
        aligned = transform_minutiae(aligned, key)
    idx = match_points(aligned, centres, tol_px=float(params["tol_px"]), tol_angle=float(params["tol_angle"]))
    matched = vault.codes[idx[idx >= 0]]
    coef, trials = unlock(vault, matched, max_trials=int(params["max_trials"]))
    return {"match": coef is not None, "matched_elements": int(len(matched)), "trials": trials,
            "pose_score": pose.score}
