"""router.engine.interpreter: ordered first-match rules, shadows, state, errors, purity and tracing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.compile.ir import CompiledPolicy
from router.engine.interpreter import evaluate
from router.engine.trace import BufferTracer
from tests.helpers import compile_ok, decide, texts

ORDER = """
rules:
  - id: first
    on: input
    when: "text == 'go'"
    do: [{notify: first}]
  - id: second
    on: input
    do: [{notify: second}]
  - id: other-group
    on: input
    group: side
    do: [{notify: side}]
  - id: after-decided
    on: input
    group: side
    do: [{notify: never}]
"""


def test_first_match_decides_its_group(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, ORDER)
    decision = decide(policy, {"type": "input", "text": "go"})
    assert decision.fired == ("first", "other-group")
    assert texts(decision) == ["first", "side"]


def test_non_matching_rule_does_not_stop_group(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, ORDER)
    assert decide(policy, {"type": "input", "text": "stay"}).fired == ("second", "other-group")


def test_rules_for_other_events_not_evaluated(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, ORDER)
    decision = decide(policy, {"type": "turn_end"})
    assert decision.fired == () and decision.effects == () and decision.event_type == "turn_end"


def test_continue_lets_later_rules_of_the_group_run(tmp_path: Path) -> None:
    policy = compile_ok(
        tmp_path, ORDER.replace("do: [{notify: first}]", "do: [{notify: first}]\n    continue: true")
    )
    assert texts(decide(policy, {"type": "input", "text": "go"})) == ["first", "second", "side"]


SHADOW = """
rules:
  - id: try-it
    on: input
    shadow: true
    do: [{notify: shadowed}, {set: {tried: true}}]
  - id: reads-state
    on: input
    when: "state.tried"
    do: [{notify: saw-shadow-write}]
  - id: real
    on: input
    do: [{notify: applied}]
"""


def test_shadow_rule_recorded_never_applied_and_does_not_stop_group(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, SHADOW)
    decision = decide(policy, {"type": "input"})
    assert [e.action for e in decision.shadowed] == ["notify", "set"]
    assert decision.shadowed[0].params["text"] == "shadowed" and decision.shadowed[1].params == {
        "tried": True
    }
    assert all(e.shadow and e.rule_id == "try-it" for e in decision.shadowed)
    assert texts(decision) == ["applied"]
    assert decision.state == {} and not decision.state_changed


STATE = """
rules:
  - id: write
    on: input
    continue: true
    do:
      - set: {band: react, turns: "{state.turns + 1}", ds.mode: spec, ds.depth: 2}
  - id: read
    on: input
    when: "state.band == 'react' and state.ds.mode == 'spec'"
    continue: true
    do: [{notify: "turns={state.turns}"}]
  - id: drop
    on: input
    do: [{unset: [old, ds.depth, not.there]}]
"""


def test_state_writes_visible_to_later_rules_of_same_event(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, STATE)
    decision = decide(policy, {"type": "input"}, state={"turns": 4, "old": 1})
    assert texts(decision) == ["turns=5"]
    assert decision.state == {"band": "react", "turns": 5, "ds": {"mode": "spec"}}
    assert decision.state_changed


def test_state_input_not_mutated(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, STATE)
    state = {"turns": 1, "old": 1, "ds": {"depth": 9, "keep": True}}
    snapshot = copy.deepcopy(state)
    decision = decide(policy, {"type": "input"}, state=state)
    assert state == snapshot
    assert decision.state["ds"] == {"mode": "spec", "keep": True}


def test_same_inputs_same_decision(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, STATE)
    runs = [decide(policy, {"type": "input"}, state={"turns": 1}) for _ in range(3)]
    assert all(r.effects == runs[0].effects and r.state == runs[0].state for r in runs)


ERRORS = """
rules:
  - id: broken-when
    on: input
    when: "text + 1 > 2"
    do: [{notify: never}]
  - id: broken-match
    on: input
    match: "length(images) > `0`"
    do: [{notify: never}]
  - id: broken-template
    on: input
    do:
      - notify: "{text / 2}"
      - notify: ok
