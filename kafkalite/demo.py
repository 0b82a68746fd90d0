"""The main demo (``bash scripts/demo``): the truck_gps scenario on a local 3-broker cluster.

1. A local ZooKeeper ensemble of three servers, brokers 101-103 and a schema registry start as
   plain processes (:mod:`kafkalite.cluster`); the brokers' ``zookeeper.connect`` names all three
   servers.
2. ``trucks_gps`` is created with 10 partitions and replication factor 3 (min.insync.replicas 2);
   the ``Position`` Avro schema is registered as subject ``trucks_gps-value``.
3. Two producers send each truck's position every tick as registry-framed Avro (magic byte,
   schema id, Avro binary), keyed by truck id (acks=all, idempotent), so a truck's positions stay
   in one partition, in order.
4. A consumer group of three tracks the latest position of every truck and commits its offsets.
5. Half-way one broker is killed with kill -9; its session expires, the controller elects new
   leaders from the ISR, and producers and consumers carry on. The failover time is measured.
6. The PySpark reader (format "kafkalite") reads the committed range, decoding the values into
   typed columns with the registered schema (``valueAvroSubject``), and Spark SQL computes
   per-truck statistics; then the killed broker is restarted and catches up; then a summary.
7. Alongside (unless ``--no-connect``), Kafka Connect: a throwaway PostgreSQL (started while the
   cluster starts, :mod:`kafkalite.cluster.postgres`) holds the trucks' ``depots`` table; one
   distributed worker of the cluster launcher runs a JDBC source (mode timestamp+incrementing,
   topic.prefix ``pg-``) that loads it into ``pg-depots``, and a Parquet sink (AvroConverter on the
   registry) that lands ``trucks_gps`` under ``<data dir>/parquet/``. The summary counts the depots
   read back from the topic and the Parquet files and positions read back with pyarrow (each
   position at most once). PostgreSQL is stopped and removed at the end, even with
   ``--keep-running`` (the source connector is paused first).

Without Java or PySpark (or with ``--no-spark``) the same statistics come from a plain consumer
over the same range, decoding the Avro values itself. The demo says which it did.

``--secure`` runs the same job over SASL_SSL with SCRAM-SHA-512: a throwaway CA and broker
certificate are made under the data directory, the brokers' and the demo user's SCRAM credentials
are written to ZooKeeper with ``kafkalite-configs --zookeeper`` before the brokers start (Kafka's
way), the brokers talk SASL_SSL among themselves, and every client of the job (admin, producers,
consumer group, Spark reader) connects to the SASL_SSL listener with the properties also written to
``client.properties`` for the tools. So does the SQL server: the launcher writes the same user
into ``sql/ksql-server.properties`` with Kafka's Java names (``sasl.jaas.config``, a PEM
``ssl.truststore.location``), which it gives to its clients and to its Spark queries. The
PLAINTEXT listener stays for the launcher's readiness check, the schema registry's store and the
Connect worker.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import logging
import math
import os
import random
import secrets
import shutil
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cluster import STATE_FILE, ClusterError, LocalCluster
from kafkalite.cluster.postgres import PostgresServer, postgres_bin_dir, start_postgres
from kafkalite.cluster.processes import ConnectWorkerProcess, free_port
from kafkalite.registry.client import RegisteredSchema, RegistryClient, RegistryClientError
from kafkalite.registry.serde import SerdeError, decode, encode, parse_avro

TOPIC = "trucks_gps"
SUBJECT = f"{TOPIC}-value"            # Confluent's TopicNameStrategy
POSITION_SCHEMA = {
    "type": "record", "name": "Position", "namespace": "kafkalite.demo",
    "doc": "One report of a truck's position (truck_gps scenario).",
    "fields": [
        {"name": "truck_id", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "lat", "type": "double"},
        {"name": "lon", "type": "double"},
        {"name": "speed_kmh", "type": "double"},
    ],
}
PARTITIONS = 10
ZOOKEEPERS = 3          # a ZooKeeper ensemble, as production runs it
GROUP = "truck-trackers"


CLIENT_LOG = logging.getLogger("kafkalite.demo.clients")
#: the clients' security properties (Kafka's names); empty = PLAINTEXT, filled by ``--secure``
CLIENT_SECURITY: dict[str, str] = {}


def client_conf(**conf: Any) -> dict[str, Any]:
    """librdkafka's own log lines (disconnects while a broker is down, ...) go to clients.log in
    the data directory instead of cluttering the demo's progress; with ``--secure`` every client
    gets the SASL_SSL properties."""
    return {**conf, **CLIENT_SECURITY, "logger": CLIENT_LOG}


def log_clients_to(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    CLIENT_LOG.addHandler(handler)
    CLIENT_LOG.setLevel(logging.DEBUG)
    CLIENT_LOG.propagate = False


def say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


# ------------------------------------------------------------------------------ trucks


class Truck:
    """A truck driving a random walk around its depot, reporting every 20 simulated seconds."""

    def __init__(self, n: int, rng: random.Random) -> None:
        self.id = f"truck-{n:03d}"
        self.lat = 48.0 + rng.uniform(-2, 2)
        self.lon = 2.0 + rng.uniform(-3, 3)
        self.heading = rng.uniform(0, 2 * math.pi)
        self.rng = rng

    def report(self, ts_ms: int) -> dict[str, Any]:
        speed = max(0.0, self.rng.gauss(70, 20))                  # km/h
        self.heading += self.rng.gauss(0, 0.2)
        km = speed * 20 / 3600
        self.lat += km / 111.0 * math.cos(self.heading)
        self.lon += km / (111.0 * math.cos(math.radians(self.lat))) * math.sin(self.heading)
        return {"truck_id": self.id, "ts": ts_ms, "lat": round(self.lat, 6), "lon": round(self.lon, 6),
                "speed_kmh": round(speed, 1)}


def haversine_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    lat1, lon1, lat2, lon2 = map(math.radians, (*a, *b))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(h))


class PositionCodec:
    """Positions as registry-framed Avro: the schema is registered once (the id every value
    carries), values are encoded with it, and decoded by the id they carry (looked up once per id;
    ids never change meaning), as confluent-kafka's AvroSerializer/AvroDeserializer do."""

    def __init__(self, registry_url: str) -> None:
        self.registry = RegistryClient(registry_url)
        text = json.dumps(POSITION_SCHEMA)
        self.schema_id = self.registry.register(SUBJECT, text)
        self.version = self.registry.subject_version(SUBJECT, "latest")[0]
        self.parsed = parse_avro(text)
        self._known: dict[int, tuple[RegisteredSchema, Any]] = {
            self.schema_id: (RegisteredSchema(self.schema_id, "AVRO", text), self.parsed)}
        self._lock = threading.Lock()

    def encode(self, position: dict[str, Any]) -> bytes:
        return encode(self.schema_id, self.parsed, position)

    def _lookup(self, schema_id: int) -> tuple[RegisteredSchema, Any]:
        with self._lock:
            known = self._known.get(schema_id)
            if known is None:
                reg = self.registry.by_id(schema_id)
                known = self._known[schema_id] = (reg, parse_avro(reg.schema, reg.dependencies))
            return known

    def decode(self, value: bytes) -> dict[str, Any]:
        """The position (``ts`` as an aware UTC datetime, fastavro's timestamp-millis)."""
        return decode(value, self._lookup)[2]


