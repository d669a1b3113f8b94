"""router.engine.signal_memo: expression signals remembered across events by exactly what each
reads, and evaluations with the memo giving the decisions evaluations without it give."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.compile.compiler import compile_files
from router.compile.ir import CompiledPolicy
from router.engine.decision import Decision, SignalOutcome
from router.engine.interpreter import evaluate
from router.engine.signal_memo import MISSING, SignalMemo, Unfreezable, freeze, path_key
from tests.helpers import compile_ok, event, record_calls, texts

ROOT = Path(__file__).resolve().parents[2]

POLICY = """
signals:
  cwd_name: {expr: "count_calls(session.cwd) + '/x'"}
  twice: {expr: "signals.cwd_name + signals.cwd_name"}
  by_text: {expr: "count_calls(text)"}
  ext: {complete: {prompt: hi}, fallback: "'fell back'"}
  branch: {expr: "count_calls(signals.ext) if text == 'ask' else 'no'"}
  with_state: {expr: "count_calls(state.n or 0)"}
rules:
  - id: show
    on: input
    do: [{notify: "{signals.twice} {signals.branch} {signals.with_state}"}]
"""


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """`count_calls(x) -> x`, recording every call (tests/helpers.py)."""
    return record_calls(monkeypatch)


def _input(text: str, cwd: str = "/p", **fields: Any) -> dict[str, Any]:
    return event("input", text=text, session={"cwd": cwd, "id": fields.pop("sid", "s1")}, **fields)


def _finish(policy: CompiledPolicy, doc: Mapping[str, Any], memo: SignalMemo | None,
            state: Mapping[str, Any] | None = None) -> Decision:
    """Evaluate until no signal is pending, external signals failing (their fallback applies)."""
    outcomes: dict[str, SignalOutcome] = {}
    while (decision := evaluate(policy, doc, state=state, outcomes=outcomes, signal_memo=memo)).pending:
        outcomes[decision.pending.name] = SignalOutcome(error="not recorded")
    return decision


def test_freeze_tells_apart_values_python_calls_equal() -> None:
    assert len({freeze(True), freeze(1), freeze(1.0)}) == 3
    assert freeze({"a": [1, "x"]}) == freeze({"a": [1, "x"]})
    assert freeze([1]) != freeze((1,))
    assert freeze({"a": 1}) != freeze([["a", 1]])
    with pytest.raises(Unfreezable):
        freeze({"a": object()})


def test_a_path_key_tells_a_missing_field_from_a_null_one_and_stops_at_a_non_object() -> None:
    assert path_key({"a": {}}, ("a", "b")) == (1, MISSING)
    assert path_key({"a": {"b": None}}, ("a", "b")) == freeze(None)
    assert path_key({"a": "text"}, ("a", "b")) == (1, freeze("text"))
    assert path_key({"a": {"b": 1, "c": 2}}, ("a", "b")) == path_key({"a": {"b": 1, "c": 3}}, ("a", "b"))


def test_the_key_is_what_the_signal_reads(tmp_path: Path, calls: list[Any]) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = SignalMemo(policy)
    cwd_name = policy.signals["cwd_name"]
    plan = memo.plan(cwd_name)
    assert plan is not None and plan.paths == (("session", "cwd"),) and not plan.reads_vars
    first = memo.static_key(plan, _input("a"), (), {})
    assert memo.static_key(plan, _input("b", sid="other"), (), {}) == first  # unrelated fields
    assert memo.static_key(plan, _input("a", cwd="/q"), (), {}) != first


def test_a_signal_is_computed_again_only_when_what_it_reads_changes(tmp_path: Path, calls: list[Any]) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = SignalMemo(policy)
    assert texts(_finish(policy, _input("a"), memo)) == ["/p/x/p/x no 0"]
    assert calls == ["/p", 0]
    assert texts(_finish(policy, _input("b", sid="s2"), memo)) == ["/p/x/p/x no 0"]
    assert calls == ["/p", 0]  # another text and session id: nothing either signal reads
    assert texts(_finish(policy, _input("b", cwd="/q"), memo)) == ["/q/x/q/x no 0"]
    assert calls == ["/p", 0, "/q"]
    assert texts(_finish(policy, _input("b"), memo, state={"n": 2})) == ["/p/x/p/x no 2"]
    assert calls == ["/p", 0, "/q", 2]


def test_the_signals_a_signal_reads_are_checked_in_the_order_it_reads_them(
        tmp_path: Path, calls: list[Any]) -> None:
    """`branch` reads the external `ext` only when the text is 'ask': with the memo, an event of
    another text never asks for it either, and one that asks gets the decision it gets without."""
    policy = compile_ok(tmp_path, POLICY)
    memo = SignalMemo(policy)
    for text in ("x", "ask", "x", "ask"):
        with_memo = evaluate(policy, _input(text), signal_memo=memo)
        assert with_memo == evaluate(policy, _input(text))
        assert (with_memo.pending is not None) == (text == "ask")
    for value in ("given", "other", "given"):
        decision = evaluate(policy, _input("ask"), signal_values={"ext": value}, signal_memo=memo)
        assert texts(decision) == [f"/p/x/p/x {value} 0"]
    assert calls.count("given") == 1 and calls.count("other") == 1  # the third: remembered


def test_signals_the_analysis_cannot_see_through_are_never_memoized(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
        signals:
          dynamic: {expr: "[signals[k] for k in ['plain']]"}
          listed: {expr: "keys(signals)"}
          shadowing: {expr: "[state for state in [1, 2]]"}
          ext: {complete: {prompt: hi}}
          plain: {expr: "1"}
          bound_name: {expr: "[x for x in [1]] + [1]"}
        rules:
          - {id: r, on: input, do: [{notify: "{signals.plain}"}]}
        """)
    memo = SignalMemo(policy)
    assert [n for n, s in policy.signals.items() if memo.plan(s) is None] == \
        ["dynamic", "listed", "shadowing", "ext"]
    plan = memo.plan(policy.signals["bound_name"])
    assert plan is not None and plan.bound == {"x"}
    assert memo.static_key(plan, {"x": 1}, (), {}) is None  # a comprehension name the scope has


