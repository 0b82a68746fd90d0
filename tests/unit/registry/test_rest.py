"""The REST API in memory: Twisted Web's site driven through a StringTransport, no network,
the store applying records at once (MemoryStore), so every answer is the registry's own."""
from __future__ import annotations

import json
from typing import Any

import pytest
from twisted.internet import defer
from twisted.internet.testing import StringTransport

from kafkalite.registry.rest import Forwarded, make_site
from kafkalite.registry.service import MemoryStore, SchemaRegistry
from kafkalite.registry.state import RegistryState

V1 = "application/vnd.schemaregistry.v1+json"
ME = "http://me:8081"

USER_V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "id", "type": "long"}, {"name": "email", "type": ["null", "string"], "default": None}]})
USER_BAD = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "id", "type": "long"}, {"name": "age", "type": "int"}]})


class Api:
    def __init__(self, primary: str | None = ME, forwarder: Any = None, max_body: int = 1 << 20) -> None:
        self.state = RegistryState()
        self.store = MemoryStore(self.state)
        self.registry = SchemaRegistry(self.state, self.store, ME)
        self.registry.primary_url = primary
        self.site = make_site(self.registry, forwarder, max_body)

    def raw(self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
            ) -> tuple[int, dict[str, str], bytes]:
        proto = self.site.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        head = {"Host": "registry", "Content-Length": str(len(body)), **(headers or {})}
        proto.dataReceived(f"{method} {path} HTTP/1.0\r\n".encode()
                           + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n" + body)
        data = transport.value()
        header_blob, _, payload = data.partition(b"\r\n\r\n")
        lines = header_blob.decode().split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        return status, hdrs, payload

    def call(self, method: str, path: str, body: Any = None, ctype: str = V1) -> tuple[int, Any]:
        data = b"" if body is None else json.dumps(body).encode()
        status, hdrs, payload = self.raw(method, path, data, {"Content-Type": ctype} if body is not None else {})
        return status, json.loads(payload) if payload else None


@pytest.fixture
def api() -> Api:
    return Api()


def test_register_lookup_and_read_back(api: Api) -> None:
    """Same schema -> same id across subjects; versions, latest/-1, raw schema and by-id reads."""
    assert api.call("POST", "/subjects/users-value/versions", {"schema": USER_V1}) == (200, {"id": 1})
    assert api.call("POST", "/subjects/users-value/versions", {"schema": USER_V1}) == (200, {"id": 1})
    assert api.call("POST", "/subjects/other/versions", {"schema": USER_V1}) == (200, {"id": 1})
    assert api.call("POST", "/subjects/users-value/versions", {"schema": USER_V2}) == (200, {"id": 2})
    assert api.call("GET", "/subjects") == (200, ["other", "users-value"])
    assert api.call("GET", "/subjects/users-value/versions") == (200, [1, 2])
    for v in ("latest", "-1", "2"):
        status, body = api.call("GET", f"/subjects/users-value/versions/{v}")
        assert status == 200 and body["version"] == 2 and body["id"] == 2 and "schemaType" not in body
    status, schema = api.call("GET", "/subjects/users-value/versions/1/schema")
    assert status == 200 and schema["name"] == "User" and len(schema["fields"]) == 1
    assert api.call("GET", "/schemas/ids/1")[1] == {"schema": api.state.get_version("other", 1).schema}
    assert api.call("GET", "/schemas/ids/1/versions") == (200, [{"subject": "other", "version": 1},
                                                                 {"subject": "users-value", "version": 1}])
    assert api.call("GET", "/schemas/ids/1/subjects") == (200, ["other", "users-value"])
    assert api.call("GET", "/schemas/types") == (200, ["JSON", "AVRO"])
    status, found = api.call("POST", "/subjects/users-value", {"schema": USER_V2})
    assert status == 200 and found["id"] == 2 and found["version"] == 2 and found["subject"] == "users-value"


def test_content_types_accepted_and_echoed(api: Api) -> None:
    """The three content types are accepted; the answer uses the one the client accepts."""
    for ctype in ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                  "application/json"):
        status, hdrs, _ = api.raw("POST", "/subjects/ct/versions", json.dumps({"schema": USER_V1}).encode(),
                                  {"Content-Type": ctype, "Accept": ctype})
        assert status == 200 and hdrs["content-type"] == ctype