# ------------------------------------------------------------------------------ --secure

BROKER_USER = "admin"          # the brokers' own identity on the SASL_SSL inter-broker listener
DEMO_USER = "trucks"           # the demo's clients
MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class SecureSetup:
    """The throwaway PKI and SCRAM passwords of one ``--secure`` run (nothing secret is kept
    beyond the data directory)."""

    ca: Path
    broker_pem: Path                 # key (encrypted with key_password) + certificate chain
    key_password: str
    admin_password: str              # BROKER_USER's SCRAM password
    demo_password: str               # DEMO_USER's
    client_properties: Path

    def client_security(self) -> dict[str, str]:
        """The demo clients' properties (librdkafka's and kafkalite's tools' names)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": DEMO_USER,
                "sasl.password": self.demo_password, "ssl.ca.location": str(self.ca)}

    def service_security(self) -> dict[str, str]:
        """The same user with the Java client's names, as a service's properties file takes them
        (ksqlDB's ``ksql-server.properties``): a JAAS line and a PEM truststore."""
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="{DEMO_USER}" password="{self.demo_password}";')
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.jaas.config": jaas,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)}

    def broker_overrides(self) -> dict[str, str]:
        """Every broker: a SASL_SSL listener (SCRAM-SHA-512) that the brokers also use among
        themselves as BROKER_USER, next to the launcher's PLAINTEXT one."""
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="{BROKER_USER}" password="{self.admin_password}";')
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.broker_pem),
                "ssl.key.password": self.key_password, "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca), "sasl.enabled.mechanisms": MECHANISM,
                "sasl.mechanism.inter.broker.protocol": MECHANISM,
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
                "inter.broker.listener.name": "SASL_SSL"}

    def write_credentials(self, zk_connect: str) -> None:
        """The SCRAM credentials of BROKER_USER and DEMO_USER in ``/config/users`` (salted, as
        Kafka stores them), written like ``kafka-configs --zookeeper`` before the brokers start."""
        import contextlib
        import io

        from kafkalite.cli import configs as configs_tool
        from kafkalite.cli.common import ToolError

        for user, password in ((BROKER_USER, self.admin_password), (DEMO_USER, self.demo_password)):
            try:
                with contextlib.redirect_stdout(io.StringIO()):      # its "Completed updating ..." line
                    code = configs_tool.main(["--zookeeper", zk_connect, "--alter", "--entity-type", "users",
                                              "--entity-name", user, "--add-config",
                                              f"{MECHANISM}=[password={password}]"])
            except ToolError as exc:
                raise ClusterError(f"could not write the SCRAM credential of {user}: {exc}") from None
            if code:
                raise ClusterError(f"could not write the SCRAM credential of {user} to ZooKeeper")


