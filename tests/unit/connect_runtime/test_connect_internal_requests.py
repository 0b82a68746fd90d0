"""Task configurations go to the leader (Kafka 2.8's DistributedHerder): a follower running a
connector POSTs the configs it generated to the leader's internal endpoint, and only the leader
writes them to the config topic. Two distributed herders in memory (fake config stores, the
leader's REST resource answering the follower's HTTP calls through Twisted's DummyRequest)."""
from __future__ import annotations

import base64
import json
import threading
import time
from io import BytesIO
from pathlib import Path
from typing import Any, Mapping

import pytest
from twisted.internet import defer
from twisted.web.server import NOT_DONE_YET
from twisted.web.test.requesthelper import DummyRequest

from kafkalite.connect.runtime.distributed import DistributedHerder
from kafkalite.connect.runtime.herder import ClusterConfigState
from kafkalite.connect.runtime.kafka_stores import ConfigUpdate
from kafkalite.connect.runtime.offsets import MemoryOffsetStore
from kafkalite.connect.runtime.rest import ConnectResource
from kafkalite.connect.runtime.rest_client import ConnectRestException
from kafkalite.connect.runtime.signing import SessionKey, sign
from kafkalite.connect.runtime.status import MemoryStatusStore
from kafkalite.connect.runtime.worker import Worker
from kafkalite.connect.runtime.worker_config import WorkerConfig
from tests.support.waiting import wait_for

from .connect_fakes import FakeBroker, FakeClients


class FakeConfigStore:
    """The config topic as a list of writes, replayed into the shared state."""

    def __init__(self, state: ClusterConfigState) -> None:
        self.state = state
        self.lock = threading.RLock()
        self.on_update: Any = None
        self.task_writes: list[tuple[str, list[dict[str, str]]]] = []
        self.session_keys: list[Any] = []
        self.session_key: Any = None
        self.readers: list[Any] = []             # other workers' stores reading the same topic

    def snapshot(self) -> ClusterConfigState:
        with self.lock:
            return self.state.snapshot()

    def refresh(self, timeout: float = 30.0) -> None:
        pass

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        with self.lock:
            self.task_writes.append((name, configs))
            self.state.tasks[name] = [dict(c) for c in configs]

    def put_session_key(self, key: Any) -> None:
        """As the topic would: every reader (this store too) replays the record."""
        self.session_keys.append(key)
        for store in [self] + self.readers:
            store.session_key = key
            update = ConfigUpdate()
            update.session_key = key
            store.on_update(update)


def _config(tmp: Path, name: str, **extra: str) -> WorkerConfig:
    props = {"bootstrap.servers": "127.0.0.1:1", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
             "value.converter": "org.apache.kafka.connect.json.JsonConverter", "group.id": "g",
             "config.storage.topic": "c", "offset.storage.topic": "o", "status.storage.topic": "s",
             "listeners": f"http://{name}:8083"}
    props.update(extra)
    return WorkerConfig.parse(props, distributed=True)


def _herder(tmp: Path, name: str, state: ClusterConfigState, **extra: str) -> DistributedHerder:
    config = _config(tmp, name, **extra)
    status = MemoryStatusStore()
    worker = Worker(f"{name}:8083", config, MemoryOffsetStore(), status, clients=FakeClients(FakeBroker()))
    store = FakeConfigStore(state)
    h = DistributedHerder(config, worker, store, MemoryOffsetStore(), status, "cluster")  # type: ignore[arg-type]
    h.member.member_id = f"member-{name}"
    h.leader_id, h.leader_url = "member-leader", "http://leader:8083"
    h.protocol = "sessioned" if config.connect_protocol == "sessioned" else h.protocol
    h.ready, h.rebalancing = True, False
    return h


def _start_session(leader: DistributedHerder, follower: DistributedHerder) -> None:
    """The leader's first tick under sessioned: it distributes a key, which both workers read."""
    leader.member.member_id = "member-leader"
    leader._check_key_rotation()
    assert leader.session_key is not None and follower.session_key == leader.session_key


