"""Enrol and verify a finger with the fuzzy vault, end to end (the API behind ``fedprint enroll / verify``).

Enrolment (construction 2, issue 59): helper field of the first impression
(:mod:`~fedprint.privacy.templates.alignment`); clusters of minutiae over all impressions with their consistency
weights (:mod:`.consistency`); clusters off the helper's foreground are dropped (chaff lives only there, so a
point outside it would be genuine), then clusters too close to a more consistent one (the chaff's spacing rule,
:func:`.chaff.spaced`); the ``max_genuine`` most consistent remaining clusters become the genuine elements — each
one point on the polynomial (``weighted=False``, Nandakumar et al. 2007) or as many of ``q`` = number of
impressions slots as its weight (``weighted=True``, Fang Sec. 6.3). Chaff (:func:`.chaff.draw_chaff`): foreground
cells, directions = helper orientation at the cell + a gap drawn from the genuine gaps, spacing rule enforced;
under a PIN (:mod:`.password`) chaff is drawn in the enrolment frame and moved by the same keyed transform as
the genuine points, so that even an attacker who found the PIN and undid the transform sees the two alike.
:func:`.fuzzy_vault.lock` then hides the secret. Prints larger than the 512 px frame are refused at enrolment
(their minutiae beyond it would be lost).

``construction=1`` rebuilds the first construction (uniform chaff directions, genuine points not spaced, chaff
in the helper's foreground only) so that the attacks can be measured against it; nothing writes it to a file
and :func:`.template_file.read_template` refuses version-1 vault files.

Verification: register the probe's helper field against the stored one, refine the translation on the vault
points (not possible under a PIN: the points are scrambled), map the probe minutiae (then the PIN transform),
match each to the nearest vault element within ``tol_px`` / ``tol_angle`` and :func:`.fuzzy_vault.unlock`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedprint.privacy.templates.alignment import BACKGROUND, BLOCK, helper_field, refine, register
from fedprint.privacy.templates.chaff import draw_chaff, spaced, views_of
from fedprint.privacy.templates.consistency import consistent_minutiae, match_points
from fedprint.privacy.templates.fuzzy_vault import MAX_TRIALS, Vault, lock, unlock
from fedprint.privacy.templates.password import (
    TRANSFORM_CELL,
    cell_transforms,
    derive_key,
    mask_helper,
    transform_minutiae,
)
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


#: Construction :func:`enrol` builds by default (the template file's version, :mod:`.template_file`).
CONSTRUCTION = 2


def check_frame(images: list[np.ndarray]) -> None:
    """Refuse enrolment images larger than the vault frame: minutiae beyond FRAME px would be dropped silently."""
    for i, img in enumerate(images):
        h, w = np.shape(img)[:2]
        if h > FRAME or w > FRAME:
            raise ValueError(f"IMG {i + 1}: print {w} x {h} px exceeds the vault's {FRAME} x {FRAME} px frame "
                             f"(6-bit cell codes of {CELL} px); minutiae beyond it would be lost — crop the print "
                             f"to its foreground within {FRAME} px")


def _genuine_v2(points: np.ndarray, weights: np.ndarray, allowed: np.ndarray, store, unstore, max_genuine: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Genuine points (enrolment frame), their weights and stored codes under construction 2: on the helper's
    foreground, distinct stored codes, the spacing rule in every view (:func:`.chaff.views_of`)."""
    e_codes = minutia_codes(points)
    u, v = e_codes >> 10, (e_codes >> 4) & 63
    ok = (e_codes > 0) & allowed[np.clip(v, 0, allowed.shape[0] - 1), np.clip(u, 0, allowed.shape[1] - 1)]
    points, weights = points[ok], weights[ok]
    s_codes = minutia_codes(store(points)) if len(points) else np.zeros(0, np.int64)
    ok = s_codes > 0
    points, weights, s_codes = points[ok], weights[ok], s_codes[ok]
    _, first = np.unique(s_codes, return_index=True)
    first = np.sort(first)  # priority (weight) order kept
    points, weights, s_codes = points[first], weights[first], s_codes[first]
    keep = spaced(*views_of(points, store, unstore)) if len(points) else np.zeros(0, bool)
    idx = np.flatnonzero(keep)[:max_genuine]
    return points[idx], weights[idx], s_codes[idx]


def _unstore(key: bytes):
    """What a key holder reconstructs of stored code centres: each moved back by its source cell's transform."""
    t = cell_transforms(key)
    cells = FRAME // TRANSFORM_CELL

    def unstore(centres: np.ndarray, source: np.ndarray) -> np.ndarray:
        c = np.clip(np.floor(source[:, 1] / TRANSFORM_CELL), 0, cells - 1).astype(np.int64) * cells + \
            np.clip(np.floor(source[:, 0] / TRANSFORM_CELL), 0, cells - 1).astype(np.int64)
        return np.column_stack([np.mod(centres[:, 0] - t[c, 0], FRAME), np.mod(centres[:, 1] - t[c, 1], FRAME),
                                np.mod(centres[:, 2] - t[c, 2], 2 * np.pi)])

    return unstore


