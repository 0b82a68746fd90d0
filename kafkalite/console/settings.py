"""What the console is pointed at and how it behaves (its command line, as one typed value)."""
from __future__ import annotations

from dataclasses import dataclass, field

from kafkalite.client.security import ClientSecurity

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9021          # Confluent Control Center's port: what people expect a Kafka console on


@dataclass(frozen=True)
class ConsoleSettings:
    bootstrap_servers: str
    security: ClientSecurity = field(default_factory=ClientSecurity)
    registry_url: str | None = None
    connect_url: str | None = None
    sql_url: str | None = None
    metrics_urls: tuple[str, ...] = ()
    zookeeper: str | None = None
    read_only: bool = False
    #: ask each person for their own SASL user and password, so the cluster's ACLs apply to them
    user_login: bool = False
    login_idle_s: float = 1800.0
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    #: how often consumer-group lag is sampled for the lag-over-time charts (0: never)
    lag_sample_interval_s: float = 10.0
    #: how often the brokers' /metrics are scraped for the live charts (0: only when a page asks)
    metrics_interval_s: float = 5.0
    request_timeout_ms: int = 15000
