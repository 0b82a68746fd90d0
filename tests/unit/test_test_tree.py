"""The test tree itself: pytest imports test modules by their file name ("prepend" import mode),
so two test modules with one basename in directories that are not packages break collection of
the whole suite. Each basename is used once, or lives in a package (a directory with __init__.py)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_basenames_do_not_collide() -> None:
    by_name: dict[str, list[Path]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            by_name[path.name].append(path.relative_to(TESTS))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each (or make its directory a package): {clashes}"
