"""Replaying sessions in worker processes (`router replay --jobs N`), merged in input order.

The sessions are read and the policy compiled once, in the parent; the workers are forked from
it, so each inherits the compiled policy, the catalog and the parsed sessions and compiles
nothing. Each worker replays chunks of consecutive sessions and sends their SessionRuns back; the
parent puts them in the sessions' order, so the output and the totals are those of `--jobs 1`.
A session whose replay raises fails alone (its error in the output, exit 1), in a worker or not;
a worker that dies (killed, out of memory) fails the sessions it had not returned, with the reason;
Ctrl-C stops the workers at once. Where processes cannot be forked, the replay runs in-process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from router.replay.runner import Replayer, SessionRun
from router.replay.session_file import Problem, SessionFile

CHUNKS_PER_JOB = 8  # chunks per worker: small enough to balance sessions of different sizes
MAX_CHUNK = 64  # sessions per chunk at most (a chunk's results travel back as one message)

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


def replay_parallel(replayer: Replayer, sessions: Sequence[SessionFile], jobs: int,
                    advance: Callable[[int], None] | None = None) -> list[SessionRun]:
    """Every session through `replayer` in `jobs` forked workers, in the order of `sessions`."""
    global _WORK
    size = max(1, min(MAX_CHUNK, -(-len(sessions) // (jobs * CHUNKS_PER_JOB))))
    chunks = [(start, min(start + size, len(sessions))) for start in range(0, len(sessions), size)]
    results: list[list[SessionRun] | None] = [None] * len(chunks)
    _WORK = (replayer, sessions)
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(chunks)), initializer=_worker_start,
                               mp_context=multiprocessing.get_context("fork"))
    try:
        futures = [pool.submit(_replay_chunk, start, stop) for start, stop in chunks]
        for index, future in enumerate(futures):
            results[index] = _collect(future, sessions, chunks[index])
            if advance is not None:
                advance(chunks[index][1] - chunks[index][0])
    except BaseException:  # Ctrl-C, or anything else: no worker outlives the run
        _stop(pool)
        raise
    finally:
        _WORK = None
    pool.shutdown(wait=True)
    return [run for chunk in results if chunk is not None for run in chunk]


def _collect(future: Future[list[SessionRun]], sessions: Sequence[SessionFile],
             chunk: tuple[int, int]) -> list[SessionRun]:
    """A chunk's runs; when its worker died, a failed run for each of its sessions."""
    try:
        return future.result()
    except BrokenProcessPool:
        reason = "replay failed: a worker process ended abruptly (killed, or out of memory) before this " \
                 "session's result came back; --jobs 1 replays in one process"
    except Exception as exc:  # e.g. a result that could not be sent back
        reason = f"replay failed in a worker process: {type(exc).__name__}: {exc}"
    return [failed(session, reason) for session in sessions[chunk[0]:chunk[1]]]


def _worker_start() -> None:
    """A worker leaves Ctrl-C to the parent, which stops it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _replay_chunk(start: int, stop: int) -> list[SessionRun]:
    assert _WORK is not None, "a replay worker is forked from the parent that set the work"
    replayer, sessions = _WORK
    return [run_one(replayer, session) for session in sessions[start:stop]]


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers now (terminate, then kill), without waiting for their chunks."""
    processes: dict[Any, Any] = dict(getattr(pool, "_processes", None) or {})
    for process in processes.values():
        if process.is_alive():
            process.terminate()
    for process in processes.values():
        process.join(timeout=2)
        if process.is_alive():
            process.kill()
            process.join(timeout=2)
    pool.shutdown(wait=False, cancel_futures=True)
