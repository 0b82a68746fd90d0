"""``kafkalite-connect-standalone worker.properties [connector.properties ...]`` and
``kafkalite-connect-distributed worker.properties`` (Kafka's ``ConnectStandalone`` and
``ConnectDistributed``).

Start-up: read the worker properties, reach the brokers (their cluster id is the REST root's
``kafka_cluster_id``), bind the REST listener (``listeners`` / ``rest.port``; the advertised URL
names the port really bound, so ``:0`` works), start the herder, then (standalone) create each
connector given on the command line. SIGTERM/SIGINT stop every task (committing offsets) and, in
distributed mode, leave the group so the others take the work over at once.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from kafkalite.config import ConfigError, load_properties

from .worker_config import WorkerConfig, WorkerConfigError

log = logging.getLogger("kafkalite.connect")

#: seconds a thread holding the GIL runs before it must hand it over (Python's default is 0.005).
#: A worker's task threads are CPU-bound (a source task reads and converts as long as its producer
#: takes records) while its clients' threads wait on sockets: at the default, every answer that a
#: producer's sender or a sink task's consumer receives waits up to 5 ms for the GIL, and with one
#: request in flight per connection (Kafka's worker producer settings) those waits, not the work,
#: bounded the file pipeline's throughput.
SWITCH_INTERVAL = 0.0005


def _parse(prog: str, argv: list[str] | None, distributed: bool) -> tuple[WorkerConfig, list[str], str]:
    parser = argparse.ArgumentParser(prog=prog, description=(
        "Run a Kafka Connect worker in distributed mode." if distributed else
        "Run a Kafka Connect worker in standalone mode with the connectors given."))
    parser.add_argument("worker_properties", help="the worker's properties file")
    if not distributed:
        parser.add_argument("connector_properties", nargs="*", help="a connector's properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a worker property (after the file); may be repeated")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    try:
        props = load_properties([args.worker_properties], args.override)
    except OSError as exc:
        raise WorkerConfigError(f"cannot read {args.worker_properties}: {exc.strerror or exc}") from None
    except ConfigError as exc:
        raise WorkerConfigError(str(exc)) from None
    connectors = [] if distributed else list(args.connector_properties)
    return WorkerConfig.parse(props, distributed=distributed), connectors, args.log_level


def main(argv: list[str] | None = None, *, distributed: bool = False) -> int:
    prog = "kafkalite-connect-distributed" if distributed else "kafkalite-connect-standalone"
    try:
        config, connector_files, level = _parse(prog, argv, distributed)
        connector_props = [load_properties([path]) for path in connector_files]
    except (WorkerConfigError, ConfigError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{prog}: cannot read a connector properties file: {exc.strerror or exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=getattr(logging, level), format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    sys.setswitchinterval(SWITCH_INTERVAL)
    from twisted.internet import reactor as _reactor, threads
    from twisted.internet.error import CannotListenError

    from kafkalite.client import ClientError, KafkaClient

    from .metrics import ConnectMetrics
    from .rest import make_site
    reactor: Any = _reactor

    try:
        with KafkaClient(config.bootstrap_servers, client_id=f"{prog}-bootstrap",
                         security=config.client_security("admin.")) as client:
            cluster_id = client.metadata([]).cluster_id or ""
    except ClientError as exc:
        print(f"{prog}: cannot reach the brokers at {config.bootstrap_servers}: {exc}", file=sys.stderr)
        return 1

    metrics = ConnectMetrics()
    holder: dict[str, Any] = {}
    listener = config.listeners[0]
    site = make_site(_LateHerder(holder), reactor, metrics)
    try:
        port = reactor.listenTCP(listener.port, site, interface=listener.host)
    except CannotListenError as exc:
        print(f"{prog}: cannot listen on {listener.host}:{listener.port}: {exc.socketError}", file=sys.stderr)
        return 1
    real_port = port.getHost().port
    if config.advertised_url.endswith(f":{listener.port}") and not config.props.get("rest.advertised.port"):
        config.advertised_url = config.advertised_url.rsplit(":", 1)[0] + f":{real_port}"
    worker_id = config.advertised_url.split("://", 1)[1]

    if distributed:
        from .distributed import DistributedHerder
        herder: Any = DistributedHerder.create(config, worker_id, cluster_id, metrics)
    else:
        from .offsets import FileOffsetStore
        from .standalone import StandaloneHerder
        from .status import MemoryStatusStore
        from .worker import Worker
        status_store = MemoryStatusStore()
        try:
            offset_store = FileOffsetStore(config.offset_file)
        except OSError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 1
        worker = Worker(worker_id, config, offset_store, status_store, metrics=metrics)
        herder = StandaloneHerder(worker, status_store, cluster_id)
    holder["herder"] = herder
    exit_code = [0]

    def start() -> None:
        herder.start()
        for props in connector_props:
            name = props.get("name", "")
            try:
                herder.put_connector_config(name, props, False)
                log.info("created connector %s", name)
            except Exception as exc:  # noqa: BLE001 - Kafka's standalone exits on a bad connector
                log.error("Failed to create connector for %s: %s", name or "(no name)", exc)
                exit_code[0] = 1
                reactor.callFromThread(reactor.stop)
                return
        log.info("Kafka Connect started; REST API at %s (worker %s, cluster %s)", config.advertised_url,
                 worker_id, cluster_id)

    def failed(failure: Any) -> None:
        log.error("start-up failed: %s", failure.getTraceback())
        exit_code[0] = 1
        reactor.stop()

    def shutdown() -> Any:
        log.info("Kafka Connect stopping")
        return threads.deferToThread(herder.stop)

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    reactor.callWhenRunning(lambda: threads.deferToThread(start).addErrback(failed))
    reactor.suggestThreadPoolSize(20)
    reactor.run()
    return exit_code[0]


class _LateHerder:
    """The REST site is bound before the herder exists (the worker id names the bound port);
    until then every call answers that the worker is starting."""

    def __init__(self, holder: dict[str, Any]) -> None:
        self._holder = holder

    @property
    def ready(self) -> bool:
        herder = self._holder.get("herder")
        return herder is not None and getattr(herder, "ready", True)

    def __getattr__(self, name: str) -> Any:
        herder = self._holder.get("herder")
        if herder is None:
            from .herder import RebalanceNeededException
            raise RebalanceNeededException("The worker is starting up")
        return getattr(herder, name)


def standalone_console() -> None:
    sys.exit(main(distributed=False))


def distributed_console() -> None:
    sys.exit(main(distributed=True))
