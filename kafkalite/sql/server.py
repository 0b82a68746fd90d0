"""``kafkalite-sql-server ksql-server.properties``: ksqlDB's server on kafkalite and Spark.

Startup as ksqlDB's: read the properties, start the Spark session (``spark.master``, default
``local[2]``; any ``spark.*`` property is passed on), create the command topic if needed and replay
it (every stream, table and persistent query is rebuilt and resumes from its checkpoint), then
open the REST listener. SIGTERM/SIGINT stop the queries and the session before the process exits.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from kafkalite.sql.config import ConfigError, KsqlConfig, read_properties

log = logging.getLogger("kafkalite.sql.server")


def spark_session(config: KsqlConfig) -> Any:
    """The session the queries run in (``spark.master``, local by default); its Python workers run
    this interpreter and import this package, also on a Spark cluster (spark_integration.session),
    and its driver JVM the thread stack that lets a query stopped mid-batch end cleanly
    (``spark.driver.defaultJavaOptions``, session.DRIVER_JAVA_OPTIONS); a ``spark.*`` property of
    the file overrides any of these."""
    from spark_integration.session import spark_session as session_for
    return session_for(f"kafkalite-sql-{config.service_id}", config.spark_master,
                       {"spark.sql.shuffle.partitions": "2",
                        # MAP('k' := 1, 'k' := 2) keeps the last value, as ksqlDB's map builder does
                        "spark.sql.mapKeyDedupPolicy": "LAST_WIN", **dict(config.spark_conf)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalite-sql-server",
                                     description="ksqlDB's statements as Spark streaming queries over kafkalite")
    parser.add_argument("config", help="ksql-server.properties")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    try:
        config = KsqlConfig.from_properties(read_properties(args.config))
        host, port = config.listener
    except (OSError, ConfigError) as exc:
        print(f"kafkalite-sql-server: {exc}", file=sys.stderr)
        return 2

    from twisted.internet import reactor as _reactor

    from kafkalite.sql.engine import Engine
    from kafkalite.sql.rest import make_site

    reactor: Any = _reactor
    engine = Engine(config, lambda: spark_session(config))
    try:
        replayed = engine.start()
    except Exception as exc:                      # brokers unreachable, Spark failed to start...
        print(f"kafkalite-sql-server: cannot start: {exc}", file=sys.stderr)
        return 1
    log.info("replayed %d commands; listening on http://%s:%d", replayed, host, port)
    reactor.listenTCP(port, make_site(engine, config.idle_connection_timeout_s), interface=host)

    def shutdown() -> None:
        engine.stop()
        spark = engine._spark
        if hasattr(spark, "stop"):
            spark.stop()
    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
