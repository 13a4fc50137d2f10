"""Using a trained verifier: 1:1 verification and evaluation on a dataset (1:N search:
:mod:`fedprint.recognition.identification`).

Both embed images through the model's own input pipeline (:class:`fedprint.models.preprocess.InputSpec` stored in
the model file) at each image's resolution (``dpi``), and compare unit-norm embeddings by Euclidean distance
(Yan et al. 2025 Eq. 2: match iff distance <= threshold). The similarity ``score = 1 - distance / 2`` lies in [0, 1].

Every image first passes the print-quality gate of :mod:`fedprint.recognition.quality` (``min_quality``; 0 turns it
off):
a blank, flat, tiny or noise image is refused with a message naming it, never scored — or, with ``skip_bad``,
left out and reported. Non-finite thresholds and embeddings (a model with NaN weights) are refused.

Evaluation protocols (:func:`protocol_pairs`):

* ``"fvc"`` — the FVC competitions' protocol: every genuine pair (each pair of impressions of one finger), and
  impostor pairs between the FIRST impression of every finger and the first impression of every other finger
  (Maio et al. 2002 [1]_);
* ``"all"`` — every pair of images.

References
----------
.. [1] D. Maio, D. Maltoni, R. Cappelli, J. L. Wayman, A. K. Jain, "FVC2002: Second Fingerprint Verification
   Competition", ICPR 2002.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fedprint.data.pairs import PairSet
from fedprint.data.record import FingerprintRecord
from fedprint.models.device import current_device, on_device
from fedprint.models.metrics import (
    eer,
    fnmr_at_fmr,
    pair_cosines,
    roc_auc,
    threshold_at_eer,
    threshold_at_fmr,
    verification_metrics,
)
from fedprint.models.model_file import VerifierModel
from fedprint.models.preprocess import to_tensor_batch
from fedprint.recognition.minutiae_fusion import fused_scores, matcher_of, minutiae_fusion_of, minutiae_scores
from fedprint.recognition.quality import MIN_QUALITY, check_quality, gate

PROTOCOLS = ("fvc", "all")
#: Operating points :func:`evaluate` reports thresholds for: name -> target FMR (None: the EER point), and the
#: fewest impostor pairs that resolve the target.
OPERATING_POINTS = {"eer": (None, 1), "fmr_1%": (0.01, 100), "fmr_0.1%": (0.001, 1000)}
#: Pair scores :func:`evaluate` can use: the embedding distance; the embedding and the dense match of the
#: feature map fused with the weights the model file stores (:mod:`fedprint.models.dense_match`); or the embedding and a
#: classical minutiae matcher fused by the z-score sum the model file stores
#(:mod:`fedprint.recognition.minutiae_fusion`).
SCORES = ("global", "fused", "minutiae")
#: Scores whose "distance" is −(a fused score), each with the model-file calibration that holds its threshold.
FUSED_SCORES = ("fused", "minutiae")


def score_fusion_of(model: VerifierModel) -> dict:
    """The model file's ``global + dense`` calibration, or a ValueError that says where one comes from."""
    cal = model.meta.get("score_fusion")
    if not cal:
        raise ValueError(f"{model.meta.get('path', 'model')}: the model file stores no score-fusion calibration "
                         "(`fedprint train` / `simulate` write one for the compact encoder from their validation "
                         "pairs; deployment runs, ResNet-18 models and older files have none): use --score global")
    return cal


def model_inputs(model: VerifierModel, records: Sequence[FingerprintRecord], batch_size: int = 64) -> torch.Tensor:
    """The network inputs (N, 1, S, S) of ``records``, prepared as ``model`` was trained (on the CPU)."""
    return torch.cat([to_tensor_batch([r.image for r in records[s:s + batch_size]], model.spec,
                                      [r.dpi for r in records[s:s + batch_size]])
                      for s in range(0, len(records), batch_size)])


