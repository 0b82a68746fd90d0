"""SCRAM users, as Kafka 2.x manages them: credentials live in ZooKeeper (``/config/users/<user>``)
and are written with kafka-configs' ``--zookeeper`` path (kafkalite-configs'
:func:`~kafkalite.cli.configs.alter_user_zookeeper`, reused here), since the brokers do not serve
DescribeUserScramCredentials/AlterUserScramCredentials. Only mechanism names are ever shown, never
a credential's salt or keys. Needs the console's ``--zookeeper``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafkalite.cli.common import ToolError, zookeeper_login
from kafkalite.cli.configs import alter_user_zookeeper
from kafkalite.security import scram
from zk_schema import ConfigEntityZNode, desanitize

T = TypeVar("T")
MECHANISMS = tuple(scram.MECHANISMS)


class ScramUserError(ValueError):
    """A refused change (unknown mechanism, short password, no ZooKeeper configured)."""


@dataclass(frozen=True)
class ScramUser:
    name: str
    mechanisms: list[str]


class ScramUsersService:
    def __init__(self, zookeeper: str | None) -> None:
        self.zookeeper = zookeeper

    @property
    def configured(self) -> bool:
        return bool(self.zookeeper)

    def _with_zk(self, fn: Callable[[Any], T]) -> T:
        if not self.zookeeper:
            raise ScramUserError("SCRAM users are kept in ZooKeeper: start the console with --zookeeper")
        login = zookeeper_login()          # a JAAS Client section: secure znodes, as Kafka's tools
        zk = KazooClient(hosts=self.zookeeper, timeout=10,
                         auth_data=[("digest", f"{login[0]}:{login[1]}")] if login else None)
        try:
            zk.start(15)
        except Exception as exc:  # noqa: BLE001 - kazoo raises its own timeout or a socket error
            zk.close()
            raise ScramUserError(f"cannot connect to ZooKeeper at {self.zookeeper}: {exc}") from None
        try:
            return fn(zk)
        except ToolError as exc:
            raise ScramUserError(str(exc)) from None
        finally:
            zk.stop()
            zk.close()

    def users(self) -> list[ScramUser]:
        def work(zk: Any) -> list[ScramUser]:
            parent = ConfigEntityZNode.path("users", "").rstrip("/")
            try:
                names = zk.get_children(parent)
            except NoNodeError:
                return []
            out = []
            for entry in sorted(names):
                try:
                    data, _ = zk.get(f"{parent}/{entry}")
                except NoNodeError:
                    continue
                mechs = sorted(k for k in ConfigEntityZNode.decode(data).config if k in scram.MECHANISMS)
                if mechs:
                    out.append(ScramUser(desanitize(entry), mechs))
            return out
        return self._with_zk(work)

    def set_password(self, user: str, mechanism: str, password: str, iterations: int = scram.DEFAULT_ITERATIONS) -> None:
        if not user:
            raise ScramUserError("give the user's name")
        if mechanism not in scram.MECHANISMS:
            raise ScramUserError(f"unknown mechanism {mechanism!r} (one of {', '.join(MECHANISMS)})")
        if not password:
            raise ScramUserError("give a password")
        if "," in password or "]" in password:
            raise ScramUserError("the password cannot hold ',' or ']' (kafka-configs' credential syntax)")
        self._with_zk(lambda zk: alter_user_zookeeper(zk, user, {mechanism: f"password={password},iterations={iterations}"},
                                                      []))

    def delete(self, user: str, mechanism: str) -> None:
        self._with_zk(lambda zk: alter_user_zookeeper(zk, user, {}, [mechanism]))
