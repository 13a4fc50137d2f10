"""Membership inference against the Siamese verifier, with the finger identity as the membership unit.

A finger is a **member** when its impressions were in the target model's training split, a **non-member** when
they were not (open-set held-out fingers, or a disjoint population). Every attack turns the model's embeddings of
one finger's impressions into one score per finger; higher score = "more likely a member".

Attacks
-------
* **Yeom** (loss / distance threshold, Yeom et al. 2018): the per-finger mean genuine-pair distance
  d̄ = mean_{i<j} ||f(x_i) − f(x_j)|| (Yan et al. 2025 Eq. 1's d), score −d̄; and the per-finger contrastive loss (Eq. 1)
  over its genuine pairs and its impostor pairs with the other candidate fingers, score −loss.
* **Compactness** (per-identity similarity statistic, user-level MIA for embedding models): r = mean distance of
  the finger's embeddings to their own centroid / distance from that centroid to the nearest other candidate
  finger's centroid; score −log r. Training pulls a member's impressions together *relative to* other fingers.
* **LiRA** (Carlini et al. 2022) with shadow models trained on disjoint synthetic populations plus a balanced
  half of the candidate fingers (:func:`balanced_inclusion`): per-finger statistic φ = −log(d̄ + 1e-6);
  *online*: log N(φ; μ_in, σ²) − log N(φ; μ_out, σ²) from the shadows that did / did not train on the finger;
  *offline*: log Φ((φ − μ_out) / σ) from the OUT shadows only. With few shadows per side the variance is the
  pooled ("global") one over all fingers (the paper's fixed-variance variant), see :func:`lira_scores`.

Metrics (:func:`mia_metrics`)
-----------------------------
* ``auc``: ROC AUC of the score (Mann-Whitney, ties = 1/2); ``auc_ci95``: its 95% stratified bootstrap
  interval over fingers.
* ``balanced_accuracy``: (TPR + TNR) / 2 of decisions Ŝ made with a threshold chosen on the *other* half of the
  fingers (2-fold stratified cross-fitting, seeded): the threshold never sees the fingers it classifies.
  ``balanced_accuracy_oracle`` is the optimistic best threshold on all fingers, for reference only.
* ``tpr_at_1pct_fpr`` / ``tpr_at_0.1pct_fpr``: highest TPR among thresholds with FPR ≤ 1% / 0.1%, reported only
  when there are at least 100 / 1000 non-members (else the string ``"not resolvable (n non-members)"``).
* Yan et al. 2025 Table 6's "mutual information" and "entropy", defined precisely: with M the membership bit and Ŝ the
  cross-fitted decision above, both distributed as in the evaluated set (prior = its member fraction),
  ``mi_decision_bits`` = I(M; Ŝ) = Σ p(m, s) log2 [p(m, s) / (p(m) p(s))] (bits, plug-in estimate),
  ``entropy_decision_bits`` = H(Ŝ), ``entropy_membership_bits`` = H(M) (the ceiling of I(M; Ŝ)), and
  ``mi_binned_bits`` = I(M; B) with B the score in ``bins`` equal-frequency bins (threshold-free; the plug-in
  estimate is biased upwards by about (bins − 1) / (2 n ln 2) bits for n fingers, reported as
  ``mi_binned_bias_bits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from scipy.stats import norm
from torch import nn

from fedprint.models.metrics import roc_auc, roc_curve
from fedprint.training.trainer import embed

#: Attack names, in report order.
ATTACKS = ("yeom_distance", "yeom_loss", "compactness", "lira_online", "lira_offline")
#: FPR levels of the TPR@FPR metrics and the non-member counts needed to resolve them.
FPR_LEVELS = {"tpr_at_1pct_fpr": 0.01, "tpr_at_0.1pct_fpr": 0.001}


# --------------------------------------------------------------------------------- per-identity statistics


def identity_groups(identities: Sequence[str], indices: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Record indices per identity (sorted identity order), keeping only identities with >= 2 images.

    Parameters
    ----------
    identities : sequence of str
        Identity of every record (``records[k].identity``).
    indices : sequence of int, optional
        The records to consider (e.g. a split part); default all.
    """
    idx = np.arange(len(identities)) if indices is None else np.asarray(indices, dtype=np.int64)
    groups: dict[str, list[int]] = {}
    for k in idx.tolist():
        groups.setdefault(identities[k], []).append(k)
    return {ident: np.asarray(v, dtype=np.int64) for ident, v in sorted(groups.items()) if len(v) >= 2}


