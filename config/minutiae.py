"""``[minutiae]``: which extractor gives every consumer of an experiment its minutiae (issue 57).

One key, ``backend`` (:mod:`fedprint.data.minutiae_backends`): ``"auto"`` (default; MINDTCT from nbis-py where it is
installed, else the crossing number), ``"nbis"``, ``"leader"`` or ``"crossing"``. It chooses the extractor of
FP-DFSN's Eq. 9 (``privacy.fpdfsn``, part of its cache key) and of the minutiae-map training targets
(``training.minutiae_targets``, ``[train] minutiae_weight``); the model file's ``data.minutiae`` records what it
resolved to where either was used, and every run's provenance what ``"auto"`` means on its machine.

The name is checked when the file is read; whether the backend's package is installed, when it is used
(:meth:`MinutiaeSection.resolved`), so a run directory written elsewhere can still be read back.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any

from fedprint.data.minutiae_backends import BACKENDS, resolve_backend

#: What ``[minutiae] backend`` accepts.
CHOICES = ("auto", *BACKENDS)
#: How errors name the key.
OPTION = "[minutiae] backend"


def check_backend_name(name: object, where: str = OPTION) -> str:
    """``name`` if it is one of :data:`CHOICES`, else one line naming ``where``."""
    if not isinstance(name, str) or name not in CHOICES:
        raise ValueError(f"{where}: expected one of {', '.join(CHOICES)}, got {name!r}")
    return name


@dataclass(frozen=True)
class MinutiaeSection:
    """``[minutiae]``: the minutiae backend of the experiment (see the module docstring)."""

    backend: str = "auto"

    def __post_init__(self) -> None:
        check_backend_name(self.backend, "minutiae.backend")

    def resolved(self) -> str:
        """The backend this means here (``"auto"`` resolved); one line naming the key if not installed."""
        return resolve_backend(self.backend, OPTION)


#: The command-line option that overrides ``[minutiae] backend`` (``fedprint train``, ``fedprint train sweep``).
CLI_OPTION = "--minutiae-backend"


def add_minutiae_backend_arg(p: argparse.ArgumentParser) -> None:
    """``--minutiae-backend NAME``: overrides the experiment's ``[minutiae] backend`` (default: as configured)."""
    p.add_argument(CLI_OPTION, default=None, metavar="NAME",
                   help="minutiae extractor of FP-DFSN and the minutiae-map targets, instead of the experiment's "
                        "[minutiae] backend: auto (nbis where nbis-py is installed, else crossing), nbis, leader or "
                        "crossing (fedprint.data.minutiae_backends); recorded in the run and the model file")


def with_minutiae_backend(cfg: Any, name: str | None) -> Any:
    """``cfg`` (an ExperimentConfig) with backend ``name`` (None: its own ``[minutiae] backend``), checked now
    (known; installed where the experiment uses minutiae), with one line naming the option or key."""
    if name is not None:
        resolve_backend(check_backend_name(name, CLI_OPTION), CLI_OPTION)
        cfg = dataclasses.replace(cfg, minutiae=MinutiaeSection(name))
    elif cfg.minutiae_uses():
        cfg.minutiae.resolved()
    return cfg
