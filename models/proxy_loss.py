"""A large-margin cosine loss against learned finger proxies (CosFace), an aid to the embedding's own loss.

Pair and batch losses (Eq. 1, SupCon) compare the images of one batch: an anchor meets 15 other fingers a step.
A proxy loss keeps one learned unit vector w_c per training finger and asks every embedding to be closer to its own
finger's proxy than to all the others, so each step ranks an image against every training finger at once (Movshovitz-
Attias et al. 2017). CosFace (Wang et al. 2018, Eq. 4) adds a cosine margin m to the true finger's logit::

    L = mean_i  -log( exp(s (w_{y_i}.z_i - m)) / (exp(s (w_{y_i}.z_i - m)) + sum_{c != y_i} exp(s w_c.z_i)) )

with z_i and w_c unit-norm and s a scale (here 1 / tau, the temperature SupCon uses). The proxies exist only while
training (``[train] proxy_weight``); verification still compares the embeddings themselves.

References
----------
Movshovitz-Attias, Y. et al. (2017). No fuss distance metric learning using proxies. ICCV, 360-368.
Wang, H. et al. (2018). CosFace: large margin cosine loss for deep face recognition. CVPR, 5265-5274.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def class_mean_proxies(emb: torch.Tensor, labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Unit-norm mean embedding of each class: the proxies' start, so the loss does not first scramble a
    pre-trained embedding to chase random vectors.

    Parameters
    ----------
    emb : Tensor, shape (N, d)
        Embeddings of the training images.
    labels : Tensor of int, shape (N,)
        Class of each, in ``0 .. n_classes - 1``.
    n_classes : int
        Number of proxies; a class without an image keeps a zero row (normalised to zero; it is never a target).

    Returns
    -------
    Tensor, shape (n_classes, d)
    """
    labels = torch.as_tensor(labels, device=emb.device)
    if emb.ndim != 2 or labels.shape != (emb.shape[0],):
        raise ValueError(f"class_mean_proxies: emb must be (N, d) and labels (N,), got {tuple(emb.shape)} and "
                         f"{tuple(labels.shape)}")
    if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= n_classes):
        raise ValueError(f"class_mean_proxies: labels must lie in [0, {n_classes}), got "
                         f"[{int(labels.min())}, {int(labels.max())}]")
    sums = torch.zeros(n_classes, emb.shape[1], dtype=emb.dtype, device=emb.device).index_add_(0, labels, emb)
    return F.normalize(sums, dim=1)


def proxy_cosface_loss(emb: torch.Tensor, labels: torch.Tensor, proxies: torch.Tensor, *, scale: float,
                       margin: float = 0.0) -> torch.Tensor:
    """CosFace's large-margin cosine loss (Wang et al. 2018, Eq. 4) of a batch against learned proxies.

    Parameters
    ----------
    emb : Tensor, shape (N, d)
        Unit-norm embeddings.
    labels : Tensor of int, shape (N,)
        Finger (proxy row) of each embedding.
    proxies : Tensor, shape (C, d)
        One vector per training finger; normalised here, so only their directions count.
    scale : float
        s > 0: cosines are multiplied by it before the softmax.
    margin : float
        m in [0, 1) subtracted from the cosine to the true proxy (default 0: the normalised softmax, NormFace).

    Returns
    -------
    Tensor
        Scalar mean cross-entropy over the batch.
    """
    if scale <= 0:
        raise ValueError(f"proxy_cosface_loss: scale must be > 0, got {scale}")
    if not 0 <= margin < 1:
        raise ValueError(f"proxy_cosface_loss: margin must be in [0, 1), got {margin}")
    labels = torch.as_tensor(labels, device=emb.device)
    if emb.ndim != 2 or proxies.ndim != 2 or emb.shape[1] != proxies.shape[1] or labels.shape != (emb.shape[0],):
        raise ValueError(f"proxy_cosface_loss: emb (N, d), labels (N,) and proxies (C, d) expected, got "
                         f"{tuple(emb.shape)}, {tuple(labels.shape)} and {tuple(proxies.shape)}")
    cos = emb @ F.normalize(proxies, dim=1).T
    cos = cos - margin * F.one_hot(labels, proxies.shape[0]).to(cos.dtype)
    return F.cross_entropy(scale * cos, labels)