def embedding_statistics(emb: np.ndarray, groups: Sequence[np.ndarray], *, margin: float = 1.0) -> dict:
    """Per-identity statistics of the embeddings ``emb`` (rows unit-norm) for the groups of row indices.

    Parameters
    ----------
    emb : ndarray, shape (N, d)
        Embeddings of all images referenced by ``groups``.
    groups : sequence of int arrays
        Row indices of each identity (each of size >= 2); identities are the candidate set.
    margin : float
        Contrastive margin m of Eq. 1 (default 1.0, FedPrint's training default).

    Returns
    -------
    dict of ndarray, each shape (n_identities,)
        ``mean_genuine_distance`` d̄, ``contrastive_loss`` (mean of Eq. 1's terms over the identity's genuine
        pairs and its impostor pairs with every image of the other candidates), ``compactness_ratio`` r.
    """
    if len(groups) < 2:
        raise ValueError(f"groups: need at least 2 identities, got {len(groups)}")
    emb = np.asarray(emb, dtype=np.float64)
    owner = np.full(len(emb), -1, dtype=np.int64)
    for g, rows in enumerate(groups):
        if len(rows) < 2:
            raise ValueError(f"groups[{g}]: each identity needs >= 2 images, got {len(rows)}")
        owner[rows] = g
    used = np.flatnonzero(owner >= 0)
    e, own = emb[used], owner[used]
    # All pairwise distances of the candidate images (a few thousand at most in an audit).
    dist = np.sqrt(np.maximum(2.0 - 2.0 * (e @ e.T), 0.0)) if np.allclose(np.linalg.norm(e, axis=1), 1.0) \
        else np.linalg.norm(e[:, None] - e[None], axis=2)
    same = own[:, None] == own[None]
    np.fill_diagonal(same, False)
    n_id = len(groups)
    onehot = np.zeros((len(e), n_id))
    onehot[np.arange(len(e)), own] = 1.0
    counts = onehot.sum(0)
    # Genuine pairs of identity g: sum over its same-identity off-diagonal block / (n_g (n_g - 1)).
    gen_d = (onehot.T @ (dist * same) @ onehot).diagonal() / (counts * (counts - 1))
    gen_l = (onehot.T @ (dist**2 * same) @ onehot).diagonal() / (counts * (counts - 1))
    diff = own[:, None] != own[None]
    hinge = np.clip(margin - dist, 0.0, None) ** 2 * diff
    imp_l = (onehot.T @ hinge).sum(1) / (counts * (len(e) - counts))
    n_gen = counts * (counts - 1) / 2
    n_imp = counts * (len(e) - counts)
    loss = (gen_l * n_gen + imp_l * n_imp) / (n_gen + n_imp)
    centroids = (onehot.T @ e) / counts[:, None]
    spread = np.linalg.norm(e - centroids[own], axis=1)
    mean_spread = (onehot.T @ spread) / counts
    cdist = np.linalg.norm(centroids[:, None] - centroids[None], axis=2)
    np.fill_diagonal(cdist, np.inf)
    ratio = mean_spread / np.maximum(cdist.min(1), 1e-12)
    return {"mean_genuine_distance": gen_d, "contrastive_loss": loss, "compactness_ratio": ratio}


def model_statistics(encoder: nn.Module, images: torch.Tensor, groups: Sequence[np.ndarray], *,
                     margin: float = 1.0) -> dict:
    """:func:`embedding_statistics` of ``encoder``'s embeddings of ``images`` (embeds only the grouped rows)."""
    used = np.unique(np.concatenate(list(groups)))
    pos = np.full(len(images), -1, dtype=np.int64)
    pos[used] = np.arange(len(used))
    emb = embed(encoder, images[torch.from_numpy(used)]).double().numpy()
    return embedding_statistics(emb, [pos[g] for g in groups], margin=margin)


def lira_statistic(stats: dict) -> np.ndarray:
    """LiRA's per-identity statistic φ = −log(d̄ + 1e-6) (d̄ = mean genuine distance; the log makes the
    shadow distribution of a bounded, positive distance closer to Gaussian)."""
    return -np.log(np.asarray(stats["mean_genuine_distance"], dtype=np.float64) + 1e-6)


def attack_scores(stats: dict) -> dict[str, np.ndarray]:
    """Shadow-free attack scores (higher = member) from :func:`embedding_statistics` output."""
    return {
        "yeom_distance": -np.asarray(stats["mean_genuine_distance"], dtype=np.float64),
        "yeom_loss": -np.asarray(stats["contrastive_loss"], dtype=np.float64),
        "compactness": -np.log(np.maximum(np.asarray(stats["compactness_ratio"], dtype=np.float64), 1e-12)),
    }


