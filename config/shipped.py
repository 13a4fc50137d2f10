"""Finding an experiment by path or by the name of a shipped one (``experiments/*.toml``).

Both Flower apps receive the experiment through the flat Flower run config (``experiment = "demo"`` or a path):
:func:`resolve_experiment` looks for a path first, then for a shipped file in ``<project>/experiments/``, which
is part of the FAB (``flwr run .`` packages ``**/*.toml``) and of the source tree.
"""

from __future__ import annotations

from pathlib import Path

#: Folder of the shipped experiment TOMLs (in the FAB and the source tree).
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "experiments"


def shipped_names() -> list[str]:
    """Names of the shipped experiments (``--config NAME``), sorted."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.toml"))


def resolve_experiment(name_or_path: str | Path, base_dir: str | Path | None = None) -> Path:
    """The experiment TOML meant by ``name_or_path``.

    Tried in order: the path itself (relative paths against ``base_dir``, default the working directory);
    then ``<project>/experiments/<name>`` and ``<project>/experiments/<name>.toml`` (shipped experiments).
    """
    text = str(name_or_path)
    if not text:
        raise ValueError("experiment: expected a path to an experiment TOML or the name of a shipped one")
    path = Path(text)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    candidates = [path, SHIPPED_DIR / text, SHIPPED_DIR / f"{text}.toml", SHIPPED_DIR / Path(text).name]
    for cand in candidates:
        if cand.is_file():
            return cand.resolve()
    shipped = sorted(p.stem for p in SHIPPED_DIR.glob("*.toml"))
    raise FileNotFoundError(f"experiment {text!r}: no such file, and not a shipped experiment {shipped}")
