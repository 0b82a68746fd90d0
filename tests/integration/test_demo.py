"""The main demo (``python -m kafkalite.demo``, what ``scripts/demo`` runs), shortened: it runs to
its summary with every record acknowledged and consumed on a ZooKeeper ensemble of three, sends
the positions as Avro through the cluster's schema registry, survives the broker it kills
half-way, loads the depots from a throwaway PostgreSQL through Kafka Connect's JDBC source and lands
the positions in Parquet through the sink (each at most once), and leaves no process behind
(PostgreSQL included). (Spark is left out here: the reader has its own tests in
tests/spark; the statistics come from the plain consumer, which decodes the Avro values too.)

``--secure`` runs the job over SASL_SSL, with the streaming SQL part (a windowed table read by a
pull query, an alerts stream) and without Connect: the SQL server starts a Spark session (a JVM
start, the larger part of a minute on two busy cores), so one run has it, the one where its
clients also go through SASL_SSL; its queries over PLAINTEXT are tested in tests/spark."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from tests.integration.test_cluster_tool import processes_using


def test_demo_runs_to_its_summary(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "kafkalite.demo", "--data-dir", str(data_dir),
                        "--trucks", "12", "--ticks", "60", "--tick-ms", "50", "--no-spark", "--no-sql"],
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "records produced     720 of 720 acknowledged" in out
    assert re.search(r"records consumed     720 distinct offsets", out)
    killed = re.search(r"failover             broker (10[123]) killed \(kill -9\) half-way; every partition "
                       r"led by a live broker after [0-9.]+ s", out)
    assert killed, out
    assert re.search(rf"restarted broker {killed.group(1)}: \d+ under-replicated partitions -> 0", out)
    assert "consumer group       truck-trackers: 3 members" in out and "committed 720" in out
    assert "statistics           720 records over the committed range read by a plain consumer decoding " \
        "the Avro values" in out
    assert re.search(r"schema registry      http://127\.0\.0\.1:\d+: trucks_gps-value version 1 \(schema id \d+\), "
                     r"every value registry-framed Avro", out), out
    assert "(no SQL server: --no-sql)" in out and "streaming sql" not in out       # --no-sql
    assert "result               OK" in out
    ensemble = re.search(r"cluster              ZooKeeper ensemble of 3 \((\S+)\)", out)
    assert ensemble and len(ensemble.group(1).split(",")) == 3, out
    assert sorted((data_dir / f"zookeeper-{n}" / "data" / "myid").read_text().strip() for n in (1, 2, 3)) == ["1", "2", "3"]
    assert (data_dir / f"broker-{killed.group(1)}" / "data" / "trucks_gps-0").is_dir()
    assert "primary is now" in (data_dir / "schema-registry" / "schema-registry.log").read_text()
    assert "depots               6 of 6 rows of PostgreSQL table depots arrived in pg-depots through the JDBC " \
        "source (timestamp+incrementing)" in out
    parquet = re.search(r"parquet              (\d+) files with (\d+) of 720 positions \((\d+) distinct", out)
    assert parquet, out
    files = sorted(p for p in (data_dir / "parquet" / "topics" / "trucks_gps").rglob("*.parquet")
                   if not p.name.startswith("."))
    positions = [key for f in files
                 for key in zip(*pq.read_table(f, columns=["truck_id", "ts"]).to_pydict().values())]
    assert 0 < len(positions) == len(set(positions)) <= 720           # some, each at most once
    assert (len(files), len(positions), len(positions)) == tuple(int(g) for g in parquet.groups())
    pg_root = re.search(r"\(throwaway, in (\S+)\)", out)
    assert pg_root and not Path(pg_root.group(1)).exists(), out        # PostgreSQL stopped and removed
    assert processes_using(data_dir) == []
    assert processes_using(Path(pg_root.group(1))) == []


def test_secure_demo_runs_over_sasl_ssl(tmp_path: Path) -> None:
    """``--secure``: the same job over SASL_SSL with SCRAM-SHA-512 (brokers replicating over it
    too, so the kill and the catch-up go through it); the clients' bootstrap list is the brokers'
    SASL_SSL listeners, and client.properties lets a tool in with the demo user. The SQL server's
    bootstrap list is the SASL_SSL listeners only, so its windowed table (read by the pull query)
    and its exactly-once alerts stream went through them, as the demo user."""
    data_dir = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "kafkalite.demo", "--data-dir", str(data_dir), "--secure",
                        "--trucks", "8", "--ticks", "40", "--tick-ms", "50", "--no-spark", "--no-connect",
                        "--keep-running"],
                       capture_output=True, text=True, timeout=400)
    try:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        out = r.stdout
        assert "records produced     320 of 320 acknowledged" in out and "committed 320" in out
        assert re.search(r"restarted broker 10[123]: \d+ under-replicated partitions -> 0", out), out
        assert "security             SASL_SSL with SCRAM-SHA-512 as 'trucks'" in out
        bootstrap = re.search(r"\+ brokers 101-103 \((\S+)\)", out)
        assert bootstrap, out
        logs = {b: (data_dir / f"broker-{b}" / "server.log").read_text() for b in (101, 102, 103)}
        sasl_ports = {m for text in logs.values() for m in re.findall(r"SASL_SSL://127\.0\.0\.1:(\d+)", text)}
        assert {hp.rsplit(":", 1)[1] for hp in bootstrap.group(1).split(",")} == sasl_ports
        assert "result               OK" in out
        assert "kafka connect" not in out and not (data_dir / "connect-0").exists()     # --no-connect
        # streaming SQL on the cluster's kafkalite-sql-server: a windowed table answered by a pull
        # query, an alerts stream holding every report over the limit exactly once
        assert re.search(r"pull query on SPEED_PER_MINUTE for truck-001: latest window \d\d:\d\d:00 - "
                         r"\d\d:\d\d:00 average [0-9.]+ km/h over \d+ reports", out), out
        alerts = re.search(r"streaming sql +kafkalite-sql-server http://127\.0\.0\.1:\d+ \(clients over SASL_SSL as "
                           r"'trucks'\): table SPEED_PER_MINUTE .*stream SPEED_ALERTS \((\d+) of (\d+) reports "
                           r"over 100 km/h\)", out)
        assert alerts and alerts.group(1) == alerts.group(2) and int(alerts.group(1)) > 0, out
        sql_props_path = data_dir / "sql" / "ksql-server.properties"
        sql_props = dict(line.split("=", 1) for line in sql_props_path.read_text().splitlines())
        assert sql_props["bootstrap.servers"] == bootstrap.group(1)                 # SASL_SSL listeners only
        assert (sql_props["security.protocol"], sql_props["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
        assert 'username="trucks"' in sql_props["sasl.jaas.config"]
        assert sql_props["ssl.truststore.location"] == str(data_dir / "pki" / "ca.pem")
        assert sql_props_path.stat().st_mode & 0o077 == 0                          # it holds a password
        props = data_dir / "client.properties"
        listed = subprocess.run([sys.executable, "-m", "kafkalite.cli.topics", "--bootstrap-server",
                                 bootstrap.group(1), "--command-config", str(props), "--list"],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and "trucks_gps" in listed.stdout.split(), listed.stderr
    finally:
        subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(data_dir), "down"],
                       capture_output=True, timeout=120)
    assert processes_using(data_dir) == []
