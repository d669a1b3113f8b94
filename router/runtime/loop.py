"""A small event loop for `router serve`, so the sidecar starts without asyncio (and ssl).

The sidecar has one pipe each way: the loop reads stdin itself (select on it and on a wake-up
pipe other threads write to) and runs every request as a task on the main thread, one step at a
time, as asyncio would: a request that waits (for the bridge's answer to a classify, complete or
ask request, for a child `pi`, for a slot) lets the others run meanwhile, and `cancel` stops it at
its wait.

The waits the engine and the executor use (`create_future`, `spawn`, `wait_for`, `sleep`,
`run_process`) work in both worlds: on this loop, or, when called under a running asyncio loop
(the tests drive the Engine with `asyncio.run`), through asyncio, imported only then.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import os
import queue
import select
import signal as signals
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from router.runtime.loop_tasks import Cancelled, Future, Task, Timer

_local = threading.local()


def running() -> Loop | None:
    """The loop running on this thread, None under asyncio (or outside any loop)."""
    loop: Loop | None = getattr(_local, "loop", None)
    return loop


class Loop:
    """Ready callbacks, timers, an inbox other threads post to, and at most one file descriptor
    read on the loop's own thread (the sidecar's stdin: no thread hands its lines over)."""

    def __init__(self) -> None:
        self._ready: collections.deque[tuple[Callable[..., None], tuple[Any, ...]]] = collections.deque()
        self._timers: list[tuple[float, int, Timer]] = []
        self._inbox: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]]] = queue.SimpleQueue()
        self._order = itertools.count()
        self._reader: tuple[int, Callable[[bytes], None]] | None = None
        self._wake: tuple[int, int] | None = None  # a pipe: other threads write a byte to wake the loop

    def call_soon(self, callback: Callable[..., None], *args: Any) -> None:
        self._ready.append((callback, args))

    def call_soon_threadsafe(self, callback: Callable[..., None], *args: Any) -> None:
        self._inbox.put((callback, args))
        if self._wake is not None:
            with contextlib.suppress(BlockingIOError, OSError):  # full: the loop wakes anyway
                os.write(self._wake[1], b"\0")

    def read_from(self, fd: int, callback: Callable[[bytes], None]) -> None:
        """Hand each chunk read from `fd` to `callback` on the loop's thread; b"" once at its end."""
        if self._wake is None:
            self._wake = os.pipe()
            for end in self._wake:
                os.set_blocking(end, False)
        self._reader = (fd, callback)

    def call_later(self, delay: float, callback: Callable[..., None], *args: Any) -> Timer:
        timer = Timer(time.monotonic() + max(delay, 0.0), callback, args)
        heapq.heappush(self._timers, (timer.when, next(self._order), timer))
        return timer

    def create_future(self) -> Future:
        return Future(self)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> Task:
        return Task(self, coro)

    def run_until(self, finished: Callable[[], bool], timeout: float | None = None) -> bool:
        """Run until `finished()` (True) or `timeout` seconds passed (False)."""
        previous, _local.loop = running(), self
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not finished():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                self._run_once(deadline)
            return True
        finally:
            _local.loop = previous

    def close(self) -> None:
        """Close the wake-up pipe (the loop may not run again)."""
        if self._wake is not None:
            for end in self._wake:
                with contextlib.suppress(OSError):
                    os.close(end)
            self._wake = None

    def _run_once(self, deadline: float | None) -> None:
        """Run the ready callbacks; when there are none, wait for input, the inbox or the next timer."""
        if self._ready:
            for _ in range(len(self._ready)):
                callback, args = self._ready.popleft()
                callback(*args)
            self._wait(block=False, deadline=deadline)
        else:
            self._wait(block=True, deadline=deadline)
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback(*timer.args)

    def _wait(self, *, block: bool, deadline: float | None) -> None:
        if self._reader is None or self._wake is None:
            self._take_inbox(block=block, deadline=deadline)
            return
        fd, take = self._reader
        timeout = self._until_next(deadline) if block else 0.0
        readable, _, _ = select.select([fd, self._wake[0]], [], [], timeout)
        if self._wake[0] in readable:
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(self._wake[0], 4096)
        while True:  # what other threads posted, then the input
            try:
                callback, args = self._inbox.get_nowait()
            except queue.Empty:
                break
            callback(*args)
        if fd in readable:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._reader = None
            take(chunk)

    def _take_inbox(self, *, block: bool, deadline: float | None) -> None:
        try:
            callback, args = self._inbox.get(timeout=self._until_next(deadline)) if block \
                else self._inbox.get_nowait()
        except queue.Empty:
            return
        callback(*args)

    def _until_next(self, deadline: float | None) -> float | None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        moments = [t for t in (self._timers[0][0] if self._timers else None, deadline) if t is not None]
        return max(min(moments) - time.monotonic(), 0.0005) if moments else None


