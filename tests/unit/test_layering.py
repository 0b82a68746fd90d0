"""Imports point one way: core <- adapters <- broker <- tools (ARCHITECTURE.md, "Layers").

Each module of kafkalite/, zk_schema/ and spark_integration/ is parsed (not imported) and every
import of a project module is checked against the layer table: a module may import its own layer
and the layers below it, never one above. The pure core also never imports Twisted's reactor
machinery or kazoo, and the operator side never imports the broker. A new package must be given
a layer here, so the table stays the architecture's one source.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (module prefix, layer); the longest matching prefix wins.
LAYERS: list[tuple[str, int]] = [
    # 0 core: pure data and logic
    ("kafkalite.errors", 0), ("kafkalite.config", 0), ("kafkalite.protocol", 0),
    ("kafkalite.records", 0), ("kafkalite.storage", 0), ("kafkalite.metadata", 0),
    ("kafkalite.group", 0), ("kafkalite.controller.decisions", 0),
    ("kafkalite.controller.assignment", 0), ("kafkalite.security", 0), ("kafkalite.txn", 0),
    ("zk_schema", 0), ("kafkalite", 0),
    # 1 adapters: ZooKeeper sessions, sockets, follower fetching
    ("kafkalite.coordination", 1), ("kafkalite.net", 1), ("kafkalite.replication", 1),
    # 2 the broker's wiring (the controller's I/O half included)
    ("kafkalite.broker", 2), ("kafkalite.controller.controller", 2), ("kafkalite.controller.context", 2),
    ("kafkalite.controller", 2), ("kafkalite.metrics", 2),
    # 3 tools: reach brokers over the wire (or, like Kafka's tools, ZooKeeper)
    ("kafkalite.client", 3), ("kafkalite.cli", 3), ("kafkalite.cluster", 3), ("kafkalite.demo", 3),
    ("kafkalite.registry", 3), ("kafkalite.connect", 3), ("kafkalite.console", 3), ("kafkalite.sql", 3),
    ("spark_integration", 3),
]
NAMES = {0: "core", 1: "adapters", 2: "broker", 3: "tools"}
#: Core modules that are pure: no reactor, no sockets, no kazoo.
PURE = ("kafkalite.protocol", "kafkalite.quota", "kafkalite.records", "kafkalite.storage", "kafkalite.metadata",
        "zk_schema", "kafkalite.controller.decisions", "kafkalite.config", "kafkalite.errors")
IMPURE_THIRD_PARTY = ("twisted", "kazoo")


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


def test_the_pure_core_imports_no_reactor_and_no_kazoo() -> None:
    wrong = []
    for module, path in modules():
        if not module.startswith(PURE):
            continue
        for target, line in imports_of(module, path):
            if target.split(".")[0] in IMPURE_THIRD_PARTY:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(sorted(set(wrong)))


@pytest.mark.parametrize("tool", ["kafkalite.cli", "kafkalite.client", "kafkalite.registry", "spark_integration",
                                  "kafkalite.cluster", "kafkalite.demo"])
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
