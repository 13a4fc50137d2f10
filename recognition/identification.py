"""1:N identification: search a gallery of enrolled fingers for each probe print.

Three scores rank the gallery identities (each identity by its best-matching enrolled impression):

* ``"global"`` — the Euclidean distance of the unit-norm embeddings (one matrix product for the whole gallery);
* ``"fused"`` — the embedding fused with the dense match of the feature maps (every probe-gallery pair);
* ``"minutiae"`` — the usual AFIS arrangement (e.g. Maltoni et al. 2022 [1]_, ch. 5.8 "indexing"): the embedding is a
  fast prefilter over the whole gallery, and only the ``shortlist`` nearest identities are compared by the
  classical minutiae matcher, ranked by the embedding + matcher fusion the model file stores
  (:mod:`fedprint.recognition.minutiae_fusion`). An identity outside the shortlist keeps its prefilter order
  behind every shortlisted one, so a true mate the prefilter misses is found at rank > ``shortlist`` (the
  shortlist's recall bounds rank-1: ``docs/studies/identification.md`` measures both). ``shortlist=None`` matches
  every gallery identity (exhaustive).

For a gallery searched many times, :mod:`fedprint.recognition.gallery_index` stores the gallery's embeddings (and
minutiae templates) once and :func:`~fedprint.recognition.gallery_index.identify_index` searches them with the same
ranking (``fedprint gallery build``, ``fedprint identify --index``).

A probe that is also a gallery image (same file) is never matched to itself. Open set: with a threshold (default
the model's for the score), ``candidate`` is the top identity when its distance is within it, else None ("not
enrolled").

References
----------
.. [1] D. Maltoni, D. Maio, A. K. Jain, J. Feng, *Handbook of Fingerprint Recognition*, 3rd ed., Springer, 2022.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedprint.data.record import FingerprintRecord
from fedprint.models.model_file import VerifierModel
from fedprint.recognition.matching import (
    _fused_distances,
    decision_threshold,
    embed_images,
    model_inputs,
    quality_gate,
)
from fedprint.recognition.minutiae_fusion import fused_scores, matcher_of, minutiae_fusion_of
from fedprint.recognition.quality import MIN_QUALITY

#: Gallery identities the minutiae matcher re-ranks per probe by default (``--shortlist``).
SHORTLIST = 20


@dataclass
class Identification:
    """Result of searching one probe in the gallery."""

    probe: str
    identity: str | None
    ranked: list[tuple[str, float]]  # (gallery identity, distance), nearest first
    rank: int | None  # 1-based rank of the true identity (None: unknown or not enrolled)
    quality: float = float("nan")  # print quality of the probe (recognition.quality)
    candidate: str | None = None  # open set: nearest identity if within the threshold, else None (not enrolled)


def _per_identity(dist: np.ndarray, g_ids: np.ndarray, names: np.ndarray) -> np.ndarray:
    """(P, I) distance of each probe to each identity: the smallest over the identity's impressions."""
    out = np.full((dist.shape[0], len(names)), np.inf)
    idx = np.searchsorted(names, g_ids)
    np.minimum.at(out.T, idx, dist.T)  # out[:, idx[g]] = min(out[:, idx[g]], dist[:, g])
    return out


