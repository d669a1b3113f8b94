"""Replaying sessions in worker processes (`router replay --jobs N`), merged in input order.

The sessions are read and the policy compiled once, in the parent; the workers are forked from
it, so each inherits the compiled policy, the catalog and the parsed sessions and compiles
nothing. Each worker replays chunks of consecutive sessions, one at a time, and sends their
SessionRuns back; the parent puts them in the sessions' order, so the output and the totals are
those of `--jobs 1`. A session whose replay raises fails alone (its error in the output, exit 1),
in a worker or not; a worker that dies (killed, out of memory) fails the sessions of the chunk it
held, with the reason, and the others go on in the workers left. Where processes cannot be
forked, the replay runs in-process.

Ctrl-C stops the run promptly whatever moment it lands. The pool is our own (os.fork and one pair
of pipes per worker), not concurrent.futures' ProcessPoolExecutor: that one forks inside
`submit`, keeps its process table behind locks a manager thread holds, and joins that thread at
interpreter exit, so a Ctrl-C landing in the wrong place left a worker unknown to the parent or
the parent hanging (issue 26). Here SIGINT is held back (blocked, and a second handler only
notes it) while workers are forked and registered and while they are stopped, so the parent
always knows every worker's pid; workers start with SIGINT blocked, ignore it, then unblock it
(Ctrl-C is the parent's to handle); on Ctrl-C or any other exception the parent SIGKILLs and
reaps every worker before re-raising. A worker whose parent dies is killed by the kernel
(PR_SET_PDEATHSIG, Linux) and otherwise ends when its task pipe closes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any

from router.replay.runner import Replayer, SessionRun
from router.replay.session_file import Problem, SessionFile

CHUNKS_PER_JOB = 8  # chunks per worker: small enough to balance sessions of different sizes
MAX_CHUNK = 64  # sessions per chunk at most (a chunk's results travel back as one message)
_NONE_LEFT = ("replay failed: every worker process ended abruptly (killed, or out of memory) before this "
              "session was replayed; --jobs 1 replays in one process")
_PR_SET_PDEATHSIG = 1  # prctl option: the signal a process gets when its parent ends

_WORK: tuple[Replayer, Sequence[SessionFile]] | None = None  # what forked workers inherit


def job_count(jobs: int) -> int:
    """`--jobs`: 0 means one per core this process may run on."""
    if jobs > 0:
        return jobs
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_one(replayer: Replayer, session: SessionFile) -> SessionRun:
    """The replay of `session`; one that raises becomes a failed run naming the error."""
    try:
        return replayer.run(session)
    except Exception as exc:  # a session the replay cannot handle fails alone, told
        return failed(session, f"replay failed: {type(exc).__name__}: {exc}")


def failed(session: SessionFile, message: str) -> SessionRun:
    """A SessionRun that says why the session was not replayed."""
    problems = [*session.problems, Problem(session.path, 0, message)]
    return SessionRun(session.id, session.path, problems=problems, error=message)


@dataclass
class _Worker:
    """A forked worker: its pid, the pipe its chunks go down and the pipe its results come up."""

    pid: int
    tasks: Connection
    results: Connection
    chunk: int | None = None  # the index of the chunk it is replaying
    ended: bool = False  # reaped: its pid may be another process's now, never to be signalled


def replay_parallel(replayer: Replayer, sessions: Sequence[SessionFile], jobs: int,
                    advance: Callable[[int], None] | None = None) -> list[SessionRun]:
    """Every session through `replayer` in `jobs` forked workers, in the order of `sessions`."""
    global _WORK
    size = max(1, min(MAX_CHUNK, -(-len(sessions) // (jobs * CHUNKS_PER_JOB))))
    chunks = [(start, min(start + size, len(sessions))) for start in range(0, len(sessions), size)]
    results: list[list[SessionRun] | None] = [None] * len(chunks)
    workers: list[_Worker] = []
    _WORK = (replayer, sessions)
    try:
        _start_workers(workers, min(jobs, len(chunks)))
        _run_chunks(workers, chunks, results, sessions, advance)
    except BaseException:  # Ctrl-C, or anything else: no worker outlives the run
        _stop(workers)
        raise
    finally:
        _WORK = None
    _finish(workers)
    return [run for chunk in results if chunk is not None for run in chunk]


def _run_chunks(workers: list[_Worker], chunks: list[tuple[int, int]], results: list[list[SessionRun] | None],
                sessions: Sequence[SessionFile], advance: Callable[[int], None] | None) -> None:
    """Deal the chunks to idle workers until each has its runs (or, with no worker left, fails)."""
    waiting = deque(range(len(chunks)))
    live = [worker for worker in workers if _give(worker, waiting, chunks)]
    while live:
        for ready in wait([worker.results for worker in live]):
            worker = next(w for w in live if w.results is ready)
            index = worker.chunk
            assert index is not None, "only a worker with a chunk is waited for"
            runs, alive = _receive(worker, sessions[chunks[index][0]:chunks[index][1]])
            results[index] = runs
            if advance is not None:
                advance(len(runs))
            if not (alive and _give(worker, waiting, chunks)):
                live.remove(worker)
    for index in waiting:  # every worker died: the rest is not replayed (--jobs 1 would be)
        start, stop = chunks[index]
        results[index] = [failed(session, _NONE_LEFT) for session in sessions[start:stop]]


def _give(worker: _Worker, waiting: deque[int], chunks: list[tuple[int, int]]) -> bool:
    """The next waiting chunk to `worker`; False when there is none or the worker has died (the chunk
    then waits for another)."""
    worker.chunk = waiting.popleft() if waiting else None
    if worker.chunk is None:
        return False
    try:
        worker.tasks.send(chunks[worker.chunk])
    except OSError:  # it died between two chunks (its pipe is broken)
        waiting.appendleft(worker.chunk)
        worker.chunk = None
        return False
    return True


def _receive(worker: _Worker, sessions: Sequence[SessionFile]) -> tuple[list[SessionRun], bool]:
    """The runs `worker` sent for its chunk and whether it lives; failed runs when it died."""
    try:
        message: tuple[str, Any] = worker.results.recv()
    except (EOFError, OSError):
        return [failed(session, _died(_reap(worker))) for session in sessions], False
    kind, value = message
    if kind == "runs":
        return value, True
    return [failed(session, f"replay failed in a worker process: {value}") for session in sessions], True


def _died(how: str) -> str:
    return (f"replay failed: a worker process ended abruptly ({how}, e.g. killed or out of memory) before "
            "this session's result came back; --jobs 1 replays in one process")


def _start_workers(workers: list[_Worker], count: int) -> None:
    """Fork `count` workers into `workers` with Ctrl-C held back, so that none is left unregistered."""
    parent = os.getpid()
    with _sigint_held():
        for _ in range(count):
            tasks_read, tasks_write = os.pipe()
            results_read, results_write = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                for fd in (tasks_read, tasks_write, results_read, results_write):
                    os.close(fd)
                raise
            if pid == 0:  # the worker: never returns into the parent's code
                os.close(tasks_write)
                os.close(results_read)
                _worker_main(parent, tasks_read, results_write, workers)
            workers.append(_Worker(pid, Connection(tasks_write, readable=False),
                                   Connection(results_read, writable=False)))
            os.close(tasks_read)
            os.close(results_write)


def _worker_main(parent: int, tasks: int, results: int, others: list[_Worker]) -> None:
    """A worker's whole life: chunks in, runs out, until its task pipe closes; then `_exit`."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        _die_with_parent(parent)
        for other in others:  # the pipes of the workers forked before: theirs, not ours
            other.tasks.close()
            other.results.close()
        _serve(Connection(tasks, writable=False), Connection(results, readable=False))
        code = 0
    except BaseException:  # a worker never unwinds into the parent's stack
        with contextlib.suppress(BaseException):
            sys.excepthook(*sys.exc_info())
    finally:
        os._exit(code)


