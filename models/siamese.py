"""Siamese fingerprint encoder of Yan et al. 2025 (Sec. 3.1, Sec. 5.2): one CNN f_theta, shared by both branches.

Two encoders, both ending in an L2-normalised embedding (so pair distances lie in [0, 2]):

* :class:`CompactEncoder` - a small CNN that trains in minutes on 2 CPU cores at 128 x 128.
* :func:`resnet18_encoder` - torchvision's ResNet-18 (no pretrained weights), 1-channel stem.

Neither contains BatchNorm: every normalisation layer is GroupNorm. BatchNorm mixes samples of a batch, which
breaks per-sample gradients (DP-SGD / Opacus refuses it) and makes federated averaging of running statistics
ill-defined; GroupNorm is per sample and has no running state.

Initialisation draws only from torch's global RNG, so ``torch.manual_seed(s)`` before construction makes it
deterministic.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedprint.models.alignment import RigidAligner
from fedprint.models.pooling import GeM

ENCODERS = ("compact", "resnet18")
#: How the compact encoder pools its last feature map: the average, or a learned generalised mean.
POOLINGS = ("avg", "gem")


def _groups(channels: int, max_groups: int = 8) -> int:
    """Largest group count <= ``max_groups`` that divides ``channels`` (GroupNorm needs an exact division)."""
    for g in range(min(max_groups, channels), 0, -1):
        if channels % g == 0:
            return g
    return 1


def distance(e1: torch.Tensor, e2: torch.Tensor) -> torch.Tensor:
    """Euclidean distance d = ||e1 - e2||_2 per row (Yan et al. 2025 Eq. 1), shape (N,).

    The gradient at d = 0 is defined as 0 (torch's subgradient of the norm), so identical embeddings do not
    produce NaNs.
    """
    if e1.shape != e2.shape or e1.ndim != 2:
        raise ValueError(f"distance: expected two (N, d) tensors of equal shape, got {tuple(e1.shape)} "
                         f"and {tuple(e2.shape)}")
    return torch.linalg.vector_norm(e1 - e2, dim=1)


class CompactEncoder(nn.Module):
    """Compact CNN: 5 conv blocks (conv, GroupNorm, ReLU), global average pooling, linear projection, L2 norm.

    Block 1 is a 5x5 stride-2 stem; blocks 2-4 are 3x3 convs followed by 2x2 max-pooling *before* GroupNorm
    and ReLU; block 5 is a 3x3 conv. Channels are ``width, 2w, 4w, 4w, 8w``; a 128 x 128 input reaches block 5
    at 8 x 8. Speed choices, measured with ``benchmarks/bench_encoder.py`` on 2 CPU threads (forward+backward,
    batch 32, 128 px): the strided stem instead of a full-resolution conv + pool (~1.3x; its 5x5 kernel still
    spans a ridge period, ~4 px at 128 px), pooling before the normalisation so GroupNorm/ReLU run on 4x fewer
    values (~1.3x), and channels-last memory layout for conv weights and activations (~1.4x).

    Parameters
    ----------
    embedding_dim : int
        Dimension d of the embedding f(x) in R^d (default 128).
    width : int
        Channels of the first block (default 32).
    in_channels : int
        Input channels (1 for grayscale fingerprints).
    grid : int
        Side g of the pooling grid (default 1: global average pooling). g > 1 averages block 5 over a g x g grid
        of cells and the head sees all g² cells (8·width·g² features), so the embedding keeps the coarse layout
        of the print (where the core and the ridge flow are) that a global average discards; the price is less
        invariance to where the print sits in the input. DeepPrint (Engelsma et al. 2021) keeps the spatial
        map for the same reason, after aligning the print.
    channels_last : bool
        Store conv weights and run activations in channels-last layout (default True; same results up to
        float rounding, faster on CPU). Parameters keep their shapes; only their strides differ.
    pooling : str
        ``"avg"`` (default: average pooling) or ``"gem"`` (generalised mean with a learned exponent starting at 3,
        :class:`fedprint.models.pooling.GeM`; its one parameter is ``pool.p``).
    align : bool
        Put a learned rotation-and-shift aligner in front of block 1 (default False;
        :class:`fedprint.models.alignment.RigidAligner`, DeepPrint's localisation network). It starts as the identity,
        so
        weights of a model without one load unchanged and the aligner learns from there.
    """

    def __init__(self, embedding_dim: int = 128, width: int = 32, in_channels: int = 1, grid: int = 1,
                 channels_last: bool = True, align: bool = False, pooling: str = "avg") -> None:
        super().__init__()
        for name, v in (("embedding_dim", embedding_dim), ("width", width), ("in_channels", in_channels),
                        ("grid", grid)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"CompactEncoder: {name} must be a positive integer, got {v!r}")
        if not isinstance(align, bool):
            raise ValueError(f"CompactEncoder: align must be True or False, got {align!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"CompactEncoder: pooling must be one of {POOLINGS}, got {pooling!r}")
        chans = [in_channels, width, 2 * width, 4 * width, 4 * width, 8 * width]
        layers: list[nn.Module] = []
        for i, (cin, cout) in enumerate(zip(chans[:-1], chans[1:], strict=True)):
            k, stride = (5, 2) if i == 0 else (3, 1)
            layers.append(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False))
            if 0 < i < len(chans) - 2:
                layers.append(nn.MaxPool2d(2))
            layers += [nn.GroupNorm(_groups(cout), cout), nn.ReLU(inplace=True)]
            if i == 2:
                self._middle = len(layers)  # end of block 3: S/8, 4 * width channels
        self.features = nn.Sequential(*layers)
        self.pool = GeM(grid) if pooling == "gem" else nn.AdaptiveAvgPool2d(grid)
        self.fc = nn.Linear(chans[-1] * grid * grid, embedding_dim)
        self.grid = grid
        self.embedding_dim = embedding_dim
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        # Built last, so the encoder's own initial weights are those of an encoder without it (same seed).
        self.align = RigidAligner() if align else None
        self.channels_last = bool(channels_last)
        if self.channels_last:
            self.to(memory_format=torch.channels_last)

    @property
    def head_layer(self) -> nn.Linear:
        """The final projection (the "head" of personalised FL methods; every other layer is the "base")."""
        return self.fc

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        """The input as block 1 takes it: aligned (when the encoder has an aligner), in its memory layout."""
        if self.align is not None:
            x = self.align(x)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """Last feature map: (N, C, H, W) -> (N, 8 * width, H / 16, W / 16)."""
        return self.features(self._prepare(x))

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """Base output: (N, C, H, W) -> (N, 8 * width * grid²) pooled features, before the head."""
        return self.pool(self.feature_map(x)).flatten(1)

    def project(self, z: torch.Tensor) -> torch.Tensor:
        """Head: pooled features (N, 8 * width * grid²) -> (N, embedding_dim) unit-norm embeddings."""
        return F.normalize(self.fc(z), dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) float -> (N, embedding_dim) unit-norm embeddings."""
        return self.embed_with_map(x)[0]

    def embed_with_map(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(embeddings, :meth:`feature_map`) from one forward pass."""
        return self.embed_with_maps(x)[:2]

    def embed_with_maps(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(embeddings, :meth:`feature_map`, the block-3 map (N, 4 * width, H / 8, W / 8)) from one forward pass."""
        middle = self.features[:self._middle](self._prepare(x))
        fmap = self.features[self._middle:](middle)
        return self.project(self.pool(fmap).flatten(1)), fmap, middle


class _NormalizedEmbedding(nn.Module):
    """Wraps a backbone that outputs raw (N, d) features and L2-normalises them."""

    def __init__(self, backbone: nn.Module, embedding_dim: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.embedding_dim = embedding_dim

    @property
    def head_layer(self) -> nn.Linear:
        """The backbone's final linear layer (the "head" of personalised FL methods)."""
        return self.backbone.fc

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """Base output: the backbone's pooled features, before its final linear layer."""
        b = self.backbone
        x = b.maxpool(b.relu(b.bn1(b.conv1(x))))
        x = b.layer4(b.layer3(b.layer2(b.layer1(x))))
        return torch.flatten(b.avgpool(x), 1)

    def project(self, z: torch.Tensor) -> torch.Tensor:
        """Head: pooled features -> unit-norm embeddings."""
        return F.normalize(self.backbone.fc(z), dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.backbone(x), dim=1)


def _replace_batchnorm(module: nn.Module) -> None:
    """Swap every BatchNorm2d (recursively, in place) for GroupNorm with the same channels and affine init."""
    for name, child in module.named_children():
        if isinstance(child, nn.modules.batchnorm._BatchNorm):
            c = child.num_features
            setattr(module, name, nn.GroupNorm(_groups(c, 32), c, eps=child.eps, affine=True))
        else:
            _replace_batchnorm(child)


def resnet18_encoder(embedding_dim: int = 128) -> nn.Module:
    """ResNet-18 (``torchvision.models.resnet18(weights=None)``) as a fingerprint encoder.

    Changes to the torchvision model: 1-channel 7x7/2 stem, every BatchNorm replaced by GroupNorm (32 groups,
    or the largest divisor of the channel count below that), the classifier replaced by a linear projection to
    ``embedding_dim``, output L2-normalised. No pretrained weights (none are available offline, and ImageNet
    features would not fit 1-channel fingerprints without adaptation).
    """
    from torchvision.models import resnet18

    if not isinstance(embedding_dim, int) or embedding_dim < 1:
        raise ValueError(f"resnet18_encoder: embedding_dim must be a positive integer, got {embedding_dim!r}")
    net = resnet18(weights=None)
    net.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
    _replace_batchnorm(net)
    net.fc = nn.Linear(net.fc.in_features, embedding_dim)
    return _NormalizedEmbedding(net, embedding_dim)


def build_encoder(name: str, embedding_dim: int = 128, **kwargs) -> nn.Module:
    """Encoder by name: ``"compact"`` (:class:`CompactEncoder`, accepts ``width``, ``grid``, ``align`` and
    ``pooling``) or ``"resnet18"``."""
    if name == "compact":
        return CompactEncoder(embedding_dim=embedding_dim, **kwargs)
    if name == "resnet18":
        if kwargs:
            raise ValueError(f"build_encoder: 'resnet18' takes no extra options, got {sorted(kwargs)}")
        return resnet18_encoder(embedding_dim=embedding_dim)
    raise ValueError(f"build_encoder: unknown encoder name {name!r}; expected one of {ENCODERS}")


class SiameseNet(nn.Module):
    """Siamese network (Yan et al. 2025 Fig. 2): both branches are the *same* encoder module, so weights are shared
    by construction (one parameter set, gradients from both branches accumulate into it).

    ``forward`` runs the encoder once per branch rather than on the concatenated pair batch: with GroupNorm
    the result is identical, and separate calls keep the batch axis equal to the pair axis, which
    per-sample-gradient tools (DP-SGD) rely on.
    """

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """f_theta(x): (N, 1, S, S) -> (N, d) unit-norm embeddings."""
        return self.encoder(x)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Embeddings (e1, e2) of the pair batches x1, x2 (each (N, 1, S, S))."""
        if x1.shape[0] != x2.shape[0]:
            raise ValueError(f"SiameseNet: x1 and x2 must hold the same number of images, got {x1.shape[0]} "
                             f"and {x2.shape[0]}")
        return self.encoder(x1), self.encoder(x2)

    @staticmethod
    def distance(e1: torch.Tensor, e2: torch.Tensor) -> torch.Tensor:
        """Euclidean distance per pair; see :func:`distance`."""
        return distance(e1, e2)


def head_parameter_names(encoder: nn.Module) -> list[str]:
    """Names (as in ``encoder.state_dict()``) of the head's parameters; every other parameter is the base.

    The split personalised federated methods use (FedAS keeps its own head, FedALA adapts the top layers).
    """
    head = {id(p) for p in encoder.head_layer.parameters()}
    return [n for n, p in encoder.named_parameters() if id(p) in head]


def leading_block_parameters(encoder: nn.Module, n: int) -> list[nn.Parameter]:
    """Parameters of the first ``n`` conv blocks of a :class:`CompactEncoder` (each block: its convolution and the
    GroupNorm after it; the aligner, the pooling and the head are never among them), in module order.

    Raises ValueError for another encoder (no ``features`` stack of conv blocks) or ``n`` outside 0..5.
    """
    if n == 0:
        return []
    features = getattr(encoder, "features", None)
    if not isinstance(features, nn.Sequential):
        raise ValueError(f"freeze_blocks: {type(encoder).__name__} has no stack of conv blocks (compact encoder only)")
    starts = [i for i, m in enumerate(features) if isinstance(m, nn.Conv2d)] + [len(features)]
    if not 0 <= n < len(starts):
        raise ValueError(f"freeze_blocks: expected 0..{len(starts) - 1} (the encoder's conv blocks), got {n}")
    return [p for m in list(features)[: starts[n]] for p in m.parameters()]


def new_encoder(name: str, embedding_dim: int, seed: int, **kwargs) -> nn.Module:
    """A freshly initialised encoder (``kwargs`` as :func:`build_encoder`); the seed fixes its initial weights."""
    torch.manual_seed(seed)
    return build_encoder(name, embedding_dim, **kwargs)
