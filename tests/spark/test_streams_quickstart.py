"""docs/streams.md's quickstart, run as written: the bash block between its ``<!-- streams
quickstart begin -->`` and ``<!-- streams quickstart end -->`` markers runs in bash from the
repository's root against the broker it starts itself (a Spark pipeline on local[2], exactly
once, read back by a read_committed consumer). As for the README's quickstart
(tests/integration/test_readme_quickstart.py), only the broker's port, the cluster's directory
(``$KAFKALITE_CLUSTER_DIR``), the checkpoint's directory and ``.venv/bin/`` change; every
``#   ...`` output line the block shows must be printed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kafkalite.cluster.processes import free_port
from tests.integration.test_readme_quickstart import shown_outputs

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- streams quickstart begin -->", "<!-- streams quickstart end -->"


def test_the_stream_processing_quickstart_runs_as_written(tmp_path: Path) -> None:
    import re

    text = (ROOT / "docs" / "streams.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    blocks = re.findall(r"```bash\n(.*?)```", text.split(BEGIN, 1)[1].split(END, 1)[0], re.S)
    assert len(blocks) == 1, "the quickstart is one bash block"
    script = blocks[0]
    port = free_port()
    runnable = (script.replace("127.0.0.1:9092", f"127.0.0.1:{port}").replace("--base-port 9092", f"--base-port {port}")
                .replace("var/pipeline-checkpoint", str(tmp_path / "checkpoint"))
                .replace(".venv/bin/", f"{Path(sys.executable).parent}/"))
    assert "9092" not in runnable and "var/pipeline" not in runnable
    cluster_dir = tmp_path / "cluster"
    env = {**os.environ, "KAFKALITE_CLUSTER_DIR": str(cluster_dir), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + runnable], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=400)
    finally:
        if cluster_dir.exists():
            subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(cluster_dir), "down",
                            "--delete-data"], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    printed = [" ".join(line.split()) for line in done.stdout.splitlines()]
    shown = [line.replace("127.0.0.1:9092", f"127.0.0.1:{port}") for line in shown_outputs(script)]
    assert len(shown) == 5, shown
    for line in shown:
        assert line in printed, f"the quickstart shows {line!r}, not printed:\n{done.stdout[-3000:]}"
    assert printed.count("pipeline: done, 3 records") == 1
    assert not cluster_dir.exists() and not (tmp_path / "checkpoint").exists()