def _similarities(model: VerifierModel, inputs: torch.Tensor, a, b, *, radius: int, min_overlap: int,
                  angles: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(−embedding distance, dense match) of the pairs (a[k], b[k]) of network ``inputs`` (one feature pass)."""
    from fedprint.models import dense_match

    features = dense_match.print_features(model.encoder, inputs, tuple(angles))
    return dense_match.pair_similarities(features, a, b, radius=radius, min_overlap=min_overlap)


def pair_similarities(model: VerifierModel, records: Sequence[FingerprintRecord], pairs: PairSet, *,
                      radius: int, min_overlap: int, angles: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(−embedding distance, dense match) of each pair (:mod:`fedprint.models.dense_match`); both higher = same finger.

    Runs on the CPU: the dense match compares every cell pair of the two feature maps at each searched shift.
    """
    return _similarities(model, model_inputs(model, records), pairs.a, pairs.b, radius=radius,
                         min_overlap=min_overlap, angles=angles)


def _fused_distances(model: VerifierModel, inputs: torch.Tensor, a, b) -> np.ndarray:
    """−(global + dense score) of the pairs (a[k], b[k]) of network ``inputs``, with the model's calibration."""
    from fedprint.models.dense_match import fused_scores, search_of

    cal = score_fusion_of(model)
    return -fused_scores(cal, *_similarities(model, inputs, a, b, **search_of(cal)))


def fused_distances(model: VerifierModel, records: Sequence[FingerprintRecord], pairs: PairSet) -> np.ndarray:
    """−(global + dense score) of each pair (lower = same finger, like a distance), with the model's calibration."""
    return _fused_distances(model, model_inputs(model, records), pairs.a, pairs.b)


def resolve_score(model: VerifierModel, score: str) -> tuple[str, str]:
    """The score ``score`` stands for, and why: ``"auto"`` is ``"minutiae"`` (the embedding fused with the
    classical matcher) when the model file stores that calibration and its matcher is installed, else ``"global"``
    (the embedding alone); any other name stands for itself.

    Examples
    --------
    >>> from fedprint.models.model_file import load_model, pretrained_path
    >>> resolve_score(load_model(pretrained_path()), "global")
    ('global', 'asked for')
    """
    if score != "auto":
        if score not in SCORES:
            raise ValueError(f"--score: expected auto or one of {', '.join(SCORES)}, got {score!r}")
        return score, "asked for"
    from fedprint.data.minutiae_matchers import DESCRIPTIONS, available

    cal = model.meta.get("minutiae_fusion")
    if not cal:
        return "global", ("auto: the model file stores no minutiae-fusion calibration (fedprint calibrate --score "
                          "minutiae makes one)")
    matcher = matcher_of(cal)
    if not available(matcher):
        return "global", (f"auto: the model file's fusion needs {DESCRIPTIONS[matcher]}, not installed here "
                          "(pip install 'fedprint[classical]')")
    return "minutiae", f"auto: the embedding fused with {DESCRIPTIONS[matcher]}, as the model file is calibrated"


def _finite_threshold(model: VerifierModel, threshold: float | None) -> float | None:
    t = model.threshold if threshold is None else threshold
    if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or not np.isfinite(t)):
        raise ValueError(f"threshold: expected a finite distance, got {t!r}")
    return None if t is None else float(t)


def decision_threshold(model: VerifierModel, threshold: float | None, score: str = "global") -> float | None:
    """The threshold on the "distance" of ``score``: ``threshold`` if given, else the model's (``"fused"`` /
    ``"minutiae"``: minus that fused score's stored threshold, since its "distance" is −score). None: the model
    stores none."""
    if score not in SCORES:
        raise ValueError(f"score: expected one of {SCORES}, got {score!r}")
    if score in FUSED_SCORES:
        cal = score_fusion_of(model) if score == "fused" else minutiae_fusion_of(model)
        threshold = -float(cal["threshold"]) if threshold is None else threshold
    return _finite_threshold(model, threshold)


def quality_gate(records: Sequence[FingerprintRecord], min_quality: float = MIN_QUALITY, *, skip_bad: bool = False,
                 report: list | None = None) -> tuple[list[FingerprintRecord], np.ndarray]:
    """Records that hold a fingerprint (quality >= ``min_quality``) and their qualities.

    ``skip_bad`` False: the first image below the gate raises :class:`fedprint.recognition.quality.LowQualityError`
    naming its file. True: such images are left out, each appended to ``report`` as ``(source, reason)``.
    """
    names = [r.source or r.key for r in records]
    if not skip_bad:
        q = check_quality([r.image for r in records], [r.dpi for r in records], names, min_quality)
        return list(records), q
    check_quality([], [], [], min_quality)  # validates min_quality
    judged = [gate(r.image, r.dpi, min_quality) for r in records]
    q = np.array([v for v, _ in judged], dtype=np.float64)
    keep = np.array([why is None for _, why in judged], dtype=bool)
    if report is not None:
        report.extend((n, f"no fingerprint found: {why}") for n, (_, why) in zip(names, judged, strict=True)
                      if why is not None)
    return [r for r, k in zip(records, keep, strict=True) if k], q[keep]


