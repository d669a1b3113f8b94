"""The one HTML report (`router report --html`, `router replay --html`, `router diff --html`).

No network, no external script or stylesheet: the styles are inline, the plots are SVG drawn
here, and a Content-Security-Policy meta tag forbids the page to load anything. `render` takes
the `Figures` of report_data.py (from the decision log or from replayed sessions) and returns the
page text. Every text is escaped and cut to FIELD_CHARS; every table holds at most MAX_ROWS rows;
an empty cell says "—".
"""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from router.load.prices import usd
from router.replay.log_files import fired_ids, record_time, shadow_ids
from router.replay.report_data import Figures, TurnRow
from router.replay.report_svg import bars, line
from router.replay.summary import Money

SLOWEST = 10
PROMPT_CHARS = 80  # a prompt is shown (when the log keeps it) cut to this
FIELD_CHARS = 120  # a longer value (a model, a rule id, a title) is cut, and says so
MAX_ROWS = 100  # rows of a table or bars of a chart; the rest is counted, not shown
EMPTY = "—"
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1060px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;text-align:left}
td:first-child{white-space:nowrap}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even){background:#f6f6f6}
svg text{font:12px system-ui,sans-serif;fill:#222}.bar{fill:#4a78b5}.shadow{fill:#9bb7dc}
.line{fill:none;stroke:#4a78b5;stroke-width:2}.base{fill:none;stroke:#c0504d;stroke-width:2;
stroke-dasharray:6 4}.axis{stroke:#999}.grid{stroke:#eee}.muted{color:#777}.big{font-size:1.3em}
"""


def render(figures: Figures) -> str:
    """The whole page for `figures`."""
    sections: list[Callable[[Figures], str]] = [
        _summary, _policy, _models, _tiers, _cost, _changes, _projects, _sessions, _rules, _blocked,
        _failures, _slowest]
    body = "\n".join(s for section in sections if (s := section(figures)))
    title = _e(figures.title)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            f"<title>{title}</title><style>{STYLE}</style></head>\n"
            f"<body><h1>{title}</h1>\n{body}\n</body></html>\n")


def _e(value: Any) -> str:
    """`value` escaped for HTML, cut to FIELD_CHARS characters; None and "" are "—"."""
    text = EMPTY if value is None or value == "" else str(value)
    return html.escape(cut_field(text), quote=True)


def cut_field(text: str, limit: int = FIELD_CHARS) -> str:
    """`text`, or its first `limit` characters and `… [cut: N characters]`: a 50 MB field in a
    record makes a line of a page, not 50 MB of it."""
    return text if len(text) <= limit else f"{text[:limit]}… [cut: {len(text):,} characters]"


def _more(total: int, what: str) -> str:
    left = total - MAX_ROWS
    return f"<p class=\"muted more\">{left} more {what} not shown (at most {MAX_ROWS}).</p>" \
        if left > 0 else ""


def _section(key: str, title: str, body: str, note: str = "") -> str:
    note_html = f"<p class=\"muted\">{note}</p>" if note else ""
    return f"<section id=\"{key}\"><h2>{_e(title)}</h2>{note_html}{body}</section>"


def _table(key: str, head: Sequence[str], rows: Iterable[tuple[str, Sequence[Any]]], numeric: int = 1,
           until: int | None = None) -> str:
    """A table whose rows carry `data-<key>="<id>"`; columns `numeric` to `until` (excluded; the
    last, when None) are right-aligned numbers."""
    numbers = range(numeric, until if until is not None else len(head))
    items = list(rows)
    header = "".join(f"<th{_align(i, numbers)}>{_e(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        f"<tr data-{key}=\"{_e(ident)}\">"
        + "".join(f"<td{_align(i, numbers)}>{_e(c)}</td>" for i, c in enumerate(cells))
        + "</tr>" for ident, cells in items[:MAX_ROWS])
    return f"<table><tr>{header}</tr>{body}</table>{_more(len(items), 'rows')}"


def _align(column: int, numbers: range) -> str:
    return " class=\"n\"" if column in numbers else ""


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else EMPTY


def _money(turns: Iterable[TurnRow]) -> Money:
    money = Money()
    for turn in turns:
        money.add(turn.cost, turn.source)
    return money


def _cost_cell(turns: Sequence[TurnRow]) -> str:
    money = _money(turns)
    return money.text() if money.known or money.unknown else EMPTY


def _tokens(turns: Iterable[TurnRow]) -> int | None:
    known = [t.tokens for t in turns if t.tokens is not None]
    return sum(known) if known else None


def _saving(turns: Sequence[TurnRow]) -> tuple[float, float, int] | None:
    """(cost, baseline, turns) over the turns priced both as run and on the baseline."""
    both = [t for t in turns if t.cost is not None and t.baseline is not None]
    if not both:
        return None
    return sum(t.cost or 0.0 for t in both), sum(t.baseline or 0.0 for t in both), len(both)


def _saving_text(turns: Sequence[TurnRow]) -> str:
    found = _saving(turns)
    if found is None:
        return EMPTY
    cost, baseline, count = found
    share = f" ({(baseline - cost) / baseline:.0%})" if baseline else ""
    partial = f" over {count} of {len(turns)} turns" if count != len(turns) else ""
    return f"{usd(baseline - cost)}{share}{partial}"


# --- sections ---------------------------------------------------------------------------------


def _summary(f: Figures) -> str:
    turns = f.turns
    times = [t for r in f.records if (t := record_time(r)) is not None] + [t.time for t in turns if t.time]
    money = _money(turns)
    baseline = Money()
    for turn in turns:
        baseline.add(turn.baseline)
    saving = _saving(turns)
    rows = [("decisions", "decisions (events evaluated)", len(f.records)),
            ("turns", "turns (answers)", len(turns)),
            ("sessions", "sessions", len({t.session for t in turns} | {str(r.get("session") or "")
                                                                         for r in f.records} - {""})),
            ("projects", "projects", len({t.project for t in turns if t.project}) or EMPTY),
            ("first", "first", min(times).isoformat(timespec="seconds") if times else EMPTY),
            ("last", "last", max(times).isoformat(timespec="seconds") if times else EMPTY),
            ("tokens", "tokens", _tokens(turns)),
            ("cost", "cost" + (" (estimated)" if f.origin == "replay" else " (recorded)"),
             money.text() if turns else EMPTY),
            ("baseline", f"all-cloud ({f.baseline_model})" if f.baseline_model else "all-cloud",
             baseline.text() if f.baseline_model and baseline.known else _no_baseline(f)),
            ("saving", "saving against all-cloud", _saving_text(turns))]
    body = "".join(f"<tr><th>{_e(label)}</th><td class=\"n\" data-summary=\"{key}\">{_e(value)}</td></tr>"
                   for key, label, value in rows)
    big = ""
    if saving is not None:
        cost, base, _ = saving
        big = (f"<p class=\"big\" id=\"headline\">{_e(usd(cost))} instead of {_e(usd(base))} "
               f"all-cloud: <strong>{_e(usd(base - cost))} saved</strong></p>")
    notes = "".join(f"<p class=\"muted note\">{_e(n)}</p>" for n in f.notes)
    return _section("summary", "Summary", f"{big}<table>{body}</table>{notes}",
                    f"From the {f.origin}. A turn is one answer of the model; a decision is one event "
                    "the policy evaluated.")


def _no_baseline(f: Figures) -> str:
    if not f.baseline_model:
        return "n/a (no priced model: pass --models)"
    return "n/a (the records hold no tokens)" if f.origin == "decision log" else "n/a"


def _policy(f: Figures) -> str:
    if not f.policy:
        return _section("policy", "Policy version", "", "No record names its policy.")
    return _section("policy", "Policy version",
                    _table("policy", ("what", "value"),
                                           ((str(i), (w, v)) for i, (w, v) in enumerate(f.policy, 1)),
                                           numeric=2))


def _grouped(turns: Sequence[TurnRow], key: Callable[[TurnRow], str]) -> list[tuple[str, list[TurnRow]]]:
    groups: dict[str, list[TurnRow]] = defaultdict(list)
    for turn in turns:
        groups[key(turn)].append(turn)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


def _share_section(f: Figures, key: str, title: str, of: Callable[[TurnRow], str], note: str) -> str:
    if not f.turns:
        return _section(f"{key}s", title, "", "No turn was answered.")
    groups = _grouped(f.turns, of)
    all_tokens = _tokens(f.turns) or 0
    all_cost = sum(t.cost for t in f.turns if t.cost is not None)
    rows = []
    for name, turns in groups:
        tokens, money = _tokens(turns), _money(turns)
        rows.append((name, (name, len(turns), _share(len(turns), len(f.turns)), tokens,
                            _share(tokens or 0, all_tokens) if tokens is not None else EMPTY,
                            _cost_cell(turns), _share(money.usd, all_cost) if money.known else EMPTY)))
    table = _table(key, (key, "turns", "share", "tokens", "share", "cost", "share"), rows)
    return _section(f"{key}s", title, bars([(n, len(t)) for n, t in groups[:MAX_ROWS]]) + table, note)


def _models(f: Figures) -> str:
    return _share_section(f, "model", "Models", lambda t: t.model,
                          "Turns by the model that answered them: share of turns, tokens and cost.")


def _tiers(f: Figures) -> str:
    return _share_section(f, "tier", "Tiers", lambda t: t.tier,
                          "Turns by the tier of the model that answered them (the tier the policy records "
                          "for it, else cloud when priced, local when served on this machine).")


def _cost(f: Figures) -> str:
    priced = sorted(((t.time, t) for t in f.turns if t.time is not None and t.cost is not None),
                    key=lambda item: item[0])
    if not priced:
        why = "no turn has a time" if f.turns else "no turn"
        return _section("cost", "Cost over time", "", f"No curve: {why} with a price.")
    run, base, cumulative = 0.0, 0.0, []
    has_base = all(t.baseline is not None for _, t in priced)
    for moment, turn in priced:
        run += turn.cost or 0.0
        base += turn.baseline or 0.0
        cumulative.append((moment, run, base if has_base else None))
    note = (f"Cumulative cost of {len(priced)} priced turn(s): {usd(run)}"
            + (f"; all-cloud ({f.baseline_model}): {usd(base)} (dashed)." if has_base else "."))
    return _section("cost", "Cost over time", line(cumulative), _e(note))


def _changes(f: Figures) -> str:
    if f.changes is None:
        return ""
    if not f.changes:
        return _section("changes", "Changed turns", "", "No turn changes.")
    rows = [(f"{c['session'][:12]}#{c['turn']}", (c["session"][:12], c["turn"], c["what"], c["old"], c["new"],
                                                   c["delta"])) for c in f.changes]
    return _section("changes", "Changed turns",
                    _table("change", ("session", "turn", "what", "old", "new", "cost Δ"), rows, numeric=5))


def _projects(f: Figures) -> str:
    groups = _grouped(f.turns, lambda t: t.project or EMPTY)
    rows = [(name, (name, len({t.session for t in turns}), len(turns), _tokens(turns), _cost_cell(turns),
                    _saving_text(turns))) for name, turns in groups]
    return _section("projects", "Per project",
                    _table("project", ("project", "sessions", "turns", "tokens", "cost", "saving"), rows)
                    if rows else "", "" if rows else "No turn was answered.")


def _sessions(f: Figures) -> str:
    groups = _grouped(f.turns, lambda t: t.session)
    rows = []
    for name, turns in groups:
        models = Counter(t.model for t in turns).most_common(3)
        prompt = next((t.prompt for t in turns if t.prompt), None)
        rows.append((name, (name, turns[0].project, len(turns), _tokens(turns), _cost_cell(turns),
                            ", ".join(f"{m} {n}" for m, n in models),
                            cut_field(prompt, PROMPT_CHARS) if prompt else None)))
    head = ("session", "project", "turns", "tokens", "cost", "models", "first prompt")
    return _section("sessions", "Per session", _table("session", head, rows, 2, 5) if rows else "",
                    "" if rows else "No turn was answered.")


def _rules(f: Figures) -> str:
    fired = Counter(rule for r in f.records for rule in fired_ids(r))
    shadow = Counter(rule for r in f.records for rule in shadow_ids(r))
    parts = []
    if fired:
        names = sorted(fired, key=lambda n: (-fired[n], n))
        parts.append(bars([(n, fired[n]) for n in names[:MAX_ROWS]]))
        parts.append(_table("rule", ("rule", "fired"), ((n, (n, fired[n])) for n in names)))
    else:
        parts.append("<p class=\"muted\">No rule fired.</p>")
    if shadow:
        names = sorted(shadow, key=lambda n: (-shadow[n], n))
        parts.append("<h3>Shadow rules (not applied, never counted as fired)</h3>")
        parts.append(_table("shadow", ("rule", "would fire"), ((n, (n, shadow[n])) for n in names)))
    return _section("rules", "Hits per rule", "".join(parts),
                    "Decisions in which each rule fired and was applied.")


def _blocked(f: Figures) -> str:
    if not f.blocked:
        return _section("blocked", "Blocked tool calls", "", "No tool call was blocked.")
    rows = [(str(i), (b.session[:13], b.where, b.tool, b.rule, b.reason)) for i, b in enumerate(f.blocked, 1)]
    return _section("blocked", "Blocked tool calls",
                    _table("blocked", ("session", "when", "tool", "rule", "reason"), rows, numeric=5))


def _failures(f: Figures) -> str:
    if not f.failures:
        return _section("failures", "Fallbacks and failures", "", "No signal fell back, nothing failed.")
    rows = [(f"{kind}:{what}", (kind, what, n)) for (kind, what), n in f.failures.most_common()]
    table = _table("failure", ("kind", "what", "count"), rows, 2)
    return _section("failures", "Fallbacks and failures", table)


def _slowest(f: Figures) -> str:
    timed = [r for r in f.records if isinstance(r.get("latency_ms"), (int, float))]
    slow = sorted(timed, key=lambda r: -float(r["latency_ms"]))[:SLOWEST]
    if not slow:
        return ""
    rows = [(str(rank), (r.get("time") or (f"turn {r['turn']}" if r.get("turn") is not None else None),
                         str(r.get("session") or "")[:12], f"{r.get('event')} #{r.get('seq')}",
                         ", ".join(fired_ids(r)), f"{float(r['latency_ms']):.2f}"))
            for rank, r in enumerate(slow, 1)]
    return _section("slowest", "Slowest decisions",
                    _table("slow", ("when", "session", "event", "rules fired", "ms"), rows, numeric=4))
