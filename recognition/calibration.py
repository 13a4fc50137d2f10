"""Calibration: a decision threshold (and score-fusion statistics) chosen on the user's own prints.

What ``fedprint calibrate`` does, as functions: :func:`calibrate` scores every pair of a set of records with a
model (the embedding's distance, the embedding fused with the dense match, or the embedding fused with the
minutiae matcher), picks the operating point (FMR <= a target, or the equal-error point) and returns the model
file's new bytes with what was chosen and on which pairs. Nothing is written: the caller stores the bytes.

A threshold chosen on synthetic prints rarely suits a real sensor (the shipped model's rejects most real genuine
pairs); one chosen on a few hundred pairs of the user's own sensor does. To resolve an FMR of ``f`` the pairs
must hold at least ``1 / f`` impostor pairs, which :func:`operating_point` checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedprint.data.record import FingerprintRecord

#: The scores a model can be calibrated for (``--score`` of ``fedprint calibrate``).
SCORES = ("global", "fused", "minutiae")
#: Minutes of matching above which the minutiae score asks for ``max_impostors`` (instead of starting).
UNASKED_MINUTES = 15.0


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` chose, and the model file that stores it.

    Attributes
    ----------
    score : str
        The score calibrated (one of :data:`SCORES`).
    threshold : float
        The decision threshold: a distance for ``"global"`` (match below it), a fused similarity otherwise
        (match above it).
    fmr, fnmr : float
        The false match / false non-match rates of ``threshold`` on the calibration pairs.
    what : str
        The operating point's name ("FMR <= 1 %" or "the EER point").
    n_genuine, n_impostor : int
        Pairs the threshold was chosen on.
    eer : dict of str to float
        EER on the calibration pairs of the calibrated score (key ``score``) and of its parts (``"embedding"``,
        ``"dense"``, ``"minutiae"`` where they exist).
    source : str
        One line stored in the model file: operating point, pair counts, data.
    model_bytes : bytes
        The model file with the new threshold / fusion statistics; weights unchanged.
    """

    score: str
    threshold: float
    fmr: float
    fnmr: float
    what: str
    n_genuine: int
    n_impostor: int
    eer: dict[str, float]
    source: str
    model_bytes: bytes = field(repr=False)


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def operating_point(scores: np.ndarray, labels: np.ndarray, *, fmr: float = 0.01, at_eer: bool = False,
                    higher_is_genuine: bool = False) -> tuple[dict, str]:
    """The threshold at FMR <= ``fmr`` (or at the EER point), with its rates and its name.

    Parameters
    ----------
    scores : ndarray of float, shape (n,)
        One score per pair.
    labels : ndarray of int, shape (n,)
        1 for a genuine pair, 0 for an impostor pair.
    fmr : float, optional
        The largest false match rate allowed (default 0.01), ignored with ``at_eer``.
    at_eer : bool, optional
        Choose the equal-error point instead.
    higher_is_genuine : bool, optional
        True for similarities, False (default) for distances.

    Returns
    -------
    point : dict
        ``threshold``, ``fmr``, ``fnmr`` (:func:`fedprint.models.metrics.threshold_at_fmr`).
    what : str
        The operating point's name.

    Raises
    ------
    ValueError
        If the impostor pairs are too few to resolve ``fmr`` (fewer than ``1 / fmr``).

    Examples
    --------
    >>> import numpy as np
    >>> d = np.array([0.1, 0.2, 0.3, 0.9, 1.0, 1.1])
    >>> point, what = operating_point(d, np.array([1, 1, 1, 0, 0, 0]), at_eer=True)
    >>> what, point["fmr"], point["fnmr"]
    ('the EER point', 0.0, 0.0)
    """
    from fedprint.models.metrics import threshold_at_eer, threshold_at_fmr

    labels = np.asarray(labels)
    if at_eer:
        return threshold_at_eer(scores, labels, higher_is_genuine), "the EER point"
    n_imp, need = int((labels == 0).sum()), int(round(1.0 / fmr))
    if n_imp < need:
        raise ValueError(f"--fmr: {n_imp} impostor pairs cannot resolve FMR {100 * fmr:g} % (need >= {need}); "
                         "use --protocol all, more fingers, a larger --fmr, or --eer")
    return threshold_at_fmr(scores, labels, fmr, higher_is_genuine), f"FMR <= {100 * fmr:g} %"


