"""Language semantics settled after review: truthiness, signal errors, limits, templates, events."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from router.engine import rule_index
from router.engine.decision import Decision, SignalOutcome, SignalRequest
from router.engine.interpreter import evaluate
from router.lang.expr.expression import compile_template
from router.lang.expr.syntax import ExpressionSyntaxError
from router.load.event_documents import complete_event
from router.runtime.executor import Executor
from tests.helpers import compile_ok, compile_text, decide, fails, render


def test_when_zero_is_false_and_not_zero_is_true(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
rules:
  - {id: some, on: turn_end, when: "tool_calls", do: [{log: x}], continue: true}
  - {id: none, on: turn_end, when: "not tool_calls", do: [{log: y}]}
""")
    assert decide(policy, {"type": "turn_end", "tool_calls": 0}).fired == ("none",)
    assert decide(policy, {"type": "turn_end", "tool_calls": 2}).fired == ("some",)


def test_signal_errors_reading_computes_the_signal(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
signals:
  p: {classify: {model: x/y, questions: {q: {instructions: i}}}, fallback: "0.5"}
rules:
  - {id: a, on: input, when: "signal_errors.p != null", do: [{log: "{signal_errors.p}"}]}
""")
    decision = decide(policy, {"type": "input"}, outcomes={"p": SignalOutcome(error="timeout")})
    assert decision.fired == ("a",) and decision.effects[0].params["text"] == "timeout"


def test_text_helpers_are_bounded() -> None:
    assert fails("replace(replace('x' * 5000, 'x', 'x' * 5000), 'x', 'xx')").code == "RT403"
    assert fails("join('', ['x' * 90000, 'y' * 90000] * 6)").code in ("RT403", "RT402")


def test_templates_write_values_as_the_language_does() -> None:
    assert render("{a} {b} {c}", a=None, b=True, c=["x"]) == 'null true ["x"]'
    with pytest.raises(ExpressionSyntaxError):
        compile_template("{a!r}")


def test_child_runs_only_pi(tmp_path: Path) -> None:
    async def bridge(*_: object) -> object:
        return None

    executor = Executor(bridge, cwd=str(tmp_path))
    outcome = asyncio.run(executor.compute(SignalRequest("c", "child", {"pi_bin": "/bin/sh", "prompt": "x"})))
    assert outcome.error is not None and "not a pi binary" in outcome.error


def test_hand_written_events_are_completed_like_pi_events() -> None:
    event = complete_event({"type": "command", "name": "x", "args": "status now",
                            "model": {"provider": "fake", "id": "m"},
                            "usage": {"tokens": 50, "context_window": 200}})
    assert event["argv"] == ["status", "now"] and event["model"]["ref"] == "fake/m"
    assert event["usage"]["percent"] == 25


def test_unset_accepts_one_key(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, "rules:\n  - {id: a, on: input, do: [{unset: flag}]}\n")
    assert decide(policy, {"type": "input"}, state={"flag": 1, "keep": 2}).state == {"keep": 2}


def test_sidecar_exits_after_shutdown_without_closing_stdin(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-m", "router", "serve", "--cwd", str(tmp_path),
                                "--agent-dir", str(tmp_path / "agent")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path)
    assert process.stdin is not None
    process.stdin.write(b'{"id":1,"method":"hello","params":{}}\n{"id":2,"method":"shutdown"}\n')
    process.stdin.flush()
    try:
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.stdin.close()
        if process.stdout:
            process.stdout.close()


# --- the rule index agrees with evaluating every rule ---------------------------------------

_LITERALS = ["bash", "read", "a", "it's", 'say "hi"', "two\nlines", "", "Ünï", "fix it", "x" * 300,
             "\\'; __import__('os') #"]
_VALUES = [*_LITERALS, None, 1, 2.5, True, [], ["a"], {"y": "a"}, {"y": 1}]


def _jmespath_literal(text: str) -> str:
    if "'" not in text and "\\" not in text:
        return f"'{text}'"
    return "`" + json.dumps(text).replace("`", "\\`") + "`"


def _match_parts(lit: str) -> list[str]:
    j = _jmespath_literal(lit)
    return [f"tool.name == {j}", f"tool.name != {j}", f"{j} == tool.name", f"tool.input.command == {j}",
            f"tool.input.x.y == {j}", "state.n == 'a'", "contains(tool.name, 'a')", "tool.input.n > `1`",
            "!tool.input.flag", "tool.input.x.y || tool.name == 'bash'", f"tool.input.command != {j}"]


def _when_parts(lit: str) -> list[str]:
    p = repr(lit)
    return [f"tool.name == {p}", f"tool.input.command != {p}", f"tool.input.x.y == {p}",
            f"count_keywords(tool.input.command, [{p}, 'fix']) > 0", "count_keywords(tool.name, ['ba']) >= 1",
            "count_keywords(tool.input.command, ['x'])", "count_keywords(tool.input.x, ['a']) > 0",
            "tool.input.n > 1", "vars.k.y == 'b'", "vars.m.y == 'a'", "state.n == 'a'",
            "lower(tool.name) == 'bash'", "tool.input.n in [1, 2]", "not tool.input.flag",
            f"{p} == tool.name"]


@st.composite
def _rules(draw: st.DrawFn) -> list[dict[str, Any]]:
    rules = []
    for i in range(draw(st.integers(1, 12))):
        lit = draw(st.sampled_from(_LITERALS))
        match = draw(st.lists(st.sampled_from(_match_parts(lit)), max_size=3))
        when = draw(st.lists(st.sampled_from(_when_parts(lit)), max_size=3))
        rule: dict[str, Any] = {"id": f"r{i}", "on": "tool_call",
                                "group": draw(st.sampled_from(["default", "g"])),
                                "do": [{"notify": f"r{i} {{tool.name}}"}]}
        if draw(st.booleans()):
            rule["do"].append({"set": {"n": "a"}})
        if match:
            rule["match"] = " && ".join(match)
        if when:
            rule["when"] = " and ".join(when)
        rule["continue"] = draw(st.booleans())
        rule["shadow"] = draw(st.booleans())
        rules.append(rule)
    return rules


_events = st.fixed_dictionaries({
    "type": st.just("tool_call"),
    "tool": st.one_of(st.sampled_from(_VALUES), st.fixed_dictionaries({
        "name": st.sampled_from(_VALUES),
        "input": st.fixed_dictionaries({k: st.sampled_from(_VALUES) for k in ("command", "x", "n", "flag")}),
    })),
})


def _outcome(decision: Decision) -> Any:
    return (decision.fired, list(decision.effects),
            list(decision.shadowed),
            [(d.code, d.message) for d in decision.errors], decision.state, decision.pending)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=_rules(), events=st.lists(_events, min_size=1, max_size=4),
       state=st.sampled_from([{}, {"n": "a"}]))
def test_rule_index_agrees_with_evaluating_every_rule(rules: list[dict[str, Any]],
                                                      events: list[dict[str, Any]],
                                                      state: dict[str, Any]) -> None:
    text = json.dumps({"version": 1, "vars": {"k": "abc", "m": {"y": "a"}}, "rules": rules})
    with tempfile.TemporaryDirectory() as tmp:
        policy, _ = compile_text(Path(tmp), text)
    assume(policy is not None)
    assert policy is not None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rule_index, "MIN_RULES", 1)
        for event_doc in events:
            patch.setattr(rule_index, "enabled", True)
            indexed = evaluate(policy, event_doc, state=state)
            patch.setattr(rule_index, "enabled", False)
            reference = evaluate(policy, event_doc, state=state)
            assert _outcome(indexed) == _outcome(reference), (rules, event_doc)
