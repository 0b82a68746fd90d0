"""``/brokers/ids/<id>``: a live broker's registration (ephemeral), and ``/brokers/seqid``.

Version 5 (IBP >= 2.7; version 4 is the same without ``features``)::

    {"version":5,"host":"10.0.0.1","port":9092,"jmx_port":-1,"timestamp":"1700000000000",
     "endpoints":["PLAINTEXT://10.0.0.1:9092"],
     "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
     "rack":"r1","features":{}}

``host``/``port`` mirror the first PLAINTEXT endpoint (null/-1 if none) for pre-0.10 clients,
``timestamp`` is a string, ``rack`` is present only when ``broker.rack`` is set. Older
versions (1-3) are read too: before v4 the listener name *is* the security protocol.
The broker id is not in the JSON; it comes from the path, so :meth:`decode` takes it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from zk_schema import paths
from zk_schema._json import (dumps, loads_object, opt_str, req_int, req_list,
                             req_long_string, req_object, req_str, req_version)
from zk_schema.errors import ZkDataError

_ENDPOINT_RE = re.compile(r"([^:/]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)")


@dataclass(frozen=True)
class EndPoint:
    """One advertised listener: ``LISTENER_NAME://host:port`` plus its security protocol."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: dict[str, str] | None = None) -> "EndPoint":
        """Parse ``NAME://host:port``; without a map the name is taken as the protocol."""
        match = _ENDPOINT_RE.fullmatch(text)
        if match is None:
            raise ValueError(f"unable to parse endpoint {text!r}")
        name, host, port = match.group(1), match.group(2), int(match.group(3))
        if protocol_map is None:
            protocol = name
        elif name in protocol_map:
            protocol = protocol_map[name]
        else:
            raise ValueError(f"listener {name!r} missing from listener_security_protocol_map")
        return cls(name, host, port, protocol)


def _features(znode: str, obj: dict[str, Any]) -> dict[str, tuple[int, int]]:
    result: dict[str, tuple[int, int]] = {}
    for name, rng in req_object(znode, obj, "features").items():
        if not isinstance(rng, dict):
            raise ZkDataError(znode, f"feature {name!r} must be an object")
        result[name] = (req_int(znode, rng, "min_version"), req_int(znode, rng, "max_version"))
    return result


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[EndPoint, ...]
    timestamp_ms: int
    jmx_port: int = -1
    rack: str | None = None
    #: supported features: name -> (min_version, max_version); ``{}`` in 2.x
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    version: int = 5

    def __post_init__(self) -> None:
        if self.version not in (4, 5):
            raise ValueError(f"kafkalite writes broker registration version 4 or 5, not {self.version}")

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{paths.BROKER_IDS}/{int(broker_id)}"

    @property
    def host(self) -> str | None:
        """Legacy ``host`` field: the first PLAINTEXT endpoint's host."""
        ep = self._plaintext()
        return ep.host if ep else None

    @property
    def port(self) -> int:
        ep = self._plaintext()
        return ep.port if ep else -1

    def _plaintext(self) -> EndPoint | None:
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "version": self.version,
            "host": self.host,
            "port": self.port,
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp_ms),
            "endpoints": [e.connection_string() for e in self.endpoints],
            "listener_security_protocol_map": {e.listener_name: e.security_protocol
                                               for e in self.endpoints},
        }
        if self.rack is not None:
            obj["rack"] = self.rack
        if self.version >= 5:
            obj["features"] = {name: {"min_version": lo, "max_version": hi}
                               for name, (lo, hi) in self.features.items()}
        return dumps(obj)

    @classmethod
    def decode(cls, data: bytes, broker_id: int) -> "BrokerRegistration":
        znode = cls.path(broker_id)
        obj = loads_object(znode, data)
        version = req_version(znode, obj, (1, 2, 3, 4, 5))
        jmx_port = req_int(znode, obj, "jmx_port")
        timestamp = req_long_string(znode, obj, "timestamp")
        try:
            if version == 1:
                endpoints = [EndPoint("PLAINTEXT", req_str(znode, obj, "host"),
                                      req_int(znode, obj, "port"), "PLAINTEXT")]
            else:
                pmap = None
                if version >= 4:
                    pmap = req_object(znode, obj, "listener_security_protocol_map")
                    if not all(isinstance(v, str) for v in pmap.values()):
                        raise ZkDataError(znode, "listener_security_protocol_map values must be strings")
                raw = req_list(znode, obj, "endpoints")
                if not all(isinstance(e, str) for e in raw):
                    raise ZkDataError(znode, "endpoints must be strings")
                endpoints = [EndPoint.parse(e, pmap) for e in raw]
        except ValueError as exc:
            if isinstance(exc, ZkDataError):
                raise
            raise ZkDataError(znode, str(exc)) from None
        rack = opt_str(znode, obj, "rack") if version >= 3 else None
        features = _features(znode, obj) if version >= 5 else {}
        return cls(broker_id, tuple(endpoints), timestamp, jmx_port, rack, features,
                   version if version >= 4 else 4)


class BrokerSequenceIdZNode:
    """``/brokers/seqid``: empty; its data version drives broker-id generation."""

    PATH = paths.BROKER_SEQUENCE_ID

    @staticmethod
    def path() -> str:
        return paths.BROKER_SEQUENCE_ID

    @staticmethod
    def broker_id_from_version(zk_version: int, reserved_broker_max_id: int = 1000) -> int:
        """Kafka's generated id: the seqid node's new data version + ``reserved.broker.max.id``."""
        return zk_version + reserved_broker_max_id


__all__ = ["EndPoint", "BrokerRegistration", "BrokerSequenceIdZNode"]
