"""A per-test Markdown table from a real client's own suite run, for the compatibility sweeps
(``scripts/compat-schema-registry``, ``scripts/compat``).

    python tests/interop/compat_table.py [--format junit|rdkafka|jsonl] [--script NAME]
        INPUT... FINDINGS.md OUT.md "suite title"

Inputs: pytest's junit XML (``junit``, the default); the logs of librdkafka's ``test-runner``
(``rdkafka``: its summary table, one or more log files; a file ``NNNN@<variant>.log`` holds a
second run of NNNN, one sub-test alone or another scenario, its rows named ``<test>[<variant>]``); or JSON lines ``{"id", "outcome",
"detail"}`` (``jsonl``, written by ``tests/interop/compat_kafka09.py``).

Each test is ``pass``, ``skip`` (with the runner's reason), ``excused`` (it failed and FINDINGS.md
lists it, in a line starting with ``- `<test id>```, under a heading containing "excused") or
``FAIL``. Not a test module (no ``test_`` prefix): it runs outside the project's suite.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

Result = tuple[str, str, str]

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# librdkafka's test summary row: "| 0001_multiobj    |     PASSED |   1.234s | <failstr>"
RDKAFKA_ROW = re.compile(r"^\|\s*(\d{4}_\w+)\s*\|\s*([A-Z_]+)\s*\|\s*([\d.]+)s\s*\|\s?(.*)$")


def excused_tests(findings: str) -> dict[str, str]:
    """``test id pattern -> reason`` from the excused sections of FINDINGS.md (``*`` is a wildcard)."""
    bullets: list[str] = []   # each bullet of an excused section, continuation lines joined
    in_section = False
    for line in findings.splitlines():
        if line.startswith("#"):
            in_section = "excused" in line.lower()
            bullets.append("")
        elif in_section and line.startswith("- "):
            bullets.append(line[2:].strip())
        elif in_section and line.startswith("  ") and bullets and bullets[-1]:
            bullets[-1] += " " + line.strip()
        else:
            bullets.append("")
    out: dict[str, str] = {}
    for bullet in filter(None, bullets):
        # "`a` and `b` — reason": every `pattern` before the reason text is excused by it
        head = re.match(r"((?:`[^`]+`(?:\s*,\s*|\s+and\s+|\s*))+)[:\s—-]*(.*)", bullet)
        if head:
            for pattern in re.findall(r"`([^`]+)`", head.group(1)):
                out[pattern] = _short(head.group(2).strip())
    return out


def _short(reason: str, limit: int = 220) -> str:
    return reason if len(reason) <= limit else reason[:limit].rsplit(" ", 1)[0] + " …"


def reason_for(test_id: str, excused: dict[str, str]) -> str | None:
    for pattern, reason in excused.items():
        regex = "^" + ".*".join(map(re.escape, pattern.split("*"))) + "$"
        if re.match(regex, test_id):
            return reason or "listed in FINDINGS.md"
    return None


def results(junit: Path) -> list[Result]:
    """(test id, outcome, detail) for every testcase in the junit XML."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        test_id = f"{module}.py::{case.get('name')}"
        outcome, detail = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "fail"
                detail = (child.get("message") or "").splitlines()[0][:160] if child.get("message") else child.tag
            elif child.tag == "skipped":
                outcome, detail = "skip", (child.get("message") or "")[:160]
        out.append((test_id, outcome, detail))
    return out


RDKAFKA_STARTED = re.compile(r"=+ Running test (\d{4}_\w+) =+")
RDKAFKA_FAILED = re.compile(r'### Test "(\d{4}_\w+)[^"]*" failed at (.*?): ###')