@torch.no_grad()
def embed_images(model: VerifierModel, images: Sequence[np.ndarray], dpis: Sequence[float | None],
                 batch_size: int = 64) -> np.ndarray:
    """Unit-norm embeddings of grayscale images, prepared the way ``model`` was trained.

    Each image is cropped, resized to the model's input resolution and normalised by the model's own
    :class:`~fedprint.models.preprocess.InputSpec` (on the CPU), then embedded on
    :func:`fedprint.models.device.current_device`. No quality gate: see :func:`quality_gate`.

    Parameters
    ----------
    model : VerifierModel
        A loaded model (:func:`fedprint.models.model_file.load_model`).
    images : sequence of ndarray, uint8, shape (H, W)
        Grayscale prints, any sizes.
    dpis : sequence of float or None
        Resolution of each image in dots per inch (None: taken as the model's input resolution).
    batch_size : int
        Images per forward pass.

    Returns
    -------
    ndarray, float64, shape (N, d)
        One unit-norm row per image (d = the model's embedding size); shape (0, 0) for no images.

    Raises
    ------
    ValueError
        If the model produces NaN or infinite embeddings (a damaged model), or an image is not a 2-D uint8 array.

    Examples
    --------
    >>> import numpy as np
    >>> from fedprint.data.stripes import stripe_records
    >>> from fedprint.models.model_file import load_model, pretrained_path
    >>> model = load_model(pretrained_path())
    >>> records = stripe_records(n_fingers=2, n_impressions=2, size=64)
    >>> e = embed_images(model, [r.image for r in records], [250.0] * len(records))
    >>> e.shape
    (4, 128)
    >>> np.allclose(np.linalg.norm(e, axis=1), 1.0)
    True
    """
    dev = current_device()
    model.encoder.eval()
    out = []
    with on_device(model.encoder, dev):
        for s in range(0, len(images), batch_size):
            x = to_tensor_batch(list(images[s:s + batch_size]), model.spec, list(dpis[s:s + batch_size]))
            out.append(model.encoder(x.to(dev)).float().cpu().double().numpy())
    e = np.concatenate(out) if out else np.zeros((0, 0))
    if not np.isfinite(e).all():
        raise ValueError(f"{model.meta.get('path', 'model')}: the model produced NaN or infinite embeddings; it "
                         "cannot score these images")
    return e


