"""router.engine.rule_index: which rules an event can skip, with hostile policies that must stay data."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

from router.compile.ir import CompiledPolicy
from router.engine import rule_index
from router.engine.decision import Decision
from router.engine.interpreter import _Run, evaluate
from tests.helpers import compile_ok

HOSTILE = ["it's", 'say "hi"', "two\nlines\r\n", "`tick`", "\\", "\\'", "'); __import__('os').system('x') #",
           "{text}", "}}{{", "\u2028\u0000", "é" * 50, "x" * 5000]


def _literal(text: str) -> str:
    """A JMESPath JSON literal of `text`."""
    return "`" + json.dumps(text).replace("`", "\\`") + "`"


def _policy(tmp_path: Path, rules: list[dict[str, Any]], **extra: Any) -> CompiledPolicy:
    return compile_ok(tmp_path, json.dumps({"version": 1, **extra, "rules": rules}))


def _outcome(decision: Decision) -> Any:
    return (decision.fired, decision.effects, decision.shadowed,
            [(d.code, d.message) for d in decision.errors], decision.state)


def _both(policy: CompiledPolicy, event: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Decision:
    """The decision with the index; asserts it equals the one without."""
    monkeypatch.setattr(rule_index, "enabled", False)
    reference = evaluate(policy, event)
    monkeypatch.setattr(rule_index, "enabled", True)
    indexed = evaluate(policy, event)
    assert _outcome(indexed) == _outcome(reference)
    return indexed


def _candidates(policy: CompiledPolicy, event: dict[str, Any]) -> list[str]:
    index = rule_index.index_for(policy, event["type"])
    assert index is not None
    run = _Run(policy, event, {}, {}, {}, None, policy)
    return [r.id for r in index.candidates(run.scope, lambda: run.sandbox)]


def _tool(name: Any, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_call", "tool": {"name": name, "input": tool_input}}


def test_equalities_on_one_field_leave_out_every_other_rule(tmp_path: Path) -> None:
    rules = [{"id": f"r{i}", "on": "tool_call", "match": f"tool.name == 't{i}'", "do": [{"log": "x"}]}
             for i in range(50)]
    policy = _policy(tmp_path, rules)
    assert _candidates(policy, _tool("t7")) == ["r7"]
    assert _candidates(policy, _tool("other")) == []
    assert _candidates(policy, _tool(None)) == []


def test_order_groups_continue_and_shadow_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = [{"id": f"r{i}", "on": "tool_call", "group": "g" if i % 2 else "default",
              "match": f"tool.name == '{'bash' if i % 3 else 'read'}'", "continue": i % 4 == 1,
              "shadow": i % 5 == 2, "do": [{"notify": f"r{i}"}]} for i in range(30)]
    policy = _policy(tmp_path, rules)
    for name in ("bash", "read", "none"):
        _both(policy, _tool(name), monkeypatch)
    fired = _both(policy, _tool("bash"), monkeypatch).fired
    assert fired[:3] == ("r1", "r2", "r4")  # r1 continues, r2 is a shadow, r4 decides `default`


def test_a_condition_that_fails_is_still_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = [{"id": f"r{i}", "on": "tool_call", "when": f"tool.input.x.y == 'a' and tool.name == 't{i}'",
              "do": [{"log": "x"}]} for i in range(10)]
    policy = _policy(tmp_path, rules)
    decision = _both(policy, _tool("t1", x="a string has no fields"), monkeypatch)
    assert len(decision.errors) == 10 and {d.code for d in decision.errors} == {"RT401"}
    assert _candidates(policy, _tool("t1", x={"y": "b"})) == []


def test_keyword_lists_are_combined_without_changing_matches(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    words = [["fix"], ["Crash", "bug"], ["ß"], ["a.b"], ["(x"], ["İ"]]
    rules = [{"id": f"r{i}", "on": "tool_call",
              "when": f"count_keywords(tool.input.command, {json.dumps(w)}) > 0", "do": [{"log": "x"}]}
             for i, w in enumerate(words * 2)]
    policy = _policy(tmp_path, rules)
    for command in ["no match", "FIX the CRASH", "SS", "aXb", "a.b (x", "i̇", "İ", None, 3, ["fix"]]:
        _both(policy, _tool("bash", command=command), monkeypatch)
    # `re`'s case folding, as count_keywords has it: 'İ' matches the 'i' of "fix"
    assert _candidates(policy, _tool("bash", command="please fix")) == ["r0", "r5", "r6", "r11"]
    assert _candidates(policy, _tool("bash", command="no match")) == []


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_literals_are_compared_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               text: str) -> None:
    literal = _literal(text)
    rules = [{"id": f"r{i}", "on": "tool_call", "match": f"tool.name == {literal} && tool.input.i == `{i}`",
              "when": f"count_keywords(tool.input.command, [{text!r}]) > 0 "
                      f"and tool.input.command != {text!r}",
              "do": [{"notify": "hit"}]} for i in range(10)]
    policy = _policy(tmp_path, rules)
    for name, command in [(text, text + "!"), (text, text), (text + " ", text + "!"), ("bash", "x")]:
        for i in (0, 3, 11):
            _both(policy, _tool(name, command=command, i=i), monkeypatch)
    assert _candidates(policy, _tool(text, command=text.upper() + "!", i=3)) == ["r3"]
    assert _candidates(policy, _tool(text + "\n", command=text, i=3)) == []


def test_hostile_field_names_and_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = ["it's", 'q"uote', "new\nline", "sp ace", "__class__", "a.b"]
    rules = [{"id": f"r{i}-{j}", "on": "tool_call",
              "match": f"tool.input.{json.dumps(key)} == 'v{j}'", "do": [{"log": "x"}]}
             for i, key in enumerate(keys) for j in range(3)]
    policy = _policy(tmp_path, rules)
    for key in keys:
        decision = _both(policy, _tool("bash", **{key: "v1"}), monkeypatch)
        assert decision.fired == (f"r{keys.index(key)}-1",)


def test_nothing_is_compiled_or_executed_while_indexing(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The index is data and existing closures: building and using it calls no exec/eval/compile."""
    rules = [{"id": f"r{i}", "on": "tool_call", "match": f"tool.name == {_literal(t)} && tool.input.n > `1`",
              "when": f"count_keywords(tool.input.command, [{t!r}]) > 0 and tool.input.n < 100",
              "do": [{"log": "x"}]} for i, t in enumerate(HOSTILE)]
    policy = _policy(tmp_path, rules)

    calls: list[str] = []

    def refuse(name: str) -> Any:
        return lambda *_, **__: calls.append(name)

    with monkeypatch.context() as patch:
        for name in ("exec", "eval", "compile"):
            patch.setattr(builtins, name, refuse(name))
        index = rule_index.index_for(policy, "tool_call")
        decision = evaluate(policy, _tool(HOSTILE[0], command=HOSTILE[0], n=5))
    assert calls == []
    assert index is not None and decision.fired == ("r0",)


def test_mutable_roots_are_never_atoms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`state` changes while rules run (a `set` of an earlier rule), so its tests stay in the rules."""
    rules = [{"id": "first", "on": "tool_call", "do": [{"set": {"n": "a"}}], "continue": True}]
    rules += [{"id": f"r{i}", "on": "tool_call", "match": "state.n == 'a'", "when": "state.n == 'a'",
               "continue": True, "do": [{"log": "x"}]} for i in range(10)]
    policy = _policy(tmp_path, rules)
    assert len(_both(policy, _tool("bash"), monkeypatch).fired) == 11
    assert rule_index.build_index(policy.by_event["tool_call"]) is None


def test_small_policies_have_no_index(tmp_path: Path) -> None:
    rules = [{"id": f"r{i}", "on": "tool_call", "match": f"tool.name == 't{i}'", "do": [{"log": "x"}]}
             for i in range(rule_index.MIN_RULES - 1)]
    assert rule_index.index_for(_policy(tmp_path, rules), "tool_call") is None
