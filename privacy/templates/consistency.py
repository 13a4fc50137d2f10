"""The asymmetric setting of Fang's thesis Ch. 6: several enrolment impressions -> elements with weights.

The impressions after the first are registered to the first (:mod:`~fedprint.privacy.templates.alignment`);
minutiae of all impressions are clustered greedily (a minutia joins the nearest cluster within ``tol_px`` pixels
and ``tol_angle`` radians, at most one minutia per impression per cluster). A cluster's *weight* is the number of
impressions it was seen in — its consistency, the auxiliary information ``v`` of Sec. 6.3 — and its position the
mean of its members.
"""

from __future__ import annotations

import numpy as np

from fedprint.privacy.templates.alignment import Pose, refine, register


def match_points(a: np.ndarray, b: np.ndarray, *, tol_px: float, tol_angle: float) -> np.ndarray:
    """Greedy one-to-one matching of points a (n, >=3) to b (m, >=3): index into b for each row of a, or -1.

    Pairs are taken in increasing spatial distance; both within ``tol_px`` and directions within ``tol_angle``.
    """
    out = np.full(len(a), -1, dtype=np.int64)
    if len(a) == 0 or len(b) == 0:
        return out
    d = np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])
    da = np.abs(np.angle(np.exp(1j * (a[:, None, 2] - b[None, :, 2]))))
    d = np.where((d <= tol_px) & (da <= tol_angle), d, np.inf)
    used = np.zeros(len(b), bool)
    for flat in np.argsort(d, axis=None):
        i, j = divmod(int(flat), len(b))
        if not np.isfinite(d[i, j]):
            break
        if out[i] < 0 and not used[j]:
            out[i] = j
            used[j] = True
    return out


def align_to(probe_minutiae: np.ndarray, probe_field: np.ndarray, ref_field: np.ndarray,
             ref_points: np.ndarray) -> tuple[np.ndarray, Pose]:
    """Probe minutiae mapped into the reference frame (registration on helper fields, Hough refinement)."""
    pose = refine(register(probe_field, ref_field), probe_minutiae, ref_points)
    return pose.apply(probe_minutiae), pose


def consistent_minutiae(minutiae: list[np.ndarray], fields: list[np.ndarray], *, tol_px: float = 12.0,
                        tol_angle: float = np.deg2rad(30)) -> tuple[np.ndarray, np.ndarray]:
    """Clusters of minutiae over enrolment impressions, in the first impression's frame.

    Parameters
    ----------
    minutiae : list of (n_i, >=3) arrays (x, y, direction, ...), one per impression
    fields : list of helper fields (:func:`.alignment.helper_field`), same order

    Returns
    -------
    points : (c, 3) float array
        Cluster means (x, y, circular-mean direction), sorted by decreasing weight.
    weights : (c,) int array
        Number of impressions each cluster was seen in (1..len(minutiae)).
    """
    if not minutiae:
        raise ValueError("minutiae: expected at least one enrolment impression")
    members: list[list[np.ndarray]] = [[m[:3]] for m in np.asarray(minutiae[0], float)[:, :3]]
    for mins, fld in zip(minutiae[1:], fields[1:], strict=True):
        if len(mins) == 0:
            continue
        centres = _centres(members)
        aligned, _ = align_to(np.asarray(mins, float)[:, :3], fld, fields[0], centres)
        idx = match_points(aligned, centres, tol_px=tol_px, tol_angle=tol_angle)
        for row, j in zip(aligned, idx, strict=True):
            if j >= 0:
                members[j].append(row[:3])
            else:
                members.append([row[:3]])
    points = _centres(members)
    weights = np.array([len(m) for m in members], dtype=np.int64)
    order = np.argsort(-weights, kind="stable")
    return points[order], weights[order]


def _centres(members: list[list[np.ndarray]]) -> np.ndarray:
    if not members:
        return np.zeros((0, 3))
    out = np.empty((len(members), 3))
    for i, ms in enumerate(members):
        a = np.asarray(ms)
        out[i, :2] = a[:, :2].mean(0)
        out[i, 2] = np.mod(np.angle(np.exp(1j * a[:, 2]).mean()), 2 * np.pi)
    return out
