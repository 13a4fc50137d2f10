"""Test-time rotation search on real prints (issue 22 lever "multi-crop or test-time augmentation"): does it pay?

Three scorings of the same pairs with the same model, nothing trained:

* ``plain``: one embedding per image (what ``fedprint evaluate`` does);
* ``mean``: the normalised mean of the embeddings of the image rotated by every angle of ``--angles``;
* ``min``: the smallest distance between the first image and any rotation of the second (alignment by search).

    nice -n 10 .venv/bin/python -m studies.study_tta --model M [--model M2@fcj2020_dev] --out runs/tta [--sets a,b]
    nice -n 10 .venv/bin/python -m studies.study_tta --run runs/recipe/fcj_rr192_e120 [--run FOLDER=TOML] --out ...

Pairs: every pair of each real set (``--protocol all``), with their counts. A model trained on a set's fingers
(e.g. FCJ2020 for a fine-tuned model) is scored on that set anyway: name such sets after the model file
(``PATH@SET[,SET]``) and its rows are marked "(trained on)". ``--run``: a ``fedprint train`` run folder, scored on
the held-out test pairs of each of its institutions (the partition rebuilt from its experiment TOML, by default
``FOLDER.toml`` beside it, as ``studies/study_recipe.py`` writes them). Writes ``tta.csv`` / ``tta.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import cv2
import numpy as np

from fedprint.config.rundir import markdown_table
from fedprint.data.atomic_io import write_csv, write_text
from fedprint.data.datasets import load_dataset
from fedprint.data.pairs import PairSet
from fedprint.models.metrics import eer, fnmr_at_fmr
from fedprint.models.model_file import load_model
from fedprint.recognition.matching import embed_images, protocol_pairs

ROOT = Path(__file__).resolve().parents[1]


SETS = ("fcj2020_dev", "fvc_300x300_b", "fvc2002_db1_b", "fvc2002_db3_b", "pyfnprint_16x8")


def rotate(image: np.ndarray, degrees: float) -> np.ndarray:
    """The image rotated about its centre, uncovered corners filled with the border's median grey."""
    if degrees == 0:
        return image
    h, w = image.shape
    m = cv2.getRotationMatrix2D((w / 2.0, h / 2.0), degrees, 1.0)
    fill = int(np.median(np.concatenate([image[0], image[-1], image[:, 0], image[:, -1]])))
    return cv2.warpAffine(image, m, (w, h), flags=cv2.INTER_LINEAR, borderValue=fill)


def scored(model, records, angles: list[float], pairs: PairSet | None = None
           ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Distances of ``pairs`` (default: every pair of ``records``) under each scoring, and the labels."""
    if pairs is None:
        pairs = protocol_pairs(records, "all")
    else:  # embed only the records the pairs use
        used = np.unique(np.concatenate([pairs.a, pairs.b]))
        records = [records[int(k)] for k in used]
        pairs = PairSet(np.searchsorted(used, pairs.a), np.searchsorted(used, pairs.b), pairs.label)
    dpis = [r.dpi for r in records]
    emb = np.stack([embed_images(model, [rotate(r.image, a) for r in records], dpis) for a in angles])  # (A,N,d)
    plain = emb[angles.index(0.0)]
    mean = emb.mean(axis=0)
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    d_plain = np.linalg.norm(plain[pairs.a] - plain[pairs.b], axis=1)
    d_mean = np.linalg.norm(mean[pairs.a] - mean[pairs.b], axis=1)
    d_min = np.linalg.norm(plain[pairs.a][None] - emb[:, pairs.b], axis=2).min(axis=0)
    return {"plain": (d_plain, pairs.label), "mean": (d_mean, pairs.label), "min": (d_min, pairs.label)}


def run_files(spec: str) -> tuple[Path, Path]:
    """Model file and experiment TOML of a run ``FOLDER[=TOML]`` (default TOML: ``FOLDER.toml`` beside the folder,
    as ``studies/study_recipe.py`` writes them); FileNotFoundError naming ``--run`` and the missing file."""
    folder, _, toml = spec.partition("=")
    folder = Path(folder)
    toml = Path(toml) if toml else folder.with_name(folder.name + ".toml")
    model = folder / "model_centralized.pt"
    for need in (model, toml):
        if not need.is_file():
            raise FileNotFoundError(f"--run {spec}: no file {need} (expected a fedprint train run folder and its "
                                    "experiment TOML)")
    return model, toml


def held_out(spec: str) -> tuple[Path, list[tuple[str, list, PairSet]]]:
    """Model file and (institution, records, held-out test pairs) of each institution of a run ``FOLDER[=TOML]``."""
    from studies.study_dense_match import run_clients

    model, toml = run_files(spec)
    return model, [(c.name, c.records, c.test_pairs) for c in run_clients(toml)[1]]


def _rows(label: str, set_name: str, res: dict, t0: float) -> list[dict]:
    return [{"model": label, "set": set_name, "scoring": how, "EER": eer(d, y), "FNMR@FMR1%": fnmr_at_fmr(d, y, 0.01),
             "genuine": int(y.sum()), "impostor": int((y == 0).sum()), "seconds": time.perf_counter() - t0}
            for how, (d, y) in res.items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", default=[],
                    help="model file, optionally PATH@SET[,SET] naming the real sets it trained on (repeatable)")
    ap.add_argument("--run", action="append", default=[],
                    help="fedprint train run folder, optionally FOLDER=TOML: scored on its held-out test pairs "
                         "(repeatable)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--angles", default="-15,-7.5,0,7.5,15", help="rotations in degrees; must include 0")
    ap.add_argument("--real", type=Path, default=Path(os.environ.get("FEDPRINT_REAL_SAMPLES",
                                                                       ROOT.parent / "shared" / "data" / "real")))
    args = ap.parse_args(argv)
    angles = [float(a) for a in args.angles.split(",")]
    if 0.0 not in angles:
        ap.error(f"--angles: expected a list that includes 0, got {args.angles!r}")
    if not args.model and not args.run:
        ap.error("expected at least one --model or --run")
    rows = []
    for spec in args.model:
        path, _, trained = spec.partition("@")
        seen = set(filter(None, trained.split(",")))
        model = load_model(path)
        for name in args.sets.split(","):
            if not (args.real / name).is_dir():
                ap.error(f"--sets: no folder {args.real / name}")
            records = load_dataset("auto", args.real / name)
            t0 = time.perf_counter()
            rows += _rows(Path(path).name, name + (" (trained on)" if name in seen else ""),
                          scored(model, records, angles), t0)
            print(" | ".join(f"{r['set']} {r['scoring']} {r['EER']:.4f}" for r in rows[-3:]), flush=True)
    for spec in args.run:
        try:
            path, institutions = held_out(spec)
        except FileNotFoundError as exc:
            ap.error(str(exc))
        model = load_model(path)
        for name, records, pairs in institutions:
            t0 = time.perf_counter()
            rows += _rows(path.parent.name, f"{name} (held out)", scored(model, records, angles, pairs), t0)
            print(" | ".join(f"{r['model']} {r['set']} {r['scoring']} {r['EER']:.4f}" for r in rows[-3:]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "tta.csv", rows)
    text = (f"# Test-time rotation search on real prints\n\nAngles {angles} degrees; every pair of each set "
            "(--model). "
            "plain = one embedding; mean = mean embedding over the rotations; min = smallest distance over the "
            "rotations of the second image. Sets marked (held out): the test pairs of a training run's own split.\n\n"
            + markdown_table(rows))
    write_text(args.out / "tta.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