def calibrate(model_path: str | Path, records: Sequence[FingerprintRecord], *, score: str = "global",
              fmr: float = 0.01, at_eer: bool = False, protocol: str = "fvc", max_impostors: int | None = None,
              seed: int = 0, min_quality: float = 0.0, data: str | Path = "", layout: str = "",
              skipped: int = 0, minutiae_cache: str | Path | None = None, matcher: str = "auto",
              notify: Callable[[str], None] | None = None) -> Calibration:
    """Choose a model's decision threshold (and fusion statistics) on the pairs of ``records``.

    Parameters
    ----------
    model_path : str or Path
        The FedPrint model file to calibrate (read, never written).
    records : sequence of FingerprintRecord
        The user's prints, already through the quality gate; pairs are drawn from them by ``protocol``.
    score : {"global", "fused", "minutiae"}
        ``"global"``: the embedding's distance (the model's own threshold); ``"fused"``: the embedding's cosine
        fused with the dense match of the last feature maps; ``"minutiae"``: the embedding fused with the
        minutiae matcher (z-score sum). The fused scores store their statistics in the model file too.
    fmr : float, optional
        Target false match rate (default 0.01).
    at_eer : bool, optional
        Calibrate at the equal-error point instead of ``fmr``.
    protocol : str, optional
        Pair protocol (:func:`fedprint.recognition.matching.protocol_pairs`): ``"fvc"`` or ``"all"``.
    max_impostors : int, optional
        Draw at most this many impostor pairs (``seed`` chooses them); required by ``"minutiae"`` when its
        matching would take more than :data:`UNASKED_MINUTES`.
    seed : int, optional
        Seed of the impostor draw.
    min_quality : float, optional
        The quality gate the records passed (recorded).
    data, layout : str, optional
        Where the records came from (recorded in the model file).
    skipped : int, optional
        Files left out before calibration (recorded).
    minutiae_cache : str or Path, optional
        Cache folder of the minutiae matcher's scores (``"minutiae"`` only).
    matcher : {"auto", "nbis", "leader", "gabor"}, optional
        The classical matcher fused with the embedding (``"minutiae"`` only;
        :mod:`fedprint.data.minutiae_matchers`; ``"auto"``: NBIS where installed). The model file records it.
    notify : callable, optional
        Called with one line before a long scoring step (the CLI prints it).

    Returns
    -------
    Calibration
        The threshold, its rates and pair counts, and the model file's new bytes.

    Raises
    ------
    ValueError
        If the pairs hold no genuine or no impostor pair, too few impostors for ``fmr``, or the dense match is
        constant (``"fused"``).
    """
    if score not in SCORES:
        raise ValueError(f"--score: expected one of {', '.join(SCORES)}, got {score!r}")
    data = str(Path(data).resolve()) if data else ""
    common = dict(fmr=fmr, at_eer=at_eer, protocol=protocol, data=data)
    if score == "fused":
        return _fused(model_path, records, **common)
    if score == "minutiae":
        return _minutiae(model_path, records, max_impostors=max_impostors, seed=seed, cache=minutiae_cache,
                         matcher=matcher, notify=notify, **common)
    return _global(model_path, records, max_impostors=max_impostors, seed=seed, min_quality=min_quality,
                   layout=layout, skipped=skipped, **common)


def _global(model_path, records, *, fmr, at_eer, protocol, data, max_impostors, seed, min_quality, layout,
            skipped) -> Calibration:
    from fedprint.models.model_file import load_model, recalibrated_bytes
    from fedprint.recognition.matching import evaluate

    model = load_model(model_path)
    metrics, d, pairs = evaluate(model, records, protocol, min_quality=min_quality, max_impostors=max_impostors,
                                 seed=seed)
    n_imp, n_gen = metrics["n_impostor"], metrics["n_genuine"]
    point, what = operating_point(d, pairs.label, fmr=fmr, at_eer=at_eer)
    source = (f"calibrated at {what} on {n_gen} genuine / {n_imp} impostor pairs of {data} "
              f"({protocol} protocol, {metrics['images']} images of {metrics['fingers']} fingers)")
    record = {"data": data, "layout": layout, "protocol": protocol,
              "target": "eer" if at_eer else {"fmr": fmr}, "fmr": point["fmr"], "fnmr": point["fnmr"],
              "n_genuine": n_gen, "n_impostor": n_imp, "images": metrics["images"],
              "fingers": metrics["fingers"], "eer": metrics["eer"], "min_quality": min_quality,
              "skipped": skipped, "model": str(model_path), "utc": _utc()}
    return Calibration("global", float(point["threshold"]), point["fmr"], point["fnmr"], what, n_gen, n_imp,
                       {"global": metrics["eer"]}, source,
                       recalibrated_bytes(model_path, point["threshold"], source, record))


