"""router.engine.decision_memo: whole decisions remembered by everything an event type's rules can
read, and decisions taken from the memo equal to fresh evaluations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.compile.ir import CompiledPolicy
from router.diagnostics.code_names import BUDGET_EXCEEDED
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.engine.decision import Decision, SignalOutcome
from router.engine.decision_memo import DecisionMemo
from router.engine.interpreter import evaluate
from tests.engine.test_signal_memo import _JSON, _corpus_events, _pack_policy
from tests.helpers import compile_ok, event, texts

POLICY = """
signals:
  where: {expr: "session.cwd + '/' + (vars.suffix or '')"}
  ext: {complete: {prompt: "{tool.name}"}, fallback: "model.id"}
vars:
  suffix: x
rules:
  - id: show
    on: input
    let: {n: "state.n or 0"}
    match: "source == 'interactive'"
    when: "text != 'quiet'"
    do: [{notify: "{signals.where} {n}"}, {set: {seen: "{text}"}}]
  - id: ask
    on: tool_call
    do: [{notify: "{signals.ext}"}]
"""


def _finish(policy: CompiledPolicy, doc: Mapping[str, Any],
            state: Mapping[str, Any] | None = None) -> Decision:
    """A fresh decision, external signals failing (their fallback applies), as the replay does
    for an event without a record."""
    outcomes: dict[str, SignalOutcome] = {}
    while (decision := evaluate(policy, doc, state=state, outcomes=outcomes)).pending:
        outcomes[decision.pending.name] = SignalOutcome(error="not recorded")
    return decision


def _memoized(memo: DecisionMemo, policy: CompiledPolicy, doc: Mapping[str, Any],
              state: Mapping[str, Any] | None = None) -> Decision:
    """What the replay runner does: the remembered decision of the event's key, else a fresh one kept."""
    key = memo.key(doc, state or {})
    entry = memo.get(key, state or {}) if key is not None else None
    if entry is not None:
        return entry.decision
    decision = _finish(policy, doc, state)
    if key is not None:
        memo.remember(key, decision, ())
    return decision


def _input(text: str, cwd: str = "/p", **fields: Any) -> dict[str, Any]:
    fields.setdefault("source", "interactive")
    return event("input", text=text, session={"cwd": cwd, "id": fields.pop("sid", "s1")}, **fields)


