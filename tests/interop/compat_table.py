"""A per-test Markdown table from a real client's own suite run (pytest's junit XML), for the
compatibility sweeps (``scripts/compat-schema-registry``).

    python tests/interop/compat_table.py JUNIT.xml FINDINGS.md OUT.md "suite title"

Each test is ``pass``, ``skip`` (with pytest's reason), ``excused`` (it failed and FINDINGS.md
lists it, in a line starting with ``- `<test id>```, under a heading containing "excused") or
``FAIL``. Not a test module (no ``test_`` prefix): it runs outside the project's suite.
"""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def excused_tests(findings: str) -> dict[str, str]:
    """``test id pattern -> reason`` from the excused sections of FINDINGS.md (``*`` is a wildcard)."""
    out: dict[str, str] = {}
    in_section = False
    for line in findings.splitlines():
        if line.startswith("#"):
            in_section = "excused" in line.lower()
            continue
        m = re.match(r"- `([^`]+)`[:\s—-]*(.*)", line.strip())
        if in_section and m:
            out[m.group(1)] = m.group(2).strip()
    return out


def reason_for(test_id: str, excused: dict[str, str]) -> str | None:
    for pattern, reason in excused.items():
        regex = "^" + ".*".join(map(re.escape, pattern.split("*"))) + "$"
        if re.match(regex, test_id):
            return reason or "listed in FINDINGS.md"
    return None


def results(junit: Path) -> list[tuple[str, str, str]]:
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


def main(argv: list[str]) -> int:
    junit, findings, out_path, title = Path(argv[0]), Path(argv[1]), Path(argv[2]), argv[3]
    excused = excused_tests(findings.read_text())
    rows, counts = [], Counter()
    for test_id, outcome, detail in results(junit):
        if outcome == "fail":
            reason = reason_for(test_id, excused)
            outcome = "excused" if reason else "FAIL"
            detail = f"{reason} ({detail})" if reason else detail
        counts[outcome] += 1
        rows.append(f"| `{test_id}` | {outcome} | {detail.replace('|', '/')} |")
    summary = ", ".join(f"{counts[k]} {k}" for k in ("pass", "excused", "skip", "FAIL") if counts[k])
    text = [f"# {title} against kafkalite's schema registry", "",
            "Written by `scripts/compat-schema-registry` (do not edit by hand). Excused failures are",
            "listed with their reason in tests/interop/FINDINGS.md.", "",
            f"**{sum(counts.values())} tests: {summary}**", "",
            "| test | result | detail |", "|---|---|---|", *rows, ""]
    out_path.write_text("\n".join(text))
    print(f"[compat] {sum(counts.values())} tests: {summary} -> {out_path}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
