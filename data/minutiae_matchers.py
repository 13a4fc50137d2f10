"""Classical minutiae matchers: the peers FedPrint is measured against, and the matcher it fuses with.

``"nbis"``
    NIST's MINDTCT minutiae and Bozorth3 matcher (NBIS 5) through ``nbis-py`` (the ``classical`` extra): what a
    user with no budget picks; ~70 ms a print, ~1-4 ms a comparison on one core. Score: Bozorth3's count of
    compatible minutia pairs (about 40 and above is a match at 500 dpi).
``"leader"``
    The LEADER minutiae of :mod:`fedprint.data.minutiae_backends` and afis's geometric matcher (``afis``, the
    ``classical`` extra): the most accurate of the three on the shared real sets; ~0.8 s a print, ~11-16 ms a
    comparison. Score in [0, 1].
``"gabor"``
    afis's Gabor enhancement + crossing-number minutiae + pure-Python Bozorth3 (:mod:`fedprint.data.realism`):
    the comparator of FedPrint's earlier studies, kept as a named option only (it fails on capacitive sensors).

``"auto"`` is ``"nbis"`` where nbis-py imports, else ``"gabor"`` where afis does. Every score is "higher = more
alike"; scores of different matchers are on different scales, so a fusion records which matcher it was
calibrated with (:mod:`fedprint.recognition.minutiae_fusion`) and refuses another.

Each record is read at its own resolution (``record.dpi``, 500 when unknown): MINDTCT scales its parameters by
it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import numpy as np
from tqdm import tqdm

from fedprint.data.record import FingerprintRecord

#: Matcher names (what each is: the module docstring).
MATCHERS = ("nbis", "leader", "gabor")
#: What each matcher is, as reports and model files name it.
DESCRIPTIONS = {"nbis": "NBIS MINDTCT + Bozorth3 (nbis-py)", "leader": "LEADER + afis geometric matcher",
                "gabor": "afis Gabor minutiae + Bozorth3"}
_MODULES = {"nbis": "nbis", "leader": "afis", "gabor": "afis"}
#: Seconds of one core a print (extraction) and a pair (comparison) take, as measured on the shared real sets
#: (benchmarks/bench_peers.py prints today's figures): for time estimates only.
COST_S = {"nbis": (0.03, 0.002), "leader": (0.8, 0.015), "gabor": (0.7, 0.1)}


def estimated_minutes(matcher: str, prints: int, pairs: int) -> float:
    """About how many minutes of one core ``matcher`` takes for ``prints`` extractions and ``pairs``
    comparisons (:data:`COST_S`)."""
    per_print, per_pair = COST_S[matcher]
    return (prints * per_print + pairs * per_pair) / 60


def available(matcher: str) -> bool:
    """True if ``matcher``'s library imports here (without importing it)."""
    return importlib.util.find_spec(_MODULES[matcher]) is not None


def default_matcher() -> str:
    """What ``"auto"`` means here (module docstring); ValueError if no matcher is installed."""
    for name in ("nbis", "gabor"):
        if available(name):
            return name
    raise ValueError("no classical minutiae matcher is installed: pip install 'fedprint[classical]'")


def resolve_matcher(name: str | None, option: str = "--matcher") -> str:
    """The matcher ``name`` stands for (``"auto"`` / None: :func:`default_matcher`), or one line naming
    ``option``."""
    from fedprint.data.minutiae_backends import resolve_choice

    return resolve_choice(name, _MODULES, default_matcher, option, "matcher")


def _dpi(record: FingerprintRecord) -> float:
    return float(record.dpi) if record.dpi else 500.0


def templates(records: Sequence[FingerprintRecord], matcher: str = "auto", *, progress: bool = True) -> list:
    """The matcher's template of every record, in order (the slow part: extraction).

    Parameters
    ----------
    records : sequence of FingerprintRecord
        Grayscale prints (``record.image`` uint8, ridges dark).
    matcher : {"auto", "nbis", "leader", "gabor"}
        See the module docstring.
    progress : bool, optional
        Show a progress bar.

    Returns
    -------
    list
        One opaque template per record, for :func:`pair_scores` with the same ``matcher``.
    """
    matcher = resolve_matcher(matcher)
    if matcher == "gabor":
        from fedprint.data.realism import afis_templates

        return afis_templates(records, progress=progress)
    from fedprint.data.minutiae_backends import leader_template, nbis_minutiae

    make = (lambda r: nbis_minutiae(r.image, _dpi(r))) if matcher == "nbis" else (lambda r: leader_template(r.image))
    return [make(r) for r in tqdm(records, desc=f"{matcher} extract", disable=not progress)]


def pair_scores(tpl: Sequence | dict, pairs: np.ndarray, matcher: str = "auto", *,
                progress: bool = True) -> np.ndarray:
    """The matcher's score of each pair ``(i, j)`` of templates ``tpl[i]``, ``tpl[j]`` (higher = more alike)."""
    matcher = resolve_matcher(matcher)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    out = np.empty(len(pairs))
    if matcher == "nbis":
        compare = lambda a, b: float(a.compare(b))  # noqa: E731
    else:
        from fedprint.data.minutiae_backends import _leader_extractor
        from fedprint.data.realism import _extractor

        ex, method = (_leader_extractor(), "geometric") if matcher == "leader" else (_extractor(False), "bozorth3")

        def compare(a, b) -> float:
            res = ex.match(a, b, method=method)
            return float(res.raw_score if res.raw_score is not None else res.score)
    for k, (i, j) in enumerate(tqdm(pairs, desc=f"{matcher} match", disable=not progress)):
        out[k] = compare(tpl[i], tpl[j])
    return out


def scores(records: Sequence[FingerprintRecord], pairs: np.ndarray, matcher: str = "auto", *,
           progress: bool = True) -> np.ndarray:
    """The matcher's score of each pair of ``records`` (indices, shape (m, 2)); only the records the pairs use
    are extracted."""
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer):
        raise ValueError(f"pairs: expected an integer array of shape (m, 2), got {pairs.dtype} {pairs.shape}")
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= len(records)):
        raise ValueError(f"pairs: indices must lie in [0, {len(records)}), got [{pairs.min()}, {pairs.max()}]")
    matcher = resolve_matcher(matcher)
    used = np.unique(pairs).tolist()
    tpl = dict(zip(used, templates([records[i] for i in used], matcher, progress=progress), strict=True))
    return pair_scores(tpl, pairs, matcher, progress=progress)
