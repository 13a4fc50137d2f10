"""argparse ``type=`` converters that reject bad numbers at parse time, naming what was expected.

argparse reports their message as ``argument --dpi: expected a number > 0, got '-5'`` before the command reads
any file, so a bad option never costs a data load.
"""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def add_device_arg(p: argparse.ArgumentParser) -> None:
    """``--device auto|cpu|cuda``: where networks train and embed (set up by the dispatcher,
    :mod:`fedprint.models.device`)."""
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where networks train and embed: auto = CUDA when available, else the CPU (default auto; "
                        "mixed precision on CUDA except under DP-SGD)")


def add_real_samples_arg(p: argparse.ArgumentParser) -> None:
    """``--real-samples DIR``: the root of the real fingerprint sets (overrides ``$FEDPRINT_REAL_SAMPLES``)."""
    p.add_argument("--real-samples", default=None, metavar="DIR",
                   help="folder holding the real fingerprint sets, one sub-folder per set (default: "
                        "$FEDPRINT_REAL_SAMPLES, else ../shared/data/real beside the project); every model is "
                        "scored on each set, and kind = \"real\" sources read from it")


def add_peers_arg(p: argparse.ArgumentParser) -> None:
    """``--peers LIST``: the free minutiae matchers scored beside every model on the same pairs
    (:mod:`fedprint.recognition.peers`; overrides ``$FEDPRINT_PEERS``)."""
    p.add_argument("--peers", default=None, metavar="LIST",
                   help="matchers a user would pick instead, scored on the same pairs as every model and fused "
                        "with it: auto (NBIS where nbis-py is installed), none, or a comma list of nbis, leader "
                        "(~1-2 s a print), gabor (default: $FEDPRINT_PEERS, else auto); scores are kept in "
                        "$FEDPRINT_CACHE/peer_scores (default ~/.cache/fedprint)")


def unit_float(text: str) -> float:
    """A number in [0, 1] (a quality gate, a rate)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def finite_float(text: str) -> float:
    """A finite number (no nan / inf): a threshold."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


#: Scan resolutions accepted for ``--dpi`` options (dots per inch): the range in which a file's stated resolution is
#: taken as a scanner's (:data:`fedprint.data.datasets.imread.FILE_DPI_RANGE`, not imported: parsing stays light).
DPI_RANGE = (100.0, 2000.0)


def scan_dpi(text: str) -> float:
    """A scan resolution in :data:`DPI_RANGE` (a value outside it is no fingerprint sensor's: ``--dpi 1e9`` would
    shrink the print to nothing and be reported as "no fingerprint found")."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    lo, hi = DPI_RANGE
    if not (lo <= value <= hi):
        raise argparse.ArgumentTypeError(f"expected a scan resolution in [{lo:g}, {hi:g}] dots per inch, got {text!r}")
    return value
