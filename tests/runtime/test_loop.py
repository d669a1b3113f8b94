"""router.runtime.loop: the sidecar's own event loop (no asyncio), with the real Connection on it."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from router.runtime import loop
from router.runtime.connection import Connection, id_key
from router.runtime.server import Engine
from tests.helpers import HANGING_PI, assert_group_gone, stub


def run(coro: Any, timeout: float = 10) -> Any:
    """Run one coroutine on a fresh Loop to its end (bounded)."""
    events = loop.Loop()
    task = events.spawn(coro)
    assert events.run_until(task.done, timeout=timeout)
    return task.result()


def test_a_task_waits_on_a_future_set_from_another_thread() -> None:
    async def main() -> Any:
        future = loop.create_future()
        running = loop.running()
        assert running is not None
        import threading
        threading.Thread(target=running.call_soon_threadsafe, args=(future.set_result, 42)).start()
        return await future

    assert run(main()) == 42


def test_wait_for_times_out_and_sleep_returns() -> None:
    async def main() -> str:
        await loop.sleep(0.01)
        try:
            await loop.wait_for(loop.create_future(), 0.05)
        except TimeoutError:
            return "timed out"
        return "answered"

    assert run(main()) == "timed out"


def test_run_process_gives_code_and_output_and_none_past_its_timeout(tmp_path: Path) -> None:
    script = stub(tmp_path, "#!/bin/sh\ncat; echo err >&2; exit 3\n", "echoing")
    assert run(loop.run_process([str(script)], b"in", cwd=None, timeout=10)) == (3, b"in", b"err\n")
    hanging = stub(tmp_path / "bin", HANGING_PI)
    assert run(loop.run_process([str(hanging)], b"", cwd=None, timeout=0.2)) is None
    assert_group_gone(int((tmp_path / "bin" / "pid").read_text()))


def test_run_process_that_cannot_start_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        run(loop.run_process([str(tmp_path / "missing")], b"", cwd=None, timeout=1))


def run_until_seen(events: loop.Loop, seen: Callable[[], bool], timeout: float = 30) -> bool:
    """Run the loop until `seen()`, which may depend on the world outside it (checked every 10 ms)."""
    deadline = time.monotonic() + timeout
    while not seen():
        if time.monotonic() > deadline:
            return False
        events.run_until(seen, timeout=0.01)
    return True


class Output(io.BytesIO):
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


def test_cancel_on_the_loop_stops_the_request_and_kills_its_child(tmp_path: Path) -> None:
    pi = stub(tmp_path / "bin", HANGING_PI)
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    agent.mkdir()
    cwd.mkdir()
    (agent / "router.yaml").write_text(f"""version: 1
signals:
  c: {{child: {{prompt: "x", pi_bin: "{pi}", timeout_ms: 60000}}}}
rules:
  - {{id: r, on: input, do: [{{notify: "{{signals.c}}"}}]}}
""")
    output = Output()
    connection = Connection(output)
    connection.engine = Engine(connection, cwd=cwd, agent=agent, extra=[])
    events = loop.Loop()
    events.call_soon(connection.dispatch, {"id": 1, "method": "hello", "params": {"cwd": str(cwd)}})
    assert events.run_until(lambda: not connection.tasks and output.getvalue() != b"", timeout=30)
    event = {"type": "input", "payload": {"text": "hi", "source": "interactive"}, "ctx": {}}
    events.call_soon(connection.dispatch, {"id": 5, "method": "event", "params": event})
    gpid = tmp_path / "bin" / "gpid"
    assert run_until_seen(events, lambda: gpid.is_file() and gpid.read_text().strip() != "")
    assert id_key(5) in connection.running
    connection.dispatch({"method": "cancel", "params": {"id": 5}})
    assert events.run_until(lambda: not connection.tasks, timeout=10)
    assert connection.running == {} and not connection.closing.is_set()
    assert [m.get("id") for m in output.messages()] == [None, 1, None]  # no answer for the cancelled one
    assert_group_gone(int((tmp_path / "bin" / "pid").read_text()))
