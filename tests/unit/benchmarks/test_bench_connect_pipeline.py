"""Scenario 16's own logic (bench/connect_pipeline.py, scenarios.connect_rows): the source file,
the worker settings both workers get, the /proc parsing and the figures. No cluster, no timing."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench import connect_pipeline as cp
from bench import report, scenarios
from bench.connect_pipeline import Figures, Sample


def test_generated_lines_are_numbered_and_of_fixed_length(tmp_path: Path) -> None:
    path = tmp_path / "source.txt"
    count = cp.generate_lines(path, 0.025)          # 25,000 bytes
    assert count == 250
    data = path.read_bytes()
    assert len(data) == count * cp.LINE_BYTES
    lines = data.decode().split("\n")[:-1]
    assert len(lines) == count and {len(line) + 1 for line in lines} == {cp.LINE_BYTES}
    assert [int(line.split()[0]) for line in lines] == list(range(count))


def test_both_workers_get_string_converters_and_their_own_rest_port(tmp_path: Path) -> None:
    props = cp.worker_properties("127.0.0.1:1234", tmp_path, 4567)
    assert props["key.converter"] == props["value.converter"] == cp.STRING
    assert props["value.converter.schemas.enable"] == "false"
    assert props["rest.port"] == "4567" and props["rest.host.name"] == "127.0.0.1"
    assert props["offset.storage.file.filename"] == str(tmp_path / "connect.offsets")
    assert props["internal.value.converter"] == cp.JSON      # Kafka 0.9's worker requires them
    jdbc = cp.worker_properties("b:1", tmp_path, 1, converter=cp.JSON, schemas=True)
    assert jdbc["value.converter"] == cp.JSON and jdbc["value.converter.schemas.enable"] == "true"
    written = cp.write_properties(tmp_path / "w.properties", props).read_text().splitlines()
    assert "bootstrap.servers=127.0.0.1:1234" in written


def test_file_connectors_name_kafkas_classes(tmp_path: Path) -> None:
    source, sink = cp.file_connectors(tmp_path / "in", tmp_path / "out", "t")
    assert source["connector.class"].endswith("FileStreamSourceConnector") and source["topic"] == "t"
    assert sink["connector.class"].endswith("FileStreamSinkConnector") and sink["topics"] == "t"
    assert source["file"] == str(tmp_path / "in") and sink["file"] == str(tmp_path / "out")


def test_proc_parsing() -> None:
    # the CPU seconds come from bench/cpu.py (tests/unit/benchmarks/test_bench_cpu.py)
    status = "Name:\tjava\nVmPeak:\t 999 kB\nVmHWM:\t  204800 kB\nVmRSS:\t 100 kB\n"
    assert cp.peak_rss_kib(status) == 204800
    with pytest.raises(ValueError):
        cp.peak_rss_kib("Name:\tx\n")
    assert cp.read_proc(2**22 + 12345) is None                # no such process


def test_read_proc_of_this_process() -> None:
    import os
    got = cp.read_proc(os.getpid())
    assert got is not None and got[0] > 0 and got[1] > 1000


SAMPLES = [Sample(10.0, 0, 0), Sample(11.0, 0, 0), Sample(12.0, 400, 0), Sample(14.0, 1000, 30_000),
           Sample(16.0, 1000, 90_000), Sample(17.0, 1000, 100_000)]


def test_summary_counts_from_the_connector_start() -> None:
    f = cp.summarize(SAMPLES, spawned=9.0, started=10.0, records=1000, done_at=100_000, cpu_s=7.5, peak_kib=2048)
    assert f.startup_s == 1.0                      # spawned at 9, the connector started at 10
    assert f.source_rate == 1000 / 4.0             # 10 -> 14 (every record in the topic)
    assert f.pipeline_rate == 1000 / 7.0           # 10 -> 17 (every byte in the sink file)
    assert (f.cpu_s, f.peak_rss_mib) == (7.5, 2.0)
    assert f.notes == []


def test_summary_without_a_logged_start_counts_from_the_first_record_and_says_so() -> None:
    f = cp.summarize(SAMPLES, 9.0, None, 1000, 100_000, 1.0, 1024)
    assert f.startup_s == 3.0 and f.source_rate == 1000 / 2.0 and f.pipeline_rate == 1000 / 5.0
    assert "first record" in f.notes[0]


def test_summary_of_a_run_faster_than_one_sample_counts_one_interval() -> None:
    samples = [Sample(0.0, 0, 0), Sample(0.5, 10, 1000)]
    f = cp.summarize(samples, 0.0, 0.2, 10, 1000, 1.0, 1024)
    assert f.pipeline_rate == f.source_rate == 10 / 0.5


def test_summary_refuses_incomplete_samples() -> None:
    with pytest.raises(ValueError):
        cp.summarize([Sample(0.0, 5, 0), Sample(1.0, 10, 999)], 0.0, 0.0, 10, 1000, 1.0, 1)


def test_connector_start_from_either_workers_log() -> None:
    import datetime
    kafkalite = ("[2026-11-29 03:53:41,600] INFO kafkalite.connect.runtime.standalone: herder started\n"
                 "[2026-11-29 03:53:41,682] INFO kafkalite.connect.runtime.worker: starting connector "
                 "bench-file-source (org.apache.kafka.connect.file.FileStreamSourceConnector)\n")
    java = ("  at some.Trace(Line.java:1)\n[2026-11-29 03:54:08,352] INFO Creating connector bench-file-sink of type "
            "x (org.apache.kafka.connect.runtime.Worker:170)\n[2026-11-29 03:54:08,400] INFO Creating connector "
            "bench-file-source of type org.apache.kafka.connect.file.FileStreamSourceConnector "
            "(org.apache.kafka.connect.runtime.Worker:170)\n")
    expect = datetime.datetime(2026, 11, 29, 3, 53, 41, 682000).timestamp()
    assert cp.connector_started(kafkalite, "bench-file-source") == pytest.approx(expect)
    assert cp.connector_started(java, "bench-file-source") == pytest.approx(
        datetime.datetime(2026, 11, 29, 3, 54, 8, 400000).timestamp())
    assert cp.connector_started(java, "other") is None


def test_row_rate() -> None:
    samples = [Sample(0.0, 0, 0), Sample(1.0, 0, 100), Sample(3.0, 0, 500), Sample(5.0, 0, 1000)]
    assert cp.row_rate(samples, 1000) == 1000 / 4.0
    with pytest.raises(ValueError):
        cp.row_rate(samples, 2000)


def test_rows_side_by_side_under_one_key() -> None:
    figures = {"kafkalite": Figures(1000, 2.0, 300.0, 500.0, 9.0, 80.0),
               "Kafka 0.9.0.1": Figures(1000, 4.0, 600.0, 700.0, 6.0, 250.0, ["sink file 1 bytes, source 2"])}
    rows = scenarios.connect_rows(20.0, figures)
    assert len(rows) == 8
    assert {r.scenario for r in rows} == {scenarios.CONNECT_SCENARIO}
    assert report.scenario_number(rows[0].scenario) == 16
    lite = {r.metric: r for r in rows if r.system == "kafkalite"}
    java = {r.metric: r for r in rows if r.system == "Kafka 0.9.0.1"}
    assert lite.keys() == java.keys()              # same metrics: the ratio column pairs them
    cpu = next(r for m, r in lite.items() if "CPU" in m)
    assert cpu.values == [9.0] and not cpu.higher_is_better and cpu.unit == "s"
    rss = next(r for m, r in lite.items() if "RSS" in m)
    assert rss.values == [80.0] and not rss.higher_is_better
    pipeline = next(r for m, r in java.items() if "last line in the sink file" in m)
    assert pipeline.values == [600.0] and "start-up 4.0 s" in pipeline.note and "sink file 1 bytes" in pipeline.note
    results = report.Results(Path("."), "x")
    results.rows = [*rows]
    for r in results.rows:
        r.run = "x"
    assert results.ratio(pipeline) is None         # the ratio is on the kafkalite row
    assert results.ratio(next(r for m, r in lite.items() if "last line" in m)) == pytest.approx(0.5)


def test_stalled_for_counts_from_the_last_change() -> None:
    assert cp.stalled_for([]) == 0.0
    moving = [Sample(0.0, 0, 0), Sample(1.0, 5, 0), Sample(2.0, 9, 0)]
    assert cp.stalled_for(moving) == 0.0
    stuck = [Sample(0.0, 0, 0), Sample(1.0, 5, 0), Sample(2.0, 5, 0), Sample(4.5, 5, 0)]
    assert cp.stalled_for(stuck) == 3.5                  # unchanged since the sample at 1.0
    never = [Sample(10.0, 0, 0), Sample(70.0, 0, 0)]
    assert cp.stalled_for(never) == 60.0                 # nothing ever moved: since the first sample
    sink_moves = [Sample(0.0, 9, 0), Sample(1.0, 9, 50), Sample(3.0, 9, 50)]
    assert cp.stalled_for(sink_moves) == 2.0
