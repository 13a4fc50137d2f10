"""A training loss on the dense match: teach the last feature map to match prints cell by cell.

:mod:`fedprint.models.dense_match` scores two prints [1]_ by the best mean cosine of their cell descriptors over shifts,
using
features trained for the pooled embedding only. This loss trains them for that use as well: in each P x K batch,
every genuine pair and as many random impostor pairs get the dense score ``s`` of the module above (best shift,
the same skin mask and overlap rule), and with ``d = 1 − s``

    L_dense = ½ [ mean_genuine d²  +  mean_impostor max(0, m − d)² ],

Eq. 1 of Yan et al. 2025 [2]_ applied to the dense distance, the genuine and impostor terms averaged separately like
:func:`fedprint.models.loss.batch_contrastive_loss`. The gradient reaches the descriptors through the best shift only,
as
a max-pooling would. ``[train] dense_weight`` adds it to the embedding's loss (default 0: off).

References
----------
.. [1] D. Maltoni et al., *Handbook of Fingerprint Recognition*, 2nd ed., 2009, Sec. 4.7 (correlation matching).
.. [2] Y. Yan et al., 2025 (seed 003), Eq. 1 (contrastive loss).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedprint.models.dense_match import MIN_OVERLAP, RADIUS, describe_cells, shift_matrices, shifted_scores

#: Margin m on the dense distance 1 − s. Descriptors follow a ReLU, so cosines lie in [0, 1] and d in [0, 1]:
#: impostor pairs are pushed until their best-shift mean cosine is at most 1 − m.
DENSE_MARGIN = 0.5


def batch_pairs(labels: torch.Tensor, generator: torch.Generator, impostors_per_genuine: float = 1.0
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, b, y): every genuine pair of the batch (i < j, same label) and ``impostors_per_genuine`` times as many
    impostor pairs drawn at random (without repeats) from the batch's different-label pairs."""
    n = len(labels)
    i, j = torch.triu_indices(n, n, offset=1)
    same = labels[i] == labels[j]
    gi, gj = i[same], j[same]
    ii, ij = i[~same], j[~same]
    k = min(len(ii), int(round(impostors_per_genuine * len(gi))))
    pick = torch.randperm(len(ii), generator=generator)[:k]
    a, b = torch.cat([gi, ii[pick]]), torch.cat([gj, ij[pick]])
    y = torch.cat([torch.ones(len(gi)), torch.zeros(k)])
    return a, b, y


def dense_contrastive_loss(fmap: torch.Tensor, images: torch.Tensor, labels: torch.Tensor,
                           generator: torch.Generator, *, radius: int = RADIUS, min_overlap: int = MIN_OVERLAP,
                           margin: float = DENSE_MARGIN, impostors_per_genuine: float = 1.0) -> torch.Tensor:
    """L_dense of the module docstring for one P x K batch.

    Parameters
    ----------
    fmap : Tensor, shape (N, C, H, W)
        The encoder's last feature map of ``images`` (with gradient; :meth:`CompactEncoder.embed_with_map`).
    images : Tensor, shape (N, 1, S, S)
        The (augmented) inputs, for the skin mask of each cell.
    labels : Tensor of int, shape (N,)
        Finger label of each image.
    generator : torch.Generator
        Draws the impostor pairs.
    radius, min_overlap : int
        Shift search of :func:`fedprint.models.dense_match.dense_similarity` (defaults as at matching time).
    margin : float
        m in (0, 1] (default :data:`DENSE_MARGIN`).
    impostors_per_genuine : float
        Impostor pairs drawn per genuine pair (default 1).

    Returns
    -------
    Tensor
        Scalar loss; 0 (with gradient) when the batch has no genuine pair.
    """
    if not 0 < margin <= 1:
        raise ValueError(f"dense_contrastive_loss: margin must be in (0, 1], got {margin}")
    a, b, y = batch_pairs(labels.cpu(), generator, impostors_per_genuine)
    if len(a) == 0 or y.sum() == 0:
        return fmap.sum() * 0.0
    desc, skin = describe_cells(fmap.float(), images)
    h, w = fmap.shape[-2:]
    a, b, y = a.to(fmap.device), b.to(fmap.device), y.to(fmap.device)
    s = shifted_scores(desc[a], skin[a], desc[b], skin[b], shift_matrices(h, w, radius), min_overlap)
    d = 1.0 - s.max(dim=1).values
    genuine = d[y == 1].pow(2).mean()
    impostor = F.relu(margin - d[y == 0]).pow(2).mean() if bool((y == 0).any()) else d.sum() * 0.0
    return 0.5 * (genuine + impostor)
