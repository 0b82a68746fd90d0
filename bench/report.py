"""Results of the side-by-side benchmark: one row per (scenario, metric, system) holding every run's
value; printed as one table with the kafkalite / Kafka ratio, appended as JSON lines, drawn as a
PNG chart (matplotlib, optional: the table and JSON do not need it)."""
from __future__ import annotations

import json
import statistics
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.systems import KAFKA, KAFKALITE


@dataclass
class Row:
    scenario: str            # e.g. "1 produce"
    metric: str              # e.g. "1 partition, acks=1"
    system: str
    unit: str
    values: list[float]
    higher_is_better: bool = True
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    run: str = ""            # the stamp of the run that measured it (Results.add fills it in)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def key(self) -> tuple[str, str]:
        return self.scenario, self.metric


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


class Results:
    def __init__(self, out_dir: Path, stamp: str | None = None) -> None:
        self.rows: list[Row] = []
        self.out_dir = out_dir
        self.stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
        self.jsonl = out_dir / f"{self.stamp}.jsonl"

    def add(self, row: Row) -> Row:
        if not row.run:
            row.run = self.stamp
        self.rows.append(row)
        print(f"  [{row.system}] {row.scenario} / {row.metric}: median {fmt(row.median)} {row.unit} "
              f"(min {fmt(min(row.values))}, max {fmt(max(row.values))}, {len(row.values)} run(s))"
              + (f"; {row.note}" if row.note else ""), flush=True)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.jsonl, "a") as f:
            f.write(json.dumps({"time": self.stamp, **asdict(row), "median": row.median,
                                "min": min(row.values), "max": max(row.values)}) + "\n")
        return row

    def ratio(self, row: Row) -> float | None:
        """kafkalite median / Kafka median of the same metric in the same run (on the kafkalite
        row only): figures of different runs saw different machine loads."""
        if row.system != KAFKALITE:
            return None
        other = next((r for r in self.rows if r.key == row.key and r.system == KAFKA and r.run == row.run), None)
        if other is None or other.median == 0:
            return None
        return row.median / other.median

    def ordered(self) -> list[Row]:
        order = {KAFKALITE: 0, KAFKA: 1}
        keys: list[tuple[str, str]] = []
        for r in self.rows:
            if r.key not in keys:
                keys.append(r.key)
        return sorted(self.rows, key=lambda r: (keys.index(r.key), order.get(r.system, 2)))

    def table(self, markdown: bool = False, scenario: str | None = None) -> str:
        """Every row (or ``scenario``'s); a markdown table also names each row's run."""
        head = ["scenario", "metric", "system", "median", "min", "max", "unit", "runs", "kafkalite/Kafka"]
        if markdown:
            head.append("run")
        body = []
        for r in self.ordered():
            if scenario is not None and r.scenario != scenario:
                continue
            ratio = self.ratio(r)
            shown = "" if ratio is None else f"{ratio:.2f}" + (" (higher is better)" if r.higher_is_better
                                                                 else " (lower is better)")
            body.append([r.scenario, r.metric, r.system, fmt(r.median), fmt(min(r.values)), fmt(max(r.values)),
                         r.unit, str(len(r.values)), shown] + ([r.run] if markdown else []))
        if markdown:
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in body]
            return "\n".join(lines)
        widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
        right = {3, 4, 5, 7}
        out = []
        for row in [head, *body]:
            out.append("  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)

    def side_by_side(self) -> str:
        """A markdown table with one line per metric: kafkalite's median, Kafka's of the same run
        (or "-") and their ratio; rows of other systems (the machine's ceiling) are left out."""
        lines = ["| scenario | metric | unit | kafkalite | Kafka 0.9.0.1 | kafkalite/Kafka | run |",
                 "|---|---|---|---|---|---|---|"]
        for r in self.ordered():
            if r.system != KAFKALITE:
                continue
            other = next((o for o in self.rows if o.key == r.key and o.system == KAFKA and o.run == r.run), None)
            ratio = self.ratio(r)
            shown = "" if ratio is None else f"{ratio:.2f}"
            cells = [r.scenario, r.metric, r.unit, fmt(r.median), fmt(other.median) if other else "-", shown, r.run]
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        return "\n".join(lines)

    def chart(self, path: Path, scenario: str | None = None) -> Path | None:
        """One small bar panel per metric (kafkalite vs Kafka, median with min-max whiskers), of
        every scenario or of ``scenario`` only."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib not installed (pip install -e .[bench]): no chart", flush=True)
            return None
        keys: list[tuple[str, str]] = []
        for r in self.ordered():
            if r.key not in keys and (scenario is None or r.scenario == scenario):
                keys.append(r.key)
        if not keys:
            return None
        cols = min(4, len(keys))
        nrows = (len(keys) + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(cols * 3.4, nrows * 2.7), squeeze=False)
        colors = {KAFKALITE: "#2a7ab9", KAFKA: "#d9822b"}
        for ax, key in zip(axes.flat, keys):
            rows = [r for r in self.ordered() if r.key == key]
            names = [r.system for r in rows]
            med = [r.median for r in rows]
            lo = [r.median - min(r.values) for r in rows]
            hi = [max(r.values) - r.median for r in rows]
            ax.bar(range(len(rows)), med, yerr=[lo, hi], capsize=3,
                   color=[colors.get(n, "grey") for n in names])
            ax.set_xticks(range(len(rows)), [n.replace("Kafka ", "Kafka\n") for n in names], fontsize=7)
            better = "higher" if rows[0].higher_is_better else "lower"
            ax.set_title(textwrap.fill(key[1], 48) if scenario else f"{key[0]}\n{key[1]}", fontsize=8)
            ax.set_ylabel(f"{rows[0].unit} ({better} better)", fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
        for ax in list(axes.flat)[len(keys):]:
            ax.axis("off")
        title = scenario or f"kafkalite vs Kafka {KAFKA.split()[-1]}, same machine ({self.stamp})"
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path


def load_published(path: Path) -> tuple[dict[str, str], list[Row]]:
    """The runs (stamp -> header) and rows kept in ``path`` (bench/RESULTS.json), if any."""
    if not path.exists():
        return {}, []
    data = json.loads(path.read_text())
    return dict(data["runs"]), [Row(**r) for r in data["rows"]]


def merge_published(runs: dict[str, str], rows: list[Row], results: Results, header: str) -> tuple[dict[str, str], list[Row]]:
    """The published rows with ``results``' rows in place of those it measured again (same
    scenario, metric and system); runs no row refers to any more are dropped."""
    fresh = {(r.scenario, r.metric, r.system) for r in results.rows}
    kept = [r for r in rows if (r.scenario, r.metric, r.system) not in fresh] + results.rows
    runs = {**runs, results.stamp: header}
    used = {r.run for r in kept}
    return {k: v for k, v in runs.items() if k in used}, kept


def save_published(path: Path, runs: dict[str, str], rows: list[Row]) -> None:
    path.write_text(json.dumps({"runs": runs, "rows": [asdict(r) for r in rows]}, indent=1) + "\n")


#: the documentation page whose side-by-side table `scripts/bench publish` rewrites
DOC_PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
DOC_START = "<!-- generated:bench-side-by-side start (scripts/bench publish) -->"
DOC_END = "<!-- generated:bench-side-by-side end -->"


def scenario_number(scenario: str) -> int:
    head = scenario.split(" ", 1)[0]
    return int(head) if head.isdigit() else 99


def doc_table(rows: list[Row]) -> str:
    """The documentation's benchmark table: the published rows side by side, in scenario order,
    without the latency rows' p99.9 and max and the console pages' max (bench/RESULTS.md keeps
    every row)."""
    shown = Results(Path("."), "-")
    shown.rows = sorted((r for r in rows if " p99.9," not in r.metric and not r.metric.startswith(("end-to-end max",
                                                                                                  "produce-to-ack max"))
                         and not r.metric.endswith(": max")),
                        key=lambda r: scenario_number(r.scenario))
    return shown.side_by_side()


def regenerate_doc(text: str, rows: list[Row]) -> str:
    """``text`` (docs/benchmarks.md) with the part between the markers replaced by :func:`doc_table`."""
    start, end = text.find(DOC_START), text.find(DOC_END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC_PAGE.name} lacks the {DOC_START!r} ... {DOC_END!r} markers")
    return text[:start + len(DOC_START)] + "\n" + doc_table(rows) + "\n" + text[end:]

