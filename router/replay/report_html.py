"""One self-contained HTML page about a list of decision records (`router report --html`).

No network, no external script or stylesheet: the styles are inline, the plots are SVG drawn
here, and a Content-Security-Policy meta tag forbids the page to load anything. The builder
takes records (decision-log records, or records a replay produced) and returns the page text.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from router.replay.log_files import fired_ids, record_time, shadow_ids

SLOWEST = 10
FIELD_CHARS = 120  # a longer value (a model, a rule id, a title) is cut, and says so
MAX_ROWS = 100  # rows of a table or bars of a chart; the rest is counted, not shown
BAR_HEIGHT, BAR_GAP, LABEL_WIDTH, BAR_WIDTH = 18, 6, 220, 360
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:980px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even){background:#f6f6f6}
svg text{font:12px system-ui,sans-serif;fill:#222}.bar{fill:#4a78b5}.shadow{fill:#9bb7dc}
.line{fill:none;stroke:#4a78b5;stroke-width:2}.axis{stroke:#999}.muted{color:#777}
"""


def render(records: Iterable[dict[str, Any]], title: str = "Router decisions") -> str:
    """The whole page for `records`."""
    items = [r for r in records if isinstance(r, dict)]
    sections = [_summary(items), _share("Models", "model", _counts(items, "model"), "model of the turn"),
                _share("Tiers", "tier", _counts(items, "tier"), "tier the decision set"),
                _cost(items), _rules(items), _slowest(items)]
    body = "\n".join(s for s in sections if s)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head>\n"
            f"<body><h1>{_e(title)}</h1>\n{body}\n</body></html>\n")


def _e(value: Any) -> str:
    """`value` escaped for HTML, cut to FIELD_CHARS characters (`cut_field`)."""
    return html.escape(cut_field(str(value)), quote=True)


def cut_field(text: str, limit: int = FIELD_CHARS) -> str:
    """`text`, or its first `limit` characters and `… [cut: N characters]`: a 50 MB field in a
    record makes a line of a page, not 50 MB of it."""
    return text if len(text) <= limit else f"{text[:limit]}… [cut: {len(text):,} characters]"


def _more(shown: int, total: int, what: str) -> str:
    left = total - shown
    return f"<p class=\"muted more\">{left} more {what} not shown (at most {MAX_ROWS}).</p>" \
        if left > 0 else ""


def _counts(records: Sequence[dict[str, Any]], key: str) -> list[tuple[str, int]]:
    counter = Counter(str(r[key]) for r in records if r.get(key))
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))


# --- sections ---------------------------------------------------------------------------------


def _summary(records: Sequence[dict[str, Any]]) -> str:
    times = [t for r in records if (t := record_time(r)) is not None]
    sessions = {str(r.get("session") or "") for r in records}
    rows = [("decisions", str(len(records)), "decisions"), ("sessions", str(len(sessions)), "sessions")]
    if times:
        rows += [("first", min(times).isoformat(timespec="seconds"), "first"),
                 ("last", max(times).isoformat(timespec="seconds"), "last")]
    costs = [c for r in records if isinstance(c := r.get("cost"), (int, float))]
    if costs:
        rows.append(("recorded cost", f"{sum(costs):.4f}", "cost"))
    body = "".join(f"<tr><th>{_e(label)}</th><td class=\"n\" data-summary=\"{key}\">{_e(value)}</td></tr>"
                   for label, value, key in rows)
    return f"<section id=\"summary\"><h2>Summary</h2><table>{body}</table></section>"


def _share(title: str, key: str, counts: list[tuple[str, int]], what: str) -> str:
    if not counts:
        return "" if key == "tier" else (f"<section id=\"{key}s\"><h2>{title}</h2>"
                                         "<p class=\"muted\">No record names a model.</p></section>")
    total = sum(n for _, n in counts)
    more = _more(min(len(counts), MAX_ROWS), len(counts), f"{key}s")
    counts = counts[:MAX_ROWS]
    rows = "".join(f"<tr data-{key}=\"{_e(name)}\"><td>{_e(name)}</td><td class=\"n count\">{n}</td>"
                   f"<td class=\"n\">{n / total:.0%}</td></tr>" for name, n in counts)
    table = (f"<table><tr><th>{key}</th><th class=\"n\">decisions</th><th class=\"n\">share</th></tr>"
             f"{rows}</table>")
    return (f"<section id=\"{key}s\"><h2>{title}</h2><p class=\"muted\">Decisions by the {what}.</p>"
            f"{_bars([(name, n) for name, n in counts])}{table}{more}</section>")


def _cost(records: Sequence[dict[str, Any]]) -> str:
    points = sorted((t, float(c)) for r in records
                    if isinstance(c := r.get("cost"), (int, float)) and (t := record_time(r)) is not None)
    if not points:
        return ""
    cumulative, total = [], 0.0
    for moment, cost in points:
        total += cost
        cumulative.append((moment, total))
    return (f"<section id=\"cost\"><h2>Cost over time</h2><p class=\"muted\">Cumulative recorded cost "
            f"of {len(points)} turn(s): {total:.4f}.</p>{_line(cumulative)}</section>")