# ------------------------------------------------------------------------------------------------- LiRA


def balanced_inclusion(n_candidates: int, n_shadows: int, rng: np.random.Generator) -> np.ndarray:
    """Which shadow model trains on which candidate: bool (n_shadows, n_candidates), each candidate IN in
    exactly ``n_shadows // 2`` shadows (chosen at random), so every candidate has IN and OUT observations.

    ``n_shadows`` must be even and >= 2.
    """
    if n_shadows < 2 or n_shadows % 2:
        raise ValueError(f"n_shadows: expected an even integer >= 2, got {n_shadows}")
    if n_candidates < 1:
        raise ValueError(f"n_candidates: expected >= 1, got {n_candidates}")
    keys = rng.random((n_shadows, n_candidates))
    return np.argsort(np.argsort(keys, axis=0), axis=0) < n_shadows // 2


def lira_scores(target: np.ndarray, shadow: np.ndarray, shadow_in: np.ndarray, *,
                min_per_side: int = 8) -> dict[str, np.ndarray]:
    """LiRA online and offline scores (higher = member) per candidate identity.

    Parameters
    ----------
    target : ndarray, shape (n,)
        Statistic φ of each candidate on the target model.
    shadow : ndarray, shape (K, n)
        φ of each candidate on each shadow model.
    shadow_in : ndarray of bool, shape (K, n)
        Whether shadow k trained on candidate i (every candidate needs >= 1 IN and >= 1 OUT shadow).
    min_per_side : int
        Per-candidate variances are used only when every candidate has at least this many IN and OUT
        observations; otherwise one pooled variance of the residuals around the per-candidate means
        (LiRA's fixed-variance variant, the right choice with few shadows). Default 8. With exactly one IN
        and one OUT shadow per candidate (K = 2) those residuals vanish, and μ and σ come from the additive
        model φ_ki = a_i + b·in_ki + N(0, σ²) (shared membership effect b).

    Returns
    -------
    dict
        ``lira_online`` = log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²);
        ``lira_offline`` = log Φ((φ − μ_out) / σ_out) (one-sided: members have larger φ).
    """
    target = np.asarray(target, dtype=np.float64)
    shadow = np.asarray(shadow, dtype=np.float64)
    shadow_in = np.asarray(shadow_in, dtype=bool)
    if shadow.ndim != 2 or shadow.shape[1] != target.shape[0] or shadow_in.shape != shadow.shape:
        raise ValueError(f"shadow / shadow_in: expected shape (K, {target.shape[0]}), got {shadow.shape} and "
                         f"{shadow_in.shape}")
    n_in, n_out = shadow_in.sum(0), (~shadow_in).sum(0)
    if np.any(n_in == 0) or np.any(n_out == 0):
        raise ValueError("shadow_in: every candidate needs at least one IN and one OUT shadow model")
    mu_in = np.where(shadow_in, shadow, 0).sum(0) / n_in
    mu_out = np.where(~shadow_in, shadow, 0).sum(0) / n_out
    res_in = np.where(shadow_in, shadow - mu_in, 0)
    res_out = np.where(~shadow_in, shadow - mu_out, 0)
    n = target.shape[0]
    if n_in.min() >= min_per_side and n_out.min() >= min_per_side:
        sd_in = np.sqrt((res_in**2).sum(0) / (n_in - 1))
        sd_out = np.sqrt((res_out**2).sum(0) / (n_out - 1))
    elif shadow.size - 2 * n > 0:
        pooled = np.sqrt(((res_in**2).sum() + (res_out**2).sum()) / (shadow.size - 2 * n))
        sd_in = sd_out = np.full(target.shape, pooled)
    else:
        # One IN and one OUT shadow per candidate: the per-side residuals are all zero. Fit the additive model
        # φ_ki = a_i + b·in_ki + noise (one membership effect b shared by all candidates); its residuals have
        # K·n − n − 1 degrees of freedom and give the pooled σ.
        if n < 2:
            raise ValueError("lira_scores: with one IN and one OUT shadow per candidate, need >= 2 candidates")
        b = float(np.mean(mu_in - mu_out))
        a = (shadow - b * shadow_in).mean(0)
        mu_in, mu_out = a + b, a
        resid = shadow - a - b * shadow_in
        pooled = np.sqrt((resid**2).sum() / (shadow.size - n - 1))
        sd_in = sd_out = np.full(target.shape, pooled)
    floor = 1e-6 + 1e-3 * float(np.std(shadow))  # guards against a zero variance
    sd_in, sd_out = np.maximum(sd_in, floor), np.maximum(sd_out, floor)
    online = norm.logpdf(target, mu_in, sd_in) - norm.logpdf(target, mu_out, sd_out)
    offline = norm.logcdf((target - mu_out) / sd_out)
    return {"lira_online": online, "lira_offline": offline}