def _fusion_point(cal: dict, fused, lab, *, fmr, at_eer, protocol, data) -> tuple[dict, str]:
    """The operating point of a fused score, recorded in ``cal`` (threshold, pair counts, data, source, time)."""
    point, what = operating_point(fused, lab, fmr=fmr, at_eer=at_eer, higher_is_genuine=True)
    n_gen, n_imp = int(lab.sum()), int((lab == 0).sum())
    cal |= {"threshold": float(point["threshold"]), "pairs": n_gen + n_imp, "n_genuine": n_gen,
            "n_impostor": n_imp, "data": data, "protocol": protocol,
            "source": f"calibrated at {what} on {n_gen} genuine / {n_imp} impostor pairs of {data} ({protocol} "
                      "protocol)",
            "utc": _utc()}
    return point, what


def _fused(model_path, records, *, fmr, at_eer, protocol, data) -> Calibration:
    from fedprint.models.dense_match import ANGLES, MIN_OVERLAP, RADIUS, fused_scores, fusion_calibration
    from fedprint.models.metrics import eer
    from fedprint.models.model_file import load_model, with_score_fusion_bytes
    from fedprint.recognition.matching import pair_similarities, protocol_pairs

    model = load_model(model_path)
    pairs = protocol_pairs(records, protocol)
    lab = pairs.label
    n_gen, n_imp = int(lab.sum()), int((lab == 0).sum())
    if n_gen == 0 or n_imp == 0:
        raise ValueError(f"--data: {data} gives {n_gen} genuine / {n_imp} impostor pairs; both are needed")
    g, dense = pair_similarities(model, records, pairs, radius=RADIUS, min_overlap=MIN_OVERLAP, angles=ANGLES)
    if dense.std() == 0:
        raise ValueError(f"--score fused: the dense match gives the same value for every pair of {data} (the "
                         f"model's {model.spec.size} px input leaves fewer than {MIN_OVERLAP} feature-map cells to "
                         "overlap); use --score global")
    cal = fusion_calibration(g, dense, lab)
    fused = fused_scores(cal, g, dense)
    point, what = _fusion_point(cal, fused, lab, fmr=fmr, at_eer=at_eer, protocol=protocol, data=data)
    return Calibration("fused", cal["threshold"], point["fmr"], point["fnmr"], what, n_gen, n_imp,
                       {"fused": eer(fused, lab, True), "embedding": eer(g, lab, True)}, cal["source"],
                       with_score_fusion_bytes(model_path, cal))


def _minutiae(model_path, records, *, fmr, at_eer, protocol, data, max_impostors, seed, cache, matcher,
              notify) -> Calibration:
    from fedprint.data.minutiae_matchers import DESCRIPTIONS, estimated_minutes, resolve_matcher
    from fedprint.models.metrics import eer
    from fedprint.models.model_file import load_model, with_minutiae_fusion_bytes
    from fedprint.recognition.matching import capped_impostors, minutiae_parts, protocol_pairs
    from fedprint.recognition.minutiae_fusion import calibration, fused_scores

    matcher = resolve_matcher(matcher)
    model = load_model(model_path)
    pairs = capped_impostors(protocol_pairs(records, protocol), max_impostors, seed)
    lab = pairs.label
    n_gen, n_imp = int(lab.sum()), int((lab == 0).sum())
    minutes = estimated_minutes(matcher, len(records), n_gen + n_imp)
    if minutes > UNASKED_MINUTES and max_impostors is None:
        raise ValueError(f"--data: {data} gives {n_gen} genuine / {n_imp} impostor pairs; the minutiae matcher "
                         f"({DESCRIPTIONS[matcher]}) would take about {minutes:.0f} min for them: draw fewer impostor "
                         "pairs with --max-impostors (e.g. 2000)")
    if notify is not None:
        notify(f"scoring {n_gen} genuine / {n_imp} impostor pairs of {len(records)} prints with the network and "
               f"the minutiae matcher ({DESCRIPTIONS[matcher]}; about {max(minutes, 0.1):.1f} min on one core)")
    cos, minutiae = minutiae_parts(model, records, pairs, cache=cache, matcher=matcher)
    cal = calibration(cos, minutiae, matcher, labels=lab)
    fused = fused_scores(cal, cos, minutiae)
    point, what = _fusion_point(cal, fused, lab, fmr=fmr, at_eer=at_eer, protocol=protocol, data=data)
    return Calibration("minutiae", cal["threshold"], point["fmr"], point["fnmr"], what, n_gen, n_imp,
                       {"minutiae": eer(fused, lab, True), "embedding": eer(cos, lab, True),
                        "matcher": eer(minutiae, lab, True)}, cal["source"],
                       with_minutiae_fusion_bytes(model_path, cal))
