"""Stated size limits of a synthetic dataset, checked before anything is generated or written."""

from __future__ import annotations

#: Stated limits, checked before anything is written: fingers per dataset, impressions per finger, images in all
#: (1,000,000 images of ~300x300 px is ~60 GB of PNGs and days of CPU).
MAX_FINGERS = 100_000
MAX_IMPRESSIONS = 100
MAX_IMAGES = 1_000_000


def check_size(fingers: int, impressions: int, where: str = "") -> None:
    """Refuse a synthetic dataset larger than :data:`MAX_FINGERS` / :data:`MAX_IMPRESSIONS` / :data:`MAX_IMAGES`.

    ``where`` prefixes the names in the message (``"--"`` for options, ``"data.sources[0]."`` for a TOML key).
    """
    for name, v, hi in (("fingers", fingers, MAX_FINGERS), ("impressions", impressions, MAX_IMPRESSIONS)):
        if isinstance(v, int) and not isinstance(v, bool) and v > hi:
            raise ValueError(f"{where}{name}: at most {hi:,} (a stated limit of the generator), got {v:,}")
    if fingers * impressions > MAX_IMAGES:
        raise ValueError(f"{where}fingers x {where}impressions: at most {MAX_IMAGES:,} images, got "
                         f"{fingers:,} x {impressions:,} = {fingers * impressions:,}")
