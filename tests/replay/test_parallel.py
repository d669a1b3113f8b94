"""router.replay.parallel: `router replay --jobs N` gives what `--jobs 1` gives, in the same order;
a session that fails, a worker that dies and Ctrl-C each end the run with the reason, never a hang."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.commands.explain import load
from router.compile.ir import CompiledPolicy
from router.replay import parallel
from router.replay.runner import Replayer, SessionRun
from router.replay.sources import Inputs, gather, replay_all
from router.replay.summary import summarize
from tests.helpers import assert_group_gone
from tests.replay_sessions import SessionWriter, write_models

ROOT = Path(__file__).resolve().parent.parent.parent
POLICY = """
version: 1
rules:
  - id: tools-read
    on: input
    when: "'notes' in text"
    do: [{tools: {only: [read]}}]
  - id: cloud-for-hard
    on: input
    group: model
    when: "'hard' in text"
    do: [{model: fake/cloud}, {set: {hard: "{(state.hard or 0) + 1}"}}]
  - id: local-otherwise
    on: input
    group: model
    do: [{model: fake/local}]
  - id: count-turns
    on: turn_end
    do: [{set: {turns: "{(state.turns or 0) + 1}"}}]
"""
PROMPTS = ("read the notes", "a hard one", "hello", "hard notes")


def write_session(directory: Path, number: int, prompts: list[int]) -> None:
    writer = SessionWriter(id=f"s{number:03d}").start("fake/local")
    for index in prompts:
        model = "fake/cloud" if index % 2 else "fake/local"
        writer.user(PROMPTS[index]).assistant(model, "done", tokens=500 + 100 * index)
    writer.write(directory)


def corpus(tmp_path: Path, sessions: list[list[int]]) -> tuple[CompiledPolicy, Inputs]:
    for number, prompts in enumerate(sessions):
        write_session(tmp_path / "sessions", number, prompts)
    write_models(tmp_path / "models.json")
    (tmp_path / "policy.yaml").write_text(POLICY)
    policy = load([tmp_path / "policy.yaml"], cwd=tmp_path).policy
    assert policy is not None
    inputs = gather([tmp_path / "sessions"], log=tmp_path / "nolog", models=tmp_path / "models.json",
                    agent=tmp_path / "agent")
    return policy, inputs


def view(runs: list[SessionRun]) -> list[dict[str, Any]]:
    """Everything a run carries but the measured evaluation times."""
    return [{"id": r.id, "path": r.path, "events": r.events, "decisions": r.decisions, "rules": dict(r.rules),
             "shadow": dict(r.shadow), "signals": dict(r.signals), "errors": dict(r.errors), "error": r.error,
             "problems": [str(p) for p in r.problems],
             "turns": [(t.number, t.model, t.recorded_model, t.outcome(), t.estimated_cost, t.price_source)
                       for t in r.turns.values()],
             "records": [{k: v for k, v in rec.items() if k != "latency_ms"} for rec in r.records]}
            for r in runs]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions=st.lists(st.lists(st.integers(0, len(PROMPTS) - 1), max_size=5), min_size=2, max_size=12),
       jobs=st.integers(2, 4))
def test_jobs_give_the_runs_and_totals_of_one_job(tmp_path_factory: pytest.TempPathFactory,
                                                  sessions: list[list[int]], jobs: int) -> None:
    policy, inputs = corpus(tmp_path_factory.mktemp("c"), sessions)
    one = replay_all(policy, inputs, progress=False)
    many = replay_all(policy, inputs, progress=False, jobs=jobs)
    assert view(many) == view(one)
    assert [r.id for r in many] == [f"s{n:03d}" for n in range(len(sessions))]
    assert summarize(many, inputs.catalog, "fake/cloud").to_dict() == \
        summarize(one, inputs.catalog, "fake/cloud").to_dict()


def test_chunks_cover_every_session_once_in_order(tmp_path: Path) -> None:
    policy, inputs = corpus(tmp_path, [[1]] * 70)
    runs = parallel.replay_parallel(Replayer(policy, inputs.catalog, inputs.log), inputs.sessions, 3)
    assert [r.id for r in runs] == [s.id for s in inputs.sessions] and len(runs) == 70


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_session_that_raises_fails_alone_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        jobs: int) -> None:
    policy, inputs = corpus(tmp_path, [[0], [1], [2]])
    original = Replayer.run

    def run(self: Replayer, session: Any) -> SessionRun:
        if session.id == "s001":
            raise ValueError("a bug")
        return original(self, session)

    monkeypatch.setattr(Replayer, "run", run)  # forked workers inherit it
    runs = replay_all(policy, inputs, progress=False, jobs=jobs)
    assert [r.id for r in runs] == ["s000", "s001", "s002"]
    assert [r.error for r in runs] == [None, "replay failed: ValueError: a bug", None]
    assert runs[0].turns and runs[2].turns and not runs[1].turns
    assert str(runs[1].problems[-1]).endswith(": replay failed: ValueError: a bug")


def test_a_worker_that_dies_fails_its_sessions_without_hanging(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    policy, inputs = corpus(tmp_path, [[0]] * 6)
    parent, original = os.getpid(), Replayer.run

    def run(self: Replayer, session: Any) -> SessionRun:
        if session.id == "s003" and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
        return original(self, session)

    monkeypatch.setattr(Replayer, "run", run)
    runs = replay_all(policy, inputs, progress=False, jobs=2)
    assert [r.id for r in runs] == [f"s{n:03d}" for n in range(6)]
    died = runs[3]
    assert died.error is not None and "worker process ended abruptly (killed by SIGKILL" in died.error
    assert [r.error is None for r in runs] == [True, True, True, False, True, True]  # the others went on


def test_when_every_worker_dies_the_rest_fail_and_say_why(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    policy, inputs = corpus(tmp_path, [[0]] * 6)
    parent, original = os.getpid(), Replayer.run

    def run(self: Replayer, session: Any) -> SessionRun:
        if session.id in ("s000", "s001") and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, session)

    monkeypatch.setattr(Replayer, "run", run)
    runs = replay_all(policy, inputs, progress=False, jobs=2)
    assert [r.id for r in runs] == [f"s{n:03d}" for n in range(6)]
    assert all(r.error is not None and "(killed by SIGKILL" in r.error for r in runs[:2]), runs[:2]
    none_left = "replay failed: every worker process ended abruptly"
    assert all(r.error is not None and r.error.startswith(none_left) for r in runs[2:]), runs[2:]


DRIVER = """
import faulthandler, os, signal, sys, threading
from pathlib import Path
from router.commands.explain import load
from router.replay import runner
from router.replay.sources import gather, replay_all

faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test dumps every stack if the run hangs
# Ctrl-C raises here as in a terminal's foreground job, whoever started the suite: a background
# job (`cmd &` in a script) inherits SIGINT ignored, and a Python started so never raises it.
signal.signal(signal.SIGINT, signal.default_int_handler)
root, moment = Path(sys.argv[1]), sys.argv[2]  # moment: "worker", or "before-fork-N" / "after-fork-N"
parent, real_fork, forks = os.getpid(), os.fork, [0]

def say(line):
    # one write per line: with PYTHONUNBUFFERED print writes the text and its newline apart, and a
    # worker killed between the two glued its line to the parent's next one
    os.write(1, f"{line}\\n".encode())

def fork():
    # a hook at the moment asked for: the test sends Ctrl-C there, then writes a line to stdin
    forks[0] += 1
    if moment == f"before-fork-{forks[0]}":
        say(f"at {moment}")
        sys.stdin.readline()
    pid = real_fork()
    if pid and moment == f"after-fork-{forks[0]}":
        say(f"at {moment}")
        sys.stdin.readline()
    return pid

os.fork = fork

def run(self, session):
    if os.getpid() != parent:  # a worker: say so, then never finish
        say(f"worker {os.getpid()}")
        threading.Event().wait()
    raise AssertionError("the parent replays nothing itself")

runner.Replayer.run = run
policy = load([root / "policy.yaml"], cwd=root).policy
inputs = gather([root / "sessions"], log=root / "nolog", models=root / "models.json", agent=root / "agent")
try:
    replay_all(policy, inputs, progress=False, jobs=2)
except KeyboardInterrupt:
    say("interrupted")
    sys.exit(130)
