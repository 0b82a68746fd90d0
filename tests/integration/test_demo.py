"""The main demo (``python -m kafkalite.demo``, what ``scripts/demo`` runs), shortened: it runs to
its summary with every record acknowledged and consumed on a ZooKeeper ensemble of three, sends
the positions as Avro through the cluster's schema registry, survives the broker it kills
half-way, and leaves no process behind. (Spark is left out here: the reader has its own tests in
tests/spark; the statistics come from the plain consumer, which decodes the Avro values too.)"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.test_cluster_tool import processes_using


def test_demo_runs_to_its_summary(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "kafkalite.demo", "--data-dir", str(data_dir),
                        "--trucks", "12", "--ticks", "60", "--tick-ms", "50", "--no-spark"],
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
    assert "result               OK" in out
    ensemble = re.search(r"cluster              ZooKeeper ensemble of 3 \((\S+)\)", out)
    assert ensemble and len(ensemble.group(1).split(",")) == 3, out
    assert sorted((data_dir / f"zookeeper-{n}" / "data" / "myid").read_text().strip() for n in (1, 2, 3)) == ["1", "2", "3"]
    assert (data_dir / f"broker-{killed.group(1)}" / "data" / "trucks_gps-0").is_dir()
    assert "primary is now" in (data_dir / "schema-registry" / "schema-registry.log").read_text()
    assert processes_using(data_dir) == []
