"""What one publication costs a *finger*: the finger-level (ε, δ) a per-finger ledger must charge.

Every publication mechanism states its guarantee under its own neighbouring relation — one pixel (the image
mechanisms), one minutia (the point set, ``protect="minutia"``) or the whole finger (the point set,
``protect="finger"``). A per-finger budget may only add up finger-level ε, so before a release is charged it is
converted here, from public quantities only (mechanism, variant, options, image shape), never from the image:

* ``protect="finger"`` point sets: the stated (ε, 0) is already finger-level (group size g = 1).
* Sound image mechanisms (one pixel, values in [0, 255]): a finger's image may differ from another in all
  H·W pixels, so by group privacy (:func:`fedprint.privacy.group_privacy.group_privacy`) the release is (H·W·ε, 0)-DP
  for
  the finger. H·W is the image's shape, which the release itself reveals. For any useful pixel ε this exceeds
  any sensible finger budget: such releases are refused by the ledger with that explanation.
* Refused outright (:class:`NoFingerGuarantee`), because no finger-level ε exists or it cannot be computed
  without reading private data:

  - every ``paper`` variant that is not DP (the image mechanisms' paper variants): nothing to charge;
  - the masked mechanisms (KLAP, RKLAP, DP-RKLAP): they release the pixels outside the mask without noise, and
    the mask from the raw minutiae, so a finger gets no guarantee at all;
  - point sets with ``protect="minutia"``: their finger-level ε is n·ε with n the finger's (private) minutiae
    count; charging it would leak n through the charge. Use ``protect="finger"`` instead.

References
----------
C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Thm 2.2 (group privacy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedprint.privacy.group_privacy import group_privacy
from fedprint.privacy.publish import registry

#: Mechanisms that release part of the image (outside a minutiae-derived mask) without noise.
MASKED = frozenset({"klap", "rklap", "dp-rklap"})
#: Mechanisms whose ``paper`` variant is DP as the paper states (the point set: Fang 2013 Thm 1 holds).
PAPER_IS_DP = frozenset({"pointset"})


class NoFingerGuarantee(ValueError):
    """The release has no finger-level guarantee a per-finger ledger could charge (data-independent reason)."""


@dataclass(frozen=True)
class FingerCharge:
    """The stated guarantee of a release and its finger-level equivalent.

    Attributes
    ----------
    stated_epsilon, stated_delta : float
        The mechanism's own (ε, δ) under ``relation``.
    relation : {"pixel", "minutia", "finger"}
        The record unit of the mechanism's neighbouring relation.
    group : int
        g: records of that relation one finger spans (1 for ``finger``, H·W for ``pixel``).
    epsilon, delta : float
        Finger-level (g·ε, g·e^{(g−1)ε}·δ) — what the ledger charges.
    """

    stated_epsilon: float
    stated_delta: float
    relation: str
    group: int
    epsilon: float
    delta: float

    def describe(self) -> str:
        """One line for CLI / query output."""
        if self.relation == "finger":
            return f"stated epsilon {self.stated_epsilon:g} protects the whole finger (finger-level epsilon " \
                   f"{self.epsilon:g})"
        return (f"stated epsilon {self.stated_epsilon:g} per {self.relation}; finger-level epsilon {self.epsilon:g} "
                f"by group privacy over g = {self.group} {self.relation}s")


def finger_charge(mechanism: str, variant: str, epsilon: float, shape: tuple[int, int],
                  options: Mapping[str, Any] | None = None, delta: float = 0.0) -> FingerCharge:
    """The finger-level cost of publishing one image of ``shape`` (H, W) px (see the module docstring).

    Raises
    ------
    NoFingerGuarantee
        With a reason that depends only on the request (never on the image's content).
    """
    options = dict(options or {})
    if variant == "paper" and mechanism not in PAPER_IS_DP:
        raise NoFingerGuarantee(
            f"variant 'paper' of {mechanism!r} is not differentially private, so a privacy ledger cannot account "
            f"for it: use variant 'sound', or publish without a ledger (the release then carries no guarantee)")
    if registry.releases_points(mechanism):
        protect = options.get("protect", "minutia")
        if protect == "finger":
            return FingerCharge(epsilon, delta, "finger", 1, epsilon, delta)
        raise NoFingerGuarantee(
            f"{mechanism!r} with protect={protect!r} protects one minutia, not the finger: its finger-level epsilon "
            f"is n x epsilon for the finger's n minutiae, and n is private; a per-finger ledger needs "
            f"protect='finger' (the mechanism then splits epsilon over the minutiae)")
    if mechanism in MASKED:
        raise NoFingerGuarantee(
            f"{mechanism!r} releases the pixels outside its mask without noise (the mask comes from the raw "
            f"minutiae): a finger gets no finger-level guarantee, so a per-finger ledger cannot charge it")
    g = int(shape[0]) * int(shape[1])
    f_eps, f_delta = group_privacy(epsilon, delta, g)
    return FingerCharge(epsilon, delta, "pixel", g, f_eps, f_delta)
