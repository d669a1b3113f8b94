"""router.replay.failed_compactions: failures Pi's session file does not record, from the log."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from router.replay.failed_compactions import FAILED, with_failed_compactions
from router.replay.log_reader import Record
from router.replay.rebuild import rebuild
from router.replay.session_file import parse_session
from tests.replay_sessions import SessionWriter


def session_with_compaction() -> str:
    return (SessionWriter().start("fake/local").user("one").assistant("fake/local").compaction()
            .user("two").assistant("fake/local").text())  # the compaction at 10:00:07, then 08 and 09


def rec(event: str, time: str, *, compact: bool = False) -> Record:
    return Record("s1", event, 0, (), ({"action": "compact", "params": {}},) if compact else (), {}, None,
                  time=time)


def failed(records: list[Record]) -> list[dict[str, object]]:
    session = parse_session(session_with_compaction(), "s.jsonl")
    steps = with_failed_compactions(rebuild(session), session, records)
    return [s.payload for s in steps if s.type == FAILED]


def test_a_compact_action_the_session_has_a_compaction_for_did_not_fail() -> None:
    assert failed([rec("agent_settled", "2026-01-01T10:00:06.500Z", compact=True),
                   rec("input", "2026-01-01T10:00:08.500Z")]) == []


def test_a_compact_action_without_a_compaction_before_the_next_prompt_failed() -> None:
    # asked after the compaction entry (10:00:07), and the next prompt came with none
    found = failed([rec("agent_settled", "2026-01-01T10:00:07.500Z", compact=True),
                    rec("input", "2026-01-01T10:00:08.500Z")])
    assert found == [{"reason": "manual", "byRouter": True, "errorMessage": "", "aborted": False}]


def test_a_failure_record_is_one_failure_not_two() -> None:
    found = failed([rec("agent_settled", "2026-01-01T10:00:07.500Z", compact=True),
                    rec(FAILED, "2026-01-01T10:00:07.700Z"), rec("input", "2026-01-01T10:00:08.500Z")])
    assert [f["byRouter"] for f in found] == [True]
    assert [f["reason"] for f in failed([rec(FAILED, "2026-01-01T10:00:03.000Z")])] == ["threshold"]


TIMES = st.one_of(st.none(), st.text(max_size=30),
                  st.datetimes().map(lambda d: d.isoformat() + "Z"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["input", FAILED, "agent_settled", "compaction_done"]), TIMES,
                          st.booleans()), max_size=8))
def test_any_records_give_steps_in_order_and_never_fail(items: list[tuple[str, str | None, bool]]) -> None:
    session = parse_session(session_with_compaction(), "s.jsonl")
    steps = rebuild(session)
    out = with_failed_compactions(steps, session, [Record("s1", e, 0, (), (
        {"action": "compact"},) if c else (), {}, None, time=t) for e, t, c in items])
    assert [s for s in out if s.type != FAILED] == steps
    assert [s.line for s in out] == sorted(s.line for s in out)