def make_secure_setup(directory: Path) -> SecureSetup:
    """A fresh CA and a broker certificate for 127.0.0.1/localhost (cryptography, as the
    project's TLS tests make theirs), random passwords, and ``client.properties`` for the tools."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkalite-demo"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(subject: x509.Name, key: Any, issuer: x509.Name, issuer_key: Any, ca: bool) -> x509.Certificate:
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=30))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            b = b.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    directory.mkdir(parents=True, exist_ok=True)
    ca_key, broker_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = name("kafkalite-demo-ca")
    ca = cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    broker = cert(name("kafkalite-demo-broker"), broker_key, ca_name, ca_key, ca=False)
    key_password = secrets.token_urlsafe(12)
    pem = serialization.Encoding.PEM
    ca_path, broker_path = directory / "ca.pem", directory / "broker.pem"
    ca_path.write_bytes(ca.public_bytes(pem))
    broker_path.write_bytes(broker_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                     serialization.BestAvailableEncryption(key_password.encode()))
                            + broker.public_bytes(pem) + ca.public_bytes(pem))
    broker_path.chmod(0o600)
    setup = SecureSetup(ca_path, broker_path, key_password, secrets.token_urlsafe(12), secrets.token_urlsafe(12),
                        directory.parent / "client.properties")
    setup.client_properties.write_text("".join(f"{k}={v}\n" for k, v in setup.client_security().items()))
    setup.client_properties.chmod(0o600)
    return setup


@dataclass
class Run:
    bootstrap: str
    codec: PositionCodec
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop_consumers: threading.Event = field(default_factory=threading.Event)
    produced: int = 0
    delivery_errors: list[str] = field(default_factory=list)
    seen: set[tuple[int, int]] = field(default_factory=set)        # (partition, offset) consumed
    redelivered: int = 0
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)  # truck -> latest position
    rebalances: dict[int, int] = field(default_factory=dict)         # member -> assignments received
    commits: int = 0
    consumer_errors: list[str] = field(default_factory=list)
    over_limit: int = 0                                             # reports above SPEED_LIMIT_KMH

    @property
    def consumed(self) -> int:
        return len(self.seen)


def producer_loop(run: Run, trucks: list[Truck], ticks: int, tick_s: float, start_ms: int,
                  progress: dict[str, int]) -> None:
    p = Producer(client_conf(**{"bootstrap.servers": run.bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 10, "message.timeout.ms": 120000, "compression.type": "lz4"}))

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        with run.lock:
            if err is None:
                run.produced += 1
            else:
                run.delivery_errors.append(str(err))

    t0 = time.monotonic()
    for tick in range(ticks):
        for truck in trucks:
            report = truck.report(start_ms + tick * 20_000)
            if report["speed_kmh"] > SPEED_LIMIT_KMH:
                with run.lock:
                    run.over_limit += 1
            value = run.codec.encode(report)
            while True:
                try:
                    p.produce(TOPIC, value, key=truck.id.encode(), timestamp=start_ms + tick * 20_000,
                              on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.05)
        p.poll(0)
        progress["tick"] = max(progress.get("tick", 0), tick + 1)
        delay = t0 + (tick + 1) * tick_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)        # not poll(delay): poll returns at the first delivery report
    left = p.flush(180)
    if left:
        with run.lock:
            run.delivery_errors.append(f"{left} records still unacknowledged after 180 s")


def consumer_loop(run: Run, member: int) -> None:
    conf = {"bootstrap.servers": run.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            "client.id": f"tracker-{member}"}
    c = Consumer(client_conf(**conf))

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with run.lock:
            run.rebalances[member] = run.rebalances.get(member, 0) + 1

    c.subscribe([TOPIC], on_assign=on_assign)
    last_commit = time.monotonic()
    try:
        while not run.stop_consumers.is_set():
            msgs = c.consume(500, 0.5)
            with run.lock:
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if not err.retriable() and err.code() != KafkaError._PARTITION_EOF:
                            run.consumer_errors.append(str(err))
                        continue
                    partition, offset, value = m.partition(), m.offset(), m.value()
                    # a record (no error) has both; the demo's producers always write an Avro value
                    assert partition is not None and offset is not None and value is not None
                    key = (partition, offset)
                    if key in run.seen:
                        run.redelivered += 1          # at-least-once: re-read after a rebalance
                        continue
                    run.seen.add(key)
                    try:
                        pos = run.codec.decode(value)
                    except (SerdeError, RegistryClientError) as exc:
                        run.consumer_errors.append(f"{m.topic()}-{m.partition()}@{m.offset()}: {exc}")
                        continue
                    latest = run.latest.get(pos["truck_id"])
                    if latest is None or pos["ts"] >= latest["ts"]:
                        run.latest[pos["truck_id"]] = pos
            if msgs and time.monotonic() - last_commit >= 1.0:
                commit(run, c)
                last_commit = time.monotonic()
        commit(run, c)
    finally:
        c.close()                                    # leaves the group at once (LeaveGroup)


def commit(run: Run, c: Consumer) -> None:
    try:
        c.commit(asynchronous=False)
        with run.lock:
            run.commits += 1
    except KafkaException as exc:                    # nothing new to commit, or mid-rebalance
        if exc.args[0].code() not in (KafkaError._NO_OFFSET, KafkaError.REBALANCE_IN_PROGRESS,
                                      KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID):
            with run.lock:
                run.consumer_errors.append(f"commit: {exc}")


# ------------------------------------------------------------------------------ Kafka Connect

DEPOTS_TABLE = "depots"
DEPOTS_TOPIC = "pg-depots"            # the JDBC source's topic.prefix + the table name
SOURCE_CONNECTOR = "depots-source"
SINK_CONNECTOR = "positions-parquet"
#: the trucks' depots (id, name, city, lat, lon), the rows of the PostgreSQL table
DEPOTS = [(1, "Paris Nord", "Paris", 48.9356, 2.3539), (2, "Lyon Port Edouard Herriot", "Lyon", 45.7272, 4.8337),
          (3, "Lille Lesquin", "Lille", 50.5866, 3.0927), (4, "Orleans Saran", "Orleans", 47.9490, 1.8765),
          (5, "Reims Croix-Blandin", "Reims", 49.2465, 4.0699), (6, "Rouen Grand-Quevilly", "Rouen", 49.4103, 1.0290)]


#: the sink also closes its files on the wall clock, so the last positions land soon after the producers stop
ROTATE_SCHEDULE_MS = 5000


@dataclass
class ConnectPart:
    """What the Connect side of the demo runs: a throwaway PostgreSQL holding the depots table,
    one distributed worker (the cluster launcher's), a JDBC source and a Parquet sink."""

    postgres: PostgresServer
    worker: ConnectWorkerProcess
    parquet_dir: Path
    flush_size: int


def start_depots_database() -> PostgresServer:
    """A throwaway PostgreSQL (in a temp dir, as the postgres user) with the ``depots`` table."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise ClusterError("PostgreSQL is not installed (bash scripts/setup installs Debian's postgresql); "
                           "or run with --no-connect")
    import psycopg

    pg = start_postgres(bin_dir)
    try:
        pg.execute(f"CREATE TABLE {DEPOTS_TABLE} (id SERIAL PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, "
                   "lat DOUBLE PRECISION NOT NULL, lon DOUBLE PRECISION NOT NULL, "
                   "updated_at TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'utc'))")
        for depot in DEPOTS:
            pg.execute(f"INSERT INTO {DEPOTS_TABLE} (id, name, city, lat, lon) VALUES (%s, %s, %s, %s, %s)", depot)
    except psycopg.Error as exc:
        pg.remove()
        raise ClusterError(f"could not create the depots table in PostgreSQL: {exc}") from None
    except BaseException:
        pg.remove()
        raise
    return pg


def connect_rest(url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One call to the worker's REST API (Connect's paths and JSON); the error JSON becomes a ClusterError."""
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
    except urllib.error.HTTPError as exc:
        raise ClusterError(f"Connect {method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from None
    except OSError as exc:
        raise ClusterError(f"Connect {method} {path}: {exc}") from None
    return json.loads(text) if text else None


def connector_configs(part: ConnectPart, registry_url: str) -> dict[str, dict[str, str]]:
    """The two connectors, with the JDBC and storage connectors' own property names."""
    return {
        SOURCE_CONNECTOR: {
            "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "tasks.max": "1",
            "connection.url": part.postgres.jdbc_url, "table.whitelist": DEPOTS_TABLE,
            "mode": "timestamp+incrementing", "incrementing.column.name": "id",
            "timestamp.column.name": "updated_at", "topic.prefix": "pg-", "poll.interval.ms": "1000"},
        SINK_CONNECTOR: {
            "connector.class": "kafkalite.connect.connectors.parquet.ParquetSinkConnector", "tasks.max": "2",
            "topics": TOPIC, "store.url": str(part.parquet_dir), "flush.size": str(part.flush_size),
            "rotate.schedule.interval.ms": str(ROTATE_SCHEDULE_MS),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry_url},
    }


def start_connectors(part: ConnectPart, registry_url: str, timeout: float = 60) -> None:
    """Create both connectors (POST /connectors) and wait until they and their tasks run."""
    configs = connector_configs(part, registry_url)
    for name, config in configs.items():
        connect_rest(part.worker.url, "POST", "/connectors", {"name": name, "config": config})
    deadline = time.monotonic() + timeout
    while True:
        states = {}
        for name in configs:
            try:
                st = connect_rest(part.worker.url, "GET", f"/connectors/{name}/status")
            except ClusterError:
                st = None                     # 404 until the config topic has been read back
            if st is not None:
                tasks = st.get("tasks") or []
                failed = [t for t in tasks if t.get("state") == "FAILED"] + (
                    [st["connector"]] if st["connector"].get("state") == "FAILED" else [])
                if failed:
                    raise ClusterError(f"connector {name} failed: {str(failed[0].get('trace', ''))[-800:]}")
                states[name] = st["connector"].get("state") == "RUNNING" and tasks and all(
                    t.get("state") == "RUNNING" for t in tasks)
        if len(states) == len(configs) and all(states.values()):
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"connectors not running after {timeout:.0f} s: {states}; see {part.worker.log_path}")
        time.sleep(0.2)


def depots_through_connect(bootstrap: str, timeout: float = 60) -> list[dict[str, Any]]:
    """The depots as the JDBC source wrote them to ``pg-depots`` (JsonConverter with its schema
    envelope), read from the beginning until every depot is there or ``timeout`` passes."""
    c = Consumer(client_conf(**{"bootstrap.servers": bootstrap, "group.id": "demo-depots-unused",
                                "enable.auto.commit": False}))
    depots: dict[int, dict[str, Any]] = {}
    try:
        c.assign([TopicPartition(DEPOTS_TOPIC, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(depots) < len(DEPOTS) and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                value = m.value()
                if m.error() or value is None:
                    continue
                row = json.loads(value)["payload"]
                depots[int(row["id"])] = row
    finally:
        c.close()
    return [depots[i] for i in sorted(depots)]


@dataclass(frozen=True)
class ParquetSummary:
    files: int
    records: int
    distinct: int                     # distinct (truck_id, ts): a position written twice counts once


def read_parquet(directory: Path) -> ParquetSummary:
    """Every finished Parquet file of the sink (not the hidden temporaries), read back with pyarrow."""
    import pyarrow.parquet as pq

    files = sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith("."))
    keys: list[tuple[str, Any]] = []
    for f in files:
        table = pq.read_table(f, columns=["truck_id", "ts"])
        keys += zip(table.column("truck_id").to_pylist(), table.column("ts").to_pylist())
    return ParquetSummary(len(files), len(keys), len(set(keys)))


def failed_tasks(part: ConnectPart, connector: str) -> list[dict[str, Any]]:
    """The connector's tasks in state FAILED (GET /connectors/{name}/status)."""
    try:
        st = connect_rest(part.worker.url, "GET", f"/connectors/{connector}/status")
    except ClusterError:
        return []                       # mid-rebalance: asked again on the next round
    return [t for t in st.get("tasks") or [] if t.get("state") == "FAILED"]


def restart_failed_sink_tasks(part: ConnectPart) -> int:
    """What an operator does when a task has failed: restart the failed ones (KIP-745's
    ``POST /connectors/{name}/restart?includeTasks=true&onlyFailed=true``). The sink resumes from
    the files already written, so no position is written twice. Returns how many were restarted."""
    failed = failed_tasks(part, SINK_CONNECTOR)
    if failed:
        cause = str(failed[0].get("trace", "")).strip().splitlines()[-1:] or ["?"]
        say(f"{len(failed)} task(s) of {SINK_CONNECTOR} FAILED ({cause[0][:160]}); restarting them with "
            f"POST /connectors/{SINK_CONNECTOR}/restart?includeTasks=true&onlyFailed=true")
        connect_rest(part.worker.url, "POST", f"/connectors/{SINK_CONNECTOR}/restart?includeTasks=true&onlyFailed=true")
    return len(failed)


def wait_parquet(part: ConnectPart, expected: int, timeout: float = 60) -> tuple[ParquetSummary, int]:
    """Wait until ``expected`` positions are in files (files close on ``flush.size`` records, and
    every ``rotate.schedule.interval.ms`` for the rest), restarting sink tasks that failed; the
    files read back (fewer after ``timeout``) and how many task restarts it took."""
    deadline = time.monotonic() + timeout
    restarts = 0
    while True:
        summary = read_parquet(part.parquet_dir)
        if summary.records >= expected or time.monotonic() > deadline:
            return summary, restarts
        restarts += restart_failed_sink_tasks(part)
        time.sleep(0.5)


# ------------------------------------------------------------------------------ phases


# ------------------------------------------------------------------------------ streaming SQL

SPEED_LIMIT_KMH = 100.0
SPEED_TABLE = "SPEED_PER_MINUTE"
ALERTS_STREAM = "SPEED_ALERTS"
#: the demo's ksqlDB statements, run by the cluster's kafkalite-sql-server while the trucks report
SQL_STATEMENTS = (
    f"CREATE STREAM positions (truck VARCHAR KEY) WITH (KAFKA_TOPIC='{TOPIC}', VALUE_FORMAT='AVRO');",
    f"CREATE TABLE {SPEED_TABLE.lower()} AS SELECT truck, AVG(speed_kmh) AS avg_speed_kmh, COUNT(*) AS reports "
    "FROM positions WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY truck EMIT CHANGES;",
    f"CREATE STREAM {ALERTS_STREAM.lower()} AS SELECT truck, speed_kmh, lat, lon FROM positions "
    f"WHERE speed_kmh > {SPEED_LIMIT_KMH} EMIT CHANGES;",
)


def sql_request(url: str, path: str, body: dict[str, Any], timeout: float = 120) -> Any:
    """One call to the SQL server's REST API (ksqlDB's paths and JSON); its error JSON becomes a
    RuntimeError with ksqlDB's message."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/vnd.ksql.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        try:
            detail = json.loads(detail).get("message", detail)
        except ValueError:
            pass
        raise RuntimeError(f"SQL {path}: {exc.code} {detail}") from None
    except OSError as exc:
        raise RuntimeError(f"SQL {path}: {exc}") from None


def start_sql_queries(url: str) -> list[str]:
    """The stream over the positions, the per-minute speed table and the alerts stream, reading
    from the beginning of the topic; returns the persistent queries' ids."""
    body = sql_request(url, "/ksql", {"ksql": "\n".join(SQL_STATEMENTS),
                                      "streamsProperties": {"auto.offset.reset": "earliest"}})
    return [e["commandStatus"]["queryId"] for e in body if e.get("commandStatus", {}).get("queryId")]


def latest_window(url: str, truck: str, reports: int, timeout: float = 180) -> dict[str, Any]:
    """Pull queries on the speed table until every one of ``truck``'s ``reports`` is counted in
    its windows; returns its latest window (WINDOWSTART, WINDOWEND, the average and count)."""
    deadline = time.monotonic() + timeout
    counted = 0
    while True:
        doc = sql_request(url, "/query", {"ksql": f"SELECT * FROM {SPEED_TABLE} WHERE truck = '{truck}';"})
        names = [n.strip("`").split("`")[0] for n in doc[0]["header"]["schema"].split(", ")]
        windows = [dict(zip(names, entry["row"]["columns"])) for entry in doc[1:] if "row" in entry]
        counted = sum(w["REPORTS"] for w in windows)
        if windows and counted >= reports:
            return max(windows, key=lambda w: w["WINDOWSTART"])
        if time.monotonic() > deadline:
            raise RuntimeError(f"the speed table counts {counted} of {truck}'s {reports} reports after "
                               f"{timeout:.0f} s")
        time.sleep(1.0)


def _utc(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000))


def count_topic(bootstrap: str, topic: str, expected: int, timeout: float = 120) -> int:
    """Records in ``topic`` as a read_committed consumer sees them, waiting up to ``timeout`` for
    ``expected`` of them."""
    c = Consumer(client_conf(**{"bootstrap.servers": bootstrap, "group.id": f"demo-count-{uuid.uuid4().hex[:6]}",
                                "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                "enable.auto.commit": False}))
    count = 0
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while count < expected and time.monotonic() < deadline:
            count += sum(1 for m in c.consume(500, 1.0) if m.error() is None)
    finally:
        c.close()
    return count


def leaders(admin: AdminClient) -> dict[int, int]:
    try:
        meta = admin.list_topics(TOPIC, timeout=5)
    except KafkaException:
        return {}
    t = meta.topics.get(TOPIC)
    return {} if t is None or t.error else {p: pm.leader for p, pm in t.partitions.items()}


def wait_failover(admin: AdminClient, victim: int, killed_at: float, result: dict[str, float]) -> None:
    """Seconds from the kill until every partition has a live leader other than the victim."""
    deadline = killed_at + 120
    while time.monotonic() < deadline:
        ls = leaders(admin)
        if len(ls) == PARTITIONS and all(l >= 0 and l != victim for l in ls.values()):
            result["failover_s"] = time.monotonic() - killed_at
            return
        time.sleep(0.1)


def committed_range(run: Run) -> dict[int, int]:
    """partition -> first offset not committed by the group."""
    c = Consumer(client_conf(**{"bootstrap.servers": run.bootstrap, "group.id": GROUP, "enable.auto.commit": False}))
    try:
        tps = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: max(tp.offset, 0) for tp in tps}
    finally:
        c.close()


def statistics_by_consumer(bootstrap: str, ranges: dict[int, int], codec: PositionCodec) -> list[dict[str, Any]]:
    """Per-truck statistics over [0, committed) with a plain consumer decoding the Avro values
    (used when there is no Spark reader)."""
    c = Consumer(client_conf(**{"bootstrap.servers": bootstrap, "group.id": "demo-stats-unused",
                                "enable.auto.commit": False}))
    tracks: dict[str, list[dict[str, Any]]] = {}
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p, end in ranges.items() if end > 0])
        remaining = {p for p, end in ranges.items() if end > 0}
        deadline = time.monotonic() + 120
        while remaining and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                partition, offset = m.partition(), m.offset()
                if m.error() or partition not in remaining:
                    continue
                # a record (no error) has an offset; the demo's producers key by truck id, Avro values
                key, value = m.key(), m.value()
                assert offset is not None and key is not None and value is not None
                if offset < ranges[partition]:
                    tracks.setdefault(key.decode(), []).append(codec.decode(value))
                if offset + 1 >= ranges[partition]:
                    remaining.discard(partition)
    finally:
        c.close()
    stats = {}
    for truck, points in tracks.items():
        points.sort(key=lambda p: p["ts"])
        dist = sum(haversine_km((a["lat"], a["lon"]), (b["lat"], b["lon"])) for a, b in zip(points, points[1:]))
        speeds = [p["speed_kmh"] for p in points]
        stats[truck] = {"truck_id": truck, "reports": len(points), "km": dist, "avg_kmh": sum(speeds) / len(speeds),
                        "max_kmh": max(speeds), "lat": points[-1]["lat"], "lon": points[-1]["lon"]}
    return [stats[t] for t in sorted(stats)]


LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tsm.name = org.apache.spark.scheduler.TaskSetManager
logger.tsm.level = off
"""


def spark_unavailable() -> str | None:
    """Why the PySpark reader cannot run here, or None."""
    if shutil.which("java") is None:
        return "java not found (bash scripts/setup installs openjdk-17-jre-headless)"
    for module in ("pyspark", "spark_integration.source"):
        try:
            if importlib.util.find_spec(module) is None:
                return f"{module} not installed"
        except ModuleNotFoundError:
            return f"{module} not installed"
    return None


def spark_statistics(bootstrap: str, registry_url: str, ranges: dict[int, int], work_dir: Path,
                     security: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The PySpark reader (``format("kafkalite")``) reads exactly the committed range
    (``endingOffsets`` = the group's committed offsets) in a local[2] Spark, the Avro values decoded
    into typed columns with the subject's latest schema; per-truck statistics are computed by
    Spark SQL, distance with a window over each truck's positions in time order. ``security``
    (client properties) is given to the source as Spark's ``kafka.``-prefixed options."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    (work_dir / "log4j2.properties").write_text(LOG4J)
    from pyspark.sql import SparkSession, Window
    from pyspark.sql import functions as F

    from spark_integration import register

    spark = (SparkSession.builder.master("local[2]").appName("kafkalite-demo")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "1g")
             .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{work_dir / 'log4j2.properties'}")
             .getOrCreate())
    try:
        register(spark)
        ending = json.dumps({TOPIC: {str(p): o for p, o in ranges.items()}})
        df = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
              .options(**{f"kafka.{k}": v for k, v in (security or {}).items()})
              .option("subscribe", TOPIC).option("startingOffsets", "earliest")
              .option("endingOffsets", ending)
              .option("schemaRegistryUrl", registry_url).option("valueAvroSubject", SUBJECT).load())
        pos = df.select("value.*")          # truck_id string, ts timestamp, lat/lon/speed_kmh double
        w = Window.partitionBy("truck_id").orderBy("ts")
        rad = F.radians
        prev_lat, prev_lon = F.lag("lat").over(w), F.lag("lon").over(w)
        hav = (F.pow(F.sin((rad("lat") - rad(prev_lat)) / 2), 2)
               + F.cos(rad("lat")) * F.cos(rad(prev_lat)) * F.pow(F.sin((rad("lon") - rad(prev_lon)) / 2), 2))
        legs = pos.withColumn("km", F.coalesce(2 * 6371.0 * F.asin(F.sqrt(hav)), F.lit(0.0)))
        stats = (legs.groupBy("truck_id")
                 .agg(F.count("*").alias("reports"), F.sum("km").alias("km"),
                      F.avg("speed_kmh").alias("avg_kmh"), F.max("speed_kmh").alias("max_kmh"),
                      F.max_by("lat", "ts").alias("lat"), F.max_by("lon", "ts").alias("lon"))
                 .orderBy("truck_id"))
        return [r.asDict() for r in stats.collect()]
    finally:
        spark.stop()


def statistics_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'truck':<10} {'reports':>7} {'km':>8} {'avg km/h':>9} {'max km/h':>9}  last position")
    for s in rows[:10]:
        print(f"{s['truck_id']:<10} {s['reports']:>7} {s['km']:>8.1f} {s['avg_kmh']:>9.1f} {s['max_kmh']:>9.1f}  "
              f"{s['lat']:.4f}, {s['lon']:.4f}")
    if len(rows) > 10:
        print(f"... and {len(rows) - 10} more trucks")
    print(flush=True)


def fresh_data_dir(path: Path) -> None:
    """Stop a previous demo cluster still running there, then start from an empty directory."""
    if (path / STATE_FILE).exists():
        try:
            LocalCluster.load(path).down(10)
        except ClusterError:
            pass
    elif path.exists() and any(path.iterdir()):
        raise ClusterError(f"{path} exists and is not a demo directory; choose another --data-dir")
    shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafkalite-demo", description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="var/demo")
    ap.add_argument("--trucks", type=int, default=40)
    ap.add_argument("--ticks", type=int, default=300, help="reports per truck")
    ap.add_argument("--tick-ms", type=int, default=100, help="real time between two reports of a truck")
    ap.add_argument("--no-kill", action="store_true", help="do not kill a broker half-way")
    ap.add_argument("--keep-running", action="store_true", help="leave the cluster running at the end")
    ap.add_argument("--no-spark", action="store_true", help="statistics from a plain consumer instead of Spark")
    ap.add_argument("--no-connect", action="store_true",
                    help="no Kafka Connect part (PostgreSQL depots through the JDBC source, positions to Parquet)")
    ap.add_argument("--no-sql", action="store_true",
                    help="no streaming SQL part (kafkalite-sql-server: speed per truck and minute, speed alerts)")
    ap.add_argument("--secure", action="store_true",
                    help="run the job over SASL_SSL with SCRAM-SHA-512 (throwaway CA, credentials in ZooKeeper)")
    args = ap.parse_args(argv)

    data_dir = Path(args.data_dir).resolve()
    CLIENT_SECURITY.clear()              # a second main() in one process starts from PLAINTEXT
    t_start = time.monotonic()
    cluster: LocalCluster | None = None
    pg_start: concurrent.futures.Future[PostgresServer] | None = None
    part: ConnectPart | None = None
    try:
        fresh_data_dir(data_dir)
        if not args.no_connect:        # initdb and start-up run while the cluster starts
            pg_start = concurrent.futures.ThreadPoolExecutor(1, "postgres").submit(start_depots_database)
        say(f"starting a ZooKeeper ensemble of {ZOOKEEPERS}, brokers 101-103, a schema registry and the web console "
            f"as local processes under {data_dir} ...")
        secure = make_secure_setup(data_dir / "pki") if args.secure else None
        # the SQL server runs its queries on Spark (with --secure over the SASL_SSL listener)
        why_no_sql = "--no-sql" if args.no_sql else spark_unavailable()
        cluster = LocalCluster(data_dir, size=3, zookeepers=ZOOKEEPERS, schema_registry=True, console=True,
                               overrides=secure.broker_overrides() if secure else None,
                               connect_workers=0 if args.no_connect else 1, sql=why_no_sql is None,
                               client_listener="SASL_SSL" if secure else None,
                               client_security=secure.service_security() if secure else None)
        secure_ports: dict[int, int] = {}
        if secure is not None:
            for b in cluster.brokers:       # fixed ports: a restarted broker keeps its address
                secure_ports[b.broker_id] = free_port()
                b.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.configured_port},"
                                            f"SASL_SSL://127.0.0.1:{secure_ports[b.broker_id]}")
            say("--secure: SASL_SSL listeners with SCRAM-SHA-512, a throwaway CA in pki/, SCRAM users "
                f"{BROKER_USER!r} (brokers) and {DEMO_USER!r} (the demo's clients) written to ZooKeeper first")
            CLIENT_SECURITY.update(secure.client_security())
        cluster.up(before_brokers=(lambda: secure.write_credentials(cluster.zk_connect)) if secure else None)
        log_clients_to(data_dir / "clients.log")
        bootstrap = (",".join(f"127.0.0.1:{p}" for p in secure_ports.values()) if secure_ports
                     else cluster.bootstrap)
        assert cluster.ensemble is not None and cluster.registry is not None
        say(f"cluster ready in {time.monotonic() - t_start:.1f} s: bootstrap servers {bootstrap}, "
            f"controller {cluster.controller_id()}, ZooKeeper leader server {cluster.ensemble.leader()}, "
            f"schema registry {cluster.registry.url}"
            + (f", web console {cluster.console.url}" if cluster.console is not None else "")
            + (f", Connect worker {cluster.connect[0].url}" if cluster.connect else "")
            + (f", SQL server {cluster.sql.url}" if cluster.sql is not None else f" (no SQL server: {why_no_sql})"))
        if pg_start is not None:
            pg = pg_start.result()
            part = ConnectPart(pg, cluster.connect[0], data_dir / "parquet",
                               max(10, args.trucks * args.ticks // (PARTITIONS * 5)))
            say(f"PostgreSQL {pg.jdbc_url.split('?')[0]} (throwaway, in {pg.root}): table {DEPOTS_TABLE} "
                f"with {len(DEPOTS)} depots")
        return demo(args, cluster, bootstrap, t_start, part)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except (ClusterError, KafkaException, RuntimeError, RegistryClientError) as exc:
        print(f"[demo] FAILED: {exc}", file=sys.stderr)
        if cluster is not None:
            print(f"[demo] logs: {data_dir}/broker-*/server.log, {data_dir}/zookeeper-*/zookeeper.log, "
                  f"{data_dir}/schema-registry/schema-registry.log"
                  + (f", {data_dir}/connect-0/connect.log" if cluster.connect else ""), file=sys.stderr)
        return 1
    finally:
        if cluster is not None and part is not None and args.keep_running:
            try:                 # the database goes away with the demo: the source waits, paused
                connect_rest(part.worker.url, "PUT", f"/connectors/{SOURCE_CONNECTOR}/pause")
            except ClusterError:
                pass
        if cluster is not None and not args.keep_running:
            cluster.down()
        if pg_start is not None:
            try:
                pg_start.result().remove()
            except Exception:  # noqa: BLE001 - its start failed (reported above) and removed what it made
                pass


def demo(args: argparse.Namespace, cluster: LocalCluster, bootstrap: str, t_start: float,
         part: ConnectPart | None) -> int:
    admin = AdminClient(client_conf(**{"bootstrap.servers": bootstrap}))
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
    if part is not None:
        admin.create_topics([NewTopic(DEPOTS_TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[DEPOTS_TOPIC].result(60)
    deadline = time.monotonic() + 60
    while len(ls := leaders(admin)) < PARTITIONS or min(ls.values()) < 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{TOPIC} has no leader for every partition after 60 s")
        time.sleep(0.1)
    per_broker = {b.broker_id: sum(1 for l in ls.values() if l == b.broker_id) for b in cluster.brokers}
    say(f"created {TOPIC}: {PARTITIONS} partitions, replication factor 3, min.insync.replicas 2; "
        f"leaders per broker {per_broker}")

    assert cluster.registry is not None
    codec = PositionCodec(cluster.registry.url)
    say(f"registered the Position Avro schema as {SUBJECT} version {codec.version} (schema id {codec.schema_id}); "
        "every value is registry-framed Avro")
    run = Run(bootstrap, codec)
    if part is not None:
        start_connectors(part, cluster.registry.url)
        say(f"Kafka Connect: JDBC source {SOURCE_CONNECTOR!r} (mode timestamp+incrementing) loads table "
            f"{DEPOTS_TABLE} into {DEPOTS_TOPIC}; Parquet sink {SINK_CONNECTOR!r} (AvroConverter, 2 tasks, "
            f"flush.size {part.flush_size}, rotate.schedule.interval.ms {ROTATE_SCHEDULE_MS}) lands {TOPIC} under {part.parquet_dir}")
    say(f"consumer group {GROUP!r}: 3 members track the latest position of each truck and commit every second")
    rng = random.Random(8)
    trucks = [Truck(n, rng) for n in range(1, args.trucks + 1)]
    start_ms = int(time.time() * 1000) - args.ticks * 20_000
    progress: dict[str, int] = {}
    halves = [trucks[0::2], trucks[1::2]]
    producers = [threading.Thread(target=producer_loop, args=(run, h, args.ticks, args.tick_ms / 1000, start_ms, progress),
                                  name=f"producer-{i}", daemon=True) for i, h in enumerate(halves)]
    consumers = [threading.Thread(target=consumer_loop, args=(run, i), name=f"tracker-{i}", daemon=True)
                 for i in range(3)]
    total = args.trucks * args.ticks
    say(f"producing {total} positions: {args.trucks} trucks x {args.ticks} reports, 2 producers "
        f"(acks=all, idempotent, keyed by truck id)")
    for t in consumers + producers:
        t.start()

    victim = None
    killed_at = 0.0
    failover: dict[str, float] = {}
    watcher: threading.Thread | None = None
    last_print = 0.0
    while any(t.is_alive() for t in producers):
        time.sleep(0.1)
        if not args.no_kill and victim is None and progress.get("tick", 0) >= args.ticks // 2:
            leader = leaders(admin).get(0, -1)          # broker id 0 is a leader too: no truth test
            victim = leader if leader >= 0 else cluster.brokers[1].broker_id
            killed_at = time.monotonic()
            cluster.kill_broker(victim)
            say(f"half-way: kill -9 broker {victim} (leader of {TOPIC}-0); producers and consumers carry on")
            watcher = threading.Thread(target=wait_failover, args=(admin, victim, killed_at, failover), daemon=True)
            watcher.start()
        if time.monotonic() - last_print >= 2.0:
            last_print = time.monotonic()
            with run.lock:
                line = (f"t={time.monotonic() - t_start:5.1f}s produced {run.produced:6d}/{total} "
                        f"consumed {run.consumed:6d}  trucks tracked {len(run.latest):3d}"
                        f"  rebalances {max(run.rebalances.values(), default=0)}  commits {run.commits}")
            if "failover_s" in failover:
                line += f"  failover done in {failover['failover_s']:.1f}s"
            elif victim is not None:
                line += f"  broker {victim} down, waiting for new leaders"
            say(line)
    deadline = time.monotonic() + 120
    while run.consumed < run.produced and time.monotonic() < deadline:
        time.sleep(0.1)
    run.stop_consumers.set()
    for t in consumers:
        t.join(60)
    if watcher is not None:
        watcher.join(120)
    say(f"all producers done: {run.produced} acknowledged, {len(run.delivery_errors)} delivery errors; "
        f"consumers read {run.consumed}")

    ranges = committed_range(run)
    committed = sum(ranges.values())
    say(f"committed offsets of {GROUP}: "
        + " ".join(f"p{p}:{o}" for p, o in sorted(ranges.items())) + f" (total {committed})")
    print("\nlatest position per truck (first 5, from the consumer group's view):")
    for truck in sorted(run.latest)[:5]:
        pos = run.latest[truck]
        print(f"  {truck}: lat {pos['lat']:.5f} lon {pos['lon']:.5f} at {pos['speed_kmh']} km/h")
    print(flush=True)

    why_not = "--no-spark" if args.no_spark else spark_unavailable()
    used_spark = why_not is None
    if used_spark:
        say("PySpark: the kafkalite data source reads the committed range in a local[2] Spark session ...")
        t0 = time.monotonic()
        rows = spark_statistics(bootstrap, cluster.registry.url, ranges, cluster.dir, CLIENT_SECURITY)
        say(f"Spark read {sum(r['reports'] for r in rows)} positions of {len(rows)} trucks "
            f"in {time.monotonic() - t0:.1f} s (JVM start included)")
    else:
        say(f"PySpark reader unavailable ({why_not}): per-truck statistics over the same committed "
            "range from a plain consumer instead")
        rows = statistics_by_consumer(bootstrap, ranges, codec)
    statistics_table(rows)
    spark_records = sum(r["reports"] for r in rows)

    depots: list[dict[str, Any]] = []
    parquet = ParquetSummary(0, 0, 0)
    sink_restarts = 0
    if part is not None:
        depots = depots_through_connect(cluster.bootstrap)
        say(f"{len(depots)} of {len(DEPOTS)} depots arrived in {DEPOTS_TOPIC} through the JDBC source: "
            + ", ".join(f"{d['name']} ({d['city']})" for d in depots))
        parquet, sink_restarts = wait_parquet(part, run.produced)
        say(f"Parquet sink: {parquet.files} files hold {parquet.records} of {run.produced} positions "
            f"({parquet.distinct} distinct)")

    restarted = ""
    if victim is not None:
        st = cluster.status()
        urp_before = len([p for p in st.under_replicated if p.topic == TOPIC])
        t0 = time.monotonic()
        cluster.start_broker(victim)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if not [p for p in cluster.status().under_replicated if p.topic == TOPIC]:
                break
            time.sleep(0.2)
        left = len([p for p in cluster.status().under_replicated if p.topic == TOPIC])
        restarted = (f"restarted broker {victim}: {urp_before} under-replicated partitions -> {left} "
                     f"after {time.monotonic() - t0:.1f} s")
        say(restarted)

    sql_window: dict[str, Any] | None = None
    alerts = 0
    if cluster.sql is not None:
        t0 = time.monotonic()
        queries = start_sql_queries(cluster.sql.url)
        say(f"streaming SQL: {', '.join(queries)} started on {cluster.sql.url} (a stream over {TOPIC}, average "
            f"speed per truck and 1-minute tumbling window into table {SPEED_TABLE}, reports over "
            f"{SPEED_LIMIT_KMH:.0f} km/h into stream {ALERTS_STREAM})")
        first = trucks[0].id
        sql_window = latest_window(cluster.sql.url, first, args.ticks)
        alerts = count_topic(bootstrap, ALERTS_STREAM, run.over_limit)
        say(f"pull query on {SPEED_TABLE} for {first}: latest window {_utc(sql_window['WINDOWSTART'])} - "
            f"{_utc(sql_window['WINDOWEND'])} average {sql_window['AVG_SPEED_KMH']:.1f} km/h over "
            f"{sql_window['REPORTS']} reports; {alerts} of {run.over_limit} alerts in {ALERTS_STREAM} "
            f"({time.monotonic() - t0:.1f} s, Spark start included)")

    ok = (run.produced == total and not run.delivery_errors and run.consumed == run.produced
          and not run.consumer_errors and committed == run.produced and spark_records == committed)
    if cluster.sql is not None:
        ok = ok and sql_window is not None and alerts == run.over_limit
    if part is not None:
        ok = ok and len(depots) == len(DEPOTS) and 0 < parquet.records == parquet.distinct
    data_dir = cluster.dir
    rel = os.path.relpath(data_dir)
    if rel.startswith(".."):
        rel = str(data_dir)
    print("\n================================ summary ================================")
    print(f"cluster              ZooKeeper ensemble of {ZOOKEEPERS} ({cluster.zk_connect}) + brokers 101-103 ({bootstrap})")
    if CLIENT_SECURITY:
        print(f"security             SASL_SSL with {MECHANISM} as {DEMO_USER!r} for every client of the job, "
              f"brokers among themselves as {BROKER_USER!r}; CA {rel}/pki/ca.pem, tools: "
              f"--command-config {rel}/client.properties")
    print(f"topic                {TOPIC}: {PARTITIONS} partitions, replication factor 3, min.insync.replicas 2")
    print(f"schema registry      {cluster.registry.url}: {SUBJECT} version {codec.version} (schema id "
          f"{codec.schema_id}), every value registry-framed Avro")
    print(f"records produced     {run.produced} of {total} acknowledged (acks=all, idempotent), "
          f"{len(run.delivery_errors)} delivery errors")
    print(f"records consumed     {run.consumed} distinct offsets, {run.redelivered} redelivered; "
          f"{len(run.latest)} trucks tracked")
    print(f"consumer group       {GROUP}: 3 members, {max(run.rebalances.values(), default=0)} rebalance(s), "
          f"{run.commits} commits, committed {committed}")
    if victim is not None:
        fo = f"{failover['failover_s']:.1f} s" if "failover_s" in failover else "not within 120 s"
        print(f"failover             broker {victim} killed (kill -9) half-way; every partition led by a live "
              f"broker after {fo} (zookeeper.session.timeout.ms=6000)")
        print(f"recovery             {restarted}")
    print(f"statistics           {spark_records} records over the committed range read by "
          f"{'the PySpark reader (format kafkalite, Avro values as typed columns)' if used_spark else 'a plain consumer decoding the Avro values (' + str(why_not) + ')'}")
    if part is not None:
        print(f"kafka connect        1 distributed worker {part.worker.url} (group connect-cluster): "
              f"{SOURCE_CONNECTOR} (JDBC source) and {SINK_CONNECTOR} (Parquet sink)")
        print(f"depots               {len(depots)} of {len(DEPOTS)} rows of PostgreSQL table {DEPOTS_TABLE} "
              f"arrived in {DEPOTS_TOPIC} through the JDBC source (timestamp+incrementing)")
        print(f"parquet              {parquet.files} files with {parquet.records} of {run.produced} positions "
              f"({parquet.distinct} distinct) under {rel}/parquet/topics/{TOPIC}/partition=<n>/ "
              f"(flush.size {part.flush_size}, rotate.schedule.interval.ms {ROTATE_SCHEDULE_MS})"
              + (f"; {sink_restarts} failed sink task(s) restarted through the REST API" if sink_restarts else ""))
    if cluster.sql is not None and sql_window is not None:
        over = f" (clients over {cluster.client_listener} as {DEMO_USER!r})" if cluster.client_listener else ""
        print(f"streaming sql        kafkalite-sql-server {cluster.sql.url}{over}: table {SPEED_TABLE} (average speed per "
              f"truck and minute), stream {ALERTS_STREAM} ({alerts} of {run.over_limit} reports over "
              f"{SPEED_LIMIT_KMH:.0f} km/h); kafkalite-sql {cluster.sql.url} for more")
    print(f"data                 {rel}/broker-<id>/data (partition logs), {rel}/zookeeper-<n>/data")
    print(f"logs                 {rel}/broker-<id>/server.log, {rel}/zookeeper-<n>/zookeeper.log, "
          f"{rel}/schema-registry/schema-registry.log, {rel}/clients.log (librdkafka)"
          + (f", {rel}/connect-0/connect.log" if part is not None else ""))
    print(f"took                 {time.monotonic() - t_start:.0f} s")
    print("explore              bash scripts/cluster --data-dir " + rel + " up     # same cluster, same data")
    print("                     bash scripts/cluster --data-dir " + rel + " status   # also each ZooKeeper server's mode")
    print("                     bash scripts/cluster --data-dir " + rel + " kill --zookeeper 1   # the ensemble keeps a quorum")
    print("                     kcat -b <bootstrap printed by up> -L")
    if CLIENT_SECURITY:
        print(f"                     kafkalite-topics --bootstrap-server {bootstrap} "
              f"--command-config {rel}/client.properties --list")
    print(f"                     kafkalite-avro-console-consumer --bootstrap-server <bootstrap> --topic {TOPIC} "
          "--from-beginning --max-messages 5 --property schema.registry.url=<registry printed by up>")
    print("                     bash scripts/cluster --data-dir " + rel + " down")
    print(f"result               {'OK' if ok else 'PROBLEMS (see above)'}")
    for err in (run.delivery_errors + run.consumer_errors)[:5]:
        print(f"  error: {err}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
