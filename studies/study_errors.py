"""Where a trained verifier errs on its own held-out real pairs (issue 22 §2): which prints, which placements.

For one ``fedprint train`` run folder (its partition rebuilt from its experiment TOML, as ``studies/study_scoring.py``
does), every held-out test pair is scored by the plain embedding cosine and, at the threshold where the impostor
pairs' false-match rate is ``--fmr`` (default 1 %):

* the genuine pairs that fail, and the impressions most of them share (a few bad captures, or spread out?);
* placement: the vertical and horizontal distance between the two prints' ridge-area centroids
  (:func:`ridge_centroids`), its correlation with the genuine score, and its mean over failing / passing pairs;
* same-person impostors (another finger of the same person; identities ``<person><sep><finger>``, ``--person-sep``,
  default ``_`` as FCJ2020 names them): how many there are and what share of the impostors above the threshold;
* ``worst_genuine.png`` / ``top_impostors.png``: the network inputs of the lowest-scoring genuine and the
  highest-scoring impostor pairs, side by side, to look at.

    python -m studies.study_errors --run runs/recipe/fcj_r192_supcon_t005_gem_e120 --out runs/errors

Writes ``errors.md`` and the two PNGs to ``--out`` (a new or empty folder).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from fedprint.data.atomic_io import staged_folder, write_text
from fedprint.models.metrics import eer, threshold_at_fmr
from studies.study_scoring import plain_scores
from studies.study_tta import run_files

ROOT = Path(__file__).resolve().parents[1]



def ridge_centroids(images: torch.Tensor, window: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) in pixels of the centre of each image's ridge area.

    The ridge area is where the local variance over ``window`` x ``window`` pixels (default 15, about three ridge
    periods at 250 dpi) exceeds that image's median local variance: ridges vary, background and padding do not.

    Parameters
    ----------
    images : Tensor, shape (N, 1, H, W)

    Returns
    -------
    cy, cx : ndarray, shape (N,)
    """
    x = images.float()
    mean = F.avg_pool2d(x, window, 1, window // 2, count_include_pad=False)
    var = F.avg_pool2d(x * x, window, 1, window // 2, count_include_pad=False) - mean * mean
    mask = (var > var.flatten(1).median(1).values.view(-1, 1, 1, 1)).float()[:, 0]
    total = mask.sum((1, 2)).clamp_min(1)
    rows = torch.arange(mask.shape[1], dtype=torch.float32).view(1, -1, 1)
    cols = torch.arange(mask.shape[2], dtype=torch.float32).view(1, 1, -1)
    return ((mask * rows).sum((1, 2)) / total).numpy(), ((mask * cols).sum((1, 2)) / total).numpy()


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else float("nan")


def error_summary(scores: np.ndarray, pairs, identities: list[str], cy: np.ndarray, cx: np.ndarray, *,
                  fmr: float = 0.01, person_sep: str = "_") -> dict:
    """The figures :mod:`studies.study_errors` reports for one run (see the module docstring)."""
    y = pairs.label
    thr = threshold_at_fmr(scores, y, fmr, higher_is_genuine=True)["threshold"]  # accepted: score >= thr
    gen, imp = y == 1, y == 0
    fail = gen & (scores < thr)
    shared = Counter(np.concatenate([pairs.a[fail], pairs.b[fail]]).tolist()).most_common(5)
    dy, dx = np.abs(cy[pairs.a] - cy[pairs.b]), np.abs(cx[pairs.a] - cx[pairs.b])
    person = np.array([i.split(person_sep)[0] if person_sep in i else i for i in identities])
    same_person = imp & (person[pairs.a] == person[pairs.b])
    above = imp & (scores >= thr)
    passing = gen & ~fail

    def corr(d: np.ndarray) -> float:  # undefined (nan) where either side does not vary
        a, b = scores[gen], d[gen]
        return float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan")

    return {
        "genuine": int(gen.sum()), "impostor": int(imp.sum()), "eer": eer(scores, y, higher_is_genuine=True),
        "threshold": thr, "failing": int(fail.sum()), "shared": shared,
        "corr_dy": corr(dy), "corr_dx": corr(dx),
        "dy_fail": _mean(dy[fail]), "dy_pass": _mean(dy[passing]),
        "dx_fail": _mean(dx[fail]), "dx_pass": _mean(dx[passing]),
        "same_person": int(same_person.sum()), "above": int(above.sum()),
        "same_person_above": int((same_person & above).sum()),
    }


def montage(images: torch.Tensor, pairs, rows: np.ndarray, per_line: int = 4) -> np.ndarray:
    """uint8 picture of the pairs ``rows`` (each: its two inputs side by side), ``per_line`` pairs a line."""
    def tile(k: int) -> np.ndarray:
        a, b = (cv2.normalize(images[int(i), 0].numpy(), None, 0, 255, cv2.NORM_MINMAX).astype(np.uint8)
                for i in (pairs.a[k], pairs.b[k]))
        gap = np.full((a.shape[0], 4), 255, np.uint8)
        return np.hstack([a, gap, b, np.full((a.shape[0], 12), 0, np.uint8)])

    tiles = [tile(k) for k in rows]
    tiles += [np.zeros_like(tiles[0])] * (-len(tiles) % per_line)
    return np.vstack([np.hstack(tiles[i:i + per_line]) for i in range(0, len(tiles), per_line)])


def render(s: dict, fmr: float, run: str, command: str, names: list[str]) -> str:
    """``errors.md``; ``names``: what to call each image (its file)."""
    shared = ", ".join(f"`{names[i]}` in {n}" for i, n in s["shared"]) or "none"
    share = s["same_person_above"] / s["above"] if s["above"] else float("nan")
    return "\n".join([
        f"# Where `{run}` errs on its held-out pairs", "",
        f"{s['genuine']} genuine / {s['impostor']} impostor held-out pairs; EER {100 * s['eer']:.2f} %. Threshold "
        f"at FMR {100 * fmr:g} %: similarity {s['threshold']:.4f}.", "",
        f"- **Failing genuine pairs**: {s['failing']} of {s['genuine']} ({100 * s['failing'] / s['genuine']:.1f} % "
        f"FNMR). The images most of them share: {shared}.",
        f"- **Placement** (distance between the two prints' ridge-area centroids, px of the network input): "
        f"correlation with the genuine score {s['corr_dy']:+.2f} vertically, {s['corr_dx']:+.2f} horizontally; "
        f"vertical distance {s['dy_fail']:.1f} px on failing pairs against {s['dy_pass']:.1f} px on the rest "
        f"(horizontal {s['dx_fail']:.1f} / {s['dx_pass']:.1f}).",
        f"- **Same-person impostors**: {s['same_person']} of {s['impostor']} impostor pairs; "
        f"{s['same_person_above']} of the {s['above']} impostors at or above the threshold ({100 * share:.1f} %).",
        "", "Pictures: `worst_genuine.png` (lowest-scoring genuine pairs), `top_impostors.png` (highest-scoring "
        "impostor pairs), the network inputs side by side.", "", f"`{command}`", ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a fedprint train run folder, FOLDER or FOLDER=TOML")
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder")
    ap.add_argument("--fmr", type=float, default=0.01, help="operating point, a false-match rate (default 0.01)")
    ap.add_argument("--person-sep", default="_", help="identity = <person><sep><finger> (default _)")
    args = ap.parse_args(argv)
    if not 0 < args.fmr < 1:
        print(f"study_errors: error: --fmr: expected a rate in (0, 1), got {args.fmr}", file=sys.stderr)
        return 2
    try:
        model, toml = run_files(args.run)
        with staged_folder(args.out) as out:
            scores, client = plain_scores(model, toml)
            pairs = client.test_pairs
            cy, cx = ridge_centroids(client.images)
            s = error_summary(scores, pairs, [r.identity for r in client.records], cy, cx, fmr=args.fmr,
                              person_sep=args.person_sep)
            gen, imp = np.flatnonzero(pairs.label == 1), np.flatnonzero(pairs.label == 0)
            worst, top = gen[np.argsort(scores[gen])][:16], imp[np.argsort(-scores[imp])][:8]
            cv2.imwrite(str(out / "worst_genuine.png"), montage(client.images, pairs, worst))
            cv2.imwrite(str(out / "top_impostors.png"), montage(client.images, pairs, top))
            command = "python -m studies.study_errors " + shlex.join(argv if argv is not None else sys.argv[1:])
            names = [str(Path(*Path(r.source).parts[-2:])) if r.source else f"{r.identity}#{r.impression}"
                     for r in client.records]
            text = render(s, args.fmr, model.parent.name, command, names)
            write_text(out / "errors.md", text)
    except (FileNotFoundError, FileExistsError) as exc:
        print(f"study_errors: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
