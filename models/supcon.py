"""Supervised contrastive loss over a P x K batch (Khosla et al. 2020), an alternative to Eq. 1 for ``[train] loss``.

For unit-norm embeddings z_i with finger labels y_i, every image i is an anchor; its positives P(i) are the other
impressions of its finger in the batch, A(i) every other image of the batch (Khosla et al. 2020, Eq. 2,
"L_out")::

    L = mean over anchors with |P(i)| > 0 of  -1/|P(i)| * sum_{p in P(i)} log( exp(z_i.z_p / tau)
                                                                          / sum_{a in A(i)} exp(z_i.z_a / tau) )

Unlike Eq. 1, which stops pushing an impostor pair once it is ``margin`` apart and weighs every pair alike, the
softmax over A(i) weighs each impostor by how close it is to the anchor, so the hardest impostors of the batch
dominate the gradient; the temperature tau sets how sharply. Verification still compares Euclidean distances of
the unit embeddings, a monotone function of z_i.z_j, so nothing downstream changes.

An additive cosine margin m >= 0 (``margin``; default 0, Khosla's loss) replaces z_i.z_p by z_i.z_p - m for every
positive p, in the numerator and in its own term of the denominator, as CosFace (Wang et al. 2018) does for a class
weight: a genuine pair only stops contributing once its similarity beats every impostor's by about m, so
training keeps pulling impressions together after the batch is already ranked right.

References
----------
Khosla, P. et al. (2020). Supervised contrastive learning. NeurIPS 33, 18661-18673.
Wang, H. et al. (2018). CosFace: large margin cosine loss for deep face recognition. CVPR, 5265-5274.
"""

from __future__ import annotations

import torch


def batch_supcon_loss(emb: torch.Tensor, labels: torch.Tensor, temperature: float = 0.1,
                      margin: float = 0.0) -> torch.Tensor:
    """Supervised contrastive loss (Khosla et al. 2020, Eq. 2) over every anchor of a batch.

    Parameters
    ----------
    emb : Tensor, shape (N, d)
        Unit-norm embeddings (N >= 2).
    labels : Tensor of int, shape (N,)
        Finger identity of each embedding.
    temperature : float
        tau > 0 (default 0.1): cosine similarities are divided by it before the softmax.
    margin : float
        Additive cosine margin m in [0, 1) subtracted from every positive pair's similarity (default 0: none).

    Returns
    -------
    Tensor
        Scalar loss; anchors without a positive in the batch are left out, and a batch with no genuine pair at
        all gives 0 (with a gradient of 0).
    """
    if temperature <= 0:
        raise ValueError(f"batch_supcon_loss: temperature must be > 0, got {temperature}")
    if not 0 <= margin < 1:
        raise ValueError(f"batch_supcon_loss: margin must be in [0, 1), got {margin}")
    if emb.ndim != 2 or emb.shape[0] < 2:
        raise ValueError(f"batch_supcon_loss: emb must have shape (N >= 2, d), got {tuple(emb.shape)}")
    labels = torch.as_tensor(labels, device=emb.device)
    if labels.shape != (emb.shape[0],):
        raise ValueError(f"batch_supcon_loss: labels must have shape ({emb.shape[0]},), got {tuple(labels.shape)}")
    n = emb.shape[0]
    self_mask = torch.eye(n, dtype=torch.bool, device=emb.device)
    positive = (labels[:, None] == labels[None, :]) & ~self_mask
    sim = emb @ emb.T - margin * positive.to(emb.dtype)
    logits = (sim / temperature).masked_fill(self_mask, float("-inf"))  # A(i): everything but i
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    n_pos = positive.sum(dim=1)
    has = n_pos > 0
    if not bool(has.any()):
        return emb.sum() * 0.0
    per_anchor = -(log_prob.masked_fill(~positive, 0.0)).sum(dim=1)[has] / n_pos[has]
    return per_anchor.mean()