def rdkafka_results(text: str) -> list[Result]:
    """(test name, outcome, detail) from one librdkafka test-runner output.

    The end-of-run summary decides: PASSED -> pass; FAILED, and RUNNING (the run ended with the
    test unfinished) -> fail; SKIPPED and NOT_STARTED (local-only or filtered out) -> skip. A test
    that started but has no summary row (a failed assertion aborts the runner before its summary)
    is a fail with its first "### Test ... failed" message. The <MAIN> row is left out.
    """
    out: dict[str, Result] = {}
    lines = [ANSI.sub("", raw).rstrip() for raw in text.splitlines()]
    first_failure: dict[str, str] = {}
    started: list[str] = []
    for i, line in enumerate(lines):
        if m := RDKAFKA_STARTED.search(line):
            started.append(m.group(1))
        elif (m := RDKAFKA_FAILED.search(line)) and m.group(1) not in first_failure:
            message = lines[i + 1].strip() if i + 1 < len(lines) else ""
            first_failure[m.group(1)] = f"{m.group(2).split(' at ')[0]}: {message}"
        elif m := RDKAFKA_ROW.match(line):
            name, state, detail = m.group(1), m.group(2), m.group(4).strip()
            if state == "PASSED":
                outcome = "pass"
            elif state in ("FAILED", "RUNNING"):
                outcome = "fail"
                detail = detail or first_failure.get(name) or ("did not finish" if state == "RUNNING" else "failed")
            else:
                outcome = "skip"
                detail = detail or state.lower().replace("_", " ")
            out[name] = (name, outcome, detail[:200])
    for name in started:
        if name not in out:
            detail = first_failure.get(name, "no result: the runner ended (crash or timeout) before its summary")
            out[name] = (name, "fail", detail[:200])
    return list(out.values())


def jsonl_results(text: str) -> list[Result]:
    out = []
    for line in text.splitlines():
        if line.strip():
            rec = json.loads(line)
            out.append((rec["id"], rec["outcome"], rec.get("detail", "")))
    return out


def load(fmt: str, inputs: list[Path]) -> list[Result]:
    rows: list[Result] = []
    for path in inputs:
        if fmt == "junit":
            rows += results(path)
        elif fmt == "rdkafka":
            found = rdkafka_results(path.read_text(errors="replace"))
            if "@" in path.stem:
                # NNNN@<variant>.log: a second run of test NNNN (one sub-test alone, or another
                # scenario); what it skipped has its row from the main run already
                sub = path.stem.split("@", 1)[1]
                found = [(f"{name}[{sub}]", outcome, detail) for name, outcome, detail in found if outcome != "skip"]
            rows += found
        else:
            rows += jsonl_results(path.read_text())
    return rows


def table(rows: list[Result], excused: dict[str, str], title: str, script: str,
          note: str = "") -> tuple[str, Counter[str]]:
    """The Markdown page and the counts per outcome."""
    lines: list[str] = []
    counts: Counter[str] = Counter()
    for test_id, outcome, detail in rows:
        if outcome == "fail":
            reason = reason_for(test_id, excused)
            outcome = "excused" if reason else "FAIL"
            detail = f"{reason} ({detail})" if reason else detail
        counts[outcome] += 1
        lines.append(f"| `{test_id}` | {outcome} | {detail.replace('|', '/')} |")
    summary = ", ".join(f"{counts[k]} {k}" for k in ("pass", "excused", "skip", "FAIL") if counts[k])
    text = [f"# {title}", "",
            f"Written by `{script}` (do not edit by hand). Excused failures are",
            "listed with their reason in tests/interop/FINDINGS.md.", "",
            *([note, ""] if note else []),
            f"**{sum(counts.values())} tests: {summary}**", "",
            "| test | result | detail |", "|---|---|---|", *lines, ""]
    return "\n".join(text), counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=("junit", "rdkafka", "jsonl"), default="junit")
    parser.add_argument("--script", default="scripts/compat-schema-registry")
    parser.add_argument("--note", default="", help="a paragraph above the counts (e.g. what was left out)")
    parser.add_argument("paths", nargs="+", help="INPUT... FINDINGS.md OUT.md TITLE")
    args = parser.parse_args(argv)
    if len(args.paths) < 4:
        parser.error("need INPUT... FINDINGS.md OUT.md TITLE")
    *inputs, findings, out_path, title = args.paths
    if args.script == "scripts/compat-schema-registry" and "against" not in title:
        title += " against kafkalite's schema registry"
    rows = load(args.format, [Path(p) for p in inputs])
    text, counts = table(rows, excused_tests(Path(findings).read_text()), title, args.script, args.note)
    Path(out_path).write_text(text)
    summary = ", ".join(f"{counts[k]} {k}" for k in ("pass", "excused", "skip", "FAIL") if counts[k])
    print(f"[compat] {sum(counts.values())} tests: {summary} -> {out_path}")
    return 1 if counts["FAIL"] or not rows else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
