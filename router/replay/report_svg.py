"""The report's plots (router/replay/report_html.py): bars of counts and the cost over time, as
inline SVG, every text escaped."""

from __future__ import annotations

import html
import math
from datetime import UTC, datetime

TICKS = 5
TIME_FORMAT, DATE_FORMAT = "%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"
BAR_HEIGHT, BAR_GAP, LABEL_WIDTH, BAR_WIDTH = 18, 6, 220, 360


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def bars(items: list[tuple[str, int]]) -> str:
    """A horizontal bar chart of counts."""
    top = max([n for _, n in items] + [1])
    height = len(items) * (BAR_HEIGHT + BAR_GAP) + BAR_GAP
    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{LABEL_WIDTH + BAR_WIDTH + 60}\" "
             f"height=\"{height}\" role=\"img\">"]
    for index, (label, value) in enumerate(items):
        y = BAR_GAP + index * (BAR_HEIGHT + BAR_GAP)
        width = max(1, round(BAR_WIDTH * value / top)) if value else 0
        parts.append(f"<text x=\"{LABEL_WIDTH - 6}\" y=\"{y + 13}\" text-anchor=\"end\">"
                     f"{_e(label[:32])}</text>")
        parts.append(f"<rect class=\"bar\" x=\"{LABEL_WIDTH}\" y=\"{y}\" width=\"{width}\" "
                     f"height=\"{BAR_HEIGHT}\"><title>{_e(label[:120])}: {value}</title></rect>")
        parts.append(f"<text x=\"{LABEL_WIDTH + width + 4}\" y=\"{y + 13}\">{value}</text>")
    parts.append("</svg>")
    return "".join(parts)


def nice_ticks(top: float, count: int = TICKS) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to at least `top`."""
    if not math.isfinite(top) or top <= 0:  # a log's `Infinity`, or costs that overflow
        return [0.0, 1.0]
    raw = top / (count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-12 * top:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _money_tick(value: float, step: float) -> str:
    decimals = max(0, min(8, -math.floor(math.log10(step)))) if step > 0 else 2
    return f"${value:.{max(decimals, 2)}f}"


def line(points: list[tuple[datetime, float, float | None]]) -> str:
    """Cumulative cost (and the baseline's, dashed) over time: labelled axes, $ ticks, time ticks."""
    width, height, left, right, top_pad, bottom_pad = 760, 280, 90, 70, 20, 60
    start, end = points[0][0].timestamp(), points[-1][0].timestamp()
    span = (end - start) or 1.0
    top = max(max(v, b or 0.0) for _, v, b in points)
    ticks = nice_ticks(top)
    scale_top = ticks[-1] or 1.0
    plot_w, plot_h = width - left - right, height - top_pad - bottom_pad
    bottom = top_pad + plot_h

    def xy(moment: float, value: float) -> str:
        return f"{left + plot_w * (moment - start) / span:.1f},{bottom - plot_h * value / scale_top:.1f}"

    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" "
             "aria-label=\"cumulative cost over time\">"]
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    for tick in ticks:
        y = bottom - plot_h * tick / scale_top
        parts.append(f"<line class=\"grid\" x1=\"{left}\" y1=\"{y:.1f}\" x2=\"{width - right}\" "
                     f"y2=\"{y:.1f}\"/>"
                     f"<text class=\"ytick\" x=\"{left - 6}\" y=\"{y + 4:.1f}\" text-anchor=\"end\">"
                     f"{_money_tick(tick, step)}</text>")
    for index in range(TICKS):
        moment = start + span * index / (TICKS - 1) if end > start else start
        x = left + plot_w * index / (TICKS - 1)
        label = datetime.fromtimestamp(moment, UTC).strftime(TIME_FORMAT if span < 86400 else DATE_FORMAT)
        parts.append(f"<line class=\"axis\" x1=\"{x:.1f}\" y1=\"{bottom}\" x2=\"{x:.1f}\" "
                     f"y2=\"{bottom + 4}\"/>"
                     f"<text class=\"xtick\" x=\"{x:.1f}\" y=\"{bottom + 18}\" text-anchor=\"middle\">"
                     f"{_e(label)}</text>")
        if end <= start:
            break
    parts.append(f"<line class=\"axis\" x1=\"{left}\" y1=\"{bottom}\" x2=\"{width - right}\" "
                 f"y2=\"{bottom}\"/>"
                 f"<line class=\"axis\" x1=\"{left}\" y1=\"{top_pad}\" x2=\"{left}\" y2=\"{bottom}\"/>")
    line = [xy(m.timestamp(), v) for m, v, _ in points]
    if len(line) == 1:
        line.append(xy(end + span if end == start else end, points[0][1]))
    parts.append(f"<polyline class=\"line\" points=\"{' '.join(line)}\"/>")
    if all(b is not None for _, _, b in points):
        base = " ".join(xy(m.timestamp(), b or 0.0) for m, _, b in points)
        parts.append(f"<polyline class=\"base\" points=\"{base}\"/>")
    parts.append(f"<text class=\"xlabel\" x=\"{left + plot_w / 2:.0f}\" y=\"{height - 12}\" "
                 "text-anchor=\"middle\">time (UTC)</text>"
                 f"<text class=\"ylabel\" transform=\"translate(16,{top_pad + plot_h / 2:.0f}) rotate(-90)\" "
                 "text-anchor=\"middle\">cumulative cost (USD, $)</text></svg>")
    return "".join(parts)
