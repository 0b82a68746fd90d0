"""What every console tool shares: Kafka-style option parsing, one-line errors, exit codes.

Bad input (an unknown option, a missing topic, an unreachable bootstrap) ends the tool with one
line on stderr and exit code 1; ``--verbose`` adds the traceback.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from typing import Any, Callable, Mapping, NoReturn, Sequence

from kafkalite.client.errors import ClientError
from kafkalite.client.security import ClientSecurity, is_security_key
from kafkalite.config import parse_properties_text


class ToolError(Exception):
    """A user-facing failure: printed as one line, exit code 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports bad options as one ``Error: ...`` line (no usage dump) and exit 1."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"Error: {message} (see --help)\n")
        sys.exit(1)


def verbose_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true", help="show tracebacks and debug logging")


def parser(prog: str, description: str) -> ArgumentParser:
    p = ArgumentParser(prog=prog, description=description)
    verbose_arg(p)
    return p


class SharedOptions:
    """A tool's global options, accepted before and after its subcommand (``tool --opt X cmd`` and
    ``tool cmd --opt X``, as kafka-topics.sh, git or docker compose take them).

    ``add`` declares the options once. :meth:`subcommands` puts them on the main parser with their
    defaults and returns its subparsers, each made with :meth:`parent` as parent parser: the same
    options with ``argparse.SUPPRESS`` defaults, because argparse copies every attribute of the
    subparser's namespace over the main one, so a real default there would overwrite a value given
    before the subcommand. A required option is required in neither place (it may come in either)
    and :meth:`parse_args` checks it was given.
    """

    def __init__(self, add: Callable[[argparse.ArgumentParser], None]) -> None:
        self._add = add
        self._required: list[argparse.Action] = []
        self._parent: argparse.ArgumentParser | None = None

    def _added(self, p: argparse.ArgumentParser) -> list[argparse.Action]:
        before = len(p._actions)
        self._add(p)
        return p._actions[before:]

    def install(self, main: argparse.ArgumentParser) -> None:
        self._required = [a for a in self._added(main) if a.required]
        for action in self._required:
            action.required = False

    def parent(self) -> argparse.ArgumentParser:
        if self._parent is None:
            self._parent = argparse.ArgumentParser(add_help=False)
            for action in self._added(self._parent):
                action.default = argparse.SUPPRESS
                action.required = False
        return self._parent

    def subcommands(self, main: argparse.ArgumentParser, **kwargs: Any) -> "Subcommands":
        """``main.add_subparsers(**kwargs)`` whose every subcommand also takes these options."""
        self.install(main)
        return Subcommands(main.add_subparsers(**kwargs), self.parent())

    def parse_args(self, main: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
        args = main.parse_args(argv)
        missing = [a.option_strings[0] for a in self._required if getattr(args, a.dest, None) is None]
        if missing:
            main.error(f"the following arguments are required: {', '.join(missing)}")
        return args


class Subcommands:
    """A tool's subparsers, each made with the shared options' parent parser."""

    def __init__(self, sub: "argparse._SubParsersAction[Any]", parent: argparse.ArgumentParser) -> None:
        self._sub = sub
        self._parent = parent

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._sub.add_parser(name, parents=[self._parent], **kwargs)
        return parser


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


SECURITY_HELP = ("security.protocol, sasl.mechanism, sasl.jaas.config or sasl.username/sasl.password, "
                 "ssl.truststore.location or ssl.ca.location")


def bootstrap_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    """``--bootstrap-server`` and the admin tools' ``--command-config`` (the client's security)."""
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", required=required,
                   help="the broker(s) to connect to")
    p.add_argument("--command-config", metavar="FILE", help=f"client properties file ({SECURITY_HELP})")


def read_properties(path: str | None, option: str = "--command-config") -> dict[str, str]:
    """A Java properties file, parsed as Kafka's tools load one (``kafkalite.config``'s parser:
    ``key=value``, ``key: value`` or ``key value``, # and ! comments, \\ continuations)."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"cannot read {option} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_properties_text(text)


def split_security(props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``props`` as (security properties, the rest): producer/consumer tools take both in one file."""
    sec = {k: v for k, v in props.items() if is_security_key(k)}
    return sec, {k: v for k, v in props.items() if not is_security_key(k)}


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """ClientSecurity from client properties; bad values and missing PEM files are one-line ToolErrors."""
    try:
        security = ClientSecurity.from_properties(props)
    except ClientError as exc:
        raise ToolError(str(exc)) from None
    for what, path in (("CA file", security.ca_location), ("certificate", security.certificate_location),
                       ("key", security.key_location)):
        if security.tls and path and not os.path.isfile(path):
            raise ToolError(f"TLS {what} {path} does not exist")
    return security


def command_config_security(args: Any) -> ClientSecurity:
    """The admin tools' ``--command-config FILE`` as ClientSecurity (PLAINTEXT without one)."""
    return client_security(read_properties(getattr(args, "command_config", None)))


#: the AdminClient properties a ``--command-config`` may set besides security, as the keywords of
#: KafkaClient (and Admin) that carry them
CLIENT_SETTINGS = {"request.timeout.ms": "request_timeout_ms", "retry.backoff.ms": "retry_backoff_ms",
                   "retries": "retries", "socket.connection.setup.timeout.ms": "connect_timeout_ms"}


def command_config(args: Any, client_id: str) -> dict[str, Any]:
    """The admin tools' ``--command-config FILE`` as KafkaClient keywords: the security, and
    ``client.id``, ``request.timeout.ms``, ``retry.backoff.ms``, ``retries`` and
    ``socket.connection.setup.timeout.ms`` as Kafka's AdminClient reads them from that file (so
    ``request.timeout.ms=5000`` bounds how long a tool keeps trying an unreachable cluster). Other
    client properties are accepted and ignored, as the AdminClient warns of unknown ones."""
    security, rest = split_security(read_properties(getattr(args, "command_config", None)))
    settings: dict[str, Any] = {"security": client_security(security), "client_id": rest.get("client.id", client_id)}
    for key, keyword in CLIENT_SETTINGS.items():
        if key in rest:
            value = rest[key].strip()
            if not value.isdigit():
                raise ToolError(f"--command-config: {key} must be a non-negative whole number, not {rest[key]!r}")
            settings[keyword] = int(value)
    return settings


def client_config_arg(p: argparse.ArgumentParser, role: str) -> None:
    """``--producer.config FILE`` / ``--consumer.config FILE``: client properties, security included."""
    p.add_argument(f"--{role}.config", dest=f"{role}_config", metavar="FILE",
                   help=f"{role} properties file; also the client's security ({SECURITY_HELP})")


def client_properties(config_file: str | None, items: Sequence[str] | None, role: str,
                      option: str | None = None) -> tuple[ClientSecurity, dict[str, str]]:
    """A producer's or consumer's properties as Kafka's tools merge them: the ``--<role>.config``
    file, then ``--<role>-property`` items over it; returns (security, the other properties)."""
    props = {**read_properties(config_file, f"--{role}.config"),
             **properties(items, option or f"--{role}-property")}
    security, rest = split_security(props)
    return client_security(security), rest


def zookeeper_login() -> tuple[str, str] | None:
    """The ZooKeeper login of Kafka's tools: the JAAS Client section of the file KAFKA_OPTS names
    (``-Djava.security.auth.login.config=...``); with one, znodes are created with secure ACLs."""
    from kafkalite.security import jaas
    try:
        return jaas.zookeeper_login(os.environ.get("KAFKA_OPTS"))
    except jaas.JaasError as exc:
        raise ToolError(str(exc)) from None
