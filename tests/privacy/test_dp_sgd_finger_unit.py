"""Issue 24 §5 and §6: removing one finger from a client's pool changes exactly that finger's pairs of the DP
pair set (nothing else), the reported g is the exact largest number of pairs of a finger, and the default δ keeps
n·δ ≤ 0.1."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprint.config import TrainConfig
from fedprint.data.pairs import PairSet
from fedprint.training.dp_sgd import default_delta, dp_pair_set, max_pairs_per_finger

FINGERS, IMPRESSIONS = 30, 4


def _pool(drop: int | None, seed: int):
    """Images (N, 1, 8, 8) of 30 fingers x 4 impressions (finger ``drop`` removed) and the pool's pairs: every
    genuine pair plus a seeded sample of impostors over the whole pool (as data.pairs.make_pairs draws them)."""
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(FINGERS * IMPRESSIONS, 1, 8, 8, generator=gen)
    finger = np.repeat(np.arange(FINGERS), IMPRESSIONS)
    keep = finger != drop
    images, finger = images[torch.from_numpy(keep)], finger[keep]
    i, j = np.triu_indices(len(finger), 1)
    same = finger[i] == finger[j]
    rng = np.random.default_rng(seed)
    imp = rng.choice(np.flatnonzero(~same), size=300, replace=False)
    a = np.concatenate([i[same], i[imp]])
    b = np.concatenate([j[same], j[imp]])
    return images, finger, PairSet(a, b, np.concatenate([np.ones(same.sum(), np.int64), np.zeros(300, np.int64)]))


def _named(pairs: PairSet, finger: np.ndarray, images: torch.Tensor) -> set:
    """Pairs as (finger, impression) names, independent of the pool's indexing."""
    base = {int(f): int(np.flatnonzero(finger == f)[0]) for f in np.unique(finger)}

    def name(k):
        return int(finger[k]), int(k - base[int(finger[k])])

    return {tuple(sorted((name(x), name(y)))) + (int(lab),) for x, y, lab in zip(pairs.a, pairs.b, pairs.label,
                                                                                  strict=True)}


@pytest.mark.parametrize("drop", [7, 0, 29])
def test_removing_one_finger_changes_only_that_fingers_pairs(drop):
    cfg = TrainConfig(seed=3)
    images, finger, pool = _pool(None, seed=1)
    images_d, finger_d, pool_d = _pool(drop, seed=1)  # the pool's impostor sample is re-drawn: it must not matter
    full = _named(dp_pair_set(pool, images, cfg, 0.05), finger, images)
    less = _named(dp_pair_set(pool_d, images_d, cfg, 0.05), finger_d, images_d)
    own = {p for p in full if drop in (p[0][0], p[1][0])}
    assert less == full - own  # exactly the finger's own pairs go, nothing else changes
    counts = {f: sum(f in (p[0][0], p[1][0]) for p in full) for f in range(FINGERS)}
    assert len(own) == counts[drop]
    dp_set = dp_pair_set(pool, images, cfg, 0.05)
    assert max_pairs_per_finger(dp_set) == max(counts.values())  # g is exact on the set trained on


def test_default_delta_is_at_most_one_over_ten_n():
    for n in (1, 24, 999, 3000, 9999, 250_000):
        assert n * default_delta(n) <= 0.1 + 1e-12 and default_delta(n) > 0.01 / n