"""


class Lines:
    """The lines of a pipe, read by a thread, so that a test waits for a line, never for a time."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[str]], bool], timeout: float) -> bool:
        """Whether `found` holds of the lines read, waiting for new lines up to `timeout` s for it."""
        with self._changed:
            self._changed.wait_for(lambda: found(self.lines) or self._ended, timeout)
            return found(self.lines)

    def join(self) -> None:
        self._thread.join(timeout=10)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid`, the group leader first."""
    members = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = entry.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry.parent.name))
    return sorted(members, key=lambda pid: (pid != pgid, pid))


def hang_report(pgid: int, err: Lines) -> str:
    """Each process of the group: its state and kernel wait channel, then its Python stacks (the driver
    dumps them on SIGUSR1; each dump ends with the driver's module frame, the bottom of every stack)."""
    report = []
    for pid in group_members(pgid):
        state = wchan = "?"
        with contextlib.suppress(OSError):
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(f"/proc/{pid}/wchan").read_text()
        report.append(f"process {pid}: state {state}, waiting in {wchan}")
        before = len(err.lines)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
        err.wait_for(lambda lines, first=before: any("in <module>" in line for line in lines[first:]), 10)
    return "\n".join([*report, "stderr:", *err.lines])


def interrupt_at(tmp_path: Path, moment: str) -> None:
    """Ctrl-C at `moment` of a `--jobs 2` replay: exit 130 after "interrupted", and no process left."""
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(DRIVER))
    proc = subprocess.Popen([sys.executable, str(driver), str(tmp_path), moment], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        mark = "worker " if moment == "worker" else f"at {moment}"
        assert out.wait_for(lambda lines: any(line.startswith(mark) for line in lines), timeout=60), \
            f"no {mark!r} line: {out.lines} {err.lines}"
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole group
        if moment != "worker":
            proc.stdin.write("go on\n")  # the hook returns once the Ctrl-C is on its way
            proc.stdin.flush()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit 30 s after Ctrl-C at {moment}; output {out.lines}\n"
                        f"{hang_report(proc.pid, err)}")
        assert not group_members(proc.pid), f"workers outlived the run: {hang_report(proc.pid, err)}"
        assert out.wait_for(lambda lines: bool(lines) and lines[-1] == "interrupted", timeout=10), \
            (out.lines, err.lines)
        assert proc.returncode == 130, (proc.returncode, out.lines, err.lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert_group_gone(proc.pid)
        out.join()
        err.join()
        proc.stdin.close()


def test_ctrl_c_stops_the_workers_and_the_run(tmp_path: Path) -> None:
    corpus(tmp_path, [[0]] * 4)
    interrupt_at(tmp_path, "worker")


@pytest.mark.parametrize("moment", ["before-fork-1", "after-fork-1", "before-fork-2", "after-fork-2"])
def test_ctrl_c_while_the_workers_start_stops_them_and_the_run(tmp_path: Path, moment: str) -> None:
    corpus(tmp_path, [[0]] * 4)
    interrupt_at(tmp_path, moment)


def test_a_killed_run_leaves_no_worker(tmp_path: Path) -> None:
    """SIGKILL to `router replay` alone (no Ctrl-C, no cleanup): the kernel ends its workers too."""
    corpus(tmp_path, [[0]] * 4)
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(DRIVER))
    proc = subprocess.Popen([sys.executable, str(driver), str(tmp_path), "worker"], cwd=ROOT, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    out = Lines(proc.stdout)
    try:
        assert out.wait_for(lambda lines: any(line.startswith("worker ") for line in lines), 60), out.lines
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert_group_gone(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out.join()


# Run in a Python of its own (one thread, SIGINT as the test sets it): in a pytest-xdist worker a
# Ctrl-C sent to the process can be taken by execnet's thread and land outside the block, and a
# KeyboardInterrupt that escapes a test ends the worker and the whole run.
HELD_BACK = """
import os, signal, sys
from router.replay import parallel

signal.signal(signal.SIGINT, signal.default_int_handler if sys.argv[1] == "handled" else signal.SIG_IGN)
reached = []
try:
    with parallel._sigint_held():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("the block went on")
    print("no KeyboardInterrupt", reached)
except KeyboardInterrupt:
    print("KeyboardInterrupt after the block", reached)
handler = signal.getsignal(signal.SIGINT)
print("handler", "python" if handler is signal.default_int_handler else
      "ignored" if handler == signal.SIG_IGN else handler)
print("blocked", signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set()))
"""


@pytest.mark.parametrize(("handler", "expected"), [
    ("handled", ["KeyboardInterrupt after the block ['the block went on']", "handler python",
                 "blocked False"]),
    # a background job's Ctrl-C (SIGINT ignored) stays ignored after the block
    ("ignored", ["no KeyboardInterrupt ['the block went on']", "handler ignored", "blocked False"]),
])
def test_a_ctrl_c_while_held_back_arrives_after_the_block(handler: str, expected: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", HELD_BACK, handler], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    assert done.stdout.splitlines() == expected, done.stderr


def test_job_count_zero_is_one_per_core() -> None:
    assert parallel.job_count(3) == 3
    assert parallel.job_count(0) == len(os.sched_getaffinity(0))


def test_cli_jobs_output_is_the_same_and_jobs_is_a_count(tmp_path: Path) -> None:
    corpus(tmp_path, [[0, 1], [2], [3, 1], [1]])
    router = Path(sys.executable).parent / "router"

    def replay(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(router), "replay", "sessions", "--policy", "policy.yaml", "--models",
                               "models.json", "--log", "nolog", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)

    one, two = replay("-f", "json"), replay("-f", "json", "--jobs", "2")
    every = replay("-f", "json", "-j", "0")
    assert one.returncode == two.returncode == every.returncode == 0, one.stderr + two.stderr
    assert one.stdout == two.stdout == every.stdout
    assert json.loads(one.stdout)["sessions"] == 4
    text_one, text_two = replay(), replay("--jobs", "2")
    assert text_one.stdout == text_two.stdout and "total: 4 sessions" in text_one.stdout
    bad = replay("--jobs", "-1")
    assert bad.returncode == 2 and "invalid value for '--jobs'" in bad.stderr \
        and "greater than or equal to 0" in bad.stderr
