"""The one record type every fingerprint source yields (synthetic generator and real-dataset loaders)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Minutia type codes, as the crossing number gives them (Yan et al. 2025 Eq. 9): CN = 1 ending, CN = 3 bifurcation.
ENDING = 1
BIFURCATION = 3


#: The usual fingerprint sensor resolution (dots per inch); synthetic masters are drawn at it.
STANDARD_DPI = 500.0


def empty_minutiae() -> np.ndarray:
    """An empty minutiae table: float64 array of shape (0, 4)."""
    return np.zeros((0, 4), dtype=np.float64)


@dataclass(frozen=True, eq=False)  # holds arrays: compare by content explicitly
class GroundTruth:
    """What the synthetic generator knows about an impression (absent for real data).

    Attributes
    ----------
    pattern : str
        One of ``arch``, ``tented_arch``, ``left_loop``, ``right_loop``, ``whorl``.
    cores, deltas : ndarray, shape (k, 2)
        Singular points as (x, y) in pixels of *this* image (column, row), float64.
    minutiae : ndarray, shape (n, 4)
        Columns ``x, y, direction, type``: pixel column and row, direction in radians in [0, 2*pi)
        (image axes, y pointing down), type :data:`ENDING` or :data:`BIFURCATION`.
    """

    pattern: str
    cores: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    deltas: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    minutiae: np.ndarray = field(default_factory=empty_minutiae)

    def to_json(self) -> dict:
        return {
            "pattern": self.pattern,
            "cores": np.asarray(self.cores, float).round(2).tolist(),
            "deltas": np.asarray(self.deltas, float).round(2).tolist(),
            "minutiae": np.asarray(self.minutiae, float).round(3).tolist(),
        }

    @classmethod
    def from_json(cls, d: dict) -> GroundTruth:
        return cls(
            pattern=d["pattern"],
            cores=np.asarray(d.get("cores", []), float).reshape(-1, 2),
            deltas=np.asarray(d.get("deltas", []), float).reshape(-1, 2),
            minutiae=np.asarray(d.get("minutiae", []), float).reshape(-1, 4),
        )


@dataclass(frozen=True, eq=False)  # holds an image: compare by .key, not ==
class FingerprintRecord:
    """One fingerprint impression.

    Attributes
    ----------
    identity : str
        Finger identity (unique within a dataset), e.g. ``"casia-00017"`` or ``"101"``.
    impression : int
        Impression index of that finger, 0-based.
    image : ndarray of uint8, shape (H, W)
        Grayscale image as stored; loaders never resize (preprocessing is explicit and recorded elsewhere).
    domain : str
        Domain / database tag, e.g. ``"socofing"``, ``"casia_v5"``, ``"nist_sd4"``, ``"fvc2004_db1"``,
        ``"synth:casia"``.
    source : str or None
        Path of the file it was read from, or None for in-memory synthetic records.
    alteration : str or None
        For altered images (SOCOFing ``Altered/``): the alteration, e.g. ``"Easy/CR"``. An altered image is an
        alteration *of* impression ``impression`` of ``identity``, not an independent impression.
    ground_truth : GroundTruth or None
        Generator ground truth (synthetic data only).
    dpi : float or None
        Resolution of ``image`` in dots per inch (loaders set their layout's default or the user's override;
        synthetic profiles: 500 x scale). None: unknown (the input pipeline then takes the image as already at
        its working resolution).
    """

    identity: str
    impression: int
    image: np.ndarray
    domain: str
    source: str | None = None
    alteration: str | None = None
    ground_truth: GroundTruth | None = None
    dpi: float | None = None

    def __post_init__(self) -> None:
        img = self.image
        if not isinstance(img, np.ndarray) or img.dtype != np.uint8 or img.ndim != 2 or img.size == 0:
            where = self.source or f"{self.identity}/{self.impression}"
            got = f"{getattr(img, 'dtype', type(img).__name__)} {getattr(img, 'shape', '')}"
            raise ValueError(f"{where}: expected a non-empty 2-D uint8 grayscale image, got {got}")
        if self.dpi is not None and not (isinstance(self.dpi, int | float) and 50 <= float(self.dpi) <= 2000):
            where = self.source or f"{self.identity}/{self.impression}"
            raise ValueError(f"{where}: dpi: expected a resolution in [50, 2000] dots per inch, got {self.dpi!r}")

    @property
    def key(self) -> str:
        """Stable unique key ``identity/impression[/alteration]``."""
        base = f"{self.identity}/{self.impression}"
        return f"{base}/{self.alteration}" if self.alteration else base
