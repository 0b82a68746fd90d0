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


def test_every_tier_directory_has_its_marker() -> None:
    """Each directory under tests/ that holds test modules is a tier: tests/conftest.py's
    _TIER_BY_DIR gives its marker (and scripts/test runs it)."""
    from tests.conftest import _TIER_BY_DIR

    tiers = {p.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py") if p.parent != TESTS}
    missing = sorted(t for t in tiers if t not in _TIER_BY_DIR)
    assert not missing, f"add these tier directories to _TIER_BY_DIR and scripts/test: {missing}"
    script = (TESTS.parent / "scripts" / "test").read_text()
    not_run = sorted(t for t in tiers if f"tests/{t}" not in script)
    assert not not_run, f"scripts/test's phases do not run: {not_run}"


def test_in_process_cluster_tests_are_in_the_inprocess_tier() -> None:
    """Tests that start brokers on the simulated clock (inprocess_cluster_factory / InProcessCluster)
    are the in-process tier and live in tests/inprocess/, not among the unit tests."""
    misplaced = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                       if p.relative_to(TESTS).parts[0] != "inprocess" and p.name != "test_test_tree.py"
                       and any(name in p.read_text() for name in ("inprocess_cluster_factory", "InProcessCluster")))
    assert not misplaced, f"move to tests/inprocess/: {misplaced}"
