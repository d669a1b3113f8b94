"""`router log`, `router shadow-report` and `router report` through the installed console script."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from router.commands.log import SessionIds
from router.replay.log_files import SinceError, parse_since
from router.runtime.decision_log import DecisionLog, LogSettings
from router.runtime.decision_record import now_iso
from tests.pipe_lines import PipeLines

ROUTER = Path(sys.executable).parent / "router"


def record(seq: int, *, session: str = "s-aaaa1111", event: str = "input", fired: tuple[str, ...] = ("r1",),
           when: datetime | None = None, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "time": now_iso(when or datetime.now(UTC)), "session": session, "event": event,
            "seq": seq, "event_digest": "sha256:00", "policy": "sha256:11",
            "rules": [{"id": r, "origin": "router.yaml:3", "fired": True} for r in fired],
            "actions": [{"action": "notify", "params": {"text": f"n{seq}"}, "rule": r} for r in fired],
            "signals": {}, "latency_ms": 1.5, "shadow": [], "model": "fake/m1", **extra}


def write_log(directory: Path, *records: dict[str, Any]) -> DecisionLog:
    log = DecisionLog(directory, LogSettings())
    for item in records:
        assert log.write(item) is None
    return log


def router(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROUTER), *args], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def test_the_console_script_is_installed() -> None:
    assert ROUTER.is_file(), f"no console script at {ROUTER}: install with pip install -e ."


def test_log_text_shows_one_line_per_decision(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    write_log(directory, record(0), record(1, event="tool_call", fired=()))
    done = router("log", "--log", str(directory))
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert " s-aaaa11 input#0 r1: notify({\"text\":\"n0\"}) [fake/m1] 1.5ms" in first
    assert " s-aaaa11 tool_call#1 no rule fired [fake/m1] 1.5ms" in second


def test_log_reads_the_agent_dirs_log_by_default_and_rotated_files_in_order(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    log = DecisionLog(agent / "router" / "log", LogSettings(max_bytes=4096, keep=3))
    for seq in range(60):
        log.write(record(seq))
    assert (agent / "router" / "log" / "decisions.3.jsonl").exists()
    done = router("log", "--format", "json", env={"PI_CODING_AGENT_DIR": str(agent)})
    seqs = [json.loads(line)["seq"] for line in done.stdout.splitlines()]
    assert seqs == list(range(seqs[0], 60)) and len(seqs) > 30


def test_log_json_has_the_fields_and_filters_apply(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    old = datetime.now(UTC) - timedelta(hours=3)
    write_log(directory, record(0, when=old), record(1, fired=("r2",)), record(2, session="s-bbbb2222"),
              record(3, fired=(), shadow=[{"id": "try", "would": [], "agrees": True}]))
    (directory / "decisions.jsonl").open("a").write("not json\n")
    done = router("log", "--log", str(directory), "--format", "json")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["seq"] for r in rows] == [0, 1, 2, 3]
    assert set(rows[0]) >= {"time", "session", "event", "rules", "actions", "model", "latency_ms"}
    assert rows[1]["rules"] == ["r2"] and rows[1]["actions"] == [
        {"action": "notify", "params": {"text": "n1"}, "rule": "r2"}]
    assert "skipped 1 line(s) that are not JSON records" in done.stderr

    def seqs(*args: str) -> list[int]:
        out = router("log", "--log", str(directory), "--format", "json", *args).stdout
        return [json.loads(line)["seq"] for line in out.splitlines()]

    assert seqs("--session", "s-bbbb") == [2]
    assert seqs("--rule", "r2") == [1]
    assert seqs("--rule", "try") == [3]
    assert seqs("--since", "2h") == [1, 2, 3]
    assert seqs("--since", now_iso(old - timedelta(minutes=1))) == [0, 1, 2, 3]


def test_log_bad_since_is_a_usage_error_without_traceback(tmp_path: Path) -> None:
    done = router("log", "--log", str(tmp_path), "--since", "yesterday")
    assert done.returncode == 2
    assert "--since 'yesterday' is neither a duration nor a time" in done.stderr
    assert "Traceback" not in done.stderr


def test_parse_since_durations_and_times() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert parse_since("10m", now) == now - timedelta(minutes=10)
    assert parse_since("2h", now) == now - timedelta(hours=2)
    assert parse_since("1d", now) == now - timedelta(days=1)
    assert parse_since("1.5h", now) == now - timedelta(minutes=90)
    assert parse_since("2026-12-01T11:00:00Z", now) == datetime(2026, 12, 1, 11, tzinfo=UTC)
    assert parse_since("2026-12-01", now) == datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(SinceError):
        parse_since("10 parsecs", now)


class Lines(PipeLines):
    """Lines of `router log --follow`, each within a deadline."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        super().__init__(process.stdout, "router log")

    def next(self, timeout: float = 20) -> str:
        return self.line(timeout).decode()