def _minutiae_rerank(model: VerifierModel, gallery: Sequence[FingerprintRecord],
                     probes: Sequence[FingerprintRecord], pe: np.ndarray, ge: np.ndarray, dist: np.ndarray,
                     pre: np.ndarray, g_ids: np.ndarray, names: np.ndarray, shortlist: int | None, timings: dict,
                     progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """Re-rank each probe's ``shortlist`` nearest identities (by the embedding) by the minutiae fusion.

    Returns the (P, I) distances (−fused score for shortlisted identities, +inf elsewhere) and the (P, I) order
    of identities per probe (re-ranked shortlist first, then the rest in prefilter order).
    """
    from fedprint.data import minutiae_matchers as mm

    cal = minutiae_fusion_of(model)
    matcher = matcher_of(cal)
    prefilter_order = np.argsort(pre, axis=1, kind="stable")
    k = len(names) if shortlist is None else min(int(shortlist), len(names))
    short = prefilter_order[:, :k]
    members = [np.flatnonzero(g_ids == n) for n in names]
    pi, gi = [], []
    for p in range(len(probes)):
        g = np.concatenate([members[i] for i in short[p]])
        g = g[np.isfinite(dist[p, g])]  # never the probe's own file
        pi.append(np.full(len(g), p))
        gi.append(g)
    pi, gi = np.concatenate(pi), np.concatenate(gi)
    t0 = time.perf_counter()
    used = np.unique(gi)  # extract only the gallery prints some shortlist holds (an index would store them all)
    made = mm.templates([*probes, *(gallery[g] for g in used)], matcher, progress=progress)
    tpl = dict(zip([*range(len(probes)), *(len(probes) + used).tolist()], made, strict=True))
    timings["minutiae_extract_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    raw = mm.pair_scores(tpl, np.stack([pi, len(probes) + gi], axis=1), matcher, progress=progress)
    timings["minutiae_match_s"] = time.perf_counter() - t0
    timings["minutiae_pairs"] = int(len(pi))
    cos = np.einsum("ij,ij->i", pe[pi], ge[gi])
    fused = np.full((len(probes), len(gallery)), np.inf)
    fused[pi, gi] = -fused_scores(cal, cos, raw)
    reranked = _per_identity(fused, g_ids, names)
    order = np.empty_like(prefilter_order)
    for p in range(len(probes)):
        head = short[p][np.argsort(reranked[p, short[p]], kind="stable")]
        order[p] = np.r_[head, prefilter_order[p, k:]]
    return reranked, order


def identify(model: VerifierModel, gallery: Sequence[FingerprintRecord], probes: Sequence[FingerprintRecord],
             *, top_k: int = 5, probe_identities_known: bool = True, threshold: float | None = None,
             min_quality: float = MIN_QUALITY, skip_bad: bool = False, report: list | None = None,
             score: str = "global", shortlist: int | None = SHORTLIST, timings: dict | None = None,
             progress: bool = False) -> list[Identification]:
    """Search each probe in the gallery (module docstring: scores, shortlist, open set).

    Parameters
    ----------
    model : VerifierModel
        A loaded model (:func:`fedprint.models.model_file.load_model`).
    gallery, probes : sequence of FingerprintRecord
        Enrolled prints (identity = the enrolled finger) and the prints searched.
    top_k : int
        Identities listed per probe (``"minutiae"``: at most ``shortlist``).
    probe_identities_known : bool
        Whether the probes' ``identity`` is their true finger (then ``rank`` is computed).
    threshold : float, optional
        Open-set threshold on the score's distance (default: the model's for ``score``).
    min_quality : float
        Quality gate of every gallery and probe image (0 turns it off).
    skip_bad : bool
        Leave images below the gate out (listed in ``report``) instead of raising.
    report : list, optional
        Receives ``(path, reason)`` of each image left out.
    score : {"global", "fused", "minutiae"}
        The ranking score (module docstring).
    shortlist : int or None
        ``"minutiae"``: identities re-ranked per probe (None: all of them).
    timings : dict, optional
        Receives seconds per stage (``embed_s``, ``minutiae_extract_s``, ``minutiae_match_s``) and
        ``minutiae_pairs``.
    progress : bool
        Progress bars for the minutiae matcher.

    Returns
    -------
    list of Identification
        One per probe that passed the gate, in order.

    Examples
    --------
    >>> from fedprint.data.stripes import stripe_records
    >>> from fedprint.models.model_file import load_model, pretrained_path
    >>> records = stripe_records(n_fingers=3, n_impressions=2, size=64)
    >>> gallery = [r for r in records if r.impression == 0]
    >>> probes = [r for r in records if r.impression == 1]
    >>> found = identify(load_model(pretrained_path()), gallery, probes, top_k=2, min_quality=0)
    >>> len(found), len(found[0].ranked)
    (3, 2)
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"--top-k: expected an integer >= 1, got {top_k!r}")
    if shortlist is not None and (isinstance(shortlist, bool) or not isinstance(shortlist, int) or shortlist < 1):
        raise ValueError(f"--shortlist: expected an integer >= 1, got {shortlist!r}")
    timings = {} if timings is None else timings
    t = decision_threshold(model, threshold, score)
    gallery, _ = quality_gate(gallery, min_quality, skip_bad=skip_bad, report=report)
    probes, pq = quality_gate(probes, min_quality, skip_bad=skip_bad, report=report)
    if not gallery:
        raise ValueError("gallery: no images" + (" above the quality gate" if skip_bad else ""))
    if not probes:
        raise ValueError("probe: no images above the quality gate")
    g_ids = np.array([r.identity for r in gallery])
    names = np.unique(g_ids)
    t0 = time.perf_counter()
    if score == "fused":
        n_p, n_g = len(probes), len(gallery)
        pi, gi = np.repeat(np.arange(n_p), n_g), np.tile(np.arange(n_g), n_p)
        dist = _fused_distances(model, model_inputs(model, [*probes, *gallery]), pi, n_p + gi).reshape(n_p, n_g)
    else:
        ge = embed_images(model, [r.image for r in gallery], [r.dpi for r in gallery])
        pe = embed_images(model, [r.image for r in probes], [r.dpi for r in probes])
        # |p - g|^2 = 2 - 2 p.g for unit vectors: one matrix product, not a (P, G, D) array
        dist = np.sqrt(np.clip(2.0 - 2.0 * (pe @ ge.T), 0.0, None))
    timings["embed_s"] = time.perf_counter() - t0
    g_src = np.array([r.source or f"mem:{id(r)}" for r in gallery])
    p_src = np.array([p.source or f"mem:{id(p)}" for p in probes])
    dist = np.where(p_src[:, None] == g_src[None, :], np.inf, dist)  # never the probe's own file
    pre = _per_identity(dist, g_ids, names)
    if score == "minutiae":
        per_id, order = _minutiae_rerank(model, gallery, probes, pe, ge, dist, pre, g_ids, names, shortlist,
                                         timings, progress)
        listed = min(top_k, len(names) if shortlist is None else shortlist)
    else:
        per_id, order, listed = pre, np.argsort(pre, axis=1, kind="stable"), top_k
    out = []
    for k, p in enumerate(probes):
        true = p.identity if probe_identities_known else None
        at = np.flatnonzero(names[order[k]] == true)
        # None: unknown, not enrolled, or enrolled only by the probe's own file
        rank = int(at[0]) + 1 if len(at) and np.isfinite(pre[k, order[k][at[0]]]) else None
        ranked = [(str(names[o]), float(per_id[k, o])) for o in order[k][:listed] if np.isfinite(per_id[k, o])]
        cand = ranked[0][0] if ranked and t is not None and ranked[0][1] <= t else None
        out.append(Identification(p.source or p.key, true, ranked, rank, float(pq[k]), cand))
    return out


def cmc(results: Sequence[Identification], max_rank: int) -> np.ndarray:
    """Cumulative match characteristic: fraction of probes (with an enrolled identity) found within rank r,
    r = 1 .. max_rank."""
    ranks = np.array([r.rank if r.rank is not None else np.inf for r in results if r.identity is not None],
                     float)
    if ranks.size == 0:
        raise ValueError("cmc: no probe has a known, enrolled identity")
    return np.array([(ranks <= r).mean() for r in range(1, max_rank + 1)])
