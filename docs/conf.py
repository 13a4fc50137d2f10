"""Sphinx configuration of the FedPrint documentation (``sphinx-build -W --keep-going -b html docs <out>``).

Pages are Markdown (myst-parser): ``index.md``, the user guide (``guide/*.md``), ``references.md`` and the
research notes (``studies.md`` lists ``studies/*.md``). The API reference (``api/``) is generated on every build:
this file writes ``api/index.rst`` from :data:`fedprint.SUBPACKAGES` (the subpackages are root folders found by an
import hook, which ``pkgutil`` cannot walk from ``fedprint``), and ``sphinx.ext.autosummary`` (recursive) writes
one page per public module under ``api/generated/``; neither is committed (``.gitignore``), so a new module or
subpackage needs no edit here, and the page of a module that is gone is removed. Docstrings are numpydoc.
``tests/test_docs.py`` builds the site with warnings as errors.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import fedprint

project = "FedPrint"
author = "FedPrint contributors"
copyright = "FedPrint contributors"
try:
    from importlib.metadata import version as _version

    release = _version("fedprint")
except ImportError:  # a bare source tree: no metadata
    release = "0.1.0"
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
# `name` in a docstring is a cross-reference (the docstrings' convention: `update_weights`, `GAP_SPREAD_TOL`).
default_role = "py:obj"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# -- myst ------------------------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# -- autodoc / autosummary / numpydoc --------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autosummary_ignore_module_all = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters / Returns carry the types
numpydoc_show_class_members = False  # members are documented by autodoc on the module's page
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = f"FedPrint {release}"

# -- the API index, from fedprint.SUBPACKAGES ------------------------------------------------------------------
_API_INDEX = Path(__file__).resolve().parent / "api" / "index.rst"


def _write_api_index() -> None:
    """Write ``api/index.rst``: a recursive autosummary over every subpackage (only when its text changes)."""
    lines = [
        "API reference",
        "=============",
        "",
        ".. This file is written by docs/conf.py on every build (from fedprint.SUBPACKAGES); do not edit it.",
        "",
        "Subpackages, from the bottom layer up; one page per public module.",
        "",
        ".. autosummary::",
        "   :toctree: generated",
        "   :template: autosummary/module.rst",
        "   :recursive:",
        "",
        *(f"   fedprint.{name}" for name in fedprint.SUBPACKAGES),
        "",
        "The package",
        "-----------",
        "",
        ".. automodule:: fedprint",
        "   :members: SUBPACKAGES",
        "   :no-show-inheritance:",
        "",
    ]
    text = "\n".join(lines)
    _API_INDEX.parent.mkdir(exist_ok=True)
    if not _API_INDEX.is_file() or _API_INDEX.read_text(encoding="utf-8") != text:
        _API_INDEX.write_text(text, encoding="utf-8")


def _remove_stale_pages() -> None:
    """Delete generated pages of modules that no longer exist (they would warn: not in any toctree)."""
    for page in (_API_INDEX.parent / "generated").glob("fedprint.*.rst"):
        name = page.stem
        try:
            gone = any(part.startswith("_") for part in name.split(".")) or importlib.util.find_spec(name) is None
        except ImportError:  # a parent package is gone too
            gone = True
        if gone:
            page.unlink(missing_ok=True)


_write_api_index()
_remove_stale_pages()