def verify(model: VerifierModel, a: np.ndarray, b: np.ndarray, *, dpi_a: float | None, dpi_b: float | None,
           threshold: float | None = None, min_quality: float = MIN_QUALITY,
           names: tuple[str, str] = ("A", "B"), score: str = "global") -> dict:
    """Compare two images (1:1 verification): qualities, distance, score, threshold used and the decision.

    Both images pass the print-quality gate first; then, with ``score = "global"``, the distance is the Euclidean
    distance between the two unit-norm embeddings and the score ``1 - distance / 2`` (Yan et al. 2025 Eq. 2 [1]_:
    match iff distance <= threshold). With ``"fused"`` / ``"minutiae"`` the score is the embedding fused with the
    dense match of the feature maps / with a classical minutiae matcher by the calibration the model file stores,
    the "distance" is −score, and the threshold (a distance, like ``threshold``) defaults to minus the model's
    threshold for that score.

    Parameters
    ----------
    model : VerifierModel
        A loaded model (:func:`fedprint.models.model_file.load_model`).
    a, b : ndarray, uint8, shape (H, W)
        The two grayscale prints.
    dpi_a, dpi_b : float or None
        Their resolutions in dots per inch (None: taken as the model's input resolution).
    threshold : float, optional
        Decision threshold on the distance; default the one stored in the model file.
    min_quality : float
        Quality gate in [0, 1] (:func:`fedprint.recognition.quality.print_quality`); 0 turns it off.
    names : tuple of str
        How error messages name the two images.
    score : {"global", "fused", "minutiae"}
        Which score decides (see above).

    Returns
    -------
    dict
        ``distance``, ``score``, ``threshold`` (floats), ``match`` (bool: distance <= threshold), ``score_kind``
        (``score``), ``quality_a`` / ``quality_b`` (the two print qualities).

    Raises
    ------
    fedprint.recognition.quality.LowQualityError
        If an image is below ``min_quality`` (the message names it by ``names``).
    ValueError
        If no threshold is given and the model file stores none, ``score`` is unknown, the model file lacks the
        calibration a fused score needs, or the model produces non-finite embeddings.

    See Also
    --------
    evaluate : metrics over a whole dataset.
    identify : 1:N search in a gallery.

    References
    ----------
    .. [1] Y. Yan, X. Xie, H. Ren, Y. Cao, H. Chang, "Privacy-Preserving Fingerprint Recognition via Federated
       Adaptive Domain Generalization", Computers, Materials & Continua, 2025.

    Examples
    --------
    Two impressions of one toy finger (stripes stand in for prints here), scored by the shipped model:

    >>> from fedprint.data.stripes import stripe_records
    >>> from fedprint.models.model_file import load_model, pretrained_path
    >>> model = load_model(pretrained_path())
    >>> first, second = stripe_records(n_fingers=1, n_impressions=2, size=64)
    >>> result = verify(model, first.image, second.image, dpi_a=250.0, dpi_b=250.0)
    >>> sorted(result)
    ['distance', 'match', 'quality_a', 'quality_b', 'score', 'score_kind', 'threshold']
    >>> result["threshold"] == model.threshold, result["match"] == (result["distance"] <= result["threshold"])
    (True, True)

    A blank image is refused, never scored:

    >>> import numpy as np
    >>> verify(model, np.full((64, 64), 255, np.uint8), second.image, dpi_a=250.0, dpi_b=250.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    fedprint.recognition.quality.LowQualityError: no fingerprint found in A: degenerate image: fewer than 8 gray ...
    """
    t = decision_threshold(model, threshold, score)
    if t is None:
        raise ValueError("threshold: the model file has no decision threshold; give --threshold or store one with "
                         "fedprint calibrate")
    q = check_quality([a, b], [dpi_a, dpi_b], list(names), min_quality)
    if score == "fused":
        d = float(_fused_distances(model, to_tensor_batch([a, b], model.spec, [dpi_a, dpi_b]), [0], [1])[0])
        s = -d
    elif score == "minutiae":
        pair = PairSet(np.array([0]), np.array([1]), np.array([0]))  # the label is not read
        records = [FingerprintRecord(name, 0, img, "verify", dpi=dpi)
                   for name, img, dpi in zip(names, (a, b), (dpi_a, dpi_b), strict=True)]
        s = float(_minutiae_fused(model, records, pair, progress=False)[0])
        d = -s
    else:
        e = embed_images(model, [a, b], [dpi_a, dpi_b])
        d = float(np.linalg.norm(e[0] - e[1]))
        s = 1.0 - d / 2.0
    return {"distance": d, "score": s, "threshold": t, "match": d <= t, "score_kind": score,
            "quality_a": float(q[0]), "quality_b": float(q[1])}


def protocol_pairs(records: Sequence[FingerprintRecord], protocol: str = "fvc") -> PairSet:
    """Genuine and impostor pairs of a dataset under an evaluation protocol (see module docstring)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: expected one of {PROTOCOLS}, got {protocol!r}")
    ids = np.array([r.identity for r in records])
    imp = np.array([r.impression for r in records])
    i, j = np.triu_indices(len(records), 1)
    same = ids[i] == ids[j]
    if protocol == "all":
        keep = np.ones(len(i), bool)
    else:
        first = np.zeros(len(records), bool)
        for identity in np.unique(ids):  # one per finger: its lowest impression number
            members = np.flatnonzero(ids == identity)
            first[members[np.argmin(imp[members])]] = True
        keep = same | (first[i] & first[j])
    i, j, same = i[keep], j[keep], same[keep]
    if not same.any() or same.all():
        raise ValueError(f"data: the {protocol!r} protocol gives {int(same.sum())} genuine and "
                         f"{int((~same).sum())} impostor pairs; need both (at least two fingers, one with two "
                         "impressions)")
    return PairSet(i.astype(np.int64), j.astype(np.int64), same.astype(np.int8))


def capped_impostors(pairs: PairSet, max_impostors: int | None, seed: int = 0) -> PairSet:
    """Every genuine pair and at most ``max_impostors`` impostor pairs, drawn without replacement with ``seed``
    (kept in their order); ``None`` keeps all. For folders whose impostor pairs are too many to score (the minutiae
    matcher takes ~0.1 s a pair: an FCJ2020 folder of 160 fingers has 457,920)."""
    if max_impostors is None:
        return pairs
    if isinstance(max_impostors, bool) or not isinstance(max_impostors, int | np.integer) or max_impostors < 1:
        raise ValueError(f"--max-impostors: expected a positive number of pairs, got {max_impostors!r}")
    imp = np.flatnonzero(pairs.label == 0)
    if len(imp) <= max_impostors:
        return pairs
    drawn = np.random.default_rng(seed).choice(imp, int(max_impostors), replace=False)
    return pairs.take(np.sort(np.r_[np.flatnonzero(pairs.label == 1), drawn]))


def minutiae_parts(model: VerifierModel, records: Sequence[FingerprintRecord], pairs: PairSet, *, cache=None,
                   progress: bool = True, matcher: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(embedding cosine, minutiae-matcher score) of each pair: the two scores ``--score minutiae`` fuses
    (:mod:`fedprint.recognition.minutiae_fusion`; ``matcher`` a name of
    :data:`fedprint.data.minutiae_matchers.MATCHERS`; its scores kept in the folder ``cache`` if given)."""
    cos = pair_cosines(embed_images(model, [r.image for r in records], [r.dpi for r in records]), pairs)
    return cos, minutiae_scores(records, pairs, matcher=matcher, cache=cache, progress=progress)


