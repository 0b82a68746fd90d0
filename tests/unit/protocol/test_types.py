"""ApiKey and the generated TypedDicts agree with the tables, and the generated files are current."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker import registry
from kafkalite.protocol import codec, messages_typed
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.schema import StructSpec, load_tables, snake_case

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "gen-protocol-types"
KAFKA_28 = Path("/work/shared/reference/kafka-messages-2.8.2")
needs_kafka_28 = pytest.mark.skipif(not KAFKA_28.is_dir(), reason="Kafka 2.8.2 descriptors not available")


def _load_generator() -> Any:
    loader = importlib.machinery.SourceFileLoader("gen_protocol_types", str(SCRIPT))
    spec = importlib.util.spec_from_loader("gen_protocol_types", loader)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    loader.exec_module(module)
    return module


def _member_name(api_name: str) -> str:
    return snake_case(api_name).upper()


# ----------------------------------------------------------------------------------------- ApiKey


def test_every_api_of_the_tables_has_its_member() -> None:
    """Each request and response key in messages.json is an ApiKey member named after the API
    (ProduceRequest -> PRODUCE), so no module needs an integer for an API the codec speaks."""
    tables = load_tables()
    assert tables.requests.keys() == tables.responses.keys()
    for key, spec in tables.requests.items():
        member = ApiKey(key)
        assert member.name == _member_name(spec.name[: -len("Request")])
        assert codec.API_KEYS[member] == spec.name[: -len("Request")]


@needs_kafka_28
def test_members_are_exactly_the_kafka_28_api_keys() -> None:
    """The enum holds every API key of Kafka 2.8 and nothing else, under Kafka's names: read the
    2.8.2 request descriptors independently (first JSON value after full-line comments)."""
    expected = {}
    for path in KAFKA_28.glob("*Request.json"):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
        doc, _ = json.JSONDecoder().raw_decode(text.strip())
        expected[doc["apiKey"]] = _member_name(doc["name"][: -len("Request")])
    assert {m.value: m.name for m in ApiKey} == expected
    assert len(ApiKey) == 65 and max(ApiKey) == ApiKey.UNREGISTER_BROKER == 64


def test_members_are_the_wire_integers() -> None:
    """A member compares, hashes and formats as its int: dict lookups by the int from a request
    header find handlers registered by member, and log lines read as before ("3", not a name)."""
    assert ApiKey.PRODUCE == 0 and ApiKey.FETCH == 1 and ApiKey.API_VERSIONS == 18
    by_member: dict[int, str] = {ApiKey.METADATA: "m"}
    assert hash(ApiKey.METADATA) == hash(3) and by_member[3] == "m"
    assert f"{ApiKey.METADATA}" == "3" and str(ApiKey.LIST_OFFSETS) == "2"
    registry.load_handlers()
    assert registry.HANDLERS[1].key is ApiKey.FETCH
    assert all(isinstance(spec.key, ApiKey) and spec.key == key for key, spec in registry.HANDLERS.items())


# ----------------------------------------------------------------------------------------- generator


def test_typed_module_is_the_generator_output() -> None:
    """messages_typed.py is exactly what the generator writes from the packaged messages.json
    (regenerate with scripts/gen-protocol-types after the tables change)."""
    gen = _load_generator()
    assert gen.render_typed(gen.load_tables()) == (ROOT / "kafkalite/protocol/messages_typed.py").read_text()


@needs_kafka_28
def test_api_keys_module_is_the_generator_output() -> None:
    """api_keys.py is exactly what the generator writes from the Kafka 2.8.2 descriptors."""
    gen = _load_generator()
    outputs = gen.outputs(KAFKA_28)
    assert outputs[gen.API_KEYS_OUTPUT] == (ROOT / "kafkalite/protocol/api_keys.py").read_text()
    assert outputs[gen.TYPED_OUTPUT] == (ROOT / "kafkalite/protocol/messages_typed.py").read_text()


def test_generator_refuses_a_table_key_kafka_does_not_have() -> None:
    """A request in messages.json whose key Kafka gives another name stops generation."""
    gen = _load_generator()
    tables = {"messages": {"ProduceRequest": {"type": "request", "api_key": 1}}}
    with pytest.raises(gen.GenerationError, match="ProduceRequest has API key 1"):
        gen.check_tables_against({0: "Produce", 1: "Fetch"}, tables)


# ----------------------------------------------------------------------------------------- TypedDicts


def _check_struct(cls: Any, spec: StructSpec, scope: tuple[int, int], owner: str) -> int:
    hints = typing.get_type_hints(cls)
    assert list(cls.__annotations__) == [f.key for f in spec.fields], cls.__name__
    checked = 0
    for f in spec.fields:
        lo, hi = max(f.versions[0], scope[0]), min(f.versions[1], scope[1])
        always = (lo, hi) == scope and f.tagged is None
        assert (f.key in cls.__required_keys__) == always, f"{cls.__name__}.{f.key}"
        hint = hints[f.key]
        nullable = type(None) in typing.get_args(hint)
        assert nullable == (f.nullable is not None), f"{cls.__name__}.{f.key}"
        if f.struct is not None:
            sub = getattr(messages_typed, owner + f.struct.name)
            base = next(a for a in typing.get_args(hint) if a is not type(None)) if nullable else hint
            inner = typing.get_args(base)[0] if f.is_array else base
            assert inner is sub, f"{cls.__name__}.{f.key}"
            checked += _check_struct(sub, f.struct, (lo, hi), owner)
        checked += 1
    return checked


def test_typed_dicts_follow_the_tables() -> None:
    """Every message has a TypedDict with every field of any version under the codec's key;
    a field is required exactly when every version of its parent has it untagged; nullable
    fields admit None; nested structs point at their own TypedDicts (independent walk of the
    loaded specs, at run time, so __required_keys__ is checked too)."""
    total = 0
    for name, spec in load_tables().messages.items():
        cls = getattr(messages_typed, name)
        total += _check_struct(cls, spec.body, spec.valid, name)
    assert total > 400


def test_mypy_catches_a_misspelt_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the types: mypy refuses a misspelt key in a request handler's view and a
    response struct that lacks a required field (run on a small snippet importing the module)."""
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent("""
        from kafkalite.protocol.messages_typed import HeartbeatRequest, HeartbeatResponse

        def handle(req: HeartbeatRequest) -> HeartbeatResponse:
            member = req["member_idd"]
            return {"throttle_time_ms": 0}
    """))
    config = tmp_path / "mypy.ini"                 # hermetic: no config found in a parent directory
    config.write_text("[mypy]\n")
    monkeypatch.setenv("MYPYPATH", str(ROOT))      # this checkout's kafkalite, not the installed one
    out, err, status = api.run([str(snippet), "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"),
                                "--no-error-summary", "--follow-imports=silent"])
    assert status == 1, (out, err)
    assert re.search(r'TypedDict "HeartbeatRequest" has no key "member_idd"', out), out
    assert re.search(r'Missing key "error_code" for TypedDict "HeartbeatResponse"', out), out


