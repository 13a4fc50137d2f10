"""Domain profiles of the synthetic generator, loaded from ``profiles.toml`` (profiles are data).

A profile fixes everything that makes one synthetic "database" differ from another (Yan et al. 2025 Table 2): image
size and resolution, population pattern prior, sensor look, distortion and quality ranges.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from fedprint.data.record import STANDARD_DPI
from fedprint.data.synth.orientation import PATTERNS

PROFILES_FILE = Path(__file__).with_name("profiles.toml")
_RANGE_KEYS = ("period_px", "contact_fraction", "dryness", "breaks", "noise_sigma", "blur_sigma", "contrast",
               "background", "blotches", "ink_gain", "frame_px")
_INT_PAIRS = ("output_size", "master_size", "blotches", "frame_px")
_SCALARS = ("scale", "rotation_deg", "translation_px", "distortion_deg", "distortion_shift_px", "close_contact_px",
            "brake_px", "contact_offset", "background_texture", "edge_fade_px", "saturation")
#: Keys a profile may leave out (their defaults: :class:`Profile`).
OPTIONAL = frozenset({"siblings", "base"})


@dataclass(frozen=True)
class Profile:
    """One domain profile; see ``profiles.toml`` for units and the meaning of every key."""

    name: str
    description: str
    population: str
    pattern_prior: dict[str, float]
    output_size: tuple[int, int]
    master_size: tuple[int, int]
    scale: float
    period_px: tuple[float, float]
    rotation_deg: float
    translation_px: float
    distortion_deg: float
    distortion_shift_px: float
    close_contact_px: float
    brake_px: float
    contact_fraction: tuple[float, float]
    contact_offset: float
    dryness: tuple[float, float]
    breaks: tuple[float, float]
    noise_sigma: tuple[float, float]
    blur_sigma: tuple[float, float]
    contrast: tuple[float, float]
    background: tuple[float, float]
    background_texture: float
    blotches: tuple[int, int]
    edge_fade_px: float
    ink_gain: tuple[float, float]
    saturation: float
    frame_px: tuple[int, int]
    anchor_shift: tuple[float, float]
    siblings: int = 1
    base: str = ""  # the profile this one takes its other keys from ("" for the three domain profiles)

    @property
    def domain(self) -> str:
        return f"synth:{self.name}"

    @property
    def dpi(self) -> float:
        """Resolution of the output images: masters are drawn at 500 dpi and resampled by ``scale``."""
        return STANDARD_DPI * float(self.scale)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        del out["base"]  # the content, not where it came from, names a generated dataset
        if self.siblings == 1:  # the optional key at its default: the content (and cache name) of older profiles
            del out["siblings"]
        return out

    def replace(self, **changes: Any) -> Profile:
        """A modified copy (e.g. noise off for tests)."""
        return dataclasses.replace(self, **changes)


def pattern_prior(base: dict[str, float], shares: dict[str, float]) -> dict[str, float]:
    """Class prior of a population: natural frequencies x (population share / 25 %), renormalised.

    ``shares`` holds Yan et al. 2025 Table 1's percentages for ``loops``, ``whorls``, ``arches``, ``tented_arches``.
    """
    mult = {"arch": shares["arches"], "tented_arch": shares["tented_arches"], "left_loop": shares["loops"],
            "right_loop": shares["loops"], "whorl": shares["whorls"]}
    raw = {p: float(base[p]) * mult[p] / 25.0 for p in PATTERNS}
    total = sum(raw.values())
    return {p: v / total for p, v in raw.items()}


def _resolve(name: str, tables: dict[str, Any], where: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The table of profile ``name`` with its ``base`` profile's keys filled in (the keys it sets, ``base``
    included, win)."""
    table = tables[name]
    if not isinstance(table, dict):
        raise ValueError(f"{where}: profile {name!r}: expected a table [profiles.{name}]")
    if "base" not in table:
        return table
    base = table["base"]
    if not isinstance(base, str) or base not in tables:
        raise ValueError(f"{where}: profile {name!r}: base {base!r} is not a profile ({sorted(tables)})")
    if base in seen or base == name:
        raise ValueError(f"{where}: profile {name!r}: base profiles form a cycle ({' -> '.join((*seen, name, base))})")
    return {**_resolve(base, tables, where, (*seen, name)), **table}