def test_the_plan_is_what_the_rules_and_their_signals_read(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = DecisionMemo(policy)
    plan = memo.plan("input")
    assert plan is not None
    # match, when, the action templates, the signal's expr; state and vars are keyed apart
    assert plan.paths == (("session", "cwd"), ("source",), ("text",))
    asked = memo.plan("tool_call")
    assert asked is not None and asked.paths == (("model", "id"), ("tool", "name"))  # fallback, request


def test_an_event_differing_only_in_what_no_rule_reads_has_the_same_key(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = DecisionMemo(policy)
    first = memo.key(_input("a"), {})
    assert first is not None
    assert memo.key(_input("a", sid="other"), {}) == first
    for other in (_input("b"), _input("a", cwd="/q"), _input("a", source="rpc")):
        assert memo.key(other, {}) != first
    assert memo.key(_input("a"), {"n": 1}) != first  # the state paths the rules read
    assert memo.key(_input("a"), {"other": 1}) == first  # and only those
    assert memo.key(_input("a"), {"n": 1}) != memo.key(_input("a"), {"n": 1.0})  # type-exact
    assert memo.key(_input("a"), {"n": True}) != memo.key(_input("a"), {"n": 1})
    assert memo.key(_input("a"), {"n": [1]}) != memo.key(_input("a"), {"n": (1,)})
    absent, null = ({**_input("a"), "session": session} for session in ({}, {"cwd": None}))
    assert memo.key(absent, {}) != memo.key(null, {})  # a missing field is not a null one
    assert memo.key({**_input("a"), "session": "/p"}, {}) != first  # not an object on the way


def test_decisions_come_from_the_memo_and_equal_fresh_ones(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = DecisionMemo(policy)
    for doc, state in [(_input("a"), {}), (_input("a", sid="s2"), {}), (_input("b"), {}),
                       (_input("a"), {"n": 3}), (_input("quiet"), {})]:
        assert _memoized(memo, policy, doc, state) == _finish(policy, doc, state)
    assert memo.hits == 1 and memo.misses == 4
    assert texts(_memoized(memo, policy, _input("a"), {"n": 3})) == ["/p/x 3"]
    # a state path no rule reads: the same key; the remembered effects applied to this state
    carried = _memoized(memo, policy, _input("a"), {"n": 3, "other": {"k": 1}})
    assert memo.hits == 3
    assert carried == _finish(policy, _input("a"), {"n": 3, "other": {"k": 1}})
    assert carried.state == {"n": 3, "other": {"k": 1}, "seen": "a"} and carried.state_changed


def test_what_the_analysis_cannot_see_through_is_never_memoized(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
        signals:
          dynamic: {expr: "[signals[k] for k in ['plain']]"}
          plain: {expr: "1"}
        rules:
          - {id: a, on: input, do: [{notify: "{signals.dynamic}"}]}
          - {id: b, on: context, match: "length(keys(@)) > `0`", do: [{notify: hi}]}
          - {id: c, on: tool_call, when: "[state for state in [1]]", do: [{notify: hi}]}
          - {id: d, on: turn_end, do: [{notify: "{[x for x in [1]]}"}]}
        """)
    memo = DecisionMemo(policy)
    assert memo.plan("input") is None  # signals read by a computed name
    assert memo.plan("context") is None  # JMESPath reading the whole root
    assert memo.plan("tool_call") is None  # a comprehension binding a scope root
    plan = memo.plan("turn_end")
    assert plan is not None and plan.bound == {"x"}
    assert memo.key(event("turn_end"), {}) is not None
    assert memo.key({**event("turn_end"), "x": 1}, {}) is None  # a field the comprehension shadows
    assert memo.key(_input("a"), {}) is None
    assert memo.key(event("turn_end"), {"o": object()}) is not None  # turn_end reads no state


def test_a_value_that_is_not_builtin_data_is_not_keyed(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = DecisionMemo(policy)
    assert memo.key({**_input("a"), "text": object()}, {}) is None
    assert memo.key(_input("a"), {"n": object()}) is None
    assert memo.key(_input("a"), {"other": object()}) is not None  # a state path no rule reads


def test_a_decision_whose_budget_ran_out_or_that_is_pending_is_not_kept(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = DecisionMemo(policy)
    key = memo.key(_input("a"), {})
    spent = Decision("input", errors=(Diagnostic(BUDGET_EXCEEDED, "ran out", None, Severity.WARNING),))
    memo.remember(key, spent, ())
    assert memo.get(key, {}) is None
    pending = evaluate(policy, event("tool_call", tool={"name": "bash"}))
    assert pending.pending is not None
    memo.remember(key, pending, ())
    assert memo.get(key, {}) is None


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> tuple[CompiledPolicy, list[dict[str, Any]]]:
    policy = _pack_policy(tmp_path_factory.mktemp("packs"))
    return policy, _corpus_events(policy)


_STATES = st.sampled_from([{}, {"cuttle": {"mode": "cost"}}, {"n": 1}, {"n": 1.0},
                           {"ds": {"band": "react"}}]) \
    | st.dictionaries(st.sampled_from(["cu", "ds", "n", "dr"]), _JSON, max_size=2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_memoized_decisions_equal_fresh_ones_for_the_packs(
        packs: tuple[CompiledPolicy, list[dict[str, Any]]], data: st.DataObject) -> None:
    """Corpus events with fields (and the state) changed at random, decided one after another with
    one memo that first saw the unchanged event: every decision equals a fresh evaluation's."""
    policy, events = packs
    memo = DecisionMemo(policy)
    for _ in range(data.draw(st.integers(1, 4))):
        base = events[data.draw(st.integers(0, len(events) - 1))]
        state = data.draw(_STATES)
        _memoized(memo, policy, base, state)  # what the memo holds: the changed event may hit it
        doc = json.loads(json.dumps(base))
        fields = sorted(set(doc) - {"type", "env"})
        for name in data.draw(st.lists(st.sampled_from(fields), max_size=3)):
            if data.draw(st.booleans()) and isinstance(doc[name], dict) and doc[name]:
                inner = data.draw(st.sampled_from(sorted(doc[name])))  # one field of an object
                doc[name][inner] = data.draw(_JSON)
            else:
                doc[name] = data.draw(_JSON)
        if data.draw(st.booleans()):
            state = data.draw(_STATES)
        assert _memoized(memo, policy, doc, state) == _finish(policy, doc, state)


def test_the_corpus_decided_again_comes_from_the_memo(
        packs: tuple[CompiledPolicy, list[dict[str, Any]]]) -> None:
    policy, events = packs
    memo = DecisionMemo(policy)
    first = [_memoized(memo, policy, doc) for doc in events]
    computed = memo.misses
    assert computed and memo.unkeyed == 0
    again = [_memoized(memo, policy, doc) for doc in events]
    assert again == first == [_finish(policy, doc) for doc in events]
    assert memo.misses == computed and memo.hits >= len(events)
