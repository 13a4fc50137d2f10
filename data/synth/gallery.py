"""Gallery figure: per profile, one master and several of its impressions, with ground-truth minutiae."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedprint.data.record import BIFURCATION  # noqa: E402
from fedprint.data.synth.impression import render_impression  # noqa: E402
from fedprint.data.synth.master import make_master  # noqa: E402
from fedprint.data.synth.profiles import get_profile, profile_names  # noqa: E402


def master_image(ridges: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """uint8 rendering of a master: dark ridges, white outside the silhouette."""
    return np.where(mask, np.clip(127.5 - 127.5 * ridges, 0, 255), 255).astype(np.uint8)


def write_gallery(out_png: str | Path, *, profiles: Sequence[str] | None = None, fingers: int = 2,
                  impressions: int = 4, seed: int = 0, minutiae: bool = True) -> Path:
    """Rows = (profile, finger); columns = master + ``impressions`` impressions. Returns the PNG path."""
    profiles = list(profiles or profile_names(variants=False))
    rows = [(get_profile(p), f) for p in profiles for f in range(fingers)]
    fig, axes = plt.subplots(len(rows), impressions + 1, figsize=(2.2 * (impressions + 1), 2.4 * len(rows)),
                             squeeze=False)
    for r, (prof, finger) in enumerate(rows):
        master = make_master(finger, seed=seed, size=prof.master_size, pattern_prior=prof.pattern_prior,
                             period_px=prof.period_px)
        axes[r, 0].imshow(master_image(master.ridges, master.mask), cmap="gray", vmin=0, vmax=255)
        axes[r, 0].set_title(f"{prof.name} #{finger}: {master.pattern}\nmaster, {len(master.minutiae)} minutiae",
                             fontsize=7)
        for i in range(impressions):
            image, gt = render_impression(master, prof, i, seed=seed)
            ax = axes[r, i + 1]
            ax.imshow(image, cmap="gray", vmin=0, vmax=255)
            if minutiae and len(gt.minutiae):
                m = gt.minutiae
                bif = m[:, 3] == BIFURCATION
                ax.scatter(m[~bif, 0], m[~bif, 1], s=6, facecolors="none", edgecolors="red", linewidths=0.6)
                ax.scatter(m[bif, 0], m[bif, 1], s=6, facecolors="none", edgecolors="lime", linewidths=0.6)
            ax.set_title(f"impr. {i} ({image.shape[1]}x{image.shape[0]}), {len(gt.minutiae)} min.", fontsize=7)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("FedPrint synthetic fingerprints (red: endings, green: bifurcations; ground truth)", fontsize=9)
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=80)
    plt.close(fig)
    return out_png
