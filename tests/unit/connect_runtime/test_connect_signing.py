"""KIP-507's pieces: HMAC signatures with the JVM's algorithm names, the session key's config
topic record, and the ``inter.worker.*`` settings."""
from __future__ import annotations

import base64
import json

import pytest

from kafkalite.connect.runtime.kafka_stores import ConfigUpdate, KafkaConfigStore
from kafkalite.connect.runtime.signing import (BadSignatureRequest, ForbiddenRequest, InternalRequestSignature,
                                               KeyGenerator, SessionKey, SigningConfig, sign, verify)
from kafkalite.connect.runtime.worker_config import WorkerConfig, WorkerConfigError

_BASE = {"bootstrap.servers": "127.0.0.1:1", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
         "value.converter": "org.apache.kafka.connect.json.JsonConverter", "group.id": "g",
         "config.storage.topic": "c", "offset.storage.topic": "o", "status.storage.topic": "s"}


def test_signature_is_the_base64_hmac_of_the_body_rfc4231() -> None:
    key = SessionKey(b"Jefe", "HmacSHA256", 0)
    headers = sign(key, b"what do ya want for nothing?", "HmacSHA256")
    assert headers == {"X-Connect-Authorization": base64.b64encode(bytes.fromhex(
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")).decode(),
        "X-Connect-Request-Signature-Algorithm": "HmacSHA256"}
    sig = InternalRequestSignature.from_headers(b"what do ya want for nothing?", headers.get)
    assert sig is not None and sig.is_valid(key)
    verify(sig, key, ["HmacSHA256"])
    with pytest.raises(ForbiddenRequest, match="^Internal request contained invalid signature.$"):
        verify(sig, SessionKey(b"other", "HmacSHA256", 0), ["HmacSHA256"])
    with pytest.raises(BadSignatureRequest, match="^Internal request missing required signature$"):
        verify(None, key, ["HmacSHA256"])
    assert InternalRequestSignature.from_headers(b"x", {"X-Connect-Authorization": "AA=="}.get) is None
    with pytest.raises(BadSignatureRequest, match="Algorithm HmacSHA3 not available"):
        InternalRequestSignature.from_headers(b"x", {**headers, "X-Connect-Request-Signature-Algorithm":
                                                     "HmacSHA3"}.get)


def test_session_key_record_is_kafkas_and_replays_into_the_config_store() -> None:
    key = SessionKey(bytes(range(32)), "HmacSHA256", 1700000000000)
    record = key.to_json()
    assert record == {"key": base64.b64encode(bytes(range(32))).decode(), "algorithm": "HmacSHA256",
                      "creation-timestamp": 1700000000000}
    assert SessionKey.from_json(record) == key
    assert SessionKey.from_json({"key": "AA==", "algorithm": "HmacSHA256", "creation-timestamp": "x"}) is None
    assert SessionKey.from_json([1]) is None
    updates: list[ConfigUpdate] = []
    store = KafkaConfigStore(WorkerConfig.parse(_BASE, distributed=True), updates.append)
    store._apply(b"session-key", json.dumps(record).encode(), 0, 0)
    assert store.session_key == key and updates[-1].session_key == key and store.state.offset == 1
    store._apply(b"session-key", None, 0, 1)                        # ignored, as Kafka does
    assert store.session_key == key


def test_key_generator_sizes_and_settings() -> None:
    assert len(KeyGenerator("HmacSHA256", None).generate(1).key) == 32
    assert len(KeyGenerator("HmacSHA512", None).generate(1).key) == 64
    gen = KeyGenerator("HmacSHA256", 128)
    key = gen.generate(5)
    assert len(key.key) == 16 and key.creation_timestamp == 5 and gen.matches(key)
    assert not gen.matches(SessionKey(key.key, "HmacSHA1", 5)) and not KeyGenerator("HmacSHA256", None).matches(key)
    assert key.expiration(1000) == 1005 and key.expiration(0) == float("inf")
    cfg = WorkerConfig.parse(_BASE, distributed=True).signing
    assert cfg == SigningConfig("HmacSHA256", None, 3600000, "HmacSHA256", ("HmacSHA256",))
    cfg = SigningConfig.parse({"inter.worker.verification.algorithms": "HmacSHA256, HmacSHA512",
                               "inter.worker.signature.algorithm": "HmacSHA512", "inter.worker.key.size": "512"})
    assert cfg.verification_algorithms == ("HmacSHA256", "HmacSHA512") and cfg.key_size == 512


@pytest.mark.parametrize("props,message", [
    ({"inter.worker.key.generation.algorithm": "HmacSHA512"},
     "Invalid value HmacSHA512 for configuration inter.worker.key.generation.algorithm: Key generation algorithm "
     "must be present in inter.worker.verification.algorithms list"),
    ({"inter.worker.signature.algorithm": "Hmac"},
     "Invalid value Hmac for configuration inter.worker.signature.algorithm: Algorithm Hmac not available"),
    ({"inter.worker.verification.algorithms": ""},
     "Invalid value [] for configuration inter.worker.verification.algorithms: At least one signature verification "
     "algorithm must be provided"),
    ({"inter.worker.key.ttl.ms": "-1"},
     "Invalid value -1 for configuration inter.worker.key.ttl.ms: Value must be in the range [0, 2147483647]"),
    ({"inter.worker.key.size": "12"}, "Key length must be a multiple of 8 and at least 40 bits"),
])
def test_bad_inter_worker_settings_are_one_line_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(WorkerConfigError) as err:
        WorkerConfig.parse({**_BASE, **props}, distributed=True)
    assert message in str(err.value) and "\n" not in str(err.value)
