"""models.augment: shapes, seeding, each part acts, disabled = identity."""

from __future__ import annotations

import pytest
import torch

from models.augment import AugmentSpec, augment


def _batch() -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(48.0), torch.arange(48.0), indexing="ij")
    x = torch.sin(2 * torch.pi * xx / 6.0)[None, None].repeat(4, 1, 1, 1)
    return (x - x.mean()) / x.std()


def test_seeded_and_per_sample():
    x = _batch()
    a = augment(x, AugmentSpec(), torch.Generator().manual_seed(1))
    b = augment(x, AugmentSpec(), torch.Generator().manual_seed(1))
    assert a.shape == x.shape and torch.equal(a, b)
    assert not torch.allclose(a[0], a[1])  # every sample gets its own draw


def test_disabled_is_identity_and_rotation_rotates():
    x = _batch()
    off = AugmentSpec.off()
    assert not off.enabled and torch.equal(augment(x, off, torch.Generator()), x)
    rot = augment(x, AugmentSpec(rotation_deg=90, translation=0, scale=0, elastic=0, contrast=0, noise=0,
                                 erase_p=0), torch.Generator().manual_seed(0))
    # vertical stripes turned by up to 90 degrees: the column-wise variance pattern changes
    assert not torch.allclose(rot, x, atol=0.1)


def test_bad_spec_and_bad_batch():
    with pytest.raises(ValueError, match="AugmentSpec.noise"):
        AugmentSpec(noise=-1)
    with pytest.raises(ValueError, match="erase_p"):
        AugmentSpec(erase_p=2)
    with pytest.raises(ValueError, match=r"\(N, 1, S, S\)"):
        augment(torch.zeros(2, 3, 8, 8), AugmentSpec(), torch.Generator())
