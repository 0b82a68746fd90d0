"""The README's runnable blocks, run as written: the bash block between ``<!-- NAME begin -->`` and
``<!-- NAME end -->`` markers runs in bash from the repository's root, against the cluster it
starts itself. The quickstart (the same block as docs/getting-started.md's), the Kafka Connect
and the Streaming SQL sections are run here; the Stream processing section's (the same block as
docs/streams.md's) by tests/spark/test_streams_quickstart.py. Only these things change: the well-known ports (the
broker's 9092, Connect's 8083, the SQL server's 8088) become free ports, the cluster directory is a temp dir (``$KAFKALITE_CLUSTER_DIR``, which the
launcher reads), ``/tmp/kafkalite-*`` scratch directories move into the test's temp dir, and
``.venv/bin/`` is the directory of the interpreter running the tests. The outputs a block shows as
``#   ...`` lines must be printed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from kafkalite.cluster.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def marked_block(path: Path, name: str = "quickstart") -> str:
    begin, end = f"<!-- {name} begin -->", f"<!-- {name} end -->"
    text = path.read_text()
    assert text.count(begin) == 1 and text.count(end) == 1, f"{path.name}: one pair of {name} markers"
    return text.split(begin, 1)[1].split(end, 1)[0]


def bash_script(block: str, name: str) -> str:
    scripts = re.findall(r"```bash\n(.*?)```", block, re.S)
    assert len(scripts) == 1, f"the {name} is one bash block"
    return scripts[0]


def quickstart_script() -> str:
    block = marked_block(ROOT / "README.md")
    assert block == marked_block(ROOT / "docs" / "getting-started.md"), \
        "README.md's and docs/getting-started.md's quickstarts differ: keep them the same"
    return bash_script(block, "quickstart")


def shown_outputs(script: str) -> list[str]:
    """The ``#   output`` lines under the commands, whitespace-normalised."""
    return [" ".join(line[len("#   "):].split()) for line in script.splitlines() if line.startswith("#   ")]


def run_as_written(script: str, tmp_path: Path, ports: dict[int, int], timeout: float,
                   replace: dict[str, str] | None = None, env: dict[str, str] | None = None) -> tuple[str, int]:
    """Run ``script`` with its well-known ports replaced by ``ports``, its scratch paths moved
    under ``tmp_path`` (``/tmp/kafkalite-*``, and each key of ``replace`` by its value), ``env``
    added to the environment; assert it succeeded and printed every line it shows. Returns what it
    printed and the broker's port."""
    runnable = script.replace("/tmp/kafkalite-", f"{tmp_path}/kafkalite-")
    for old, new in (replace or {}).items():
        assert old in runnable, f"the block names {old}"
        runnable = runnable.replace(old, new)
    for known, port in ports.items():
        runnable = runnable.replace(f"127.0.0.1:{known}", f"127.0.0.1:{port}").replace(
            f"port {known}", f"port {port}")
        assert str(known) not in runnable, f"the block names port {known} only as 127.0.0.1:{known} or --...-port {known}"
    bindir = Path(sys.executable).parent
    assert (bindir / "kafkalite-cluster").exists(), f"the console scripts are not installed in {bindir}"
    runnable = runnable.replace(".venv/bin/", f"{bindir}/")
    cluster_dir = tmp_path / "cluster"
    env = {**os.environ, **(env or {}), "KAFKALITE_CLUSTER_DIR": str(cluster_dir),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + runnable], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    finally:
        if cluster_dir.exists():
            subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(cluster_dir), "down",
                            "--delete-data"], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed = [" ".join(line.split()) for line in done.stdout.splitlines()]
    shown = shown_outputs(script)
    for known, port in ports.items():
        shown = [line.replace(f"127.0.0.1:{known}", f"127.0.0.1:{port}") for line in shown]
    assert shown, "the block shows what its commands print"
    for line in shown:
        assert line in printed, f"the block shows {line!r}, not printed:\n{done.stdout[-3000:]}"
    assert not cluster_dir.exists(), "`kafkalite-cluster down --delete-data` removed the cluster's directory"
    return done.stdout, ports[9092]


def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    stdout, port = run_as_written(quickstart_script(), tmp_path, {9092: free_port()}, timeout=90)
    printed = [" ".join(line.split()) for line in stdout.splitlines()]
    # the events were read twice: by the console consumer and by kcat
    for event in ("This is my first event", "This is my second event"):
        assert printed.count(event) == 2, stdout[-3000:]
    assert f"broker 101 at 127.0.0.1:{port}" in stdout      # kcat -L: any client sees the broker


def test_the_readme_connect_section_runs_as_written(tmp_path: Path) -> None:
    """Distributed Connect through its REST API: a file source, a sink whose unreadable record is
    dead-lettered with Connect's error headers, the good records written, the lifecycle calls."""
    script = bash_script(marked_block(ROOT / "README.md", "connect"), "Connect section")
    stdout, _ = run_as_written(script, tmp_path, {9092: free_port(), 8083: free_port()}, timeout=120)
    assert '"state":"RUNNING"' in stdout.replace(" ", ""), stdout[-3000:]        # the sink's status
    written = (tmp_path / "kafkalite-connect" / "orders.txt").read_text().splitlines()
    assert len(written) == 2 and all("id" in line for line in written), written    # the good records, in order


def test_the_readme_sql_section_runs_as_written(tmp_path: Path) -> None:
    """The SQL server started by the launcher: a stream, INSERT VALUES, a persistent aggregate,
    a push query that ends at its LIMIT and a pull query from the table's state, through the shell."""
    script = bash_script(marked_block(ROOT / "README.md", "sql"), "Streaming SQL section")
    stdout, _ = run_as_written(script, tmp_path, {9092: free_port(), 8088: free_port()}, timeout=300)
    printed = [" ".join(line.split()) for line in stdout.splitlines()]
    assert printed.count("| ann | 5.0 | 2 |") == 2, stdout[-3000:]      # the push query's row, then the pull's
    assert "Created query with ID CTAS_KM_PER_DRIVER_1" in " ".join(printed), stdout[-3000:]
