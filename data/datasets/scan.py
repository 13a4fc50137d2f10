"""Bookkeeping shared by every layout loader: the bad-file policy, duplicate keys and the record order.

A loader walks its folder, maps each file name to ``(identity, impression, alteration)`` and hands the file
to a :class:`Scan`. The scan reads and validates the image, and on any problem either raises
:class:`DatasetError` (default) or, with ``skip_bad=True``, logs a warning and appends ``(path, reason)`` to
the caller's report.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from fedprint.data.datasets.imread import IMAGE_SUFFIXES, ImageReadError, read_gray
from fedprint.data.record import FingerprintRecord, GroundTruth

log = logging.getLogger("fedprint.data.datasets")


class DatasetError(ValueError):
    """A dataset folder or file does not match what its layout expects (message names the path)."""


def natural_key(text: str) -> tuple:
    """Sort key that orders digit runs numerically ("9" < "10" < "101"), so record order reads naturally."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text) if t)


def record_sort_key(rec: FingerprintRecord) -> tuple:
    """Identity (natural order), then impression, then the unaltered image before its alterations."""
    return (natural_key(rec.identity), rec.impression, rec.alteration is not None, rec.alteration or "")


def is_image(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES


def image_files(folder: Path, *, recursive: bool = False) -> Iterator[Path]:
    """Image files (by suffix, case-insensitive) in ``folder``, in sorted path order.

    Other files are not images of the dataset (``Thumbs.db``, NIST ``.txt`` labels, READMEs) and are not
    reported.
    """
    paths = folder.rglob("*") if recursive else folder.iterdir()
    yield from sorted(p for p in paths if is_image(p))


def require_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise DatasetError(f"{path}: missing folder; expected {what}")
    return path


class Scan:
    """Collects the records of one dataset load.

    Parameters
    ----------
    layout : str
        Layout name, used in messages.
    root : Path
        Dataset root folder; must exist.
    skip_bad : bool
        False: the first bad file raises :class:`DatasetError`. True: bad files are skipped, each logged as a
        warning and appended to ``report`` as ``(path, reason)``.
    report : list or None
        Receives ``(path, reason)`` tuples when ``skip_bad`` is True.
    """

    def __init__(self, layout: str, root: str | Path, *, skip_bad: bool, report: list | None) -> None:
        self.layout = layout
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"{self.root}: dataset root folder does not exist (layout {layout})")
        self.skip_bad = skip_bad
        self.report = report
        self.n_skipped = 0
        self._records: list[FingerprintRecord] = []
        self._source_of: dict[tuple, str] = {}

    def bad(self, path: str | Path, reason: str) -> None:
        """Raise, or (skip_bad) log and report, one bad file or folder."""
        if not self.skip_bad:
            raise DatasetError(f"{path}: {reason}")
        self.n_skipped += 1
        log.warning("%s loader: skipping %s: %s", self.layout, path, reason)
        if self.report is not None:
            self.report.append((str(path), reason))

    def add(
        self,
        path: Path,
        identity: str,
        impression: int,
        domain: str,
        *,
        alteration: str | None = None,
        ground_truth: GroundTruth | None = None,
    ) -> bool:
        """Read ``path`` and keep it as a record; returns False if it was bad (and skip_bad allowed that)."""
        key = (identity, impression, alteration)
        if key in self._source_of:
            label = f"{identity}/{impression}" + (f"/{alteration}" if alteration else "")
            self.bad(path, f"duplicate record {label}: already read from {self._source_of[key]}")
            return False
        try:
            image = read_gray(path)
        except ImageReadError as exc:
            self.bad(path, exc.reason)
            return False
        self._source_of[key] = str(path)
        self._records.append(
            FingerprintRecord(
                identity=identity,
                impression=impression,
                image=image,
                domain=domain,
                source=str(path),
                alteration=alteration,
                ground_truth=ground_truth,
            )
        )
        return True

    def finish(self, expected: str) -> list[FingerprintRecord]:
        """The records in deterministic order; an empty result is an error (the layout did not match)."""
        if not self._records:
            skipped = f"; {self.n_skipped} file(s) skipped as bad" if self.n_skipped else ""
            raise DatasetError(
                f"{self.root}: no image matches the {self.layout} layout (expected {expected}){skipped}"
            )
        return sorted(self._records, key=record_sort_key)