# ---------------------------------------------------------------------------------------------- metrics


def _entropy_bits(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def mutual_information_bits(x: np.ndarray, y: np.ndarray) -> float:
    """Plug-in mutual information I(X; Y) in bits of two discrete integer-coded arrays of equal length."""
    x, y = np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"x and y: expected equal non-empty lengths, got {x.size} and {y.size}")
    _, xi = np.unique(x, return_inverse=True)
    _, yi = np.unique(y, return_inverse=True)
    joint = np.zeros((xi.max() + 1, yi.max() + 1))
    np.add.at(joint, (xi, yi), 1.0)
    joint /= joint.sum()
    return max(_entropy_bits(joint.sum(1)) + _entropy_bits(joint.sum(0)) - _entropy_bits(joint.ravel()), 0.0)


def _best_threshold(scores: np.ndarray, member: np.ndarray) -> float:
    """Threshold t (decide member iff score >= t) maximising balanced accuracy on these scores; midpoint rule."""
    roc = roc_curve(scores, member.astype(np.int8), higher_is_genuine=True)
    j = int(np.argmax((roc.tpr + 1.0 - roc.fmr) / 2.0))
    g = np.sort(np.unique(scores))[::-1]  # distinct scores, most member-like first; point j accepts g[:j]
    if j == 0:
        return float(np.nextafter(g[0], np.inf))
    if j == len(g):
        return float(g[-1])
    return float(g[j] + (g[j - 1] - g[j]) / 2.0)


def _balanced_accuracy(decision: np.ndarray, member: np.ndarray) -> float:
    return float((decision[member].mean() + (~decision[~member]).mean()) / 2.0)


