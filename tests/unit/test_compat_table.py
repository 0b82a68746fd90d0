"""The compatibility sweep's table writer (tests/interop/compat_table.py, run by scripts/compat):
librdkafka's test-runner summary is parsed into per-test outcomes (ANSI colours, states other than
PASSED/FAILED, the <MAIN> row), JSON lines and junit XML give the same rows, and a failure counts as
excused only when FINDINGS.md lists it under an "excused" heading."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

PATH = Path(__file__).resolve().parents[1] / "interop" / "compat_table.py"
_spec = importlib.util.spec_from_file_location("compat_table", PATH)
assert _spec and _spec.loader
compat_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compat_table)

RDKAFKA_OUTPUT = (
    "[0011_produce_batch    /  3.210s] some progress line | with a bar\n"
    "TEST 20261123 (bare, scenario default) SUMMARY\n"
    "#==================================================================#\n"
    "|\x1b[32m <MAIN>                                   |     PASSED |  12.000s \x1b[0m|\n"
    "|\x1b[32m 0001_multiobj                            |     PASSED |   3.123s \x1b[0m|\n"
    "|\x1b[31m 0011_produce_batch                       |     FAILED |   9.500s \x1b[0m|"
    "\x1b[31m 0011-produce_batch.c:123: test_produce: Expected INVALID_RECORD | got x\x1b[0m\n"
    "|\x1b[35m 0045_subscribe_update                    |    RUNNING | 900.000s \x1b[0m|\n"
    "|\x1b[36m 0009_mock_cluster                        |    SKIPPED |   0.000s \x1b[0m|"
    "\x1b[36m Test is local\x1b[0m\n"
    "|\x1b[33m 0022_consume_batch_local                 | NOT_STARTED |   0.000s \x1b[0m|\n"
    "#==================================================================#\n"
)


def test_librdkafka_summary_rows_become_outcomes() -> None:
    rows = {name: (outcome, detail) for name, outcome, detail in compat_table.rdkafka_results(RDKAFKA_OUTPUT)}
    assert rows == {
        "0001_multiobj": ("pass", ""),
        "0011_produce_batch": ("fail", "0011-produce_batch.c:123: test_produce: Expected INVALID_RECORD | got x"),
        "0045_subscribe_update": ("fail", "did not finish"),
        "0009_mock_cluster": ("skip", "Test is local"),
        "0022_consume_batch_local": ("skip", "not started"),
    }


def test_excused_only_when_listed_under_an_excused_heading(tmp_path: Path) -> None:
    findings = ("# Findings\n\n## Other\n- `0045_subscribe_update`: not an excuse here\n\n"
                "### librdkafka — excused\n- `0011_*`: KIP-467 record_errors (issue 15)\n")
    excused = compat_table.excused_tests(findings)
    rows = compat_table.rdkafka_results(RDKAFKA_OUTPUT)
    text, counts = compat_table.table(rows, excused, "title", "scripts/compat")
    assert counts == {"pass": 1, "excused": 1, "FAIL": 1, "skip": 2}
    assert "| `0011_produce_batch` | excused | KIP-467 record_errors (issue 15) (0011-produce_batch.c:123:" in text
    assert "**5 tests: 1 pass, 1 excused, 2 skip, 1 FAIL**" in text
    assert "got x" in text and "| got x" not in text   # a '|' in a detail cannot break the row


def test_main_reads_jsonl_and_junit_and_fails_on_unexcused(tmp_path: Path) -> None:
    jsonl = tmp_path / "k.jsonl"
    jsonl.write_text(json.dumps({"id": "console producer", "outcome": "pass", "detail": ""}) + "\n")
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="test.integration.test_x" name="test_a">'
                     '<failure message="boom">tb</failure></testcase></testsuite></testsuites>')
    findings = tmp_path / "FINDINGS.md"
    findings.write_text("## x — excused\n")
    out = tmp_path / "out.md"
    assert compat_table.main(["--format", "jsonl", "--script", "scripts/compat", str(jsonl), str(findings),
                              str(out), "t"]) == 0
    assert "1 tests: 1 pass" in out.read_text()
    assert compat_table.main(["--script", "scripts/compat", str(junit), str(findings), str(out), "t"]) == 1
    assert "| `test/integration/test_x.py::test_a` | FAIL | boom |" in out.read_text()
    assert compat_table.main(["--format", "jsonl", str(tmp_path / "k.jsonl"), str(findings), str(out), "t"]) == 0
    assert out.read_text().startswith("# t against kafkalite's schema registry")   # the old invocation


def test_librdkafka_aborted_runner_still_reports_its_test() -> None:
    """A failed assertion aborts test-runner before the summary: the test must still be a fail."""
    text = ("\x1b[36m[0011_produce_batch   /  0.000s] ================= Running test 0011_produce_batch =================\n"
            "\x1b[31m### Test \"0011_produce_batch (test_x:629)\" failed at 0011-produce_batch.c:718:test_x() "
            "at Mon Nov 23 19:40:24 2026: ###\n"
            "Test assertion failed: \"invalid_record_fail_cnt == 10\": \n"
            "test-runner: test.c:7702: test_fail0: Assertion `0' failed.\n"
            "[0012_produce_consume  /  0.000s] ================= Running test 0012_produce_consume =================\n")
    rows = {name: (outcome, detail) for name, outcome, detail in compat_table.rdkafka_results(text)}
    assert rows == {
        "0011_produce_batch": ("fail", '0011-produce_batch.c:718:test_x(): Test assertion failed: "invalid_record_fail_cnt == 10":'),
        "0012_produce_consume": ("fail", "no result: the runner ended (crash or timeout) before its summary"),
    }


def test_librdkafka_subtest_logs_get_their_own_rows(tmp_path: Path) -> None:
    """0081@DescribeConfigs.log (SUBTESTS=DescribeConfigs) is a row of its own beside 0081.log; a
    second run's skips add no rows (the main run has one for each test)."""
    row = "|\x1b[32m 0081_admin                               |     PASSED |   3.0s \x1b[0m|\n"
    (tmp_path / "0081.log").write_text(row.replace("PASSED", "FAILED"))
    (tmp_path / "0081@DescribeConfigs.log").write_text(row)
    (tmp_path / "0081@noautocreate.log").write_text(row.replace("PASSED", "SKIPPED"))   # covered by 0081.log
    rows = compat_table.load("rdkafka", sorted(tmp_path.glob("*.log")))
    assert [(name, outcome) for name, outcome, _ in rows] == [("0081_admin", "fail"),
                                                              ("0081_admin[DescribeConfigs]", "pass")]


def test_findings_bullets_span_lines_and_name_several_tests() -> None:
    findings = ("### Sweep — excused\n\n"
                "- `a.py::t1` and\n  `b.py::t1` — issue 15 (KIP-518): the states\n  filter is missing.\n"
                "- `0011_*` — issue 15.\n\nplain text ends a bullet\n  `not.a.pattern`\n")
    assert compat_table.excused_tests(findings) == {
        "a.py::t1": "issue 15 (KIP-518): the states filter is missing.",
        "b.py::t1": "issue 15 (KIP-518): the states filter is missing.",
        "0011_*": "issue 15.",
    }
