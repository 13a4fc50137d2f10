"""FedPrint: federated, privacy-preserving fingerprint verification on Flower.

One installed package; its subpackages, from the bottom layer up (``pyproject.toml``'s import-linter contracts
hold the order): :mod:`fedprint.models` (networks, losses, metrics), :mod:`fedprint.data` (records, synthetic and
real prints, minutiae), :mod:`fedprint.config` (experiment files, run directories), :mod:`fedprint.privacy` (DP
mechanisms, FP-DFSN, client-level DP, protected templates), :mod:`fedprint.recognition` (verification,
identification, quality), :mod:`fedprint.training` (what the ClientApp and the local runners share: the Siamese
trainer, DP-SGD, client data, evaluation), :mod:`fedprint.client` (the Flower ClientApp),
:mod:`fedprint.server` (the Flower ServerApp: AFFR, FedAvg, FedProx, the personalised baselines),
:mod:`fedprint.attacks` (privacy audits), :mod:`fedprint.lab` (simulation and centralised runs) and
:mod:`fedprint.cli` (the ``fedprint`` command).

Layout
------
The project fixes its folders at the repository root (``server/``, ``client/``, ``models/``, ``privacy/``,
``data/``, ... beside ``pyproject.toml``), and a wheel installs each of them inside this package (setuptools'
``package-dir``). In a source tree (a checkout, or a Flower app bundle unpacked by a SuperNode, which Flower
imports from its own folder) the folders lie beside this one: :class:`_SourceTreeFinder` imports
``fedprint.<name>`` from there, for the names in :data:`SUBPACKAGES` only, so the code a run uses is the code of
the tree it was started from and nothing else of that tree becomes part of the package.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_early(signum, frame) -> None:  # noqa: ARG001 (signal handler protocol)
    """Ctrl-C while the ``fedprint`` program is still importing (before :func:`fedprint.cli.main.main` takes over
    with KeyboardInterrupt): one line and exit 130 from the first instant; nothing has been written yet."""
    os.write(2, b"fedprint: interrupted\n")
    os._exit(130)


def _is_fedprint_program() -> bool:
    """True when this process is the ``fedprint`` command (console script or ``python -m fedprint``), not a program
    that imports the package (those keep Python's own Ctrl-C)."""
    argv = getattr(sys, "orig_argv", None) or []
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "fedprint":
        return True
    return bool(sys.argv) and os.path.basename(sys.argv[0]) == "fedprint"


if _is_fedprint_program():
    try:
        signal.signal(signal.SIGINT, _interrupted_early)
    except ValueError:  # not the main thread
        pass

import importlib.abc  # noqa: E402 (after the SIGINT handler: these imports take the first ~0.1 s)
import importlib.machinery  # noqa: E402
from pathlib import Path  # noqa: E402

#: Every subpackage, a folder of the repository root each (pyproject.toml's ``package-dir`` maps the same).
SUBPACKAGES = ("models", "data", "config", "privacy", "recognition", "training", "client", "server", "attacks",
               "lab", "cli", "experiments")

_HERE = Path(__file__).resolve().parent


class _SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Imports ``fedprint.<subpackage>`` from the folder beside this package (a source tree)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102 (importlib protocol)
        parent, _, name = fullname.partition(".")
        if parent != __name__ or name not in SUBPACKAGES:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.root])


def _source_root() -> Path | None:
    """The repository root when this package is imported from a source tree, else None (an installed wheel)."""
    if (_HERE / "server").is_dir():
        return None
    root = _HERE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "server" / "__init__.py").is_file() else None


if (_root := _source_root()) is not None:
    # First, so that a tree imported by path (a FAB) wins over an editable install's mapping of another tree.
    sys.meta_path.insert(0, _SourceTreeFinder(_root))
