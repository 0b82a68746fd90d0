"""README.md's configuration and API tables are exactly what scripts/gen-config-docs generates
from kafkalite/config.py and the handler registry, so the documentation cannot drift."""
from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_generator():
    loader = importlib.machinery.SourceFileLoader("gen_config_docs", str(ROOT / "scripts" / "gen-config-docs"))
    spec = importlib.util.spec_from_loader("gen_config_docs", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_readme_tables_match_the_code() -> None:
    """Regenerating changes nothing (run scripts/gen-config-docs after changing config.py or a handler)."""
    gen = load_generator()
    text = (ROOT / "README.md").read_text()
    assert gen.regenerate(text) == text


def test_tables_cover_every_property_and_api() -> None:
    """Every broker and topic property appears in the README with its default; every served API too."""
    from kafkalite.broker.registry import advertised, load_handlers
    from kafkalite.config import BROKER_KEYS, TOPIC_KEYS

    text = (ROOT / "README.md").read_text()
    for name in BROKER_KEYS:
        assert f"| `{name}` |" in text, name
    for name in TOPIC_KEYS:
        assert f"| `{name}` |" in text, name
    assert "| `log.retention.hours` | int | `168` |" in text
    load_handlers()
    for key, _lo, hi in advertised():
        assert f"| {key} | " in text and f"-{hi} |" in text


def test_readme_benchmark_table_is_the_published_results() -> None:
    """The README's side-by-side benchmark table is what `scripts/bench publish` writes from
    bench/RESULTS.json (publish again after editing either)."""
    from bench import report

    _, rows = report.load_published(ROOT / "bench" / "RESULTS.json")
    text = (ROOT / "README.md").read_text()
    assert report.regenerate_readme(text, rows) == text
