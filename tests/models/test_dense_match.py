"""fedprint.models.dense_match: shift-tolerant dense matching of cell descriptors, and the z-score fusion."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedprint.models.dense_match import (
    cell_descriptors,
    dense_similarity,
    fused_scores,
    fusion_calibration,
    shift_matrices,
)
from fedprint.models.metrics import zscore_fusion
from fedprint.models.siamese import CompactEncoder, resnet18_encoder


def _desc(maps: torch.Tensor) -> torch.Tensor:
    return F.normalize(maps, dim=1).flatten(2)


def test_shift_matrices_pair_cells_at_each_offset():
    m = shift_matrices(3, 4, 1)
    assert m.shape == (144, 9)
    assert m[:, 4].sum() == 12  # zero shift: every cell with itself
    assert m[:, 0].sum() == 2 * 3  # shift (-1, -1): (H-1)(W-1) cell pairs
    with pytest.raises(ValueError, match="radius"):
        shift_matrices(3, 3, -1)


def test_a_shifted_copy_matches_only_when_the_shift_is_searched():
    rng = torch.Generator().manual_seed(0)
    base = torch.randn(1, 16, 10, 10, generator=rng)
    shifted = torch.roll(base, shifts=(3, 2), dims=(2, 3))  # the same print moved by 3 and 2 cells
    other = torch.randn(1, 16, 10, 10, generator=rng)
    desc = _desc(torch.cat([base, shifted, other]))
    skin = torch.ones(3, 100)
    near = dense_similarity(desc, skin, [0, 0], [1, 2], grid=(10, 10), radius=1)
    far = dense_similarity(desc, skin, [0, 0], [1, 2], grid=(10, 10), radius=3)
    assert far[0] > 0.99  # the overlap at the true shift is identical
    assert near[0] < 0.5 and abs(far[1]) < 0.3  # out of reach, and an unrelated print
    assert np.all(far >= near - 1e-6)  # a larger search can only raise the best score


def test_skin_mask_and_minimum_overlap():
    desc = _desc(torch.randn(2, 8, 4, 4))
    skin = torch.zeros(2, 16)
    skin[:, :3] = 1  # three common skin cells only
    assert dense_similarity(desc, skin, [0], [1], grid=(4, 4), radius=0, min_overlap=4)[0] == -1.0
    assert dense_similarity(desc, skin, [0], [1], grid=(4, 4), radius=0, min_overlap=3)[0] > -1.0
    with pytest.raises(ValueError, match="grid"):
        dense_similarity(desc, skin, [0], [1], grid=(3, 3))


def test_cell_descriptors_of_the_compact_encoder():
    torch.manual_seed(0)
    enc = CompactEncoder(width=8)
    x = torch.zeros(3, 1, 64, 64)
    x[:, :, 16:48, 16:48] = torch.randn(3, 1, 32, 32)  # skin in the middle, flat background around it
    desc, skin = cell_descriptors(enc, x)
    assert desc.shape == (3, 64, 16) and skin.shape == (3, 16)
    assert torch.allclose(desc.norm(dim=1), torch.ones(3, 16), atol=1e-5)
    assert skin.view(3, 4, 4)[:, 1:3, 1:3].eq(1).all() and skin.view(3, 4, 4)[:, 0].eq(0).all()
    assert enc.training  # the encoder's mode is left as it was
    with pytest.raises(ValueError, match="compact encoder"):
        cell_descriptors(resnet18_encoder(), x)


def test_fusion_calibration_threshold_and_stored_weights():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(50), np.zeros(200)].astype(int)
    g = np.where(y == 1, -0.4, -1.0) + 0.2 * rng.standard_normal(len(y))  # −distance
    d = np.where(y == 1, 0.5, 0.1) + 0.1 * rng.standard_normal(len(y))
    cal = fusion_calibration(g, d, y, radius=3, min_overlap=4)
    assert cal["radius"] == 3 and cal["min_overlap"] == 4 and cal["pairs"] == 250
    fused = fused_scores(cal, g, d)
    np.testing.assert_allclose(fused, zscore_fusion([g, d], [g, d]))
    accuracy = np.mean((fused >= cal["threshold"]) == (y == 1))
    assert accuracy > 0.95  # two informative scores, a threshold chosen on them
    with pytest.raises(ValueError, match="both classes"):
        fusion_calibration(g, d, np.ones(len(y), int))
    with pytest.raises(ValueError, match="not a score-fusion calibration"):
        fused_scores({"radius": 3}, g, d)


def test_model_export_stores_a_fusion_calibration_for_large_enough_inputs(toy_records):
    from fedprint.lab.model_export import pooled_fusion
    from fedprint.models.preprocess import InputSpec
    from fedprint.models.siamese import new_encoder
    from fedprint.training.local_data import build_client_data

    net = new_encoder("compact", 8, 0, width=4)
    big = build_client_data(toy_records, name="c", spec=InputSpec(size=64), seed=0, progress=False)
    cal = pooled_fusion(net, [big])
    assert cal is not None and cal["global_std"] > 0 and cal["dense_std"] > 0 and cal["pairs"] == len(big.val_pairs)
    small = build_client_data(toy_records, name="c", spec=InputSpec(size=32), seed=0, progress=False)
    assert pooled_fusion(net, [small]) is None  # a 2 x 2 map cannot overlap in MIN_OVERLAP cells


def test_rotation_search_finds_a_rotated_copy():
    from fedprint.models.dense_match import pair_dense_scores, rotate

    torch.manual_seed(0)
    enc = CompactEncoder(width=4)
    x = torch.randn(1, 1, 64, 64)
    turned = rotate(x, 90.0)  # a quarter turn maps pixel centres onto pixel centres: no interpolation loss
    assert torch.allclose(rotate(turned, -90.0), x, atol=1e-4)
    images = torch.cat([x, turned])
    plain = pair_dense_scores(enc, images, [0], [1], radius=1, min_overlap=4, angles=(0.0,))
    searched = pair_dense_scores(enc, images, [0], [1], radius=1, min_overlap=4, angles=(0.0, -90.0))
    assert searched[0] > 0.99 and plain[0] < searched[0] - 0.05
    with pytest.raises(ValueError, match="angles"):
        pair_dense_scores(enc, images, [0], [1], angles=())
