"""The README's quickstart, run as written: the bash block between its ``<!-- quickstart begin -->``
and ``<!-- quickstart end -->`` markers (the same block as docs/getting-started.md's) runs in bash
from the repository's root, against the cluster it starts itself. Only three things change: the
broker's port 9092 becomes a free port, the cluster directory is a temp dir
(``$KAFKALITE_CLUSTER_DIR``, which the launcher reads) and ``.venv/bin/`` is the directory of the
interpreter running the tests. The outputs the block shows as ``#   ...`` lines must be printed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from kafkalite.cluster.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- quickstart begin -->", "<!-- quickstart end -->"


def quickstart_block(path: Path) -> str:
    text = path.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"{path.name}: one pair of quickstart markers"
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def quickstart_script() -> str:
    block = quickstart_block(ROOT / "README.md")
    assert block == quickstart_block(ROOT / "docs" / "getting-started.md"), \
        "README.md's and docs/getting-started.md's quickstarts differ: keep them the same"
    scripts = re.findall(r"```bash\n(.*?)```", block, re.S)
    assert len(scripts) == 1, "the quickstart is one bash block"
    return scripts[0]


def shown_outputs(script: str) -> list[str]:
    """The ``#   output`` lines under the commands, whitespace-normalised."""
    return [" ".join(line[len("#   "):].split()) for line in script.splitlines() if line.startswith("#   ")]


def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    script = quickstart_script()
    port = free_port()
    runnable = script.replace("127.0.0.1:9092", f"127.0.0.1:{port}").replace("--base-port 9092", f"--base-port {port}")
    assert "9092" not in runnable, "the quickstart names port 9092 only as 127.0.0.1:9092 and --base-port 9092"
    bindir = Path(sys.executable).parent
    assert (bindir / "kafkalite-cluster").exists(), f"the console scripts are not installed in {bindir}"
    runnable = runnable.replace(".venv/bin/", f"{bindir}/")
    cluster_dir = tmp_path / "cluster"
    env = {**os.environ, "KAFKALITE_CLUSTER_DIR": str(cluster_dir),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + runnable], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=90)
    finally:
        if cluster_dir.exists():
            subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(cluster_dir), "down",
                            "--delete-data"], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed = [" ".join(line.split()) for line in done.stdout.splitlines()]
    shown = [line.replace("127.0.0.1:9092", f"127.0.0.1:{port}") for line in shown_outputs(script)]
    assert shown, "the quickstart shows what its commands print"
    for line in shown:
        assert line in printed, f"the quickstart shows {line!r}, not printed:\n{done.stdout[-3000:]}"
    # the events were read twice: by the console consumer and by kcat
    for event in ("This is my first event", "This is my second event"):
        assert printed.count(event) == 2, done.stdout[-3000:]
    assert f"broker 101 at 127.0.0.1:{port}" in done.stdout      # kcat -L: any client sees the broker
    assert not cluster_dir.exists(), "`kafkalite-cluster down --delete-data` removed the cluster's directory"
