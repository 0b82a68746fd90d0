"""kafkalite-cluster's console hook: the console process's command line and its state-file
round trip (no process started here; tests/integration/test_cluster_tool.py starts one)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from kafkalite.cluster.local import LocalCluster
from kafkalite.cluster.processes import ConsoleProcess


def test_console_command_points_at_the_whole_cluster(tmp_path: Path) -> None:
    c = ConsoleProcess(tmp_path, "127.0.0.1:1,127.0.0.1:2", 40600, registry_url="http://127.0.0.1:3",
                       metrics_urls=["http://127.0.0.1:4/metrics", "http://127.0.0.1:5/metrics"],
                       zookeeper="127.0.0.1:6/chroot")
    assert c.command() == [sys.executable, "-m", "kafkalite.console", "--bootstrap-server", "127.0.0.1:1,127.0.0.1:2",
                           "--listen", "127.0.0.1:40600", "--registry-url", "http://127.0.0.1:3",
                           "--metrics-urls", "http://127.0.0.1:4/metrics,http://127.0.0.1:5/metrics",
                           "--zookeeper", "127.0.0.1:6/chroot"]
    assert c.url == "http://127.0.0.1:40600" and not c.answers()


def test_state_file_round_trip_keeps_the_console(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, size=1, console=True, console_port=40601)
    assert cluster.console is not None and cluster.console.dir == tmp_path.resolve() / "console"
    cluster.save_state()
    again = LocalCluster.load(tmp_path)
    assert again.console is not None and again.console.url == "http://127.0.0.1:40601"
    assert not again.console.alive and again.down() == []
    assert again.status().console == (False, None, "http://127.0.0.1:40601")
    plain = LocalCluster(tmp_path / "plain", size=1)
    plain.save_state()
    assert LocalCluster.load(tmp_path / "plain").console is None
    assert json.loads((tmp_path / "plain" / "cluster.json").read_text())["console"] is None
