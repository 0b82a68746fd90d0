"""What every console tool shares: Kafka-style option parsing, one-line errors, exit codes.

Bad input (an unknown option, a missing topic, an unreachable bootstrap) ends the tool with one
line on stderr and exit code 1; ``--verbose`` adds the traceback.
"""
from __future__ import annotations

import argparse
import logging
import sys
import traceback
from typing import Callable, NoReturn, Sequence


class ToolError(Exception):
    """A user-facing failure: printed as one line, exit code 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports bad options as one ``Error: ...`` line (no usage dump) and exit 1."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"Error: {message} (see --help)\n")
        sys.exit(1)


def parser(prog: str, description: str) -> ArgumentParser:
    p = ArgumentParser(prog=prog, description=description)
    p.add_argument("--verbose", action="store_true", help="show tracebacks and debug logging")
    return p


def properties(items: Sequence[str] | None, what: str) -> dict[str, str]:
    """``k=v`` items (each may hold several comma-free pairs) to a dict; bad items are ToolError."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"invalid {what} {item!r} (expected key=value)")
        out[key.strip()] = value.strip()
    return out


def run(main: Callable[[list[str]], int | None], argv: list[str] | None = None) -> NoReturn:
    """Run a tool's ``main`` with the project's error policy and exit with its code."""
    from kafkalite.client import ClientError

    args = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in args
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)", stream=sys.stderr)
    try:
        code = main(args) or 0
    except (ToolError, ClientError) as exc:
        if verbose:
            traceback.print_exc()
        sys.stderr.write(f"Error: {exc}\n")
        code = 1
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    sys.exit(code)


def bootstrap_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", required=required,
                   help="the broker(s) to connect to")


def zookeeper_login() -> tuple[str, str] | None:
    """The ZooKeeper login of Kafka's tools: the JAAS Client section of the file KAFKA_OPTS names
    (``-Djava.security.auth.login.config=...``); with one, znodes are created with secure ACLs."""
    import os

    from kafkalite.security import jaas
    try:
        return jaas.zookeeper_login(os.environ.get("KAFKA_OPTS"))
    except jaas.JaasError as exc:
        raise ToolError(str(exc)) from None
