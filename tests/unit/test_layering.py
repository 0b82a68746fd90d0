"""Imports point one way: core <- adapters <- broker <- tools (ARCHITECTURE.md, "Layers").

Each module of kafkalite/, zk_schema/ and spark_integration/ is parsed (not imported) and every
import of a project module is checked against the layer table: a module may import its own layer
and the layers below it, never one above. The pure core never imports Twisted or kazoo, the
packages allowed Deferreds take only ``twisted.internet.defer``, and the tools never import the
broker. The table is ARCHITECTURE.md's "Layers" section, read here, so the document and the
check are one source: a new package gets its row there.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMES = {0: "core", 1: "adapters", 2: "broker", 3: "tools"}
IMPURE_THIRD_PARTY = ("twisted", "kazoo")
_ROW = re.compile(r"^\|\s*`([\w.]+)`\s*\|\s*(\d)\s+(\w+)\s*\|\s*(\w*)\s*\|\s*$")


def read_layer_table(text: str) -> list[tuple[str, int, str]]:
    """(module prefix, layer, Twisted/kazoo rule) of each row of the table under "## Layers"."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = _ROW.match(line)
        if match:
            prefix, layer, name, rule = match.groups()
            assert NAMES[int(layer)] == name, f"layer {layer} is {NAMES[int(layer)]}, not {name}: {line}"
            rows.append((prefix, int(layer), rule))
    return rows


TABLE = read_layer_table((ROOT / "ARCHITECTURE.md").read_text())
#: (module prefix, layer); the longest matching prefix wins.
LAYERS: list[tuple[str, int]] = [(prefix, layer) for prefix, layer, _ in TABLE]
#: Core modules that are pure: no reactor, no Deferred, no kazoo.
PURE = tuple(prefix for prefix, _, rule in TABLE if rule == "none")
#: Core modules that use Deferreds as values (and nothing else of Twisted, no kazoo).
DEFERRED_ONLY = tuple(prefix for prefix, _, rule in TABLE if rule == "defer")
TOOLS = [prefix for prefix, layer, _ in TABLE if layer == 3]


def test_the_layer_table_is_read_from_architecture_md() -> None:
    """The document's table parses into every layer and both rules (a reformatted table that the
    reader silently skipped would otherwise check nothing)."""
    assert len(TABLE) >= 30
    assert {layer for _, layer in LAYERS} == {0, 1, 2, 3}
    assert len({prefix for prefix, _ in LAYERS}) == len(LAYERS), "a prefix listed twice"
    assert "kafkalite.protocol" in PURE and "kafkalite.group" in DEFERRED_ONLY
    assert {"kafkalite.connect", "kafkalite.sql", "kafkalite.console", "kafkalite.registry"} <= set(TOOLS)
    assert read_layer_table("x\n## Layers\n| `a.b` | 2 broker | |\n| `c` | 0 core | none |\n## Next\n"
                            "| `d` | 1 adapters | |\n") == [("a.b", 2, ""), ("c", 0, "none")]


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > best[0]:
                best = (len(prefix), layer)
    return None if best is None else best[1]


def modules() -> list[tuple[str, Path]]:
    found = []
    for top in ("kafkalite", "zk_schema", "spark_integration"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if "tests" in parts:
                continue
            found.append((".".join(parts), path))
    return found


def imports_of(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import, resolving relative ones."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((base, node.lineno))
            out += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return out


def test_every_project_module_has_a_layer() -> None:
    missing = [m for m, _ in modules() if layer_of(m) is None]
    assert not missing, f"give these a layer in LAYERS: {missing}"


def test_imports_point_one_way() -> None:
    """No module imports a layer above its own (an arrow back up the layers)."""
    wrong = []
    for module, path in modules():
        mine = layer_of(module)
        assert mine is not None
        for target, line in imports_of(module, path):
            theirs = layer_of(target) if target.split(".")[0] in ("kafkalite", "zk_schema", "spark_integration") else None
            if theirs is not None and theirs > mine:
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({NAMES[mine]}) imports {target} ({NAMES[theirs]})")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_core_packages_allowed_deferreds_take_nothing_else_of_twisted() -> None:
    """``group`` and ``txn`` answer with Deferreds (no reactor, ARCHITECTURE.md "Layers"): they may
    import ``twisted.internet.defer`` and nothing else of Twisted, and no kazoo."""
    wrong = []
    for module, path in modules():
        if not module.startswith(DEFERRED_ONLY):
            continue
        for target, line in imports_of(module, path):
            if target.split(".")[0] in IMPURE_THIRD_PARTY and not (
                    target == "twisted.internet.defer" or target.startswith("twisted.internet.defer.")
                    or target == "twisted.internet"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_the_pure_core_imports_no_reactor_and_no_kazoo() -> None:
    wrong = []
    for module, path in modules():
        if not module.startswith(PURE):
            continue
        for target, line in imports_of(module, path):
            if target.split(".")[0] in IMPURE_THIRD_PARTY:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(sorted(set(wrong)))


@pytest.mark.parametrize("tool", TOOLS)
def test_tools_never_import_the_broker(tool: str) -> None:
    """Tools and Spark reach brokers over the wire: none imports the broker's wiring or adapters
    other than ZooKeeper (Kafka's own tools read and write ZooKeeper too)."""
    wrong = []
    for module, path in modules():
        if not (module == tool or module.startswith(tool + ".")):
            continue
        for target, line in imports_of(module, path):
            if target.startswith(("kafkalite.broker", "kafkalite.controller.controller", "kafkalite.replication",
                                  "kafkalite.net")):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_zk_schema_imports_nothing_of_kafkalite() -> None:
    """zk_schema is the znode codec, usable on its own (by the tools, the controller and the tests
    alike): it imports only itself and the standard library, never kafkalite, even though both sit
    in the core layer (the layer table alone would allow it)."""
    wrong = []
    for module, path in modules():
        if not (module == "zk_schema" or module.startswith("zk_schema.")):
            continue
        for target, line in imports_of(module, path):
            if target.split(".")[0] in ("kafkalite", "spark_integration"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(sorted(set(wrong)))