def cross_fitted_decisions(scores, is_member, *, seed: int = 0) -> np.ndarray:
    """Member decisions Ŝ from 2-fold stratified cross-fitting: each half is classified with the balanced-
    accuracy-optimal threshold of the other half (fold assignment seeded by ``seed``)."""
    s = np.asarray(scores, dtype=np.float64)
    m = np.asarray(is_member).astype(bool)
    rng = np.random.default_rng(seed)
    fold = np.zeros(len(s), dtype=np.int64)
    for cls in (True, False):
        idx = np.flatnonzero(m == cls)
        fold[rng.permutation(idx)[: len(idx) // 2]] = 1
    decision = np.zeros(len(s), dtype=bool)
    for f in (0, 1):
        fit, apply = fold != f, fold == f
        t = _best_threshold(s[fit], m[fit])
        decision[apply] = s[apply] >= t
    return decision


def auc_bootstrap_ci(scores, is_member, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
                     ) -> tuple[float, float]:
    """Percentile bootstrap interval of the AUC, resampling members and non-members separately (stratified,
    with replacement, ``n_boot`` resamples seeded by ``seed``); AUC by the rank-sum (ties averaged)."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=np.float64)
    m = np.asarray(is_member).astype(bool)
    mem, non = s[m], s[~m]
    rng = np.random.default_rng(seed)
    bm = mem[rng.integers(0, len(mem), size=(n_boot, len(mem)))]
    bn = non[rng.integers(0, len(non), size=(n_boot, len(non)))]
    ranks = rankdata(np.concatenate([bm, bn], axis=1), axis=1)
    n1, n0 = len(mem), len(non)
    auc = (ranks[:, :n1].sum(1) - n1 * (n1 + 1) / 2.0) / (n1 * n0)
    lo, hi = np.quantile(auc, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def mia_metrics(scores, is_member, *, seed: int = 0, bins: int = 10) -> dict:
    """Membership-inference metrics of one attack (definitions in the module docstring).

    Parameters
    ----------
    scores : array_like, shape (n,)
        Attack score per identity, higher = more likely a member; finite.
    is_member : array_like of bool or {0, 1}, shape (n,)
        Ground-truth membership; at least 2 members and 2 non-members.
    seed : int
        Seeds the cross-fitting folds of the balanced-accuracy threshold.
    bins : int
        Equal-frequency score bins of ``mi_binned_bits`` (>= 2).

    Returns
    -------
    dict
        ``auc, auc_ci95`` (stratified percentile bootstrap, :func:`auc_bootstrap_ci`), ``balanced_accuracy,
        balanced_accuracy_oracle, tpr_at_1pct_fpr, tpr_at_0.1pct_fpr`` (float or
        "not resolvable (n non-members)"), ``mi_decision_bits, entropy_decision_bits, entropy_membership_bits,
        mi_binned_bits, mi_binned_bias_bits, n_members, n_nonmembers``.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    m = np.asarray(is_member).reshape(-1)
    if s.shape != m.shape:
        raise ValueError(f"scores and is_member: expected equal lengths, got {s.size} and {m.size}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores: must be finite (found NaN or inf)")
    if not np.all((m == 0) | (m == 1)):
        raise ValueError("is_member: expected booleans or 0/1")
    m = m.astype(bool)
    n_mem, n_non = int(m.sum()), int((~m).sum())
    if n_mem < 2 or n_non < 2:
        raise ValueError(f"is_member: need >= 2 members and >= 2 non-members, got {n_mem} and {n_non}")
    if bins < 2:
        raise ValueError(f"bins: expected an integer >= 2, got {bins}")
    labels = m.astype(np.int8)
    roc = roc_curve(s, labels, higher_is_genuine=True)
    out: dict = {"auc": roc_auc(s, labels, higher_is_genuine=True)}
    out["auc_ci95"] = auc_bootstrap_ci(s, m, seed=seed)
    decision = cross_fitted_decisions(s, m, seed=seed)
    out["balanced_accuracy"] = _balanced_accuracy(decision, m)
    out["balanced_accuracy_oracle"] = float(np.max((roc.tpr + 1.0 - roc.fmr) / 2.0))
    for key, level in FPR_LEVELS.items():
        if n_non >= round(1.0 / level):
            out[key] = float(roc.tpr[roc.fmr <= level + 1e-12].max())
        else:
            out[key] = f"not resolvable ({n_non} non-members)"
    out["mi_decision_bits"] = mutual_information_bits(m, decision)
    out["entropy_decision_bits"] = _entropy_bits(np.bincount(decision.astype(np.int64), minlength=2) / len(m))
    out["entropy_membership_bits"] = _entropy_bits(np.array([n_mem, n_non]) / len(m))
    # equal-frequency bin edges; tied scores always share a bin (tie order must not leak membership)
    binned = np.searchsorted(np.quantile(s, np.linspace(0.0, 1.0, bins + 1)[1:-1]), s, side="right")
    out["mi_binned_bits"] = mutual_information_bits(m, binned)
    out["mi_binned_bias_bits"] = float((len(np.unique(binned)) - 1) / (2.0 * len(s) * np.log(2.0)))
    out["n_members"], out["n_nonmembers"] = n_mem, n_non
    return out


def plot_mia_roc(path_png: str | Path, curves: dict, title: str = "Membership inference") -> Path:
    """Log-log ROC (TPR vs FPR) of several attacks; ``curves`` maps name -> (scores, is_member).

    Zero rates are drawn at half the curve's resolution (0.5 / n non-members, 0.5 / n members); the chance
    diagonal is dashed. The legend shows each attack's AUC.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not curves:
        raise ValueError("plot_mia_roc: curves must contain at least one (scores, is_member) entry")
    fig = Figure(figsize=(5.5, 5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    lo = 1.0
    for name, (scores, member) in curves.items():
        lab = np.asarray(member).astype(np.int8)
        roc = roc_curve(scores, lab, higher_is_genuine=True)
        fl_f, fl_t = 0.5 / int((lab == 0).sum()), 0.5 / int(lab.sum())
        lo = min(lo, fl_f, fl_t)
        auc = roc_auc(scores, lab, higher_is_genuine=True)
        ax.plot(np.maximum(roc.fmr, fl_f), np.maximum(roc.tpr, fl_t), drawstyle="steps-post",
                label=f"{name} (AUC {auc:.3f})")
    ax.plot([lo, 1], [lo, 1], color="grey", lw=0.7, ls="--", label="chance")
    ax.set(xscale="log", yscale="log", xlim=(lo, 1), ylim=(lo, 1.05), xlabel="FPR (non-members called members)",
           ylabel="TPR (members found)", title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    path = Path(path_png)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
