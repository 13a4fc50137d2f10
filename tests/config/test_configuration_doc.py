"""docs/guide/configuration.md against the code: every key of every section, with its type and default.

The page has one ``## `[section]` `` heading per experiment section (``[[data.sources]]`` included), one for the
Flower run config (``[tool.flwr.app.config]``) and one for the SuperNode node config (``--node-config``), each
followed by a table whose first column is the key in backticks. A field added to, removed from or given a new
default in a config dataclass fails here until the page says the same.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from fedprint.config import ExperimentConfig, parse_config
from fedprint.config.app import _KEYS, ClientSettings, ServerSettings, client_settings, server_settings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "guide" / "configuration.md"
RUN_CONFIG = "[tool.flwr.app.config]"
NODE_CONFIG = "--node-config"
#: Default cell of a key whose dataclass default is None (TOML has no null: the key is left out).
UNSET = "unset"
#: Default cell of a run-config key the settings read but pyproject.toml does not declare.
NOT_DECLARED = "not declared"
#: Modules that read the node config (the ClientApp's data, device and publication ledger).
NODE_CONFIG_READERS = ("training/node_data.py", "client/client_app.py", "client/publish_handler.py")
_WORDS = {int: "integer", float: "float", str: "string", bool: "boolean"}


def _nested(hint: Any) -> type | None:
    """The dataclass a field holds, as a table (``X``) or an array of tables (``tuple[X, ...]``), else None."""
    if dataclasses.is_dataclass(hint):
        return hint
    if get_origin(hint) is tuple and dataclasses.is_dataclass(get_args(hint)[0]):
        return get_args(hint)[0]
    return None


def _sections() -> dict[str, tuple[type, list[dataclasses.Field]]]:
    """TOML heading -> (dataclass, the fields that are keys of that table), derived from ExperimentConfig."""
    out = {}

    def visit(cls: type, dotted: str, array: bool) -> None:
        hints = get_type_hints(cls)
        out[f"[[{dotted}]]" if array else f"[{dotted}]"] = (cls, [f for f in dataclasses.fields(cls)
                                                                 if _nested(hints[f.name]) is None])
        for f in dataclasses.fields(cls):
            inner = _nested(hints[f.name])
            if inner is not None:
                visit(inner, f"{dotted}.{f.name}", get_origin(hints[f.name]) is tuple)

    top = get_type_hints(ExperimentConfig)
    for f in dataclasses.fields(ExperimentConfig):
        visit(top[f.name], f.name, False)
    return out


SECTIONS = _sections()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _doc_tables() -> dict[str, dict[str, dict[str, str]]]:
    """Heading token (first backticked text of a ``## `` heading) -> key -> {column: cell} of its table."""
    tables: dict[str, dict[str, dict[str, str]]] = {}
    section, header = None, None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            m = re.search(r"`([^`]+)`", line)
            section, header = (m.group(1) if m else None), None
            if section is not None:
                assert section not in tables, f"{DOC.name}: heading {section} appears twice"
                tables[section] = {}
            continue
        if section is None or not line.startswith("|"):
            continue
        cells = _cells(line)
        if header is None:
            header = cells
            assert header[:3] == ["key", "type", "default"], f"{section}: table columns {header}"
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue
        m = re.fullmatch(r"`([^`]+)`", cells[0])
        assert m, f"{section}: the key cell {cells[0]!r} is not a key in backticks"
        assert m.group(1) not in tables[section], f"{section}: key {m.group(1)} documented twice"
        assert len(cells) == len(header), f"{section}: row of {m.group(1)} has {len(cells)} cells, not {len(header)}"
        tables[section][m.group(1)] = dict(zip(header, cells, strict=True))
    return tables


TABLES = _doc_tables()


def _doc_value(cell: str, where: str) -> Any:
    """A documented default: ``unset`` -> None, else the TOML literal in backticks (``10_000`` = ``10000``)."""
    if cell == UNSET:
        return None
    m = re.fullmatch(r"`(.+)`", cell)
    assert m, f"{where}: default {cell!r} is neither {UNSET!r} nor a TOML value in backticks"
    try:
        return tomllib.loads(f"x = {m.group(1)}")["x"]
    except tomllib.TOMLDecodeError as exc:
        raise AssertionError(f"{where}: default {cell!r} is not a TOML value ({exc})") from None


def _toml_form(value: Any) -> Any:
    """A dataclass default as TOML reads it back (tuples are arrays)."""
    return [_toml_form(v) for v in value] if isinstance(value, tuple) else value


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same type (``1`` is not ``1.0`` nor ``true``), element-wise for arrays."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _type_word(hint: Any) -> str:
    args = get_args(hint)
    if isinstance(hint, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return f"{_type_word(inner)}, optional"
    if get_origin(hint) is tuple:
        return f"array of {_WORDS[args[0]]}s"
    return _WORDS[hint]


def test_every_section_has_a_table_and_no_stale_one():
    assert set(SECTIONS) - set(TABLES) == set(), "sections of ExperimentConfig missing from the page"
    documented = {s for s in TABLES if s.startswith("[") and s != RUN_CONFIG}
    assert documented - set(SECTIONS) == set(), "the page documents sections the config does not have"


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_documented_keys_are_the_fields(section):
    _, keys = SECTIONS[section]
    assert set(TABLES[section]) == {f.name for f in keys}


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_documented_defaults_are_the_dataclass_defaults(section):
    cls, keys = SECTIONS[section]
    bad = {}
    for f in keys:
        if f.name not in TABLES[section]:
            continue  # reported by test_documented_keys_are_the_fields
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        doc = _doc_value(TABLES[section][f.name]["default"], f"{section} {f.name}")
        if not _same(doc, _toml_form(default)):
            bad[f.name] = (doc, default)
    assert not bad, f"{section}: documented default != {cls.__name__} default: {bad}"


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_documented_types_are_the_field_types(section):
    cls, keys = SECTIONS[section]
    hints = get_type_hints(cls)
    got = {f.name: TABLES[section][f.name]["type"] for f in keys if f.name in TABLES[section]}
    assert got == {name: _type_word(hints[name]) for name in got}


def test_documented_defaults_load_as_the_defaults():
    """The documented defaults, written into an experiment, give the default configuration (through the loader)."""
    def table(section: str) -> dict[str, Any]:
        rows = TABLES[section]
        return {k: v for k, row in rows.items() if (v := _doc_value(row["default"], f"{section} {k}")) is not None}

    doc: dict[str, Any] = {s.strip("[]"): table(s) for s in SECTIONS if s.count(".") == 0}
    doc["data"]["sources"] = [table("[[data.sources]]")]
    assert parse_config(doc, source=DOC.name) == ExperimentConfig()


def test_the_examples_are_valid_experiments():
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "the page has no ```toml example"
    for text in blocks:
        parse_config(tomllib.loads(text), source=f"{DOC.name} example")


def _pyproject_run_config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["flwr"]["app"]["config"]


def test_run_config_keys_types_and_defaults():
    rows, declared = TABLES[RUN_CONFIG], _pyproject_run_config()
    assert set(rows) == set(_KEYS)
    for key, row in rows.items():
        kind = _KEYS[key][2]
        assert row["type"].startswith(_WORDS[kind]), f"run config {key}: type {row['type']!r}, expected {kind}"
        if key in declared:
            assert _same(_doc_value(row["default"], f"run config {key}"), declared[key]), \
                f"run config {key}: documented {row['default']}, pyproject.toml has {declared[key]!r}"
        else:
            assert row["default"] == NOT_DECLARED, f"run config {key}: not in pyproject.toml"


def test_pyproject_run_config_is_the_settings_defaults():
    """What the page calls the run config's defaults (pyproject.toml) converts to the settings' own defaults."""
    declared = _pyproject_run_config()
    assert server_settings(declared) == ServerSettings()
    assert client_settings(declared) == ClientSettings()


def _node_config_reads() -> set[str]:
    patterns = (r'node_config\[\s*"([^"]+)"\s*\]', r'node_config\.get\(\s*"([^"]+)"',
                r'"([^"]+)"\s+(?:not\s+)?in\s+node_config\b', r'_node_value\(\s*node_config\s*,\s*"([^"]+)"')
    text = "\n".join((ROOT / p).read_text(encoding="utf-8") for p in NODE_CONFIG_READERS)
    return {k for p in patterns for k in re.findall(p, text)}


def test_node_config_keys_are_the_ones_the_code_reads():
    documented = set(TABLES[NODE_CONFIG])
    assert _node_config_reads() - documented == set(), "node-config keys read in code but not documented"
    text = "\n".join((ROOT / p).read_text(encoding="utf-8") for p in NODE_CONFIG_READERS)
    stale = {k for k in documented if f'"{k}"' not in text}
    assert not stale, f"node-config keys documented but not in {NODE_CONFIG_READERS}"
