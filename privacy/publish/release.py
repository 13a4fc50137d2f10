"""One release through the ledger: validate, extract minutiae if needed, reserve budget, run the mechanism.

Shared by the offline CLI (``fedprint publish``) and the ClientApp query handler. Every input error is raised
before the mechanism runs, and the ledger is only *reserved* here: the caller commits (``ledger.commit``) once
the output is safely delivered, so a failure at any step charges nothing.
"""

from __future__ import annotations

import numpy as np

from data.minutiae import extract_minutiae
from privacy.ledger import Ledger, Reservation
from privacy.publish import registry
from privacy.publish.base import Publication, check_epsilon, check_image, check_variant


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
    round: int | None = None,
    **options,
) -> tuple[Publication, Reservation | None]:
    """Run ``mechanism`` on ``image`` and reserve its cost in ``ledger`` (not committed).

    Parameters
    ----------
    mechanism : str
        A name from :data:`privacy.publish.registry.MECHANISMS`.
    image : ndarray uint8 (H, W)
        The fingerprint; minutiae are extracted with :func:`data.minutiae.extract_minutiae` when the
        mechanism needs them.
    epsilon : float
        Budget of the release (> 0, and >= the mechanism's documented minimum, checked by the mechanism).
    rng : numpy.random.Generator
    variant : {"sound", "paper"}
    ledger : Ledger, optional
        Budget check before the run; the returned reservation is committed by the caller.
    unit : str, optional
        Finger identity charged (required with a ledger).
    image_id : str
        Recorded with the release.
    round : int, optional
        Round for the ledger's windowed budget.
    **options
        Passed to the mechanism.

    Returns
    -------
    (Publication, Reservation or None)
    """
    fn = registry.get(mechanism)  # unknown name -> ValueError listing the known ones
    variant = check_variant(variant)
    epsilon = check_epsilon(epsilon)
    image = check_image(image)
    minutiae = None
    if registry.needs_minutiae(mechanism):
        minutiae = extract_minutiae(image)
        if len(minutiae) == 0:
            raise ValueError(f"image {image_id or ''}: no minutiae found; mechanism {mechanism!r} needs minutiae")
    res = None
    if ledger is not None:
        if not unit:
            raise ValueError("unit: a ledger charges a finger identity; give the unit of this image")
        res = ledger.reserve(epsilon, unit, mechanism=mechanism, variant=variant, image_id=image_id, round=round)
    pub = fn(image, minutiae, epsilon, rng, variant, **options)
    if res is not None:
        res.describe(pub)
    return pub, res
