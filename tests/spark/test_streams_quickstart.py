"""The README's Stream processing quickstart, run as written: the block between its ``<!-- streams
quickstart begin -->`` and ``<!-- streams quickstart end -->`` markers (the same block as
docs/streams.md's) runs in bash from the repository's root against the broker it starts itself (a
Spark pipeline on local[2], exactly once, read back by a read_committed consumer). As for the
README's other blocks (tests/integration/test_readme_quickstart.py), only the broker's port, the
cluster's directory (``$KAFKALITE_CLUSTER_DIR``), the checkpoint's directory and ``.venv/bin/``
change; every ``#   ...`` output line the block shows must be printed."""
from __future__ import annotations

from pathlib import Path

from kafkalite.cluster.processes import free_port
from tests.integration.test_readme_quickstart import bash_script, marked_block, run_as_written

ROOT = Path(__file__).resolve().parents[2]


def test_the_stream_processing_quickstart_runs_as_written(tmp_path: Path) -> None:
    block = marked_block(ROOT / "README.md", "streams quickstart")
    assert block == marked_block(ROOT / "docs" / "streams.md", "streams quickstart"), \
        "README.md's and docs/streams.md's stream-processing quickstarts differ: keep them the same"
    script = bash_script(block, "stream-processing quickstart")
    stdout, _ = run_as_written(script, tmp_path, {9092: free_port()}, timeout=400,
                               replace={"var/pipeline-checkpoint": str(tmp_path / "checkpoint")},
                               env={"SPARK_LOCAL_IP": "127.0.0.1"})
    printed = [" ".join(line.split()) for line in stdout.splitlines()]
    assert printed.count("pipeline: done, 3 records") == 1, stdout[-3000:]
    assert len([line for line in script.splitlines() if line.startswith("#   ")]) == 5
    assert not (tmp_path / "checkpoint").exists()
