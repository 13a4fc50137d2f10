"""Gallery figure of a dataset folder: its first fingers, a row each, their first impressions as they are on disk.

``fedprint data gallery --data DIR`` draws the set a user just made (``fedprint data synth --out DIR``) or any
folder a loader reads, instead of generating new fingers: what is drawn is what training will read. Ground-truth
minutiae (a synthetic set's ``manifest.json``) are overlaid when the records carry them.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedprint.data.atomic_io import atomic_write_bytes  # noqa: E402
from fedprint.data.record import BIFURCATION  # noqa: E402


def _label(text: str) -> str:
    """``text`` safe for a figure title (a file name that is not UTF-8 is shown with replacement characters)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def write_dataset_gallery(out_png: str | Path, root: str | Path, *, layout: str = "auto", fingers: int = 2,
                          impressions: int = 4, minutiae: bool = True) -> Path:
    """Draw the first ``fingers`` identities of ``root`` (sorted by name), ``impressions`` images each, to
    ``out_png`` (written atomically). Raises ValueError when the folder holds no images."""
    import io

    from fedprint.data.datasets import detect_layout, load_dataset

    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"--data: no such folder: {root}")
    layout = detect_layout(root) if layout == "auto" else layout
    records = load_dataset(layout, root)
    by_finger: dict[str, list] = {}
    for r in sorted(records, key=lambda r: (r.identity, r.impression)):
        by_finger.setdefault(r.identity, []).append(r)
    chosen = list(by_finger.items())[:fingers]
    if not chosen:
        raise ValueError(f"--data {root}: no fingerprint images found (layout {layout})")
    cols = min(impressions, max(len(v) for _, v in chosen))
    fig, axes = plt.subplots(len(chosen), cols, figsize=(2.2 * cols, 2.4 * len(chosen)), squeeze=False)
    for row, (finger, recs) in enumerate(chosen):
        for col in range(cols):
            ax = axes[row, col]
            ax.set_xticks([])
            ax.set_yticks([])
            if col >= len(recs):
                ax.axis("off")
                continue
            r = recs[col]
            ax.imshow(r.image, cmap="gray", vmin=0, vmax=255)
            gt = r.ground_truth
            if minutiae and gt is not None and len(gt.minutiae):
                m = gt.minutiae
                bif = m[:, 3] == BIFURCATION
                ax.scatter(m[~bif, 0], m[~bif, 1], s=6, facecolors="none", edgecolors="red", linewidths=0.6)
                ax.scatter(m[bif, 0], m[bif, 1], s=6, facecolors="none", edgecolors="lime", linewidths=0.6)
            name = Path(r.source).name if r.source else r.key
            ax.set_title(_label(f"{finger}: {name}\n{r.image.shape[1]}x{r.image.shape[0]}"), fontsize=7)
    fig.suptitle(_label(f"{root.name} ({layout}): {len(chosen)} of {len(by_finger)} fingers"), fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(out_png, buf.getvalue())