def _die_with_parent(parent: int) -> None:
    """Ask the kernel (Linux) for SIGKILL when the parent ends; elsewhere the task pipe's EOF ends us."""
    import ctypes  # only a worker needs it

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the request
        os._exit(1)


def _serve(tasks: Connection, results: Connection) -> None:
    """Replay each chunk received and send back its runs (or why they could not be sent)."""
    while True:
        try:
            start, stop = tasks.recv()
        except EOFError:
            return
        runs = _replay_chunk(start, stop)
        try:
            results.send(("runs", runs))
        except Exception as exc:  # e.g. a run that cannot be pickled: nothing was written
            results.send(("error", f"{type(exc).__name__}: {exc}"))


def _replay_chunk(start: int, stop: int) -> list[SessionRun]:
    assert _WORK is not None, "a replay worker is forked from the parent that set the work"
    replayer, sessions = _WORK
    return [run_one(replayer, session) for session in sessions[start:stop]]


def _finish(workers: list[_Worker]) -> None:
    """The run is done: close each worker's task pipe (its signal to end) and reap it."""
    for worker in workers:
        worker.tasks.close()
    for worker in workers:
        worker.results.close()
        _reap(worker)


def _stop(workers: list[_Worker]) -> None:
    """End every worker now (SIGKILL: they hold nothing of the user's) and reap it, Ctrl-C held back."""
    with _sigint_held():
        for worker in workers:
            if not worker.ended:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGKILL)
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.tasks.close()
                worker.results.close()
            _reap(worker)


def _reap(worker: _Worker) -> str:
    """Wait for `worker` to end (once); how it ended, in words."""
    if worker.ended:
        return "ended"
    worker.ended = True
    try:
        _, status = os.waitpid(worker.pid, 0)
    except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler of the caller's)
        return "ended"
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Ctrl-C during the block is delivered after it: blocked in this thread, and noted, not raised, if
    another thread takes it. Only the main thread can hold it (elsewhere Python never raises it)."""
    if not _main_thread():
        yield
        return
    noted: list[bool] = []

    def note(number: int, frame: FrameType | None) -> None:
        noted.append(True)

    previous = signal.signal(signal.SIGINT, note)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a blocked Ctrl-C arrives now, as before
        if noted and callable(previous):
            previous(signal.SIGINT, None)
        elif noted and previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