def _pack_policy(tmp_path: Path) -> CompiledPolicy:
    path = tmp_path / "packs.yaml"
    path.write_text("version: 1\nuse: [decision, deepseek, cuttle]\n")
    policy, diagnostics = compile_files([("file", path)])
    assert policy is not None, diagnostics
    return policy


def _corpus_events(policy: CompiledPolicy) -> list[dict[str, Any]]:
    """The normalized events the replay of examples/sessions evaluates."""
    from router.load.prices import read_catalog
    from router.replay import runner
    from router.replay.session_file import read_session, session_paths

    seen: list[dict[str, Any]] = []
    original = runner._Session._decide

    def spy(self: Any, doc: dict[str, Any], record: Any) -> Decision:
        seen.append(doc)
        return original(self, doc, record)

    sessions = ROOT / "examples" / "sessions"
    replayer = runner.Replayer(policy, read_catalog(sessions / "models.json"), memo=False)
    runner._Session._decide = spy  # type: ignore[method-assign]
    try:
        for file in session_paths([sessions]):
            replayer.run(read_session(file))
    finally:
        runner._Session._decide = original  # type: ignore[method-assign]
    return seen


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> tuple[CompiledPolicy, list[dict[str, Any]]]:
    policy = _pack_policy(tmp_path_factory.mktemp("packs"))
    return policy, _corpus_events(policy)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False)
                     | st.sampled_from(["", "x", "/p", "deepseek", "cuttle", "on", "off", "config"]),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                         st.sampled_from(["id", "provider", "cwd", "text", "n"]), inner, max_size=3),
                     max_leaves=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_memoized_evaluation_equals_unmemoized_for_the_packs(
        packs: tuple[CompiledPolicy, list[dict[str, Any]]], data: st.DataObject) -> None:
    """Events of the corpus with fields changed at random, evaluated one after another with one
    memo, give the decisions fresh evaluations give (effects, state, signals and their errors)."""
    policy, events = packs
    memo = SignalMemo(policy)
    for _ in range(data.draw(st.integers(1, 4))):
        base = events[data.draw(st.integers(0, len(events) - 1))]
        _finish(policy, base, memo)  # what the memo holds: mostly what the changed event reads too
        doc = json.loads(json.dumps(base))
        fields = sorted(set(doc) - {"type", "env"})  # the normalizer's: the engine's input
        for name in data.draw(st.lists(st.sampled_from(fields), max_size=3)):
            doc[name] = data.draw(_JSON)
        state = data.draw(st.sampled_from([{}, {"cuttle": {"mode": "cost"}}, {"n": 1}]))
        assert _finish(policy, doc, memo, state) == _finish(policy, doc, None, state)


def test_the_corpus_evaluated_again_takes_its_signals_from_the_memo(
        packs: tuple[CompiledPolicy, list[dict[str, Any]]]) -> None:
    policy, events = packs
    memo = SignalMemo(policy)
    first = [_finish(policy, doc, memo) for doc in events]
    computed = memo.misses
    assert computed and memo.hits
    again = [_finish(policy, doc, memo) for doc in events]
    assert again == first == [_finish(policy, doc, None) for doc in events]
    assert memo.misses == computed  # nothing computed again


def test_a_declared_constant_is_frozen_once_and_keys_like_its_value(tmp_path: Path, calls: list[Any]) -> None:
    policy = compile_ok(tmp_path, POLICY)
    memo = SignalMemo(policy)
    catalog = {"fake/a": {"id": "a"}}
    memo.constant(catalog)
    seen: dict[tuple[str, ...], Any] = {}
    plan = memo.plan(policy.signals["cwd_name"])
    assert plan is not None
    declared = path_key({"models": catalog}, ("models",), memo._constants)
    assert declared == memo.intern(freeze({"fake/a": {"id": "a"}}))  # an equal value: the same key
    assert path_key({"models": {"fake/a": {"id": "b"}}}, ("models",), memo._constants) != declared
    assert memo.static_key(plan, _input("a"), (), seen) == memo.static_key(plan, _input("a"), (), {})