"""


def test_runtime_errors_rt401_rule_does_not_match(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, ERRORS)
    decision = decide(policy, {"type": "input", "text": "x", "images": 2})
    assert decision.fired == ("broken-template",)
    assert texts(decision) == ["ok"]
    assert [(e.code, e.rule_id) for e in decision.errors] == [
        ("RT401", "broken-when"),
        ("RT401", "broken-match"),
        ("RT401", "broken-template"),
    ]
    assert decision.errors[0].span.line == 4 and decision.errors[1].span.line == 8
    assert "skipped" in decision.errors[2].message


def test_evaluation_errors_with_tracer_are_the_same(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, ERRORS)
    tracer = BufferTracer()
    traced = decide(policy, {"type": "input", "text": "x"}, tracer=tracer)
    plain = decide(policy, {"type": "input", "text": "x"})
    assert [e.message for e in traced.errors] == [e.message for e in plain.errors]
    assert sum(1 for e in tracer.events if e.kind == "error") == 3


def test_helper_crash_inside_condition_recorded_not_raised(tmp_path: Path) -> None:
    policy = compile_ok(
        tmp_path,
        "rules:\n  - id: a\n    on: input\n    when: \"map_score(0.5, state.t, 'x')\"\n"
        "  - id: b\n    on: input\n    do: [{notify: b}]\n",
    )
    decision = decide(policy, {"type": "input"}, state={"t": "not a table"})
    assert decision.fired == ("b",) and decision.errors[0].code == "RT402"


def test_helper_attribute_error_recorded_not_raised(tmp_path: Path) -> None:
    policy = compile_ok(
        tmp_path,
        "rules:\n  - id: a\n    on: input\n    when: \"map_score(0.5, state.t, 'x')\"\n"
        "  - id: b\n    on: input\n    do: [{notify: b}]\n",
    )
    decision = decide(policy, {"type": "input"}, state={"t": [1, 2]})
    assert decision.fired == ("b",) and decision.errors[0].code == "RT402"  # the helper's own code


def test_tracer_kinds_and_first_miss(tmp_path: Path) -> None:
    policy = compile_ok(
        tmp_path,
        """
        rules:
          - id: miss
            on: input
            when: "text != null and length(text) > 3 and text != 'zzz'"
            do: [{notify: x}]
          - id: hit
            on: input
            do: [{notify: hit}]
          - id: skipped
            on: input
            do: [{notify: never}]
        """,
    )
    tracer = BufferTracer()
    decide(policy, {"type": "input", "text": "ab"}, tracer=tracer)
    kinds = [(e.kind, e.rule_id) for e in tracer.events]
    assert kinds == [
        ("rule", "miss"),
        ("cond", "miss"),
        ("miss", "miss"),
        ("rule", "hit"),
        ("fire", "hit"),
        ("action", "hit"),
        ("skip", "skipped"),
    ]
    miss = tracer.events[2]
    assert miss.message.startswith("first miss: ") and miss.span.line == 4


def test_tracer_first_miss_quotes_the_false_part(tmp_path: Path) -> None:
    policy = compile_ok(
        tmp_path, 'rules:\n  - id: m\n    on: input\n    when: "text != null and length(text) > 3"\n'
    )
    tracer = BufferTracer()
    decide(policy, {"type": "input", "text": "ab"}, tracer=tracer)
    (miss,) = [e for e in tracer.events if e.kind == "miss"]
    assert miss.message.startswith("first miss: length(text) > 3  [")


def test_tracer_off_and_on_same_decision(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, STATE)
    plain = decide(policy, {"type": "input"}, state={"turns": 2})
    traced = decide(policy, {"type": "input"}, state={"turns": 2}, tracer=BufferTracer())
    assert plain == traced


ROBUST = """
vars:
  table: [{score: 0.3, level: low}, {score: 0.7, level: high}]
  react: [build, create, 写一个]
signals:
  size: {expr: "utf16_len(text) if text != null else 0", fallback: "0"}
rules:
  - id: keywords
    on: [input, before_agent_start]
    when: "count_keywords(lower(text), vars.react) > 0 and signals.size < 500"
    continue: true
    do: [{set: {band: react, size: "{signals.size}"}}, {notify: "band {state.band}"}]
  - id: usage
    on: turn_end
    match: "usage.percent >= `90` && !state.warned"
    do: [{notify: "at {usage.percent:.0f}%"}, {set: {warned: true}}]
  - id: tool
    on: tool_call
    when: "tool.name in ['bash', 'write'] and regex(to_json(tool.input), 'rm -rf')"
    do: [{block: "no"}]
  - id: level
    on: [input, turn_end, tool_call]
    when: "map_score(clamp(to_number(state.p) or 0, 0, 1), vars.table, 'max') != 'low'"
    do: [{log: "level {thinking_level} {model.id} {tools.active[0]}"}]
"""

json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-100, 100), st.floats(allow_nan=True), st.text(max_size=20)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
events = st.fixed_dictionaries(
    {"type": st.sampled_from(["input", "before_agent_start", "turn_end", "tool_call", "context"])},
    optional={
        key: json_values
        for key in ("text", "usage", "tool", "model", "tools", "thinking_level", "env", "images")
    },
)


@pytest.fixture(scope="module")
def robust_policy(tmp_path_factory: pytest.TempPathFactory) -> CompiledPolicy:
    """Compiled once for all examples (module-scoped: Hypothesis runs many)."""
    return compile_ok(tmp_path_factory.mktemp("robust"), ROBUST)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=events, state=st.dictionaries(st.sampled_from(["band", "warned", "p"]), json_values, max_size=3))
def test_evaluate_never_raises_and_is_deterministic(
    robust_policy: CompiledPolicy, raw: dict[str, Any], state: dict[str, Any]
) -> None:
    policy = robust_policy
    if not isinstance(raw.get("env"), dict) or not all(isinstance(v, str) for v in raw["env"].values()):
        raw.pop("env", None)
    before = copy.deepcopy(state)
    first = evaluate(policy, raw, state=state)
    second = evaluate(policy, raw, state=state, tracer=BufferTracer())
    assert state == before
    assert first.fired == second.fired and first.state == second.state
    assert [e.message for e in first.errors] == [e.message for e in second.errors]
    assert [e.code for e in first.errors] == [e.code for e in second.errors]
    assert all(e.code in ("RT401", "RT402", "RT403") for e in first.errors)
