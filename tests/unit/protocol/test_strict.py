"""Strict encoding: unknown and missing fields are errors, everything else encodes as before."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from protocol_samples import all_versions, sample_message

from kafkalite.protocol import codec, compiler
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import EncodeError
from kafkalite.protocol.schema import MessageSpec, load_tables

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
TABLES = load_tables()


@pytest.fixture
def strict() -> Iterator[None]:
    """Strict mode for the test whatever the suite runs with, restored afterwards."""
    before = codec.is_strict()
    codec.set_strict(True)
    try:
        yield
    finally:
        codec.set_strict(before)


_DROP = object()


def _fetch_partition(**changes: Any) -> dict:
    p = {"partition_index": 0, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
         "records": b""}
    p.update(changes)
    return {k: v for k, v in p.items() if v is not _DROP}


def _fetch_response(partition: dict) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "t", "partitions": [partition]}]}


def _frame(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def test_misspelt_key_is_refused_with_message_version_and_key(strict: None) -> None:
    """The bug strict mode exists for: ``eror_code`` beside no ``error_code`` used to send 0."""
    with pytest.raises(EncodeError) as err:
        codec.encode_response(ApiKey.HEARTBEAT, 1, 7, {"throttle_time_ms": 0, "eror_code": 27})
    assert str(err.value) == ("HeartbeatResponse v1: unknown field 'eror_code' "
                              "(no field of that name in any version)")


def test_misspelt_key_in_a_nested_struct_names_the_struct(strict: None) -> None:
    """A wrong key deep in a Fetch response names message, version, struct and key."""
    body = _fetch_response(_fetch_partition(higth_watermark=5))
    with pytest.raises(EncodeError, match=r"^FetchResponse v11: unknown field 'higth_watermark' "
                                          r"in PartitionData \(no field"):
        codec.encode_response(ApiKey.FETCH, 11, 1, body)


def test_missing_field_of_this_version_is_refused(strict: None) -> None:
    """A field on the wire in the encoded version must be in the dict; all missing ones are listed."""
    with pytest.raises(EncodeError) as err:
        codec.encode_response(ApiKey.FETCH, 11, 1, _fetch_response(
            _fetch_partition(high_watermark=_DROP, preferred_read_replica=_DROP)))
    assert str(err.value) == ("FetchResponse v11: missing field 'high_watermark' in PartitionData "
                              "(on the wire in this version; also 'preferred_read_replica')")
    with pytest.raises(EncodeError, match=r"HeartbeatResponse v1: missing field 'error_code'"):
        codec.encode_response(ApiKey.HEARTBEAT, 1, 7, {"throttle_time_ms": 0})


def test_requests_and_data_structs_are_strict_too(strict: None) -> None:
    """The client side and the __consumer_offsets records go through the same check."""
    with pytest.raises(EncodeError, match=r"MetadataRequest v8: missing field 'include_cluster_authorized_operations'"):
        codec.encode_request(ApiKey.METADATA, 8, 1, "c", {"topics": None, "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False})
    with pytest.raises(EncodeError, match=r"ConsumerProtocolAssignment v1: unknown field 'partition'"):
        codec.encode_data("ConsumerProtocolAssignment", 1, {"assigned_partitions": [], "user_data": None,
                                                            "partition": 0})


def test_fields_of_other_versions_are_accepted(strict: None) -> None:
    """One dict serves every version: keys of fields this version lacks are allowed (and not sent)."""
    full = _fetch_response(_fetch_partition())
    assert "preferred_read_replica" in full["responses"][0]["partitions"][0]     # v11 only
    v4 = _frame(codec.encode_response(ApiKey.FETCH, 4, 1, full))
    codec.set_strict(False)
    lean = _fetch_response(_fetch_partition(preferred_read_replica=_DROP, log_start_offset=_DROP))
    del lean["error_code"], lean["session_id"]                                    # v7+ fields
    assert v4 == _frame(codec.encode_response(ApiKey.FETCH, 4, 1, lean))
    codec.set_strict(True)
    with pytest.raises(EncodeError, match="missing field 'throttle_time_ms'"):   # v1+, so needed at v4
        codec.encode_response(ApiKey.FETCH, 4, 1, {k: v for k, v in full.items() if k != "throttle_time_ms"})


def test_tagged_fields_may_be_absent(strict: None) -> None:
    """ApiVersions v3's tagged fields (supported_features, ...) are optional; absent means not sent."""
    spec = TABLES.responses[ApiKey.API_VERSIONS]
    tagged = [f.key for f in spec.body.fields if f.tagged_in(3)]
    assert "supported_features" in tagged
    body = {"error_code": 0, "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 3}],
            "throttle_time_ms": 0}
    strict_bytes = _frame(codec.encode_response(ApiKey.API_VERSIONS, 3, 1, body))
    codec.set_strict(False)
    assert strict_bytes == _frame(codec.encode_response(ApiKey.API_VERSIONS, 3, 1, body))


