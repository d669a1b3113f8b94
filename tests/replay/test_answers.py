"""router.replay.answers, and the runner answering an event's external signals as they are read instead
of evaluating again after each one: the replay of examples/sessions, with their decision logs and
without, gives the same records, turns and counts as the stepwise way (`_decide_stepwise`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from router.compile.compiler import compile_files
from router.compile.ir import CompiledPolicy
from router.engine.decision import SignalOutcome
from router.replay import runner
from router.replay.answers import NOT_RECORDED, RECORDED_FAILURE, Answers, give, known
from router.replay.log_reader import Record
from router.replay.runner import MAX_SIGNALS, Replayer, SessionRun
from router.replay.session_file import SessionFile
from router.replay.sources import gather

SESSIONS = Path(__file__).resolve().parents[2] / "examples" / "sessions"


def _policy(tmp_path: Path, text: str = "version: 1\nuse: [decision, deepseek, cuttle]\n") -> CompiledPolicy:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    policy, diagnostics = compile_files([("file", path)])
    assert policy is not None, diagnostics
    return policy


def _outcomes(run: SessionRun) -> dict[str, Any]:
    return {"turns": {n: (t.outcome(), t.fired, t.estimated_cost) for n, t in run.turns.items()},
            "records": [{k: v for k, v in r.items() if k != "latency_ms"} for r in run.records],
            "counts": (run.events, run.decisions, run.rules, run.shadow, dict(run.signals), run.errors)}


def _replay(policy: CompiledPolicy, tmp_path: Path, *, logged: bool) -> list[dict[str, Any]]:
    inputs = gather([SESSIONS], log=None if logged else tmp_path / "nolog", agent=tmp_path / "agent")
    replayer = Replayer(policy, inputs.catalog, inputs.log)
    return [_outcomes(replayer.run(session)) for session in inputs.sessions]


@pytest.mark.parametrize("logged", [True, False], ids=["decision-log", "no-log"])
def test_answering_signals_as_read_decides_as_the_stepwise_way(tmp_path: Path, logged: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _policy(tmp_path)
    answered = _replay(policy, tmp_path, logged=logged)
    monkeypatch.setattr(runner._Session, "_decide", runner._Session._decide_stepwise)
    stepwise = _replay(policy, tmp_path, logged=logged)
    assert sum(len(r["records"]) for r in stepwise) > 0
    assert sum(sum(r["counts"][4].values()) for r in stepwise) > 0  # external signals were asked for
    if logged:
        assert any(r["counts"][4].get("recorded") for r in stepwise)
    assert answered == stepwise


def _record(signals: dict[str, dict[str, Any]]) -> Record:
    return Record("s", "input", 0, (), (), signals, None)


def test_known_gives_a_recorded_value_as_a_value_and_the_rest_as_outcomes() -> None:
    record = _record({"a": {"source": "live", "value": 1},
                      "b": {"source": "live", "value": 1, "redacted": True},
                      "c": {"source": "fallback", "error": "timed out"}, "d": {"source": "cache"}})
    assert known(record, "a") == ("recorded", None)
    assert known(record, "b") == ("recorded_failure", SignalOutcome(error=RECORDED_FAILURE))
    assert known(record, "c") == ("recorded_failure", SignalOutcome(error="timed out"))
    assert known(record, "d") == ("recorded_failure", SignalOutcome(error=RECORDED_FAILURE))
    assert known(record, "e") == ("fallback", SignalOutcome(error=NOT_RECORDED))
    assert known(None, "a") == ("fallback", SignalOutcome(error=NOT_RECORDED))



def test_give_puts_a_recorded_value_in_the_values_and_anything_else_in_the_outcomes() -> None:
    record = _record({"a": {"source": "cache", "value": [1]}, "c": {"source": "fallback", "error": "no"}})
    values: dict[str, Any] = {}
    outcomes: dict[str, SignalOutcome] = {}
    assert [give(record, n, values, outcomes) for n in ("a", "c", "e")] == \
        ["recorded", "recorded_failure", "fallback"]
    assert values == {"a": [1]}
    assert outcomes == {"c": SignalOutcome(error="no"), "e": SignalOutcome(error=NOT_RECORDED)}

SIGNALS = """version: 1
signals:
  one: {complete: {prompt: one}, fallback: "'f1'"}
  two: {complete: {prompt: two}, fallback: "'f2'"}
  pure: {expr: "1 + 1"}
rules:
  - id: r
    on: input
    when: signals.two == 'f2' and signals.one == 'v1'
    do: [{log: "{signals.one}"}]
"""


def test_answers_make_each_outcome_once_in_read_order_and_none_for_a_value(tmp_path: Path) -> None:
    policy = _policy(tmp_path, SIGNALS)
    answers = Answers(policy, _record({"one": {"source": "live", "value": "v1"}}))
    assert answers.get("two") == SignalOutcome(error=NOT_RECORDED)
    assert answers.get("two") == SignalOutcome(error=NOT_RECORDED)
    assert answers.get("one") is None and answers.get("pure") is None and answers.get("nope", 5) == 5
    assert answers.take() == ["fallback"] and answers.take() == []
    assert dict(answers) == {"two": SignalOutcome(error=NOT_RECORDED)} and len(answers) == 1
    with pytest.raises(KeyError):
        answers["one"]


def test_a_signal_recorded_with_its_value_is_still_given_as_a_value(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _policy(tmp_path, SIGNALS)
    evaluations: list[str] = []
    evaluate = runner.evaluate

    def counted(*args: Any, **kwargs: Any) -> Any:
        evaluations.append("evaluate")
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(runner, "evaluate", counted)
    replayer = Replayer(policy, gather([], agent=tmp_path / "agent").catalog)
    session = runner._Session(replayer, _empty_session(), SessionRun("s", "p"))
    event = {"type": "input", "text": "hi", "source": "interactive"}
    decision = session._decide(event, _record({"one": {"source": "live", "value": "v1"}}))
    assert [p["text"] for p in decision.actions("log")] == ["v1"]
    assert dict(session.result.signals) == {"fallback": 1, "recorded": 1}  # in the order they were read
    assert len(evaluations) == 2  # again only for the value: `two` was answered where it was read
    assert session._decide(event, None).actions("log") == []
    assert len(evaluations) == 3 and session.result.signals == {"fallback": 3, "recorded": 1}


def test_more_signals_than_the_replay_allows_decide_as_the_stepwise_way(tmp_path: Path) -> None:
    names = [f"s{n}" for n in range(MAX_SIGNALS + 1)]
    text = "version: 1\nsignals:\n" + "".join(f"  {n}: {{complete: {{prompt: hi}}, fallback: \"'x'\"}}\n"
                                               for n in names)
    when = " and ".join(f"signals.{n} == 'x'" for n in names)
    text += f"rules:\n  - id: r\n    on: input\n    when: {when}"
    text += "\n    do: [{log: all}]\n"
    policy = _policy(tmp_path, text)
    replayer = Replayer(policy, gather([], agent=tmp_path / "agent").catalog)
    event = {"type": "input", "text": "hi", "source": "interactive"}
    answered = runner._Session(replayer, _empty_session(), SessionRun("s", "p"))
    stepwise = runner._Session(replayer, _empty_session(), SessionRun("s", "p"))
    assert answered._decide(event, None) == stepwise._decide_stepwise(event, None)
    assert answered.result.signals == stepwise.result.signals == {"fallback": MAX_SIGNALS}


def _empty_session() -> SessionFile:
    return SessionFile(path="p", id="s", cwd="/tmp")
