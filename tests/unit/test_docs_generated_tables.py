"""The documentation's generated tables (docs/configuration.md, docs/protocol.md, docs/benchmarks.md)
are exactly what scripts/gen-config-docs and `scripts/bench publish` generate from
kafkalite/config.py, the handler registry and bench/RESULTS.json, so the documentation cannot drift."""
from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def load_generator():
    loader = importlib.machinery.SourceFileLoader("gen_config_docs", str(ROOT / "scripts" / "gen-config-docs"))
    spec = importlib.util.spec_from_loader("gen_config_docs", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_doc_tables_match_the_code() -> None:
    """Regenerating changes nothing (run scripts/gen-config-docs after changing config.py or a handler),
    and every table the generator makes sits in one of its pages."""
    gen = load_generator()
    placed = []
    for path, names in gen.PAGES.items():
        text = path.read_text()
        assert gen.regenerate(text, names) == text, path
        placed += names
    assert sorted(placed) == sorted(gen.TABLES)


def test_a_stale_table_is_regenerated() -> None:
    """The comparison above can fail: a changed row is put back by the generator."""
    gen = load_generator()
    text = (DOCS / "configuration.md").read_text()
    stale = text.replace("| `log.retention.hours` | int | `168` |", "| `log.retention.hours` | int | `24` |")
    assert stale != text
    assert gen.regenerate(stale, ["broker-config", "topic-config"]) == text


def test_tables_cover_every_property_and_api() -> None:
    """Every broker and topic property appears in the configuration page with its default; every
    served API in the protocol page."""
    from kafkalite.broker.registry import advertised, load_handlers
    from kafkalite.config import BROKER_KEYS, TOPIC_KEYS

    text = (DOCS / "configuration.md").read_text()
    for name in BROKER_KEYS:
        assert f"| `{name}` |" in text, name
    for name in TOPIC_KEYS:
        assert f"| `{name}` |" in text, name
    assert "| `log.retention.hours` | int | `168` |" in text
    load_handlers()
    apis = (DOCS / "protocol.md").read_text()
    for key, _lo, hi in advertised():
        assert f"| {key} | " in apis and f"-{hi} |" in apis


def test_doc_benchmark_table_is_the_published_results() -> None:
    """docs/benchmarks.md's side-by-side table is what `scripts/bench publish` writes from
    bench/RESULTS.json (publish again after editing either)."""
    from bench import report

    assert report.DOC_PAGE == DOCS / "benchmarks.md"
    _, rows = report.load_published(ROOT / "bench" / "RESULTS.json")
    text = report.DOC_PAGE.read_text()
    assert report.regenerate_doc(text, rows) == text