def _build(name: str, table: dict[str, Any], doc: dict[str, Any], where: str) -> Profile:
    names = {f.name for f in fields(Profile)} - {"name", "pattern_prior"}
    missing, unknown = sorted(names - set(table) - OPTIONAL), sorted(set(table) - names)
    if missing or unknown:
        raise ValueError(f"{where}: profile {name!r}: missing keys {missing}, unknown keys {unknown}")
    pops = doc.get("populations", {})
    if table["population"] not in pops:
        raise ValueError(f"{where}: profile {name!r}: population {table['population']!r} not in "
                         f"[populations] ({sorted(pops)})")
    kw = dict(table)
    for key in ("output_size", "master_size", *_RANGE_KEYS):
        v = kw[key]
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v)):
            raise ValueError(f"{where}: profile {name!r}: {key} must be a pair [a, b] of numbers, got {v!r}")
        if v[0] > v[1] and key in _RANGE_KEYS:
            raise ValueError(f"{where}: profile {name!r}: {key} range must be [lo, hi] with lo <= hi, got {v}")
        kw[key] = tuple(int(x) for x in v) if key in _INT_PAIRS else tuple(float(x) for x in v)
    v = kw["anchor_shift"]
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v)):
        raise ValueError(f"{where}: profile {name!r}: anchor_shift must be a pair [dx, dy] of numbers, got {v!r}")
    kw["anchor_shift"] = (float(v[0]), float(v[1]))
    for key in _SCALARS:
        v = kw[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise ValueError(f"{where}: profile {name!r}: {key} must be a number >= 0, got {v!r}")
        kw[key] = float(v)
    for key in ("description", "population"):
        if not isinstance(kw[key], str):
            raise ValueError(f"{where}: profile {name!r}: {key} must be a string, got {kw[key]!r}")
    if kw["brake_px"] <= 0 or kw["ink_gain"][0] <= 0 or kw["period_px"][0] <= 2:
        raise ValueError(f"{where}: profile {name!r}: brake_px and ink_gain must be > 0 and period_px > 2 px")
    if min(kw["output_size"]) < 16 or min(kw["master_size"]) < 64:
        raise ValueError(f"{where}: profile {name!r}: output_size must be >= 16 px and master_size >= 64 px")
    v = kw.get("siblings", 1)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{where}: profile {name!r}: siblings must be an integer >= 1, got {v!r}")
    if not 0.05 <= float(kw["scale"]) <= 4:
        raise ValueError(f"{where}: profile {name!r}: scale must lie in [0.05, 4], got {kw['scale']}")
    return Profile(name=name, pattern_prior=pattern_prior(doc["base_frequencies"], pops[table["population"]]),
                   **kw)


def load_profiles(path: str | Path = PROFILES_FILE) -> dict[str, Profile]:
    """All profiles of a TOML file; errors name the file, the profile and the key."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: cannot read profiles ({exc})") from None
    if "base_frequencies" not in doc or "profiles" not in doc:
        raise ValueError(f"{path}: expected [base_frequencies] and [profiles.<name>] tables")
    tables = doc["profiles"]
    return {name: _build(name, _resolve(name, tables, str(path)), doc, str(path)) for name in tables}


@cache
def _shipped() -> dict[str, Profile]:
    return load_profiles()


def get_profile(name: str) -> Profile:
    """A shipped profile by name (``socofing``, ``casia``, ``nist_sd10``, ...)."""
    profiles = _shipped()
    if name not in profiles:
        raise ValueError(f"unknown synthetic profile {name!r}; expected one of {sorted(profiles)}")
    return profiles[name]


def profile_names(variants: bool = True) -> list[str]:
    """Names of the shipped profiles; ``variants=False``: only those with no ``base`` profile."""
    return sorted(n for n, p in _shipped().items() if variants or not p.base)
