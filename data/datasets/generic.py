"""Generic one-folder-per-finger layout, and FedPrint synthetic datasets written in it.

Layout::

    <root>/<identity>/<impression>.<png|bmp|tif|tiff>      impression an integer (leading zeros allowed)
    <root>/manifest.json                                   optional; see below

If ``manifest.json`` exists it must have ``"format": "fedprint-synth/1"`` (any other manifest is an error
rather than ignored). Then the folder is a synthetic dataset: every image gets ground truth
``GroundTruth.from_json(manifest["ground_truth"]["<identity>/<impression>"])`` and domain
``"synth:" + manifest["profile"]["name"]``. An image without a ground-truth entry is a bad file, and so is a
ground-truth entry without its image (reported against ``manifest.json``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fedprint.data.datasets.imread import IMAGE_SUFFIXES
from fedprint.data.datasets.scan import DatasetError, Scan, image_files, is_image
from fedprint.data.record import STANDARD_DPI, FingerprintRecord, GroundTruth

SYNTH_FORMAT = "fedprint-synth/1"
MANIFEST = "manifest.json"
EXPECTED = f"<identity>/<impression integer>.<{'|'.join(s[1:] for s in IMAGE_SUFFIXES)}>"


def read_manifest(root: Path) -> dict | None:
    """The parsed synthetic-dataset manifest of ``root``, or None when there is none."""
    path = root / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: cannot parse JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != SYNTH_FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise DatasetError(f"{path}: unsupported manifest format {got!r}; expected {SYNTH_FORMAT!r}")
    profile = manifest.get("profile")
    if not isinstance(profile, dict) or not isinstance(profile.get("name"), str) or not profile["name"]:
        raise DatasetError(f"{path}: expected manifest['profile']['name'] to be a non-empty string")
    if not isinstance(manifest.get("ground_truth"), dict):
        raise DatasetError(
            f"{path}: expected manifest['ground_truth'] to map '<identity>/<impression>' to objects"
        )
    return manifest


def looks_like(root: Path) -> bool:
    """Cheap layout probe: a synthetic manifest, or a sub-folder holding an integer-named image."""
    if (root / MANIFEST).exists():
        return True
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if any(is_image(p) and p.stem.isdigit() for p in d.iterdir()):
            return True
    return False


def load_generic(
    root: str | Path,
    *,
    skip_bad: bool = False,
    report: list | None = None,
    domain: str = "generic",
) -> list[FingerprintRecord]:
    """Load ``<root>/<identity>/<impression>.<ext>`` (with synthetic ground truth when ``manifest.json``
    exists).

    Parameters
    ----------
    root : str or Path
        Dataset folder.
    skip_bad, report
        See :class:`fedprint.data.datasets.scan.Scan`.
    domain : str
        Domain tag for non-synthetic folders (default ``"generic"``); a synthetic manifest overrides it.

    Returns
    -------
    list of FingerprintRecord
        Sorted by identity (natural order) then impression.
    """
    scan = Scan("generic", root, skip_bad=skip_bad, report=report)
    manifest = read_manifest(scan.root)
    truth = manifest["ground_truth"] if manifest else {}
    if manifest:
        domain = "synth:" + manifest["profile"]["name"]
    used: set[str] = set()

    for entry in sorted(scan.root.iterdir()):
        if entry.is_file():
            if is_image(entry):
                scan.bad(entry, f"image directly in the dataset root; expected {EXPECTED}")
            continue
        for sub in sorted(p for p in entry.iterdir() if p.is_dir()):
            scan.bad(sub, f"unexpected folder inside identity folder {entry.name}/; expected {EXPECTED}")
        for path in image_files(entry):
            if not (path.stem.isascii() and path.stem.isdigit()):
                scan.bad(path, f"file name is not an integer impression number; expected {EXPECTED}")
                continue
            identity, impression = entry.name, int(path.stem)
            gt = None
            if manifest:
                key = f"{identity}/{impression}"
                if key not in truth:
                    scan.bad(path, f"no ground truth for {key!r} in {MANIFEST}")
                    continue
                try:
                    gt = GroundTruth.from_json(truth[key])
                except (KeyError, TypeError, ValueError) as exc:
                    why = f"{type(exc).__name__}: {exc}"
                    scan.bad(path, f"invalid ground truth for {key!r} in {MANIFEST} ({why})")
                    continue
                used.add(key)
            scan.add(path, identity, impression, domain, ground_truth=gt)

    records = scan.finish(EXPECTED)
    if manifest:
        scale = manifest["profile"].get("scale")
        if isinstance(scale, int | float) and scale > 0:  # synthetic: masters at 500 dpi, resampled by scale
            records = [dataclasses.replace(r, dpi=STANDARD_DPI * float(scale)) for r in records]
        orphans = sorted(set(truth) - used)
        if orphans:
            shown = ", ".join(orphans[:5]) + (" ..." if len(orphans) > 5 else "")
            scan.bad(scan.root / MANIFEST, f"{len(orphans)} ground-truth entries have no image file: {shown}")
    return records