def _rules(records: Sequence[dict[str, Any]]) -> str:
    fired = Counter(rule for r in records for rule in fired_ids(r))
    shadow = Counter(rule for r in records for rule in shadow_ids(r))
    names = sorted(set(fired) | set(shadow), key=lambda n: (-(fired[n] + shadow[n]), n))
    if not names:
        return "<section id=\"rules\"><h2>Hits per rule</h2><p class=\"muted\">No rule fired.</p></section>"
    more = _more(min(len(names), MAX_ROWS), len(names), "rules")
    names = names[:MAX_ROWS]
    rows = "".join(f"<tr data-rule=\"{_e(n)}\"><td>{_e(n)}</td><td class=\"n fired\">{fired[n]}</td>"
                   f"<td class=\"n shadowed\">{shadow[n]}</td></tr>" for n in names)
    table = ("<table><tr><th>rule</th><th class=\"n\">fired</th><th class=\"n\">shadow (would fire)</th>"
             f"</tr>{rows}</table>")
    bars = _bars([(n, fired[n]) for n in names], [shadow[n] for n in names])
    return f"<section id=\"rules\"><h2>Hits per rule</h2>{bars}{table}{more}</section>"


def _slowest(records: Sequence[dict[str, Any]]) -> str:
    timed = [r for r in records if isinstance(r.get("latency_ms"), (int, float))]
    slow = sorted(timed, key=lambda r: -float(r["latency_ms"]))[:SLOWEST]
    if not slow:
        return ""
    rows = "".join(
        f"<tr class=\"slow\" data-slow=\"{rank}\"><td>{_e(r.get('time'))}</td>"
        f"<td>{_e(str(r.get('session') or '')[:12])}</td>"
        f"<td>{_e(r.get('event'))} #{_e(r.get('seq'))}</td><td>{_e(', '.join(fired_ids(r)) or '-')}</td>"
        f"<td class=\"n latency\">{float(r['latency_ms']):.2f}</td></tr>" for rank, r in enumerate(slow, 1))
    return ("<section id=\"slowest\"><h2>Slowest decisions</h2><table><tr><th>time</th><th>session</th>"
            f"<th>event</th><th>rules fired</th><th class=\"n\">ms</th></tr>{rows}</table></section>")


# --- plots ------------------------------------------------------------------------------------


def _bars(items: list[tuple[str, int]], second: list[int] | None = None) -> str:
    """A horizontal bar chart; `second`: a lighter bar after each (shadow hits)."""
    top = max([n for _, n in items] + (second or []) + [1])
    height = len(items) * (BAR_HEIGHT + BAR_GAP) + BAR_GAP
    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{LABEL_WIDTH + BAR_WIDTH + 60}\" "
             f"height=\"{height}\" role=\"img\">"]
    for index, (label, value) in enumerate(items):
        y = BAR_GAP + index * (BAR_HEIGHT + BAR_GAP)
        width = max(1, round(BAR_WIDTH * value / top)) if value else 0
        parts.append(f"<text x=\"{LABEL_WIDTH - 6}\" y=\"{y + 13}\" text-anchor=\"end\">"
                     f"{_e(label[:32])}</text>")
        parts.append(f"<rect class=\"bar\" x=\"{LABEL_WIDTH}\" y=\"{y}\" width=\"{width}\" "
                     f"height=\"{BAR_HEIGHT}\"><title>{_e(label)}: {value}</title></rect>")
        extra = second[index] if second else 0
        extra_width = round(BAR_WIDTH * extra / top) if extra else 0
        if extra_width:
            parts.append(f"<rect class=\"shadow\" x=\"{LABEL_WIDTH + width}\" y=\"{y}\" "
                         f"width=\"{extra_width}\" height=\"{BAR_HEIGHT}\"/>")
        shown = f"{value}" + (f" (+{extra} shadow)" if extra else "")
        parts.append(f"<text x=\"{LABEL_WIDTH + width + extra_width + 4}\" y=\"{y + 13}\">{shown}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _line(points: list[tuple[datetime, float]]) -> str:
    """A line chart of (time, value) points, time on x."""
    width, height, pad = 600, 200, 40
    start, end = points[0][0].timestamp(), points[-1][0].timestamp()
    span = (end - start) or 1.0
    top = max(v for _, v in points) or 1.0
    xy = [(pad + (width - 2 * pad) * (t.timestamp() - start) / span,
           height - pad - (height - 2 * pad) * v / top) for t, v in points]
    if len(xy) == 1:
        xy.append((width - pad, xy[0][1]))
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    bottom = height - pad
    first, last = (_e(points[i][0].strftime("%Y-%m-%d %H:%M")) for i in (0, -1))
    return (f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\">"
            f"<line class=\"axis\" x1=\"{pad}\" y1=\"{bottom}\" x2=\"{width - pad}\" y2=\"{bottom}\"/>"
            f"<line class=\"axis\" x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{bottom}\"/>"
            f"<polyline class=\"line\" points=\"{path}\"/>"
            f"<text x=\"{pad}\" y=\"{bottom + 16}\">{first}</text>"
            f"<text x=\"{width - pad}\" y=\"{bottom + 16}\" text-anchor=\"end\">{last}</text>"
            f"<text x=\"{pad - 4}\" y=\"{pad + 4}\" text-anchor=\"end\">{top:.2f}</text></svg>")
