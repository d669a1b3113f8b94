"""Pi's session files as `router replay` reads them: every bad line is a located problem."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from router.load.paths import log_order as rotation_order
from router.replay.log_reader import parse_record, read_logs
from router.replay.rebuild import rebuild
from router.replay.session_file import parse_session, read_session, session_paths
from tests.replay_sessions import SessionWriter, record, write_log

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10)
ENTRY_TYPES = st.sampled_from(["message", "model_change", "thinking_level_change", "compaction", "custom",
                               "session", "label", "usage", "", "x"])


def test_a_real_shape_parses_into_header_and_entries() -> None:
    writer = SessionWriter(id="abc").start().user("hi").assistant("fake/local")
    session = parse_session(writer.text(), "s.jsonl")
    assert (session.id, session.cwd, session.problems) == ("abc", "/home/user/project", [])
    assert [e.type for e in session.entries] == ["model_change", "thinking_level_change",
                                                 "message", "message", "message"]
    assert session.entries[0].line == 2


def test_bad_lines_are_named_by_file_and_line_and_the_rest_is_kept() -> None:
    text = SessionWriter(id="abc").start().text() + "{not json\n[1, 2]\n{\"no\": \"type\"}\n" \
        + '{"type": "message", "message": "text"}\n' + json.dumps({"type": "custom", "id": "z"}) + "\n"
    session = parse_session(text, "dir/s.jsonl")
    problems = [str(p) for p in session.problems]
    assert problems == [
        "dir/s.jsonl:5: not JSON (Expecting property name enclosed in double quotes); skipped",
        "dir/s.jsonl:6: a JSON array, not an entry object; skipped",
        "dir/s.jsonl:7: entry without a `type`; skipped",
        "dir/s.jsonl:8: message entry without a `message` object; skipped",
    ]
    assert session.entries[-1].line == 9


def test_a_file_without_header_takes_its_id_from_the_name(tmp_path: Path) -> None:
    path = tmp_path / "2026-01-01T10-00-00-000Z_0190abcd.jsonl"
    path.write_text(json.dumps({"type": "model_change", "id": "a", "provider": "p", "modelId": "m"}) + "\n")
    session = read_session(path)
    assert session.id == "0190abcd"
    assert [p.line for p in session.problems] == [1]


def test_an_unreadable_path_is_one_problem(tmp_path: Path) -> None:
    session = read_session(tmp_path / "missing.jsonl")
    assert session.entries == [] and "cannot read" in session.problems[0].message


def test_directories_are_searched_recursively_without_the_decision_logs(tmp_path: Path) -> None:
    SessionWriter(id="a").write(tmp_path / "--home-user-p--")
    SessionWriter(id="b").write(tmp_path / "other")
    write_log(tmp_path / "router" / "log" / "decisions.jsonl", [])
    assert [p.parent.name for p in session_paths([tmp_path])] == ["--home-user-p--", "other"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40), JSON.map(json.dumps),
                          st.builds(lambda t, rest: json.dumps({"type": t, **rest}), ENTRY_TYPES,
                                    st.dictionaries(st.sampled_from(["message", "provider", "modelId",
                                                                     "thinkingLevel", "tokensBefore",
                                                                     "firstKeptEntryId", "id", "timestamp"]),
                                                    JSON, max_size=4))), max_size=12))
def test_the_parser_and_the_rebuild_never_fail_on_any_lines(lines: list[str]) -> None:
    session = parse_session("\n".join(lines), "f.jsonl")
    assert all(p.path == "f.jsonl" and p.line >= 1 for p in session.problems)
    steps = rebuild(session)  # whatever the entries hold, the rebuild makes steps of them
    events = [s for s in steps if not s.type.startswith("@")]  # the session's starting model comes first
    assert events[0].type == "session_start" and events[-1].type == "session_shutdown"
    assert all(s.payload.get("initial") for s in steps[:steps.index(events[0])])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_raises(text: str) -> None:
    parse_session(text, "f.jsonl")


@given(JSON)
def test_any_json_value_is_a_record_or_none(value: object) -> None:
    found = parse_record(value)
    assert found is None or isinstance(found.seq, int)


def test_decision_logs_are_read_oldest_first_and_bad_lines_counted(tmp_path: Path) -> None:
    log = tmp_path / "log"
    write_log(log / "decisions.2.jsonl", [record("s", "input", 0, fired=("old",))])
    write_log(log / "decisions.1.jsonl", [record("s", "input", 0, fired=("newer",))], extra_lines=("oops",))
    write_log(log / "decisions.jsonl", [record("s", "input", 1, fired=("live",)), {"session": "s"}])
    paths = sorted(log.iterdir())
    assert [p.name for p in rotation_order(paths)] == ["decisions.2.jsonl", "decisions.1.jsonl",
                                                       "decisions.jsonl"]
    read = read_logs(paths)
    first = read.get("s", "input", 0)
    assert first is not None and first.rules == ("newer",)
    assert read.skipped == 2
    assert [str(p).split("/")[-1] for p in read.problems] == [
        "decisions.1.jsonl:2: not JSON; skipped",
        "decisions.jsonl:2: not a decision record (needs session, event, seq); skipped"]


def test_the_progress_bar_draws_only_on_a_terminal() -> None:
    import io

    from router.replay.progress import Progress

    quiet = io.StringIO()
    bar = Progress(3, "replaying", stream=quiet)
    bar.advance(3)
    bar.close()
    assert quiet.getvalue() == ""  # a StringIO is no terminal
    shown = io.StringIO()
    forced = Progress(2, "replaying", stream=shown, force=True)
    forced.advance(2)
    assert "replaying [" in shown.getvalue() and "2/2" in shown.getvalue()
    forced.close()
    assert shown.getvalue().endswith("\r")
