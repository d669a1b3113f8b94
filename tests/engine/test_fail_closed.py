"""Guards fail closed (issue 22): a rule that can refuse (`block`, `cancel`) and cannot be checked
refuses; every other failed rule fails alone, visibly, and the rules after it still run."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from router.engine.decision import Decision
from router.engine.interpreter import evaluate
from router.engine.trace import BufferTracer, render_trace
from router.lang.budget import DEFAULT_BUDGET, Budget, BudgetLimits
from tests.helpers import compile_ok, event

ROUTER = Path(sys.executable).with_name("router")
PUSH = {"name": "bash", "input": {"command": "git push -f origin main"}}
GUARD = """\
  - id: no-force-push
    on: tool_call
    when: "tool.name == 'bash' and regex(tool.input.command, 'push\\\\s+(-f|--force)')"
    do: [{block: "no force pushes"}]
"""
SLOW = """\
  - id: slow
    on: tool_call
    when: "length([upper(tool.input.command) * 1000 for a in range(10000)]) > 0"
    do: [{notify: slow}]
    continue: true
"""


def decide(tmp_path: Path, rules: str, limits: BudgetLimits = DEFAULT_BUDGET, tool: Any = PUSH,
           event_type: str = "tool_call", tracer: BufferTracer | None = None) -> Decision:
    policy = compile_ok(tmp_path, "version: 1\nrules:\n" + rules)
    fields = {"tool": tool} if event_type == "tool_call" else {}
    return evaluate(policy, event(event_type, **fields), budget=Budget(limits), tracer=tracer)


def blocks(decision: Decision) -> list[str]:
    return [e.params["reason"] for e in decision.effects if e.action == "block"]


def test_a_rule_past_its_own_budget_fails_alone_and_the_block_after_it_still_runs(tmp_path: Path) -> None:
    decision = decide(tmp_path, SLOW + GUARD)
    assert blocks(decision) == ["no force pushes"]  # evaluated, not failed closed
    (failed,) = decision.errors
    assert failed.code == "RT404" and failed.rule_id == "slow" and failed.severity == "warning"
    assert "its own 20,000,000 characters" in failed.message and "policy.yaml:" in failed.message


def test_a_rule_past_its_own_time_fails_alone(tmp_path: Path) -> None:
    decision = decide(tmp_path, SLOW + GUARD, BudgetLimits(rule_ms=0))
    assert decision.errors[0].rule_id == "slow" and "its own 0 ms" in decision.errors[0].message
    (reason,) = blocks(decision)  # the guard's own allowance (0 ms) ran out in its regex: it blocks
    assert "could not be checked (the rule took more than its own 0 ms" in reason


def test_when_the_events_budget_is_used_up_guards_block_and_the_others_are_skipped(tmp_path: Path) -> None:
    notify = "  - {id: hello, on: tool_call, do: [{notify: hi}], continue: true}\n"
    later = notify.replace("hello", "bye").replace("continue: true", "group: other")
    decision = decide(tmp_path, notify + GUARD + later, BudgetLimits(time_ms=0))
    (reason,) = blocks(decision)
    assert "rule 'no-force-push' (" in reason and "policy.yaml:" in reason
    assert "evaluation budget ran out" in reason and "shadow: true" in reason
    assert [e.action for e in decision.effects] == ["block"] and decision.fired == ("no-force-push",)
    guard, skipped = sorted(decision.errors, key=lambda d: d.rule_id or "", reverse=True)
    assert guard.code == "RT404" and "failed closed" in guard.message
    assert skipped.code == "RT404" and "2 rule(s) that cannot block were skipped" in skipped.message
    assert "'hello', 'bye'" in skipped.message


def test_a_block_rule_whose_condition_fails_blocks(tmp_path: Path) -> None:
    rules = GUARD.replace("tool.name == 'bash' and", "tool.input.command + 1 > 0 and")
    decision = decide(tmp_path, rules)
    (reason,) = blocks(decision)
    assert "could not be checked" in reason and "its when failed" in reason
    (error,) = decision.errors
    assert error.code == "RT401" and error.rule_id == "no-force-push"
    assert "failed closed and blocks" in error.message


def test_a_block_rule_whose_reason_cannot_be_rendered_still_blocks(tmp_path: Path) -> None:
    rules = GUARD.replace('"no force pushes"', '"{tool.input.command + 1}"')
    (reason,) = blocks(decide(tmp_path, rules))
    assert "its block action failed" in reason


def test_a_shadow_guard_never_blocks_even_failed(tmp_path: Path) -> None:
    failing = GUARD.replace("tool.name == 'bash' and", "tool.input.command + 1 > 0 and")
    failing += "    shadow: true\n"
    for decision in (decide(tmp_path, failing), decide(tmp_path, GUARD + "    shadow: true\n",
                                                         BudgetLimits(time_ms=0))):
        assert not blocks(decision) and not decision.effects


def test_a_failed_cancel_guard_cancels(tmp_path: Path) -> None:
    rules = "  - {id: keep, on: compaction_before, when: \"usage.tokens + 'x' == 1\", do: [{cancel: {}}]}\n"
    decision = decide(tmp_path, rules, event_type="compaction_before")
    assert [(e.action, e.params) for e in decision.effects] == [("cancel", {})]


def test_a_rule_that_cannot_block_fails_open(tmp_path: Path) -> None:
    rules = "  - {id: n, on: tool_call, when: \"tool.input.command + 1 > 0\", do: [{notify: x}]}\n"
    decision = decide(tmp_path, rules)
    assert not decision.effects and decision.errors[0].code == "RT401"


def test_the_trace_shows_the_failed_rule_and_why(tmp_path: Path) -> None:
    tracer = BufferTracer()
    decide(tmp_path, SLOW + GUARD, BudgetLimits(time_ms=0), tracer=tracer)
    lines = render_trace(tracer.events)
    assert any("rule no-force-push: failed closed, it can block" in line and "policy.yaml:" in line
               for line in lines)
    assert any("rule slow: skipped, the event's evaluation budget ran out" in line for line in lines)


def test_router_explain_shows_a_guard_that_failed_closed(tmp_path: Path) -> None:
    policy = tmp_path / "router.yaml"
    policy.write_text("version: 1\nrules:\n" + GUARD.replace("tool.name == 'bash' and",
                                                             "tool.input.command + 1 > 0 and"))
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps({"type": "tool_call", "tool": PUSH}))
    done = subprocess.run([str(ROUTER), "explain", "--policy", str(policy), "--event", str(event_file)],
                          capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert "Traceback" not in done.stderr and done.returncode != 3, done.stderr
    assert "rule no-force-push: failed closed, it can block: its when failed" in done.stdout
    assert "could not be checked" in done.stdout


def test_a_comprehension_past_simpleevals_own_limit_fails_the_rule_not_the_engine(tmp_path: Path) -> None:
    rules = textwrap.dedent("""\
      - id: big
        on: tool_call
        when: "length([[a for b in range(10000)] for a in range(100)]) > 0"
        do: [{block: big}]
    """)
    decision = decide(tmp_path, textwrap.indent(rules, "  "), tracer=BufferTracer())
    assert decision.errors[0].code == "RT403" and "could not be checked" in blocks(decision)[0]
