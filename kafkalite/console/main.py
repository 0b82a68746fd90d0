"""``kafkalite-console``: parse the command line, build the app, serve it with uvicorn."""
from __future__ import annotations

import argparse
import logging
import secrets

import uvicorn

from kafkalite.cli.common import ToolError, command_config_security, parser, run

from .app import create_app
from .settings import DEFAULT_HOST, DEFAULT_PORT, ConsoleSettings

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    p = parser("kafkalite-console", "A web console for a kafkalite (or Kafka) cluster: topics, messages, "
                                    "consumer groups, schemas, ACLs, metrics.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", required=True, help="the broker(s) to connect to")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties file: the console's own security.protocol, sasl.*, ssl.* (as the tools')")
    p.add_argument("--registry-url", metavar="URL", help="the schema registry (Avro decoding, schema pages)")
    p.add_argument("--connect-url", metavar="URL", help="a Kafka Connect REST endpoint (the Connect page)")
    p.add_argument("--sql-url", metavar="URL", help="a ksqlDB-compatible SQL server (the SQL page)")
    p.add_argument("--metrics-urls", metavar="URL[,URL...]", default="",
                   help="the brokers' Prometheus endpoints (http://host:port/metrics), comma-separated")
    p.add_argument("--zookeeper", metavar="HOST:PORT[,...]", help="the ZooKeeper ensemble, to show its members' modes")
    p.add_argument("--listen", metavar="HOST:PORT", default=f"{DEFAULT_HOST}:{DEFAULT_PORT}",
                   help=f"address to serve on (default {DEFAULT_HOST}:{DEFAULT_PORT}; port 0 picks a free one)")
    p.add_argument("--read-only", action="store_true", help="refuse every change (no create, delete, produce, reset)")
    p.add_argument("--user-login", action="store_true",
                   help="ask each person to log in with their own SASL user and password (the --command-config's "
                        "security.protocol and sasl.mechanism), so the cluster's ACLs apply to what they see and do")
    p.add_argument("--lag-sample-interval", type=float, default=10.0, metavar="SECONDS",
                   help="how often consumer lag is sampled for the lag charts (0: only when a page is viewed)")
    p.add_argument("--metrics-interval", type=float, default=5.0, metavar="SECONDS",
                   help="how often the brokers' metrics are scraped")
    return p


def settings_from(args: argparse.Namespace) -> ConsoleSettings:
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ToolError(f"--listen {args.listen!r} is not HOST:PORT")
    security = command_config_security(args)
    if args.user_login and not security.sasl:
        raise ToolError("--user-login needs a SASL security.protocol in --command-config (SASL_SSL or SASL_PLAINTEXT)")
    return ConsoleSettings(
        args.bootstrap_server, security, args.registry_url, args.connect_url, args.sql_url,
        tuple(u.strip() for u in args.metrics_urls.split(",") if u.strip()), args.zookeeper, args.read_only,
        args.user_login, host=host.strip("[]") or DEFAULT_HOST, port=int(port),
        lag_sample_interval_s=args.lag_sample_interval, metrics_interval_s=args.metrics_interval)


def main(argv: list[str]) -> int:
    settings = settings_from(build_parser().parse_args(argv))
    app = create_app(settings, session_secret=secrets.token_urlsafe(32))
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info", access_log=False,
                            server_header=False)
    server = uvicorn.Server(config)
    # uvicorn prints "Uvicorn running on http://host:port" once it listens (port 0: the real port)
    server.run()
    return 0


def console() -> None:
    run(main)
