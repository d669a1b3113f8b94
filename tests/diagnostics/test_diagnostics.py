"""diagnostics.diagnostic, engine.trace: one record shape, sorted, rendered; traces filtered."""

from __future__ import annotations

import json

from router.diagnostics.diagnostic import (
    Diagnostic,
    Severity,
    Span,
    count,
    render_json,
    render_text,
    sort_diagnostics,
)
from router.engine.trace import TraceEvent, filter_events, render_trace

W = Severity.WARNING


def test_sort_diagnostics_by_path_line_col_code_and_dedupe() -> None:
    items = [
        Diagnostic("RT302", "b", Span("b.yaml", 1, 1)),
        Diagnostic("RT301", "x", Span("a.yaml", 2, 5)),
        Diagnostic("RT205", "y", Span("a.yaml", 2, 5)),
        Diagnostic("RT110", "z", Span("a.yaml", 1, 9)),
        Diagnostic("RT205", "y", Span("a.yaml", 2, 5)),
    ]
    ordered = sort_diagnostics(items)
    assert [(d.span.path, d.span.line, d.span.col, d.code) for d in ordered] == [
        ("a.yaml", 1, 9, "RT110"),
        ("a.yaml", 2, 5, "RT205"),
        ("a.yaml", 2, 5, "RT301"),
        ("b.yaml", 1, 1, "RT302"),
    ]


def test_count_errors_and_warnings() -> None:
    assert count([Diagnostic("RT311", "w", severity=W), Diagnostic("RT205", "e")]) == (1, 1)


def test_render_text_line_format_help_and_trailer() -> None:
    text = render_text(
        [
            Diagnostic("RT205", "unknown event type 'x'", Span("p.yaml", 3, 9), help="did you mean 'y'?"),
            Diagnostic("RT311", "var 'v' is never used", Span("p.yaml", 1, 3), W),
        ]
    )
    assert text.splitlines() == [
        "p.yaml:1:3: warning: var 'v' is never used [RT311]",
        "p.yaml:3:9: error: unknown event type 'x' [RT205]",
        "  help: did you mean 'y'?",
        "Found 1 error, 1 warning.",
    ]


def test_render_text_source_excerpt_with_caret() -> None:
    text = render_text(
        [Diagnostic("RT205", "m", Span("p.yaml", 2, 5))], source_lines={"p.yaml": ["a: 1", "b:  xyz"]}
    )
    assert text.splitlines()[1:3] == ["  | b:  xyz", "  |     ^"]


def test_render_text_without_span_and_empty() -> None:
    assert render_text([Diagnostic("RT100", "no tests")]).splitlines()[0] == "error: no tests [RT100]"
    assert render_text([]) == "Found 0 errors, 0 warnings."


def test_render_json_fields() -> None:
    body = json.loads(
        render_json([Diagnostic("RT205", "m", Span("p.yaml", 2, 5), key_path="rules[0].on", rule_id="a")])
    )
    assert body == {
        "diagnostics": [
            {
                "code": "RT205",
                "severity": "error",
                "message": "m",
                "path": "p.yaml",
                "line": 2,
                "col": 5,
                "key_path": "rules[0].on",
                "rule_id": "a",
                "help": None,
            }
        ],
        "errors": 1,
        "warnings": 0,
    }


EVENTS = [
    TraceEvent("rule", "a", Span("p.yaml", 2), "rule a: enter"),
    TraceEvent("cond", "a", Span("p.yaml", 4), "when x: false", depth=1),
    TraceEvent("rule", "b", Span("p.yaml", 6), "rule b: enter"),
    TraceEvent("fire", "b", Span("p.yaml", 6), "rule b: fired", depth=1),
    TraceEvent("action", "b", Span("p.yaml", 9), "then notify: hi", depth=2),
    TraceEvent("skip", "c", Span("p.yaml", 10), "rule c: skipped"),
]


def test_filter_matched_keeps_fired_rules_with_their_rule_line() -> None:
    assert [(e.kind, e.rule_id) for e in filter_events(EVENTS, "matched")] == [
        ("rule", "b"),
        ("fire", "b"),
        ("action", "b"),
    ]


def test_filter_fails_keeps_the_rest() -> None:
    assert [(e.kind, e.rule_id) for e in filter_events(EVENTS, "fails")] == [
        ("rule", "a"),
        ("cond", "a"),
        ("skip", "c"),
    ]
    assert filter_events(EVENTS, "full") == EVENTS


def test_render_trace_location_column_and_nesting_bars() -> None:
    lines = render_trace(EVENTS[2:5])
    assert lines == ["p.yaml:6  rule b: enter", "p.yaml:6  | rule b: fired", "p.yaml:9  | | then notify: hi"]


def test_render_trace_color_only_when_asked() -> None:
    assert "\x1b[" not in "".join(render_trace(EVENTS))
    assert "\x1b[32m" in render_trace(EVENTS[3:4], color=True)[0]
