"""``kafkalite-schema-registry``: start one registry instance (Confluent's ``schema-registry-start``).

    kafkalite-schema-registry [schema-registry.properties] [--override key=value ...]

Order, so that nothing is served from a partial state: read the store to its end (blocking,
before the reactor runs), bind the listener, start the replay thread, then join the election
group. SIGTERM/SIGINT leave the group (so another instance takes over at once) and close the store.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from . import config as cfgmod
from .config import ConfigError, RegistryConfig

log = logging.getLogger("kafkalite.registry")


def _parse_args(argv: list[str] | None) -> tuple[RegistryConfig, str]:
    parser = argparse.ArgumentParser(
        prog="kafkalite-schema-registry",
        description="A Confluent-compatible schema registry storing its state in a kafkalite topic.",
        epilog="properties: " + "; ".join(f"{k} (default {d!r})" for k, (d, _) in cfgmod.PROPERTIES.items()))
    parser.add_argument("properties", nargs="?", help="a schema-registry.properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a property (after the file); may be repeated")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    props = cfgmod.read_properties(args.properties) if args.properties else {}
    for item in args.override:
        if "=" not in item:
            raise ConfigError(f"--override {item!r} is not key=value")
        key, value = item.split("=", 1)
        props[key.strip()] = value.strip()
    return cfgmod.build(props), args.log_level


def main(argv: list[str] | None = None) -> int:
    try:
        config, level = _parse_args(argv)
    except ConfigError as exc:
        print(f"kafkalite-schema-registry: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=getattr(logging, level), format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    from twisted.internet import reactor as _reactor, threads
    from twisted.internet.error import CannotListenError

    from kafkalite.client import ClientError, KafkaClient

    from .election import LeaderElection
    from .forwarding import Forwarder
    from .kafkastore import KafkaStore, StoreStartError
    from .rest import make_site
    from .service import SchemaRegistry
    from .state import RegistryState

    reactor: Any = _reactor
    state = RegistryState(default_level=config.compatibility_level)
    try:
        store = KafkaStore(reactor, state, config.bootstrap_servers, config.topic,
                           replication_factor=config.replication_factor, timeout_ms=config.timeout_ms,
                           init_timeout_ms=config.init_timeout_ms)
        store.start()              # blocking on purpose: the reactor is not running yet
    except (StoreStartError, ClientError) as exc:
        print(f"kafkalite-schema-registry: {exc}", file=sys.stderr)
        return 1
    registry = SchemaRegistry(state, store, config.url)
    site = make_site(registry, Forwarder(reactor, store.catch_up, config.timeout_ms / 1000.0), config.max_request_bytes)
    try:
        port = reactor.listenTCP(config.listen_port, site, interface=config.listen_host)
    except CannotListenError as exc:
        print(f"kafkalite-schema-registry: cannot listen on {config.listen_host}:{config.listen_port}: "
              f"{exc.socketError}", file=sys.stderr)
        store.close()
        return 1
    real_port = port.getHost().port
    url = f"http://{config.advertised_host}:{real_port}"
    registry.my_url = url                  # the listener may have been given port 0
    store.start_reader()
    identity = {"version": 1, "host": config.advertised_host, "port": real_port,
                "master_eligibility": config.leader_eligibility, "scheme": "http", "leader": False}
    election_client = KafkaClient(config.bootstrap_servers, client_id="kafkalite-schema-registry-election")
    election = LeaderElection(reactor, election_client, config.group_id, identity, registry.set_primary,
                              session_timeout_ms=config.session_timeout_ms,
                              heartbeat_interval_ms=config.heartbeat_interval_ms)

    def shutdown() -> Any:
        def blocking() -> None:        # leaving the group and closing clients block: thread pool
            election.stop()
            election_client.close()
            store.close()
        return threads.deferToThread(blocking)

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    election.start()
    log.info("Server started, listening for requests on %s (listener %s:%d), store %s on %s", url,
             config.listen_host, real_port, config.topic, config.bootstrap_servers)
    reactor.run()
    return 0


def console() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console()
