"""``kafkalite-server server.properties [--override key=value ...]``: run one broker.

Mirrors ``kafka-server-start.sh``: Kafka's property names and defaults; an unknown or invalid
property is one line on stderr and exit code 1, never a traceback. SIGTERM and SIGINT shut the
broker down cleanly (deregister from ZooKeeper, answer waiting requests, flush and close logs).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from kafkalite.config import BrokerConfig, load_properties


def logger_levels(items: Sequence[str]) -> list[tuple[str, str]]:
    """``NAME=LEVEL`` options (as log4j.properties' ``log4j.logger.NAME=LEVEL`` lines; e.g.
    ``kafka.request.logger=DEBUG``) as (name, upper-case level) pairs.

    Raises ValueError naming the first malformed item, so that a bad option is refused before
    the broker starts rather than half-applied."""
    levels = []
    for item in items:
        name, eq, level = item.partition("=")
        if not eq or not name.strip() or level.strip().upper() not in logging.getLevelNamesMapping():
            raise ValueError(f"--logger takes NAME=LEVEL (DEBUG, INFO, WARNING, ERROR), not {item!r}")
        levels.append((name.strip(), level.strip().upper()))
    return levels


def setup_logging(level: str, loggers: Sequence[tuple[str, str]] = ()) -> None:
    """The root level, then per-logger levels (pairs from :func:`logger_levels`)."""
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    for name, name_level in loggers:
        logging.getLogger(name).setLevel(name_level)
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    # Twisted shows nothing (not even unhandled Deferred errors) until logging begins.
    globalLogBeginner.beginLoggingTo([STDLibLogObserver()], redirectStandardIO=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalite-server", description="Run a kafkalite broker.")
    parser.add_argument("properties", help="server.properties file (Kafka's property names)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override a property from the file (repeatable)")
    parser.add_argument("--log-level", default=os.environ.get("KAFKALITE_LOG_LEVEL", "INFO"))
    parser.add_argument("--logger", action="append", metavar="NAME=LEVEL",
                        default=[item for item in os.environ.get("KAFKALITE_LOGGERS", "").split(",") if item],
                        help="one logger's level, e.g. kafka.request.logger=DEBUG (repeatable; "
                             "KAFKALITE_LOGGERS holds a comma-separated list)")
    args = parser.parse_args(argv)
    try:
        loggers = logger_levels(args.logger)
        config = BrokerConfig.from_properties(load_properties([args.properties], args.override))
    except (OSError, ValueError) as exc:             # ConfigError is a ValueError
        print(f"kafkalite-server: {exc}", file=sys.stderr)
        return 1
    setup_logging(args.log_level, loggers)
    from kafkalite.broker.server import run_broker
    from kafkalite.protocol import codec

    if codec.is_strict():
        logging.getLogger("kafkalite.broker").warning(
            "strict protocol encoding is on (%s): a response with an unknown or a missing field "
            "closes its connection instead of sending a default", codec.STRICT_ENV)

    return run_broker(config)


if __name__ == "__main__":
    sys.exit(main())
