"""The packaged messages.json matches the official descriptors (when they are available)."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
from importlib import resources
from pathlib import Path

import pytest

from kafkalite.protocol.schema import load_tables, snake_case

pytestmark = pytest.mark.unit

DESCRIPTORS = Path("/work/shared/reference/kafka-messages")
SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "gen-protocol-tables"
PROJECT_DESCRIPTORS = Path(__file__).resolve().parents[3] / "kafkalite" / "protocol" / "descriptors"
needs_descriptors = pytest.mark.skipif(not DESCRIPTORS.is_dir(), reason="descriptors not available")


def _load_generator():
    loader = importlib.machinery.SourceFileLoader("gen_protocol_tables", str(SCRIPT))
    spec = importlib.util.spec_from_loader("gen_protocol_tables", loader)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    loader.exec_module(module)
    return module


def _packaged() -> dict:
    return json.loads(resources.files("kafkalite.protocol").joinpath("messages.json").read_text())


@needs_descriptors
def test_packaged_tables_are_regenerated_output() -> None:
    """Running the generator now gives exactly the shipped file (no hand edits, not stale)."""
    gen = _load_generator()
    assert gen.build_tables(DESCRIPTORS, gen.LOCAL_DESCRIPTORS) == _packaged()


@needs_descriptors
def test_every_descriptor_field_is_in_the_tables() -> None:
    """Independent walk of the raw descriptors (full-line comments dropped): every message,
    valid range, field name, type and version range appears in the loaded tables."""
    tables = load_tables()
    files = sorted(DESCRIPTORS.glob("*.json")) + sorted(PROJECT_DESCRIPTORS.glob("*.json"))
    assert len(sorted(DESCRIPTORS.glob("*.json"))) == 50
    assert len(files) == len(tables.messages)

    def walk(raw_fields: list, spec_fields: tuple, commons: dict) -> int:
        assert [f["name"] for f in raw_fields] == [f.name for f in spec_fields]
        count = 0
        for raw, spec in zip(raw_fields, spec_fields):
            assert spec.key == snake_case(raw["name"])
            assert spec.type_name == raw["type"]
            lo = int(re.match(r"\d+", raw["versions"]).group())
            assert spec.versions[0] == lo
            assert ("tag" in raw) == (spec.tag is not None)
            assert ("nullableVersions" in raw) == (spec.nullable is not None)
            count += 1
            if spec.struct is not None:
                sub = raw.get("fields") or commons[raw["type"].lstrip("[]")]
                count += walk(sub, spec.struct.fields, commons)
        return count

    total = 0
    for path in files:
        text = "\n".join(line for line in path.read_text().splitlines()
                         if not line.lstrip().startswith("//"))
        doc = json.loads(text)
        spec = tables.messages[doc["name"]]
        assert spec.kind == doc["type"]
        assert spec.api_key == doc.get("apiKey")
        lo, _, hi = doc["validVersions"].partition("-")
        assert spec.valid == (int(lo), int(hi or lo))
        commons = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
        total += walk(doc["fields"], spec.body.fields, commons)
    assert total > 400


def test_tables_carry_no_prose() -> None:
    """Wire facts only: no 'about' text or comments were copied into the package."""
    text = resources.files("kafkalite.protocol").joinpath("messages.json").read_text()
    assert '"about"' not in text and "//" not in text


def test_comment_stripping_keeps_strings() -> None:
    """The generator drops // comments but not // inside string literals."""
    gen = _load_generator()
    src = '// head\n{"a": "x//y", // tail\n "b": 1}\n'
    assert json.loads(gen.strip_comments(src)) == {"a": "x//y", "b": 1}


def test_generator_rejects_unknown_descriptor_keys(tmp_path: Path) -> None:
    """A descriptor feature the codec does not know fails generation instead of being ignored."""
    gen = _load_generator()
    (tmp_path / "X.json").write_text('{"type": "data", "name": "X", "validVersions": "0",'
                                     ' "fields": [{"name": "A", "type": "int32", "versions": "0+",'
                                     ' "surprise": 1}]}')
    with pytest.raises(gen.DescriptorError):
        gen.build_tables(tmp_path)


def test_snake_case_convention() -> None:
    """Field names map as documented in the package docstring."""
    assert [snake_case(n) for n in ("ThrottleTimeMs", "TopicData", "IsrNodes", "timeoutMs",
                                    "ZkMigrationReady", "GroupsNames")] == [
        "throttle_time_ms", "topic_data", "isr_nodes", "timeout_ms", "zk_migration_ready",
        "groups_names"]