def _minutiae_fused(model: VerifierModel, records: Sequence[FingerprintRecord], pairs: PairSet, *,
                    cache=None, progress: bool = True, parts: dict | None = None) -> np.ndarray:
    """The embedding + minutiae-matcher z-score sum of each pair with the model's calibration
    (:mod:`fedprint.recognition.minutiae_fusion`); ``parts`` (if given) receives the two scores it fused."""
    cal = minutiae_fusion_of(model)
    cos, minutiae = minutiae_parts(model, records, pairs, cache=cache, progress=progress, matcher=matcher_of(cal))
    if parts is not None:
        parts.update(cosine=cos, minutiae=minutiae)
    return fused_scores(cal, cos, minutiae)


def _beside(metrics: dict, parts: dict, lab: np.ndarray) -> None:
    """EER and FNMR @ FMR 1 % of each fused score alone, reported beside the fusion (never instead of it)."""
    n_imp = int((lab == 0).sum())
    for name, s in parts.items():
        metrics[f"eer_{name}"] = eer(s, lab, higher_is_genuine=True)
        metrics[f"fnmr_at_fmr_1%_{name}"] = fnmr_at_fmr(s, lab, 0.01, True) if n_imp >= 100 else None


def evaluate(model: VerifierModel, records: Sequence[FingerprintRecord], protocol: str = "fvc",
             threshold: float | None = None, *, min_quality: float = MIN_QUALITY, skip_bad: bool = False,
             report: list | None = None, score: str = "global", max_impostors: int | None = None, seed: int = 0,
             minutiae_cache=None) -> tuple[dict, np.ndarray, PairSet]:
    """Verification metrics of ``model`` on a dataset; returns (metrics, distances, pairs).

    The pairs come from an evaluation protocol (:func:`protocol_pairs`: the FVC protocol [1]_ by default), every
    image passes the print-quality gate first, and the metrics are computed on the pair "distances" of ``score``.

    Parameters
    ----------
    model : VerifierModel
        A loaded model (:func:`fedprint.models.model_file.load_model`).
    records : sequence of FingerprintRecord
        The dataset (e.g. :func:`fedprint.data.datasets.load_dataset`); ``identity`` tells genuine pairs from
        impostor pairs, ``dpi`` each image's resolution.
    protocol : {"fvc", "all"}
        ``"fvc"``: every genuine pair, and impostor pairs between the first impressions of every two fingers;
        ``"all"``: every pair of images.
    threshold : float, optional
        Decision threshold for the threshold-dependent metrics; default the model's (none: those are left out).
    min_quality : float
        Quality gate in [0, 1]; 0 turns it off.
    skip_bad : bool
        False: the first image below the gate raises. True: such images are left out (counted in
        ``skipped_low_quality``, each appended to ``report`` as ``(source, reason)``); ``pairs`` then index the
        records kept — run :func:`quality_gate` first when the caller needs them.
    report : list, optional
        Receives the images left out by ``skip_bad``.
    score : {"global", "fused", "minutiae"}
        ``"global"`` compares embeddings; ``"fused"`` adds the dense match of the feature maps
        (:func:`fused_distances`; the "distances" are then −fused score and the model's threshold is its fused
        one); ``"minutiae"`` adds a classical minutiae matcher by the z-score sum the model stores
        (:mod:`fedprint.recognition.minutiae_fusion`), and the metrics then also hold ``eer_cosine`` /
        ``eer_minutiae`` (and FNMR @ FMR 1 %) of each score alone.
    max_impostors : int, optional
        Score every genuine pair and at most this many impostor pairs drawn with ``seed``
        (:func:`capped_impostors`; default all).
    seed : int
        Seed of that draw.
    minutiae_cache : path, optional
        Folder that keeps the minutiae matcher's scores between runs (``score="minutiae"``).

    Returns
    -------
    metrics : dict
        ``eer``, ``roc_auc``, pair and image counts and the qualities always; ``fnmr_at_fmr_1%`` /
        ``fnmr_at_fmr_0.1%`` only when there are at least 100 / 1000 impostor pairs (else None: an FMR of 0.1 %
        cannot be resolved with fewer); ``operating_points``: the distance threshold at the EER point and at FMR
        1 % / 0.1 % (same condition) with the FMR / FNMR each reaches on these pairs; ``threshold``,
        ``accuracy``, ``fmr_at_threshold``, ``fnmr_at_threshold`` when a threshold is known.
    distances : ndarray, float64, shape (P,)
        The "distance" of every pair (lower = more alike).
    pairs : PairSet
        The pairs scored: indices into the records kept, and their labels (1 genuine, 0 impostor).

    Raises
    ------
    fedprint.recognition.quality.LowQualityError
        If an image is below ``min_quality`` and ``skip_bad`` is False.
    ValueError
        If the protocol gives no genuine or no impostor pair, or for the errors of :func:`verify`.

    See Also
    --------
    verify, fedprint.models.metrics.eer, fedprint.models.metrics.fnmr_at_fmr

    References
    ----------
    .. [1] D. Maio, D. Maltoni, R. Cappelli, J. L. Wayman, A. K. Jain, "FVC2002: Second Fingerprint Verification
       Competition", ICPR 2002.

    Examples
    --------
    Six toy fingers of four impressions each: the FVC protocol pairs every two impressions of a finger (6 x 6
    genuine pairs) and the first impressions of every two fingers (15 impostor pairs).

    >>> from fedprint.data.stripes import stripe_records
    >>> from fedprint.models.model_file import load_model, pretrained_path
    >>> model = load_model(pretrained_path())
    >>> records = stripe_records(n_fingers=6, n_impressions=4, size=64)
    >>> metrics, distances, pairs = evaluate(model, records, "fvc")
    >>> metrics["n_genuine"], metrics["n_impostor"], distances.shape
    (36, 15, (51,))
    >>> 0.0 <= metrics["eer"] <= 1.0, metrics["fnmr_at_fmr_1%"]  # 15 impostor pairs cannot resolve FMR 1 %
    (True, None)
    """
    t = decision_threshold(model, threshold, score)
    n_in = len(records)
    records, q = quality_gate(records, min_quality, skip_bad=skip_bad, report=report)
    pairs = capped_impostors(protocol_pairs(records, protocol), max_impostors, seed)
    parts: dict = {}
    if score == "fused":
        d = fused_distances(model, records, pairs)
    elif score == "minutiae":
        d = -_minutiae_fused(model, records, pairs, cache=minutiae_cache, parts=parts)
    else:
        e = embed_images(model, [r.image for r in records], [r.dpi for r in records])
        d = np.linalg.norm(e[pairs.a] - e[pairs.b], axis=1)
    lab = pairs.label
    n_imp = int((lab == 0).sum())
    metrics = {"protocol": protocol, "score": score, "images": len(records),
               "fingers": len({r.identity for r in records}),
               "n_genuine": int(lab.sum()), "n_impostor": n_imp, "eer": eer(d, lab), "roc_auc": roc_auc(d, lab),
               "fnmr_at_fmr_1%": fnmr_at_fmr(d, lab, 0.01) if n_imp >= 100 else None,
               "fnmr_at_fmr_0.1%": fnmr_at_fmr(d, lab, 0.001) if n_imp >= 1000 else None,
               "min_quality": float(min_quality), "skipped_low_quality": n_in - len(records),
               "quality_min": float(q.min()), "quality_median": float(np.median(q)),
               "max_impostors": max_impostors, "seed": seed}
    _beside(metrics, parts, lab)
    metrics["operating_points"] = {
        name: (threshold_at_eer(d, lab) if target is None else threshold_at_fmr(d, lab, target))
        for name, (target, need) in OPERATING_POINTS.items() if n_imp >= need}
    if t is not None:
        at = verification_metrics(d, lab, t)
        metrics.update({"threshold": t, "accuracy": at["accuracy"], "fmr_at_threshold": at["fmr"],
                        "fnmr_at_threshold": at["fnmr"]})
    return metrics, d, pairs