def _mentions(hint: Any, target: type) -> bool:
    """Whether ``target`` appears in a type hint (a union, Deferred[...], Generator[...])."""
    return hint is target or any(_mentions(arg, target) for arg in typing.get_args(hint))


def test_every_handler_takes_its_request_and_returns_its_response() -> None:
    """Each registered handler is annotated with its API's generated request type and returns its
    generated response type (directly, in a Deferred, or as an inlineCallbacks generator's
    result), so mypy checks field names both ways; the hints are evaluated at run time, so a
    handler left on ``dict[str, Any]`` or ``Any`` fails here."""
    registry.load_handlers()
    assert len(registry.HANDLERS) >= 46
    wrong = []
    for key, spec in sorted(registry.HANDLERS.items()):
        name = codec.API_KEYS[key]
        hints = typing.get_type_hints(spec.handler)
        params = [p for p in hints if p != "return"]
        request, response = getattr(messages_typed, name + "Request"), getattr(messages_typed, name + "Response")
        if len(params) != 2 or hints[params[1]] is not request:
            wrong.append(f"{spec.handler.__name__}: request {hints.get(params[-1]) if params else None}")
        if not _mentions(hints.get("return"), response):
            wrong.append(f"{spec.handler.__name__}: returns {hints.get('return')}")
    assert not wrong, wrong


def test_records_size_counts_bytes_of_every_records_form() -> None:
    """records_size: a buffer's length, a chunk sequence's total, 0 for null."""
    assert messages_typed.records_size(b"abc") == 3
    assert messages_typed.records_size(memoryview(b"abcd")[1:]) == 3
    assert messages_typed.records_size([b"ab", bytearray(b"c"), memoryview(b"de")]) == 5
    assert messages_typed.records_size(None) == 0