@pytest.mark.parametrize("method, path, body, headers, status, code", [
    ("POST", "/subjects/s/versions", b"{not json", {"Content-Type": V1}, 422, 422),
    ("POST", "/subjects/s/versions", b'{"schema": "{}"}', {"Content-Type": "text/plain"}, 415, 415),
    ("POST", "/subjects/s/versions", b'{"schema": "{\\"type\\": \\"nope\\"}"}', {"Content-Type": V1}, 422, 42201),
    ("POST", "/subjects/s/versions", b'{"schema": 5}', {"Content-Type": V1}, 422, 42201),
    ("POST", "/subjects/s/versions", b'[1]', {"Content-Type": V1}, 422, 422),
    ("POST", "/subjects/s/versions", b'{"schema": "{}", "schemaType": "XML"}', {"Content-Type": V1}, 422, 42201),
    ("GET", "/subjects/missing/versions", b"", {}, 404, 40401),
    ("GET", "/subjects/missing/versions/1", b"", {}, 404, 40401),
    ("GET", "/subjects/s/versions/abc", b"", {}, 422, 42202),
    ("GET", "/subjects/s/versions/0", b"", {}, 422, 42202),
    ("GET", "/schemas/ids/999", b"", {}, 404, 40403),
    ("GET", "/schemas/ids/x", b"", {}, 404, 40403),
    ("GET", "/no/such/path", b"", {}, 404, 404),
    ("PATCH", "/subjects", b"", {}, 405, 405),
    ("GET", "/subjects", b"", {"Accept": "text/html"}, 406, 406),
    ("PUT", "/config", b'{"compatibility": "SIDEWAYS"}', {"Content-Type": V1}, 422, 42203),
    ("PUT", "/mode", b'{"mode": "SLEEP"}', {"Content-Type": V1}, 422, 42204),
    ("GET", "/config/s", b"", {}, 404, 40408),
    ("GET", "/mode/s", b"", {}, 404, 40409),
])
def test_bad_input_gets_the_error_json(api: Api, method: str, path: str, body: bytes, headers: dict,
                                       status: int, code: int) -> None:
    """Every refusal is Confluent's status + {"error_code", "message"}, never a crash."""
    got, hdrs, payload = api.raw(method, path, body, headers)
    doc = json.loads(payload)
    assert (got, doc["error_code"]) == (status, code), doc
    assert isinstance(doc["message"], str) and doc["message"]


def test_version_not_found_and_invalid_schema_message(api: Api) -> None:
    api.call("POST", "/subjects/s/versions", {"schema": USER_V1})
    status, body = api.call("GET", "/subjects/s/versions/7")
    assert (status, body["error_code"], body["message"]) == (404, 40402, "Version 7 not found.")
    status, body = api.call("POST", "/subjects/s", {"schema": '{"type":"record","name":"X","fields":[]}'})
    assert (status, body["error_code"]) == (404, 40403)
    status, body = api.call("POST", "/subjects/s", {"schema": "{]"})
    assert (status, body["error_code"]) == (422, 42201) and body["message"].startswith("Invalid schema")


def test_huge_body_refused_without_buffering() -> None:
    """A declared body over the limit is answered 413 with the error JSON; nothing is stored."""
    api = Api(max_body=1024)
    status, _, payload = api.raw("POST", "/subjects/s/versions", b"x" * 5000, {"Content-Type": V1})
    assert status == 413 and json.loads(payload)["error_code"] == 413
    assert api.state.subjects == {}