def call(resource: ConnectResource, method: str, path: str, data: bytes,
         headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
    req = DummyRequest([p.encode() for p in path.strip("/").split("/") if p])
    req.method, req.path, req.uri, req.args = method.encode(), path.encode(), path.encode(), {}
    req.content = BytesIO(data)
    for k, v in (headers or {}).items():
        req.requestHeaders.setRawHeaders(k.encode(), [v.encode()])
    out = resource.render(req)
    text = b"".join(req.written) if out == NOT_DONE_YET else out
    return req.responseCode or 200, json.loads(text) if text else None


class _NoBrokers:
    """The group member's client: these herders never join a group (membership is set by hand)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr("kafkalite.connect.runtime.distributed.KafkaClient", _NoBrokers)
    made: list[DistributedHerder] = []

    def make(**extra: str) -> tuple[DistributedHerder, DistributedHerder, list[tuple[str, dict[str, str]]]]:
        state_l, state_f = ClusterConfigState(), ClusterConfigState()
        leader, follower = _herder(tmp_path, "leader", state_l, **extra), _herder(tmp_path, "follower", state_f, **extra)
        made.extend([leader, follower])
        resource = ConnectResource(leader, reactor=None, run_blocking=lambda fn, *a: defer.maybeDeferred(fn, *a))
        sent: list[tuple[str, dict[str, str]]] = []

        def http(url: str, method: str, data: bytes | None, headers: Mapping[str, str] | None = None,
                 timeout: float = 90.0) -> Any:
            assert url.startswith("http://leader:8083/")
            sent.append((url, dict(headers or {})))
            code, body = call(resource, method, url[len("http://leader:8083"):], data or b"", headers)
            if code >= 400:
                raise ConnectRestException(code, body["message"])
            return body
        follower.http = http
        leader.config_store.readers.append(follower.config_store)
        src = tmp_path / "in.txt"
        src.write_text("a\n")
        cfg = {"name": "files", "connector.class": "FileStreamSource", "file": str(src), "topic": "t"}
        for h in (leader, follower):
            h.state.connectors["files"] = dict(cfg)
        return leader, follower, sent
    yield make
    for h in made:
        h._forwarder.shutdown(wait=True)
        h.worker.stop_connector("files")


def _run_connector_on(h: DistributedHerder) -> None:
    h.running_connectors.add("files")
    assert h.worker.start_connector("files", h.state.connectors["files"], "STARTED")


def test_a_follower_sends_task_configs_to_the_leader_which_alone_writes_them(pair: Any) -> None:
    leader, follower, sent = pair(**{"connect.protocol": "compatible"})
    _run_connector_on(follower)
    follower._reconfigure_tasks("files")
    wait_for(lambda: leader.config_store.task_writes, what="the leader's write")
    [(name, configs)] = leader.config_store.task_writes
    assert name == "files" and configs[0]["task.class"].endswith("FileStreamSourceTask")
    assert configs[0]["topic"] == "t"
    assert follower.config_store.task_writes == []                         # never written by the follower
    assert [u for u, _ in sent] == ["http://leader:8083/connectors/files/tasks"]
    assert sent[0][1] == {}                                                # compatible: nothing signed


def test_the_leader_writes_its_own_connectors_task_configs(pair: Any) -> None:
    leader, follower, sent = pair()
    leader.member.member_id = "member-leader"
    _run_connector_on(leader)
    leader._reconfigure_tasks("files")
    assert [n for n, _ in leader.config_store.task_writes] == ["files"] and sent == []


def test_internal_endpoint_answers(pair: Any, tmp_path: Path) -> None:
    leader, follower, _ = pair(**{"connect.protocol": "compatible"})
    resource = ConnectResource(leader, reactor=None, run_blocking=lambda fn, *a: defer.maybeDeferred(fn, *a))
    assert call(resource, "POST", "/connectors/files/tasks", b'[{"a":"1","n":2,"b":true,"z":null}]') == (204, None)
    assert leader.config_store.task_writes == [("files", [{"a": "1", "n": "2", "b": "true"}])]
    assert call(resource, "POST", "/connectors/nobody/tasks", b"[]") == (
        404, {"error_code": 404, "message": "Connector nobody not found"})
    assert call(resource, "POST", "/connectors/files/tasks", b'{"a":"1"}')[0] == 500
    leader.member.member_id = "member-somebody"                  # no longer the leader: not written here
    with pytest.raises(Exception, match="Only the leader may write task configurations."):
        leader.put_task_configs("files", [])


def test_a_failed_forward_is_retried_after_a_backoff(pair: Any) -> None:
    leader, follower, sent = pair(**{"connect.protocol": "compatible"})
    calls: list[str] = []

    def refused(url: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(url)
        raise ConnectRestException(409, "Cannot complete request because of a conflicting operation")
    follower.http = refused
    _run_connector_on(follower)
    follower._reconfigure_tasks("files")
    assert follower._events.get(timeout=10) == ("reconfigure", "files")   # the herder thread tries again
    assert calls == ["http://leader:8083/connectors/files/tasks"]
    assert leader.config_store.task_writes == [] and follower.config_store.task_writes == []
    follower.leader_url = None                                             # no leader URL: a clear error, retried
    follower._reconfigure_tasks("files")
    assert follower._events.get(timeout=10) == ("reconfigure", "files") and len(calls) == 1


def test_standalone_refuses_the_internal_endpoint(tmp_path: Path) -> None:
    from kafkalite.connect.runtime.standalone import StandaloneHerder

    from .connect_fakes import worker_config
    status = MemoryStatusStore()
    herder = StandaloneHerder(Worker("w:8083", worker_config(tmp_path), MemoryOffsetStore(), status,
                                     clients=FakeClients(FakeBroker())), status, "c")
    resource = ConnectResource(herder, reactor=None, run_blocking=lambda fn, *a: defer.maybeDeferred(fn, *a))
    code, body = call(resource, "POST", "/connectors/x/tasks", b"[]")
    assert code == 500 and body["message"].startswith("Kafka Connect in standalone mode does not support")
    herder.stop()


def test_sessioned_the_leader_distributes_a_key_and_the_follower_signs_with_it(pair: Any) -> None:
    leader, follower, sent = pair()                                     # sessioned is the default
    assert leader.request_signing_enabled()
    _start_session(leader, follower)
    [key] = leader.config_store.session_keys
    assert key.algorithm == "HmacSHA256" and len(key.key) == 32        # the JVM's default HmacSHA256 key
    _run_connector_on(follower)
    follower._reconfigure_tasks("files")
    wait_for(lambda: leader.config_store.task_writes, what="the leader's write")
    headers = sent[0][1]
    assert headers["X-Connect-Request-Signature-Algorithm"] == "HmacSHA256"
    assert len(base64.b64decode(headers["X-Connect-Authorization"])) == 32
    leader._check_key_rotation()                                        # still valid: no new key
    assert len(leader.config_store.session_keys) == 1


def test_sessioned_leader_refuses_unsigned_and_badly_signed_requests(pair: Any) -> None:
    leader, follower, _ = pair()
    _start_session(leader, follower)
    resource = ConnectResource(leader, reactor=None, run_blocking=lambda fn, *a: defer.maybeDeferred(fn, *a))
    body = b'[{"topic":"t"}]'
    assert call(resource, "POST", "/connectors/files/tasks", body) == (
        400, {"error_code": 400, "message": "Internal request missing required signature"})
    forged = sign(SessionKey(b"k" * 32, "HmacSHA256", 0), body, "HmacSHA256")
    assert call(resource, "POST", "/connectors/files/tasks", body, forged) == (
        403, {"error_code": 403, "message": "Internal request contained invalid signature."})
    good = sign(leader.session_key, body, "HmacSHA256")
    assert call(resource, "POST", "/connectors/files/tasks", body + b" ", good)[0] == 403   # another body
    code, answer = call(resource, "POST", "/connectors/files/tasks", body,
                        sign(leader.session_key, body, "HmacSHA512"))
    assert code == 400 and answer["message"].startswith(
        "This worker does not support the 'HmacSHA512' key signing algorithm used by other workers. "
        "This worker is currently configured to use: [HmacSHA256].")
    code, answer = call(resource, "POST", "/connectors/files/tasks", body,
                        {**good, "X-Connect-Request-Signature-Algorithm": "HmacNope"})
    assert (code, answer["message"]) == (400, "Algorithm HmacNope not available")
    code, answer = call(resource, "POST", "/connectors/files/tasks", body,
                        {**good, "X-Connect-Authorization": "***"})
    assert code == 400
    assert leader.config_store.task_writes == []
    assert call(resource, "POST", "/connectors/files/tasks", body, good) == (204, None)
    assert leader.config_store.task_writes == [("files", [{"topic": "t"}])]


def test_a_follower_with_a_stale_key_is_refused_then_retries(pair: Any) -> None:
    leader, follower, sent = pair()
    _start_session(leader, follower)
    follower.session_key = SessionKey(b"old" * 11, "HmacSHA256", 0)     # missed a rotation
    _run_connector_on(follower)
    follower._reconfigure_tasks("files")
    events = iter(lambda: follower._events.get(timeout=10), ("reconfigure", "files"))
    assert all(isinstance(e, ConfigUpdate) for e in events)              # the key's update, then the retry
    assert sent and leader.config_store.task_writes == []


def test_the_leader_rotates_an_expired_or_outdated_key(pair: Any) -> None:
    leader, follower, _ = pair(**{"inter.worker.key.ttl.ms": "60000", "inter.worker.key.size": "512"})
    _start_session(leader, follower)
    first = leader.session_key
    assert len(first.key) == 64 and leader.key_expiration == first.creation_timestamp + 60000
    leader.key_expiration = 0                                            # the TTL has passed
    leader._check_key_rotation()
    assert leader.session_key != first and follower.session_key == leader.session_key
    short = SessionKey(b"x" * 32, "HmacSHA256", int(time.time() * 1000))  # another worker's key size
    leader.config_store.put_session_key(short)
    leader._check_key_rotation()
    assert leader.session_key != short and len(leader.session_key.key) == 64


def test_compatible_mode_requires_no_signature(pair: Any) -> None:
    leader, follower, _ = pair(**{"connect.protocol": "compatible"})
    leader.member.member_id = "member-leader"
    leader._check_key_rotation()
    assert not leader.request_signing_enabled() and leader.config_store.session_keys == []
    leader.put_task_configs("files", [{"a": "b"}], None)
    assert leader.config_store.task_writes == [("files", [{"a": "b"}])]


class _FakeResponse:
    code = 204
    phrase = b"No Content"
    length = 0

    def __init__(self) -> None:
        from twisted.web.http_headers import Headers
        self.headers = Headers()

    def deliverBody(self, protocol: Any) -> None:
        from twisted.python.failure import Failure
        from twisted.web.client import ResponseDone
        protocol.connectionLost(Failure(ResponseDone()))


class _RecordingAgent:
    def __init__(self) -> None:
        self.requests: list[tuple[bytes, bytes, Any, Any]] = []

    def request(self, method: bytes, url: bytes, headers: Any = None, body: Any = None) -> Any:
        self.requests.append((method, url, headers, body))
        d: Any = defer.succeed(_FakeResponse())
        d.addTimeout = lambda *a, **k: d
        return d


def test_a_follower_receiving_a_signed_request_forwards_it_to_the_leader_with_its_signature(pair: Any) -> None:
    """A request that lands on a follower (its leader moved) goes on to the leader byte for byte,
    with the signature headers, so the leader can still verify it."""
    leader, follower, _ = pair()
    _start_session(leader, follower)
    resource = ConnectResource(follower, reactor=None, run_blocking=lambda fn, *a: defer.maybeDeferred(fn, *a))
    agent = _RecordingAgent()
    resource.agent = agent
    body = b'[{"topic":"t"}]'
    headers = sign(follower.session_key, body, "HmacSHA256")
    assert call(resource, "POST", "/connectors/files/tasks", body, headers) == (204, None)
    [(method, url, sent_headers, _)] = agent.requests
    assert (method, url) == (b"POST", b"http://leader:8083/connectors/files/tasks?forward=true")
    assert sent_headers.getRawHeaders(b"x-connect-authorization") == [headers["X-Connect-Authorization"].encode()]
    assert sent_headers.getRawHeaders(b"x-connect-request-signature-algorithm") == [b"HmacSHA256"]
    assert follower.config_store.task_writes == []