def create_future() -> Any:
    """A future of the running loop (this one, else asyncio's)."""
    loop = running()
    if loop is not None:
        return loop.create_future()
    import asyncio
    return asyncio.get_running_loop().create_future()


def spawn(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run `coro` as a task of the running loop; the task has `cancel` and `add_done_callback`."""
    loop = running()
    if loop is not None:
        return loop.spawn(coro)
    import asyncio
    return asyncio.get_running_loop().create_task(coro)


async def wait_for(future: Any, timeout: float) -> Any:
    """`future`'s value; TimeoutError after `timeout` seconds."""
    loop = running()
    if loop is None:
        import asyncio
        return await asyncio.wait_for(future, timeout)
    timer = loop.call_later(timeout, future.set_exception, TimeoutError())
    try:
        return await future
    finally:
        timer.cancel()


async def bounded(coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
    """`coro`'s value; TimeoutError after `timeout` seconds, the coroutine cancelled at its wait
    (a child `pi` it waits for is killed). Cancelling the caller cancels it too."""
    loop = running()
    if loop is None:
        import asyncio
        return await asyncio.wait_for(coro, timeout)
    task = loop.spawn(coro)
    expired: list[bool] = []

    def expire() -> None:
        expired.append(True)
        task.cancel()

    timer = loop.call_later(timeout, expire)
    try:
        return await task
    except Cancelled:
        if expired:
            raise TimeoutError from None
        task.cancel()
        raise
    finally:
        timer.cancel()


async def sleep(seconds: float) -> None:
    loop = running()
    if loop is None:
        import asyncio
        await asyncio.sleep(seconds)
        return
    future = loop.create_future()
    timer = loop.call_later(seconds, future.set_result, None)
    try:
        await future
    finally:
        timer.cancel()


async def run_process(argv: list[str], stdin: bytes, *, cwd: str | None,
                      timeout: float) -> tuple[int, bytes, bytes] | None:
    """Run `argv` in a new session with `stdin` written and closed; (code, stdout, stderr), or None
    when it ran past `timeout` seconds (its process group is killed). Cancelled: killed too.
    OSError when it cannot start."""
    loop = running()
    if loop is None:
        return await _run_process_asyncio(argv, stdin, cwd=cwd, timeout=timeout)
    import subprocess  # here: a sidecar's start does without it (~3 ms), most sessions never run one

    process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=die_with_parent())
    future = loop.create_future()

    def communicate() -> None:
        try:
            out, err = process.communicate(stdin, timeout=timeout)
            done: tuple[int, bytes, bytes] | None = (process.returncode, out, err)
        except subprocess.TimeoutExpired:
            kill_group(process)
            process.communicate()
            done = None
        except (OSError, ValueError) as exc:
            loop.call_soon_threadsafe(future.set_exception, exc)
            return
        loop.call_soon_threadsafe(future.set_result, done)

    threading.Thread(target=communicate, name="router-child", daemon=True).start()
    try:
        result: tuple[int, bytes, bytes] | None = await future
    except Cancelled:
        kill_group(process)
        raise
    return result


async def _run_process_asyncio(argv: list[str], stdin: bytes, *, cwd: str | None,
                               timeout: float) -> tuple[int, bytes, bytes] | None:
    import asyncio
    creating = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, preexec_fn=die_with_parent()))
    try:
        # shielded: a cancel while the process is being created must not leave it running unseen
        process = await asyncio.shield(creating)
    except asyncio.CancelledError:
        creating.add_done_callback(_kill_when_created)
        raise
    try:
        # communicate() writes the prompt, closes stdin (EOF ends Pi's read) and reads both pipes
        out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
    except TimeoutError:
        kill_group(process)
        await process.wait()
        return None
    except asyncio.CancelledError:
        kill_group(process)
        raise
    return (process.returncode if process.returncode is not None else -1), out, err


def die_with_parent() -> Callable[[], None] | None:
    """On Linux, what makes a child process get SIGKILL when the sidecar dies (killed by the bridge
    after a deadline, say): a child `pi` must not outlive the engine that was waiting for it.
    None elsewhere. The child runs in a session of its own, so the sidecar's group is not its."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def arm() -> None:  # runs in the child, between fork and exec
        prctl(pr_set_pdeathsig, int(signals.SIGKILL), 0, 0, 0)

    return arm


def _kill_when_created(creating: Any) -> None:
    """The process of a run cancelled while it was being created: killed once it exists."""
    if not creating.cancelled() and creating.exception() is None:
        kill_group(creating.result())


def kill_group(process: Any) -> None:
    """SIGKILL the process group `process` leads (it was started in a new session)."""
    try:
        os.killpg(process.pid, signals.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            process.kill()
