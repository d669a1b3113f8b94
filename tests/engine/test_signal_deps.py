"""router.engine.signal_deps: which expression signals a state write can change, and the
interpreter computing only those again (the others come back as they were)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from router.engine.signal_deps import state_dependent
from tests.helpers import compile_ok, decide, record_calls, texts

POLICY = """
vars: {base: 2}
signals:
  plain: {expr: "count_calls(vars.base + 1)"}
  from_env: {expr: "env.HOME or 'none'"}
  reads_state: {expr: "count_calls(state.n or 0)"}
  through: {expr: "signals.reads_state + 1"}
  through_errors: {expr: "signal_errors.reads_state"}
  through_plain: {expr: "signals['plain'] * 2"}
  dynamic: {expr: "[signals[k] for k in ['plain']]"}
  listed: {expr: "keys(signals)"}
  shadowing: {expr: "[state for state in [1, 2]]"}
  bound:
    let: {n: "state.n"}
    expr: "n"
  fallback_state: {complete: {prompt: hi}, fallback: "state.n"}
  transformed: {expr: "1", transform: "result + (state.n or 0)"}
  ext: {complete: {prompt: hi}, fallback: "'x'"}
  from_ext: {expr: "signals.ext + '!'"}
rules:
  - id: before
    on: input
    continue: true
    do: [{notify: "{signals.plain} {signals.reads_state}"}]
  - id: write
    on: input
    continue: true
    do: [{set: {n: 5}}]
  - id: after
    on: input
    do: [{notify: "{signals.plain} {signals.reads_state}"}]
"""


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """`count_calls(x) -> x`, recording every call (tests/helpers.py)."""
    return record_calls(monkeypatch)


def test_signals_reading_state_directly_through_others_or_opaquely(tmp_path: Path, calls: list[Any]) -> None:
    policy = compile_ok(tmp_path, POLICY)
    assert state_dependent(policy) == {"reads_state", "through", "through_errors", "dynamic", "listed",
                                       "shadowing", "bound", "transformed"}
    assert state_dependent(policy) is state_dependent(policy)  # once per policy


def test_a_state_write_computes_again_only_what_reads_state(tmp_path: Path, calls: list[Any]) -> None:
    policy = compile_ok(tmp_path, POLICY)
    decision = decide(policy, {"type": "input", "text": "hi"}, signals={"ext": "e"})
    assert texts(decision) == ["3 0", "3 5"]
    assert calls == [3, 0, 5]  # `plain` once, `reads_state` before and after the write
    assert decision.signals == {"ext": "e", "plain": 3, "reads_state": 5}  # given, or read after the write


def test_a_signal_set_aside_keeps_its_failure(tmp_path: Path, calls: list[Any]) -> None:
    policy = compile_ok(tmp_path, """
        signals:
          broken: {expr: "count_calls(1) / 0", fallback: "'fell back'"}
        rules:
          - {id: a, on: input, continue: true, do: [{notify: "{signals.broken}"}]}
          - {id: w, on: input, continue: true, do: [{set: {n: 1}}]}
          - {id: b, on: input, do: [{notify: "{signals.broken} {signal_errors.broken}"}]}
        """)
    decision = decide(policy, {"type": "input", "text": "hi"})
    assert calls == [1]
    assert texts(decision)[0] == "fell back" and texts(decision)[1].startswith("fell back ")
    assert "division by zero" in decision.signal_errors["broken"]
    assert set(decision.signal_codes) == {"broken"}