def test_log_follow_prints_appends_across_rotations(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = DecisionLog(directory, LogSettings(max_bytes=4096, keep=5))
    log.write(record(0))
    argv = [str(ROUTER), "log", "--follow", "--format", "json", "--log", str(directory), "--rule", "r1"]
    # Ctrl-C is how a user stops it; a shell's background job inherits SIGINT ignored, so the child
    # gets the default back (Python then raises KeyboardInterrupt on it)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as process:
        try:
            lines = Lines(process)
            assert json.loads(lines.next())["seq"] == 0
            log.write(record(1, fired=("other",)))  # filtered out
            log.write(record(2))
            assert json.loads(lines.next())["seq"] == 2
            for seq in range(3, 40):  # several rotations while it follows
                log.write(record(seq))
                assert json.loads(lines.next())["seq"] == seq
            assert (directory / "decisions.2.jsonl").exists()
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()  # never left behind, whatever happened above
                raise
    assert process.returncode == 0


def test_log_follow_before_any_log_waits_for_the_first_decision(tmp_path: Path) -> None:
    directory = tmp_path / "log"  # not created yet: Pi has made no decision
    argv = [str(ROUTER), "log", "--follow", "--format", "json", "--log", str(directory)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as process:
        try:
            assert process.stderr is not None
            notice = PipeLines(process.stderr, "router log stderr").line(20).decode()
            assert notice.startswith(f"waiting for the first decision in {directory} (")
            DecisionLog(directory, LogSettings()).write(record(5))
            assert json.loads(Lines(process).next())["seq"] == 5
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
    assert process.returncode == 0


def test_log_follow_of_one_file_names_its_directory(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    DecisionLog(directory, LogSettings()).write(record(0))
    done = router("log", "--follow", "--log", str(directory / "decisions.jsonl"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: --follow reads a log directory, and {directory / 'decisions.jsonl'} is a file",
        f"  help: router log --follow {directory}"]


def test_shadow_report_counts_would_fire_and_agreement(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    agree = {"id": "try-small", "would": [{"action": "model", "params": {"ref": "a"}}], "agrees": True}
    differ = {**agree, "agrees": False}
    rules = [{"id": "live", "origin": "x:1", "fired": True},
             {"id": "try-small", "origin": "x:5", "fired": False}]
    # outcomes, not the record's `agrees`: the model the session was on is what counts
    write_log(directory, record(0, rules=rules, shadow=[differ], model="a"),
              record(1, rules=rules, shadow=[agree], model="b"),
              record(2, rules=rules, shadow=[agree], model="a"), record(3, rules=rules))
    done = router("shadow-report", "--log", str(directory), "--format", "json")
    report = json.loads(done.stdout)
    [rule] = report["rules"]
    assert report["decisions"] == 4
    assert {k: rule[k] for k in ("id", "evaluated", "would_fire", "agreed", "disagreed", "agreement")} == \
        {"id": "try-small", "evaluated": 4, "would_fire": 3, "agreed": 2, "disagreed": 1,
         "agreement": pytest.approx(2 / 3)}
    text = router("shadow-report", "--log", str(directory)).stdout.splitlines()
    assert text[0] == "shadow rules, 4 decision(s); outcomes compared (model, tools, block):"
    assert text[2].split() == ["try-small", "4", "3", "2", "1", "0", "67%"]
    empty = router("shadow-report", "--log", str(tmp_path / "none"))
    assert empty.returncode == 0 and "no shadow rule fired in 0 decision(s)" in empty.stdout


def test_report_writes_a_self_contained_page(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    write_log(directory, record(0), record(1, event="turn_end", cost=0.25), record(2, model="fake/big"))
    page = tmp_path / "report.html"
    done = router("report", "--html", str(page), "--log", str(directory))
    assert done.returncode == 0 and done.stdout.strip() == f"wrote {page} (1 turn, 3 decisions)"
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert "<script src" not in text and "<link" not in text


def test_session_ids_are_shortened_as_git_shortens_hashes(tmp_path: Path) -> None:
    # UUIDv7: sessions started in the same seconds share their first characters (a timestamp)
    first, second = "01a23305-7f3c-7abc-8def-000000000001", "01a23305-91ab-7abc-8def-000000000002"
    directory = tmp_path / "log"
    write_log(directory, record(0, session=first), record(1, session=second), record(2, session=first))
    done = router("log", "--log", str(directory))
    assert done.returncode == 0, done.stderr
    shown = [line.split()[1] for line in done.stdout.splitlines()]
    assert shown == ["01a23305-7", "01a23305-9", "01a23305-7"]
    alone = tmp_path / "alone"
    write_log(alone, record(0, session=first))
    assert router("log", "--log", str(alone)).stdout.split()[1] == "01a23305"  # 8 when nothing shares them


def test_an_ambiguous_session_prefix_says_so(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    write_log(directory, record(0, session="01a23305-7f3c"), record(1, session="01a23305-91ab"))
    done = router("log", "--log", str(directory), "--session", "01a23305")
    assert len(done.stdout.splitlines()) == 2
    assert "warning: --session 01a23305 matches 2 sessions (01a23305-7, 01a23305-9); give more of the id " \
        "to pick one" in done.stderr + done.stdout
    picked = router("log", "--log", str(directory), "--session", "01a23305-9")
    assert len(picked.stdout.splitlines()) == 1 and "warning" not in picked.stderr + picked.stdout


def test_session_ids_keep_the_widest_shared_prefix_in_any_order() -> None:
    ids = SessionIds()
    for session in ("01a23305-7f3c", "01a23399-0000", "01a23305-7f31", "01b00000-0000"):
        ids.add(session)
    assert ids.width == 13  # 01a23305-7f3c and 01a23305-7f31 share 12 characters
    many = SessionIds()
    for n in range(20_000):  # a log of many sessions: neighbours only, not every pair
        many.add(f"01a2{n:08d}")
    assert many.short("01a200019999") == "01a200019999"


def test_log_shows_and_filters_the_project_by_name_or_digest_prefix(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    shop = {"name": "shop-api", "digest": "3f2a9c1e0b7d"}
    hidden = {"name": None, "digest": "9b01d4aa5e6f"}
    write_log(directory, record(0, project=shop), record(1, session="s-bbbb2222", project=hidden),
              record(2, session="s-cccc3333"))  # an older record, without a project
    lines = router("log", "--log", str(directory)).stdout.splitlines()
    assert [line.split()[1:3] for line in lines] == [["s-aaaa11", "shop-api"], ["s-bbbb22", "9b01d4aa"],
                                                     ["s-cccc33", "-"]]
    by_name = router("log", "--log", str(directory), "--project", "shop-api", "--format", "json")
    assert [json.loads(line)["project"] for line in by_name.stdout.splitlines()] == [shop]
    by_digest = router("log", "--log", str(directory), "--project", "9B01")
    assert [line.split()[1] for line in by_digest.stdout.splitlines()] == ["s-bbbb22"]
    assert router("log", "--log", str(directory), "--project", "shop").stdout == ""  # a name is exact
    without = router("log", "--log", str(directory), "--session", "s-cccc")
    assert without.stdout.split()[2] == "input#2"  # no project in the log shown: no column


def test_log_shows_a_turns_cost_with_its_price_source_and_an_unpriced_turn_as_unknown(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    tokens = {"input": 1000, "output": 200, "cache_read": 0, "cache_write": 0}
    write_log(directory, record(0, event="turn_end", cost=0.0042, price_source="policy", tokens=tokens),
              record(1, event="turn_end", tokens=tokens), record(2))
    first, second, third = router("log", "--log", str(directory)).stdout.splitlines()
    assert first.endswith("[fake/m1] $0.004200 policy 1.5ms")
    assert second.endswith("[fake/m1] cost unknown 1.5ms") and "$" not in third and "cost" not in third
    lines = router("log", "--log", str(directory), "-f", "json").stdout.splitlines()
    shown = [json.loads(line) for line in lines]
    assert [(s.get("cost"), s.get("price_source"), s.get("tokens")) for s in shown] == [
        (0.0042, "policy", tokens), (None, None, tokens), (None, None, None)]


def test_log_project_takes_a_directory_as_the_keyed_digest_its_records_have(tmp_path: Path) -> None:
    from router.load.paths import project_identity
    from router.runtime.decision_log import digest_key

    agent, hidden, other = tmp_path / "agent", tmp_path / ".acme-merger", tmp_path / "shop"
    hidden.mkdir()
    other.mkdir()
    key = digest_key(agent)
    directory = tmp_path / "log"
    write_log(directory, record(0, project=project_identity(hidden, key)),
              record(1, session="s-bbbb2222", project=project_identity(other, key)))
    env = {"PI_CODING_AGENT_DIR": str(agent)}
    shown = router("log", "--log", str(directory), "--project", str(hidden), "-f", "json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert [json.loads(line)["session"] for line in shown.stdout.splitlines()] == ["s-aaaa1111"]
    assert "acme" not in (directory / "decisions.jsonl").read_text()  # the record names no path
    elsewhere = router("log", "--log", str(directory), "--project", str(hidden), "-f", "json",
                       env={"PI_CODING_AGENT_DIR": str(tmp_path / "another-agent")})
    assert elsewhere.stdout == ""  # another key: another digest
