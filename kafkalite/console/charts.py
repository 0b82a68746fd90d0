"""Small line charts as inline SVG, drawn on the server (no JavaScript charting library): a page
refreshed by htmx gets a new chart with the new samples. Only numbers and escaped labels go in."""
from __future__ import annotations

import time
from typing import Mapping, Sequence

from markupsafe import Markup

WIDTH, HEIGHT, PAD = 560, 160, 34
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")


def _fmt(v: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.1f}{unit}"
    return f"{v:.0f}" if v == int(v) else f"{v:.2f}"


def line_chart(points: Sequence[tuple[float, float]], label: str) -> Markup:
    return multi_line_chart({label: points}, label)


def multi_line_chart(series: Mapping[str, Sequence[tuple[float, float]]], title: str) -> Markup:
    """One SVG with a line per series over a shared time axis (x: time, y: from 0 to the maximum)."""
    allpts = [p for pts in series.values() for p in pts]
    if not allpts:
        return Markup('<p class="muted">no samples yet for {}</p>').format(title)
    t0 = min(t for t, _ in allpts)
    t1 = max(t for t, _ in allpts)
    top = max(max(v for _, v in allpts), 1.0)
    span = max(t1 - t0, 1.0)

    def xy(t: float, v: float) -> str:
        x = PAD + (t - t0) / span * (WIDTH - 2 * PAD)
        y = HEIGHT - PAD + -(v / top) * (HEIGHT - 2 * PAD)
        return f"{x:.1f},{y:.1f}"

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">',
             Markup('<title>{}</title>').format(title),
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>',
             f'<text x="2" y="{PAD + 4}" font-size="10">{_fmt(top)}</text>',
             f'<text x="2" y="{HEIGHT - PAD}" font-size="10">0</text>',
             f'<text x="{PAD}" y="{HEIGHT - 8}" font-size="10">{time.strftime("%H:%M:%S", time.gmtime(t0))}</text>',
             f'<text x="{WIDTH - PAD - 44}" y="{HEIGHT - 8}" font-size="10">'
             f'{time.strftime("%H:%M:%S", time.gmtime(t1))}</text>']
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        if len(pts) == 1:
            parts.append(f'<circle cx="{xy(*pts[0]).split(",")[0]}" cy="{xy(*pts[0]).split(",")[1]}" r="3" '
                         f'fill="{colour}"/>')
        else:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                         f'points="{" ".join(xy(t, v) for t, v in pts)}"/>')
        parts.append(Markup('<text x="{}" y="{}" font-size="10" fill="{}">{} ({})</text>').format(
            WIDTH - PAD - 150, PAD + 12 * i, colour, name, _fmt(pts[-1][1])))
    parts.append("</svg>")
    return Markup("").join(Markup(p) if not isinstance(p, Markup) else p for p in parts)