def enrol(minutiae: list[np.ndarray], images: list[np.ndarray], params: VaultParams = VaultParams(), *,
          pin: str | None = None, rng: np.random.Generator | None = None,
          construction: int = CONSTRUCTION) -> tuple[dict, dict]:
    """Protected vault template of one finger from one or more impressions.

    Returns
    -------
    data : dict
        Public template material for :func:`.template_file.write_template` (vault points, salts, digest, helper).
    info : dict
        Enrolment facts for evaluation (genuine element codes, weights used, points, genuine clusters dropped by
        the spacing / foreground rules); never written to the template — the study uses the codes as ground
        truth for the attacks.

    Raises
    ------
    ValueError
        If an image exceeds the frame, too few minutiae remain for the degree, or the chaff does not fit.
    """
    if len(minutiae) != len(images) or not minutiae:
        raise ValueError("enrol: expected as many minutiae tables as images, at least one")
    if construction not in (1, 2):
        raise ValueError(f"construction: expected 1 (the weak first one, for attack measurements) or 2, "
                         f"got {construction!r}")
    check_frame(images)
    rng = np.random.default_rng() if rng is None else rng  # OS entropy unless a test injects one
    fields = [helper_field(img) for img in images]
    points, weights = consistent_minutiae(minutiae, fields, tol_px=params.tol_px, tol_angle=params.tol_angle)
    kdf_salt = rng.bytes(16) if pin else b""
    helper = fields[0]
    allowed = _foreground_cells(helper)
    key = derive_key(pin, kdf_salt) if pin else None
    clusters = len(points)
    if construction == 1:
        if key is not None:
            points = transform_minutiae(points, key)
            allowed = _foreground_cells(None)  # scrambled positions spread over the whole frame
        codes = minutia_codes(points)
        keep = codes > 0
        codes, weights = codes[keep], weights[keep]
        _, first = np.unique(codes, return_index=True)
        first = np.sort(first)[: params.max_genuine]
        codes, weights = codes[first], weights[first]
        chaff = None
    else:
        def store(p: np.ndarray) -> np.ndarray:
            return transform_minutiae(p, key) if key is not None else p

        unstore = _unstore(key) if key is not None else None
        kept, weights, codes = _genuine_v2(points, weights, allowed, store, unstore, params.max_genuine)
        chaff = None
    slots = len(minutiae) if params.weighted else 1
    w = np.minimum(weights, slots) if params.weighted else np.ones(len(codes), np.int64)
    if w.sum() < params.degree + 1:
        raise ValueError(f"enrol: only {int(w.sum())} usable minutiae points, fewer than degree + 1 = "
                         f"{params.degree + 1}; use more or better impressions")
    if construction == 2:
        cells = np.argwhere(allowed)[:, ::-1]  # (u, v) = (column, row) cells of the frame
        chaff = draw_chaff(rng, params.n_chaff, kept, cells=cells, helper=helper, store=store, unstore=unstore)
    vault, _ = lock(codes, degree=params.degree, n_chaff=params.n_chaff, weights=w, slots=slots, rng=rng,
                    allowed=allowed, chaff=chaff)
    stored_helper = mask_helper(helper, key) if key is not None else helper
    data = {"xs": vault.xs.astype(np.uint32), "ys": vault.ys.astype(np.uint32), "salt": vault.salt,
            "digest": vault.digest, "helper": stored_helper, "kdf_salt": kdf_salt}
    info = {"genuine": int(len(codes)), "codes": codes, "on_points": w, "on_polynomial": int(w.sum()),
            "points": vault.n_points,
            "weights": np.bincount(w, minlength=slots + 1)[1:].tolist(), "clusters": clusters,
            "construction": construction}
    return data, info


def template_params(params: VaultParams, n_impressions: int, *, backend: str | None = None,
                    construction: int = CONSTRUCTION) -> dict:
    """The parameters written beside the vault (public); ``backend``: the minutiae extractor enrolment used
    (:mod:`fedprint.data.minutiae_backends`), which verification must use too."""
    out = {"degree": params.degree, "n_chaff": params.n_chaff, "max_genuine": params.max_genuine,
           "weighted": params.weighted, "slots": n_impressions if params.weighted else 1,
           "tol_px": params.tol_px, "tol_angle": params.tol_angle, "max_trials": params.max_trials,
           "construction": construction}
    if backend is not None:
        out["minutiae_backend"] = backend
    return out


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