def test_incompatible_change_refused_with_409_and_compatibility_endpoint(api: Api) -> None:
    api.call("POST", "/subjects/u/versions", {"schema": USER_V1})
    status, body = api.call("POST", "/subjects/u/versions", {"schema": USER_BAD})
    assert (status, body["error_code"]) == (409, 409)
    assert "Schema being registered is incompatible with an earlier schema" in body["message"]
    assert api.call("POST", "/compatibility/subjects/u/versions/latest", {"schema": USER_BAD}) == \
        (200, {"is_compatible": False})
    status, verbose = api.call("POST", "/compatibility/subjects/u/versions/latest?verbose=True", {"schema": USER_BAD})
    assert verbose["is_compatible"] is False and any("READER_FIELD_MISSING_DEFAULT_VALUE" in m
                                                     for m in verbose["messages"])
    assert api.call("POST", "/compatibility/subjects/u/versions", {"schema": USER_V2}) == (200, {"is_compatible": True})
    # NONE lets it through
    assert api.call("PUT", "/config/u", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert api.call("POST", "/subjects/u/versions", {"schema": USER_BAD}) == (200, {"id": 2})


def test_config_and_mode_per_subject_and_global(api: Api) -> None:
    assert api.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert api.call("PUT", "/config", {"compatibility": "full"}) == (200, {"compatibility": "FULL"})
    assert api.call("GET", "/config/s?defaultToGlobal=true") == (200, {"compatibilityLevel": "FULL"})
    assert api.call("PUT", "/config/s", {"compatibility": "FORWARD_TRANSITIVE"})[0] == 200
    assert api.call("GET", "/config/s") == (200, {"compatibilityLevel": "FORWARD_TRANSITIVE"})
    assert api.call("DELETE", "/config/s") == (200, {"compatibilityLevel": "FORWARD_TRANSITIVE"})
    assert api.call("GET", "/config/s")[1]["error_code"] == 40408
    assert api.call("DELETE", "/config") == (200, {"compatibilityLevel": "FULL"})
    assert api.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    # modes
    assert api.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert api.call("PUT", "/mode/s", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = api.call("POST", "/subjects/s/versions", {"schema": USER_V1})
    assert (status, body["error_code"]) == (422, 42205)
    assert api.call("DELETE", "/mode/s") == (200, {"mode": "READONLY"})
    assert api.call("POST", "/subjects/s/versions", {"schema": USER_V1}) == (200, {"id": 1})
    status, body = api.call("PUT", "/mode", {"mode": "IMPORT"})
    assert (status, body["error_code"]) == (422, 42205)
    assert api.call("PUT", "/mode?force=true", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    # IMPORT keeps the given id and version
    assert api.call("POST", "/subjects/imp/versions", {"schema": USER_V2, "id": 40, "version": 3}) == (200, {"id": 40})
    assert api.call("GET", "/subjects/imp/versions/3")[1]["id"] == 40


def test_soft_and_hard_deletes_then_reregister(api: Api) -> None:
    api.call("POST", "/subjects/d/versions", {"schema": USER_V1})
    api.call("POST", "/subjects/d/versions", {"schema": USER_V2})
    status, body = api.call("DELETE", "/subjects/d/versions/1?permanent=true")
    assert (status, body["error_code"]) == (404, 40407)
    assert api.call("DELETE", "/subjects/d/versions/1") == (200, 1)
    assert api.call("GET", "/subjects/d/versions") == (200, [2])
    assert api.call("GET", "/subjects/d/versions?deleted=true") == (200, [1, 2])
    assert api.call("GET", "/subjects/d/versions/1")[1]["error_code"] == 40402
    assert api.call("GET", "/subjects/d/versions/1?deleted=true")[1]["id"] == 1
    assert api.call("DELETE", "/subjects/d/versions/1?permanent=true") == (200, 1)
    # subject: soft, then hard
    status, body = api.call("DELETE", "/subjects/d?permanent=true")
    assert (status, body["error_code"]) == (404, 40405)
    assert api.call("DELETE", "/subjects/d") == (200, [2])
    assert api.call("GET", "/subjects") == (200, [])
    assert api.call("GET", "/subjects?deleted=true") == (200, ["d"])
    assert api.call("DELETE", "/subjects/d")[1]["error_code"] == 40404
    assert api.call("GET", "/schemas/ids/2")[0] == 200            # deleted data still decodes
    assert api.call("DELETE", "/subjects/d?permanent=true") == (200, [2])
    assert api.call("GET", "/subjects/d/versions?deleted=true")[1]["error_code"] == 40401
    # the same schema comes back with its old id; a new one gets a fresh id
    assert api.call("POST", "/subjects/d/versions", {"schema": USER_V2}) == (200, {"id": 2})
    assert api.call("GET", "/subjects/d/versions") == (200, [1])
    other = json.dumps({"type": "record", "name": "Other", "fields": []})
    assert api.call("POST", "/subjects/e/versions", {"schema": other}) == (200, {"id": 3})


def test_references_and_referencedby(api: Api) -> None:
    addr = json.dumps({"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]})
    user = json.dumps({"type": "record", "name": "User", "fields": [{"name": "a", "type": "Address"}]})
    assert api.call("POST", "/subjects/addr/versions", {"schema": addr}) == (200, {"id": 1})
    refs = [{"name": "Address", "subject": "addr", "version": 1}]
    assert api.call("POST", "/subjects/user/versions", {"schema": user, "references": refs}) == (200, {"id": 2})
    status, body = api.call("GET", "/subjects/user/versions/1")
    assert body["references"] == refs
    assert api.call("GET", "/subjects/addr/versions/1/referencedby") == (200, [2])
    status, body = api.call("DELETE", "/subjects/addr/versions/1")
    assert (status, body["error_code"]) == (422, 42206)
    status, body = api.call("POST", "/subjects/user2/versions", {"schema": user})
    assert (status, body["error_code"]) == (422, 42201)         # Address unknown without the reference
    status, body = api.call("POST", "/subjects/user3/versions",
                            {"schema": user, "references": [{"name": "Address", "subject": "nope", "version": 1}]})
    assert (status, body["error_code"]) == (422, 42201)


def test_json_schema_type(api: Api) -> None:
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False})
    assert api.call("POST", "/subjects/j/versions", {"schema": schema, "schemaType": "JSON"}) == (200, {"id": 1})
    status, body = api.call("GET", "/subjects/j/versions/latest")
    assert body["schemaType"] == "JSON"
    narrowed = json.dumps({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}},
                           "additionalProperties": False})
    status, body = api.call("POST", "/subjects/j/versions", {"schema": narrowed, "schemaType": "JSON"})
    assert (status, body["error_code"]) == (409, 409)


def test_state_is_rebuilt_from_the_records_alone(api: Api) -> None:
    """Replaying the written records into a fresh state gives the same answers (the path a
    restarted or second instance takes)."""
    api.call("POST", "/subjects/a/versions", {"schema": USER_V1})
    api.call("POST", "/subjects/a/versions", {"schema": USER_V2})
    api.call("PUT", "/config/a", {"compatibility": "FULL"})
    api.call("DELETE", "/subjects/a/versions/1")
    fresh = Api()
    for offset, (k, v) in enumerate(api.store.log):
        fresh.state.apply_raw(k, v, offset)
    for path in ("/subjects", "/subjects/a/versions", "/subjects/a/versions?deleted=true", "/config/a",
                 "/schemas/ids/1", "/subjects/a/versions/latest"):
        assert fresh.call("GET", path) == api.call("GET", path), path
    # and ids continue after the replayed maximum
    assert fresh.call("POST", "/subjects/b/versions", {"schema": json.dumps({"type": "string"})}) == (200, {"id": 3})


def test_unreadable_records_are_skipped() -> None:
    state = RegistryState()
    state.apply_raw(b"garbage", b"{}", 0)
    state.apply_raw(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"[1]", 1)
    state.apply_raw(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
                    b'{"subject":"s","version":1,"id":4,"schema":"\\"string\\"","deleted":false}', 2)
    assert state.applied_offset == 2 and state.get_version("s", 1).id == 4 and state.max_id == 4


class FakeForwarder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, bytes, bytes]] = []

    def forward(self, primary: str, request: Any, body: bytes) -> defer.Deferred:
        self.calls.append((primary, request.method, request.uri, body))
        return defer.succeed(Forwarded(200, b"application/vnd.schemaregistry.v1+json", b'{"id":77}'))


