"""Fig.-3-like panel for FP-DFSN (Yan et al. 2025): what the perturbation does to a fingerprint, with similarities.

One row per profile (e.g. one per dataset): original | sharpened (Eq. 8) | noise mask with minutiae |
FP-DFSN output (Eq. 10) | the original recovered from the output knowing only β (:func:`invert_fpdfsn`).
PSNR / SSIM (and LPIPS when the AlexNet weights are present) are printed on the output and recovered panels,
always against the raw original image.

Command line::

    python -m privacy.fpdfsn_figure --out fig.png name=path.tif name2=path.bmp [--beta 0.5 --seed 0]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedprint.data.record import BIFURCATION  # noqa: E402
from fedprint.privacy.fpdfsn import FPDFSNParams, _check_image, invert_fpdfsn, sharpen, to_uint8  # noqa: E402
from fedprint.privacy.fpdfsn_cache import FPDFSNCache  # noqa: E402
from fedprint.privacy.similarity import image_similarity, psnr  # noqa: E402


def _label(sim: dict) -> str:
    text = f"PSNR {sim['psnr']:.1f} dB\nSSIM {sim['ssim']:.3f}"
    if "psnr_outside_mask" in sim:
        text += f"\nPSNR outside mask {sim['psnr_outside_mask']:.1f} dB"
    if sim.get("lpips") is not None:
        text += f"\nLPIPS {sim['lpips']:.3f}"
    return text


def fpdfsn_figure(
    images: dict[str, np.ndarray],
    params: FPDFSNParams | None = None,
    out_png: str | os.PathLike = "fpdfsn_figure.png",
    seed: int = 0,
    *,
    dpi: int = 110,
) -> dict[str, dict]:
    """Draw the FP-DFSN comparison figure and return the numbers printed on it.

    Parameters
    ----------
    images : dict of str -> ndarray uint8 (H, W)
        Profile name (row title) -> gray fingerprint.
    params : FPDFSNParams, optional
        FP-DFSN hyper-parameters (defaults of :class:`FPDFSNParams`).
    out_png : path
        Output PNG (parent directories are created).
    seed : int
        Seed; noise is drawn exactly as :class:`~fedprint.privacy.fpdfsn_cache.FPDFSNCache` would for (image, seed).
    dpi : int
        Resolution of the saved PNG (dots per inch of the 15-inch-wide figure); default 110.

    Returns
    -------
    dict
        Per profile: ``n_minutiae``, ``minutiae_backend``, ``mask_fraction``, ``output`` (similarity of the FP-DFSN
        output to the original) and ``recovered`` (similarity of the β-inverted output to the original).
    """
    if not images:
        raise ValueError("images: expected at least one profile")
    params = FPDFSNParams() if params is None else params
    cache = FPDFSNCache(None)
    rows = len(images)
    fig, axes = plt.subplots(rows, 5, figsize=(15, 3.3 * rows), squeeze=False)
    titles = ["original", f"sharpened (D0={params.d0:g})", "noise mask + minutiae",
              f"FP-DFSN (β={params.beta:g}, σ²={params.sigma2:g})", "recovered knowing β"]
    numbers: dict[str, dict] = {}
    for r, (name, image) in enumerate(images.items()):
        _check_image(image, name)
        res = cache.get_or_compute(image, params, seed)
        recovered = (to_uint8(invert_fpdfsn(res.image, params.beta)) if params.beta < 1
                     else np.zeros_like(image))
        sim_out = image_similarity(image, res.image)
        sim_rec = image_similarity(image, recovered)
        outside = ~res.noise_mask
        sim_rec["psnr_outside_mask"] = psnr(image, recovered, outside) if outside.any() else float("nan")
        numbers[name] = {"n_minutiae": res.n_minutiae, "minutiae_backend": res.backend,
                         "mask_fraction": float(res.noise_mask.mean()),
                         "output": sim_out, "recovered": sim_rec}

        overlay = np.stack([image] * 3, axis=-1).astype(np.float64) / 255.0
        overlay[res.noise_mask] = 0.55 * overlay[res.noise_mask] + 0.45 * np.array([1.0, 0.2, 0.2])
        panels = [image, to_uint8(sharpen(image, params.d0)), overlay, res.image, recovered]
        for c, panel in enumerate(panels):
            ax = axes[r, c]
            ax.imshow(panel, cmap="gray", vmin=0, vmax=255) if panel.ndim == 2 else ax.imshow(panel)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(titles[c], fontsize=9)
        m = res.minutiae
        if len(m):
            bif = m[:, 3] == BIFURCATION
            axes[r, 2].scatter(m[~bif, 0], m[~bif, 1], s=10, marker="o", facecolors="none",
                               edgecolors="cyan", linewidths=0.8, label="ending")
            axes[r, 2].scatter(m[bif, 0], m[bif, 1], s=10, marker="s", facecolors="none",
                               edgecolors="yellow", linewidths=0.8, label="bifurcation")
        axes[r, 0].set_ylabel(f"{name}\n{image.shape[1]}×{image.shape[0]}", fontsize=9)
        axes[r, 2].set_xlabel(f"n = {res.n_minutiae} ({res.backend}), mask {100 * res.noise_mask.mean():.1f}%",
                              fontsize=8)
        for c, sim in ((3, sim_out), (4, sim_rec)):
            axes[r, c].set_xlabel(_label(sim), fontsize=8)
    lpips_missing = any(v["output"].get("lpips") is None for v in numbers.values())
    title = "FP-DFSN (Yan et al. 2025, Eqs. 8–10): a perturbation, not differential privacy; metrics vs original"
    if lpips_missing:
        title += "\nLPIPS not shown: ImageNet AlexNet weights absent from the torch hub cache"
    fig.suptitle(title, fontsize=10)
    # keep room above the column titles for the (one- or two-line) suptitle
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.35 + 0.15 * lpips_missing) / fig.get_figheight()))
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return numbers


def main(argv: list[str] | None = None) -> None:
    import cv2

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("images", nargs="+", help="name=path (read as grayscale)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dpi", type=int, default=110)
    defaults = FPDFSNParams()
    for field in ("d0", "radius", "sigma2", "beta"):
        ap.add_argument(f"--{field}", type=float, default=getattr(defaults, field))
    ap.add_argument("--border", type=int, default=defaults.border)
    ap.add_argument("--minutiae-backend", default="auto",
                    help="minutiae extractor: auto (nbis where nbis-py is installed, else crossing), nbis, leader or "
                         "crossing (fedprint.data.minutiae_backends)")
    args = ap.parse_args(argv)
    images = {}
    for spec in args.images:
        name, _, path = spec.partition("=")
        img = cv2.imread(path, cv2.IMREAD_GRAYSCALE)  # SOCOFing Real/ BMPs are RGBA: force gray
        if img is None:
            raise ValueError(f"cannot read image file {path}")
        images[name] = img
    params = FPDFSNParams(
        d0=args.d0, border=args.border, radius=args.radius, sigma2=args.sigma2, beta=args.beta,
        backend=args.minutiae_backend,
    )
    numbers = fpdfsn_figure(images, params, args.out, args.seed, dpi=args.dpi)
    for name, v in numbers.items():
        o, rcv = v["output"], v["recovered"]
        print(f"{name}: n_minutiae={v['n_minutiae']} ({v['minutiae_backend']}) mask={v['mask_fraction']:.3f} "
              f"output PSNR={o['psnr']:.2f} SSIM={o['ssim']:.3f} LPIPS={o['lpips']} | "
              f"recovered PSNR={rcv['psnr']:.2f} (outside mask {rcv['psnr_outside_mask']:.2f}) "
              f"SSIM={rcv['ssim']:.3f}")


if __name__ == "__main__":
    main()
