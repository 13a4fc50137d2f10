"""One release through the ledger: validate, reserve the finger-level budget, extract minutiae, run the mechanism.

Shared by the offline CLI (``fedprint publish``) and the ClientApp query handler. Every input error that depends
only on the request is raised before anything reads the image's content; the ledger is only *reserved* here
(finger-level ε, see :mod:`fedprint.privacy.publish.finger_level`): the caller commits (``ledger.commit``) once the
output is safely delivered, so a failure at any step charges nothing.

Refusals that depend on the image (no minutiae found, too few minutiae for a cluster, a group size larger than
the minutiae count, ...) are reported in data-independent words (:class:`DataDependentRefusal`): the message
never carries counts, sizes or positions computed from the private image. The bare fact of a refusal still
reveals one bit about the image that no DP guarantee covers; the detailed reason is logged locally at DEBUG
level for the data holder (``fedprint --log-level debug``), never returned to a requester.

The ledger entry identifies the input by :func:`content_digest` (``content_sha256``), never by its path or
record key: file names such as SOCOFing's encode subject, sex, hand and finger.
"""

from __future__ import annotations

import hashlib
import logging

import numpy as np

from fedprint.data.minutiae_backends import extract, resolve_backend
from fedprint.privacy.ledger import BudgetExceeded, Ledger, Reservation
from fedprint.privacy.publish import registry
from fedprint.privacy.publish.base import Publication, check_epsilon, check_image, check_variant
from fedprint.privacy.publish.ceiling import check_meaningful
from fedprint.privacy.publish.finger_level import FingerCharge, finger_charge
from fedprint.privacy.publish.pointset import MAX_SIZE

log = logging.getLogger(__name__)


class DataDependentRefusal(ValueError):
    """The mechanism cannot be applied to this image; the reason depends on the image and is withheld."""


def content_digest(image: np.ndarray) -> str:
    """SHA-256 (hex) of a grayscale image's decoded pixels and shape — what a ledger records to identify the input.

    Computed from the pixels, not the file's bytes, so the same print read from a PNG or a BMP, through the CLI
    or the ClientApp, has one digest. ``sha256(f"{H}x{W}:".encode() + image.tobytes())`` of the C-ordered uint8
    array.
    """
    image = np.ascontiguousarray(check_image(image))
    return hashlib.sha256(f"{image.shape[0]}x{image.shape[1]}:".encode() + image.tobytes()).hexdigest()


def release(
    mechanism: str,
    image: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    variant: str = "sound",
    *,
    ledger: Ledger | None = None,
    unit: str | None = None,
    image_id: str = "",
    allow_large_epsilon: bool = False,
    minutiae_backend: str | None = "auto",
    **options,
) -> tuple[Publication, Reservation | None, FingerCharge | None]:
    """Run ``mechanism`` on ``image`` and reserve its finger-level cost in ``ledger`` (not committed).

    Parameters
    ----------
    mechanism : str
        A name from :data:`fedprint.privacy.publish.registry.MECHANISMS`.
    image : ndarray uint8 (H, W)
        The fingerprint; minutiae are extracted by ``minutiae_backend`` when the mechanism needs them.
    epsilon : float
        Budget of the release under the mechanism's own relation (> 0).
    rng : numpy.random.Generator
        Noise source: OS entropy in every user-facing path (tests inject a generator here).
    variant : {"sound", "paper"}
    ledger : Ledger, optional
        Per-finger budget; the finger-level cost is checked before the image is read and the returned
        reservation is committed by the caller.
    unit : str, optional
        Finger identity charged (required with a ledger).
    image_id : str
        Names the image in the local DEBUG log only; the ledger records :func:`content_digest` instead.
    allow_large_epsilon : bool
        Release even above the mechanism's largest meaningful ε (:mod:`fedprint.privacy.publish.ceiling`), where
        the noise falls below one grey level; refused by default.
    minutiae_backend : {"auto", "nbis", "leader", "crossing"}
        The extractor (:mod:`fedprint.data.minutiae_backends`; ``--minutiae-backend``) of the minutiae a point-set
        or region mechanism protects; recorded as ``details["minutiae_backend"]`` of the publication and in the
        ledger entry. Checked (known, installed) before the image is read.
    **options
        Passed to the mechanism (e.g. ``protect="finger"`` for point sets).

    Returns
    -------
    (Publication, Reservation or None, FingerCharge or None)
        The finger charge is computed whenever the release has one, with or without a ledger.
    """
    fn = registry.get(mechanism)  # unknown name -> ValueError listing the known ones
    variant = check_variant(variant)
    epsilon = check_epsilon(epsilon)
    image = check_image(image)
    if "protect" in options and not registry.releases_points(mechanism):
        raise ValueError(f"protect: only point-set mechanisms take it; {mechanism!r} protects one pixel")
    if "size" in options and options.get("protect") != "finger":
        raise ValueError("size (--points): a fixed public output size applies to point sets with protect='finger' "
                         "only (a per-minutia release publishes the minutiae count, as its guarantee states)")
    size = options.get("size", 1)
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or not 1 <= size <= MAX_SIZE:
        raise ValueError(f"size (--points): expected an integer in [1, {MAX_SIZE}] (points released; a minutiae set "
                         f"holds 20-100), got {size!r}")
    check_meaningful(mechanism, variant, epsilon, image.shape, options, allow_large_epsilon=allow_large_epsilon)
    backend = resolve_backend(minutiae_backend) if registry.needs_minutiae(mechanism) else None
    charge, res = None, None
    if ledger is not None:
        if not unit:
            raise ValueError("unit: a ledger charges a finger identity; give the unit of this image")
        charge = finger_charge(mechanism, variant, epsilon, image.shape, options)  # may refuse, data-independent
        try:
            res = ledger.reserve(charge.epsilon, unit, delta=charge.delta, mechanism=mechanism, variant=variant,
                                 relation=charge.relation, group=charge.group,
                                 stated_epsilon=charge.stated_epsilon, content_sha256=content_digest(image))
        except BudgetExceeded as exc:
            if charge.relation == "finger":
                raise
            raise BudgetExceeded(
                f"{mechanism!r} protects one {charge.relation}, not the finger: {charge.describe()}; {exc}") from exc
    else:
        try:
            charge = finger_charge(mechanism, variant, epsilon, image.shape, options)
        except ValueError:
            charge = None
    try:  # from here on the image's content is read: refusals must not describe it
        minutiae = None
        if backend is not None:
            minutiae = extract(image, backend)[:, :4]  # x, y, direction, type: what the mechanisms take
            if len(minutiae) == 0:
                raise ValueError("no minutiae found")
        pub = fn(image, minutiae, epsilon, rng, variant, **options)
        if backend is not None:
            pub.details["minutiae_backend"] = backend
    except ValueError as exc:
        log.debug("publication of %s refused, detail withheld from the output: %s", image_id or "image", exc)
        raise DataDependentRefusal(
            f"mechanism {mechanism!r} cannot be applied to this image (a precondition that depends on the image "
            f"failed; the detail is withheld because it describes private data). Nothing was charged.") from exc
    if res is not None:
        if pub.spent_epsilon > epsilon + 1e-12:
            raise RuntimeError(f"{mechanism}: spent epsilon {pub.spent_epsilon} > requested {epsilon}")
        res.info.update(dp=bool(pub.guarantee.dp), guarantee=pub.guarantee.statement())
        if backend is not None:
            res.info.update(minutiae_backend=backend)
    return pub, res, charge