def test_writes_on_a_follower_are_forwarded_and_reads_are_local() -> None:
    fwd = FakeForwarder()
    api = Api(primary="http://primary:8081", forwarder=fwd)
    body = {"schema": USER_V1}
    assert api.call("POST", "/subjects/f/versions?normalize=false", body) == (200, {"id": 77})
    assert fwd.calls == [("http://primary:8081", b"POST", b"/subjects/f/versions?normalize=false",
                          json.dumps(body).encode())]
    assert api.call("GET", "/subjects") == (200, [])          # reads never forwarded
    # bad bodies are refused locally, not forwarded
    status, _, payload = api.raw("POST", "/subjects/f/versions", b"{", {"Content-Type": V1})
    assert status == 422 and len(fwd.calls) == 1
    # a forwarded request reaching a non-primary is not forwarded again
    status, _, payload = api.raw("DELETE", "/subjects/f", b"", {"X-Kafkalite-Registry-Forwarded": "1"})
    assert (status, json.loads(payload)["error_code"]) == (500, 50004)


def test_no_primary_known_answers_50004() -> None:
    api = Api(primary=None)
    status, body = api.call("POST", "/subjects/x/versions", {"schema": USER_V1})
    assert (status, body["error_code"]) == (500, 50004)


def test_deeply_nested_input_is_refused_not_crashed(api: Api) -> None:
    """JSON nested beyond the parser's depth, as a body or inside a schema, is a 422, not a 500."""
    deep = b"[" * 100000 + b"]" * 100000
    status, _, payload = api.raw("POST", "/subjects/s/versions", deep, {"Content-Type": V1})
    assert (status, json.loads(payload)["error_code"]) == (422, 422)
    nested = '{"type":"array","items":' * 5000 + '"int"' + "}" * 5000
    status, body = api.call("POST", "/subjects/s/versions", {"schema": nested})
    assert (status, body["error_code"]) == (422, 42201)


def test_huge_chunked_body_refused() -> None:
    """A chunked body is counted as it streams and dropped past the limit: 413, nothing stored."""
    api = Api(max_body=1024)
    chunk = b"x" * 800
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n"
    proto = api.site.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    proto.dataReceived(b"POST /subjects/s/versions HTTP/1.1\r\nHost: r\r\nContent-Type: " + V1.encode()
                       + b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body)
    head, _, payload = transport.value().partition(b"\r\n\r\n")
    assert head.split()[1] == b"413" and b'"error_code":413' in payload
    assert api.state.subjects == {}
