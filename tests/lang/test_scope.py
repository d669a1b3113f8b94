"""router.engine.scope: signals computed lazily, at most once, with fallbacks and visible failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from router.engine.decision import SignalOutcome
from router.lang.functions import FUNCTIONS, Function
from tests.helpers import compile_ok, decide, texts


@pytest.fixture
def counting_function(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Register `count_calls(x) -> x`, which records every call, for the duration of a test."""
    calls: list[Any] = []

    def count_calls(value: Any) -> Any:
        calls.append(value)
        return value

    monkeypatch.setitem(
        FUNCTIONS,
        "count_calls",
        Function("count_calls", count_calls, 1, 1, "Record a call.", "count_calls(1) == 1"),
    )
    return calls


SIGNALS = """
signals:
  long: {expr: "count_calls(utf16_len(text)) > 5"}
  unused: {expr: "count_calls(1)"}
  p:
    classify:
      model: "llama.cpp/{model.id}"
      questions:
        complexity: {type: score, instructions: "How complex?"}
        tools: {type: bool, instructions: "Needs tools?", when: "text != 'hi'"}
    transform: "result.complexity"
    fallback: "0.25"
rules:
  - id: a
    on: input
    when: "signals.long"
    continue: true
    do: [{notify: long}]
  - id: b
    on: input
    when: "signals.long and signals.long"
    continue: true
    do: [{notify: "long again"}]
  - id: c
    on: input
    when: "signals.p >= 0.5"
    do: [{notify: "p={signals.p}"}]
"""


def test_expr_signal_lazy_and_computed_at_most_once(tmp_path: Path, counting_function: list[Any]) -> None:
    policy = compile_ok(tmp_path, SIGNALS)
    decision = decide(policy, {"type": "input", "text": "a long text"}, signals={"p": 0.1})
    assert counting_function == [11]
    assert decision.signals["long"] is True and "unused" not in decision.signals


def test_external_signal_pending_with_rendered_request(tmp_path: Path, counting_function: list[Any]) -> None:
    policy = compile_ok(tmp_path, SIGNALS)
    decision = decide(policy, {"type": "input", "text": "hi", "model": {"id": "m1"}})
    assert (
        decision.pending is not None and decision.pending.name == "p" and decision.pending.kind == "classify"
    )
    assert decision.pending.params["model"] == "llama.cpp/m1"
    assert list(decision.pending.questions) == ["complexity"]
    assert decision.effects == () and decision.state == {}


def test_external_signal_questions_kept_when_condition_true(
    tmp_path: Path, counting_function: list[Any]
) -> None:
    policy = compile_ok(tmp_path, SIGNALS)
    decision = decide(policy, {"type": "input", "text": "please build"})
    assert list(decision.pending.questions) == ["complexity", "tools"]


def test_external_signal_outcome_transformed(tmp_path: Path, counting_function: list[Any]) -> None:
    policy = compile_ok(tmp_path, SIGNALS)
    decision = decide(
        policy, {"type": "input", "text": "hi"}, outcomes={"p": SignalOutcome(result={"complexity": 0.75})}
    )
    assert texts(decision) == ["p=0.75"] and decision.signal_errors == {}


def test_external_signal_error_uses_fallback_and_reports(
    tmp_path: Path, counting_function: list[Any]
) -> None:
    policy = compile_ok(tmp_path, SIGNALS)
    decision = decide(
        policy, {"type": "input", "text": "hi"}, outcomes={"p": SignalOutcome(error="timeout after 10ms")}
    )
    assert decision.signals["p"] == 0.25 and decision.signal_errors == {"p": "timeout after 10ms"}
    assert decision.fired == () and decision.pending is None


def test_transform_failure_uses_fallback(tmp_path: Path, counting_function: list[Any]) -> None:
    policy = compile_ok(tmp_path, SIGNALS)
    decision = decide(
        policy, {"type": "input", "text": "hi"}, outcomes={"p": SignalOutcome(result="garbage")}
    )
    assert decision.signals["p"] == 0.25 and decision.signal_errors["p"].startswith("invalid result")


def test_signal_errors_readable_by_rules(tmp_path: Path) -> None:
    policy = compile_ok(
        tmp_path,
        """
        signals:
          s: {complete: {prompt: hi}, fallback: "'none'"}
        rules:
          - id: report
            on: input
            when: "signals.s == 'none' and signal_errors.s != null"
            do: [{notify: "failed: {signal_errors.s}"}]
        """,
    )
    decision = decide(policy, {"type": "input"}, outcomes={"s": SignalOutcome(error="boom")})
    assert texts(decision) == ["failed: boom"]