@pytest.mark.parametrize("strict_mode", [True, False])
def test_absent_tagged_struct_is_not_written(strict_mode: bool, strict: None) -> None:
    """FetchRequest v15's tagged ReplicaState: leaving it out sends exactly what its default
    sends (nothing: an empty tag section), in both modes; a non-default value is sent."""
    codec.set_strict(strict_mode)
    spec = TABLES.requests[ApiKey.FETCH]
    body = sample_message(spec, 15, nulls=False)
    body["cluster_id"] = None                                          # the other tagged field: default
    default_state = next(f for f in spec.body.fields if f.key == "replica_state").default_value()
    absent = _frame(codec.encode_request(ApiKey.FETCH, 15, 1, None, {k: v for k, v in body.items()
                                                                     if k != "replica_state"}))
    assert absent == _frame(codec.encode_request(ApiKey.FETCH, 15, 1, None, {**body, "replica_state": default_state}))
    assert absent.endswith(b"\x00")                                      # no tagged field at the top level
    sent = _frame(codec.encode_request(ApiKey.FETCH, 15, 1, None, {**body, "replica_state": {
        "replica_id": 3, "replica_epoch": 7}}))
    assert len(sent) > len(absent)


def _top_level_cases(spec: MessageSpec, version: int) -> tuple[list[str], list[str]]:
    regular = [f.key for f in spec.body.fields if f.present(version) and not (
        spec.is_flexible(version) and f.tagged_in(version))]
    tagged = [f.key for f in spec.body.fields if f.present(version) and spec.is_flexible(version)
              and f.tagged_in(version)]
    return regular, tagged


@pytest.mark.parametrize("name", sorted(n for n, s in TABLES.messages.items() if s.kind != "header"))
def test_every_message_and_version_strict_matches_fast_and_checks_each_field(name: str, strict: None) -> None:
    """For each message and version: a complete sample (fields of all versions) encodes to the
    same bytes strictly and fast; dropping any non-tagged field of the version is refused by name,
    dropping a tagged one is not; an extra key is refused."""
    spec = TABLES.messages[name]
    for version in all_versions(spec):
        body = sample_message(spec, version, nulls=False, seed=version)
        fast = compiler.encoder(spec, version)
        strict_fn = compiler.strict_encoder(spec, version)
        assert strict_fn(body, bytearray(), []) == fast(body, bytearray(), [])
        regular, tagged = _top_level_cases(spec, version)
        for key in regular:
            with pytest.raises(EncodeError, match=f"{name} v{version}: missing field '{key}'"):
                strict_fn({k: v for k, v in body.items() if k != key}, bytearray(), [])
        for key in tagged:
            strict_fn({k: v for k, v in body.items() if k != key}, bytearray(), [])
        with pytest.raises(EncodeError, match=f"{name} v{version}: unknown field 'no_such_field'"):
            strict_fn({**body, "no_such_field": 1}, bytearray(), [])


def test_non_strict_mode_is_unchanged(lenient_codec: None) -> None:
    """Production mode: a missing key takes its default and an unknown key is ignored, exactly as
    before strict mode existed (the misspelt error code goes out as 0)."""
    assert not codec.is_strict()
    sloppy = _frame(codec.encode_response(ApiKey.HEARTBEAT, 1, 7, {"eror_code": 27}))
    assert sloppy == _frame(codec.encode_response(ApiKey.HEARTBEAT, 1, 7, {"throttle_time_ms": 0, "error_code": 0}))
    assert sloppy[-2:] == b"\x00\x00"


def test_fast_encoders_carry_no_check() -> None:
    """The check is compiled into the strict variant only: the production encoder's source has
    no key comparison, and the two variants are different cached functions."""
    spec = TABLES.responses[ApiKey.FETCH]
    assert "_strict_keys" not in compiler.generated_source(spec, 11, "encode")
    assert "d.keys()" not in compiler.generated_source(spec, 11, "encode")
    assert compiler.generated_source(spec, 11, "encode-strict").count("_strict_keys(") == 4  # 4 structs
    assert compiler.encoder(spec, 11) is not compiler.strict_encoder(spec, 11)
    assert compiler.encoder(spec, 11) is compiler.encoder(spec, 11)


def test_switch_selects_the_encoders(strict: None) -> None:
    """set_strict flips between the two families; is_strict reports it."""
    codec.set_strict(False)
    assert not codec.is_strict()
    codec.encode_response(ApiKey.HEARTBEAT, 1, 1, {"oops": 1})
    codec.set_strict(True)
    assert codec.is_strict()
    with pytest.raises(EncodeError):
        codec.encode_response(ApiKey.HEARTBEAT, 1, 1, {"oops": 1})


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), (" ON ", True), ("yes", True),
                                             ("0", False), ("", False), ("false", False), (None, False)])
def test_environment_values(value: str | None, expected: bool) -> None:
    """KAFKALITE_STRICT_CODEC: 1/true/yes/on turn strict mode on; unset, empty, 0 or false do not."""
    env = {} if value is None else {codec.STRICT_ENV: value}
    assert codec.strict_from_env(env) is expected


@pytest.mark.parametrize("value, expected", [("1", "True"), ("0", "False")])
def test_environment_is_read_at_import(value: str, expected: str) -> None:
    """A fresh process (a broker started by the tests) picks the mode from its environment."""
    env = {**os.environ, codec.STRICT_ENV: value, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", "from kafkalite.protocol import codec; print(codec.is_strict())"],
                         env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == expected


def test_suite_runs_strict() -> None:
    """tests/conftest.py turns strict mode on for this process and exports it to subprocesses."""
    assert codec.is_strict()
    assert os.environ[codec.STRICT_ENV] == "1"
