"""What the executor offers a signal kind's computation (`SignalLocal`, router/actions/signals/)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.runtime import loop
from router.runtime.filelock import load_json, read_text

if TYPE_CHECKING:
    from router.runtime.executor import Executor


class ExecutorLocal:
    """The executor's bridge, working directory and slots; files, processes and timers."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    @property
    def cwd(self) -> str:
        return self._executor.cwd

    @property
    def slots(self) -> dict[str, tuple[int, int]]:
        return self._executor.slots

    async def bridge(self, method: str, params: dict[str, Any], timeout_s: float) -> Any:
        return await self._executor.bridge(method, params, timeout_s)

    def read_text(self, path: Path, *, nofollow: bool) -> str:
        return read_text(path, nofollow=nofollow)

    def load_json(self, path: Path, *, nofollow: bool) -> Any:
        return load_json(path, nofollow=nofollow)

    async def run_process(self, argv: list[str], stdin: bytes, *, cwd: str | None,
                          timeout: float) -> tuple[int, bytes, bytes] | None:
        return await loop.run_process(argv, stdin, cwd=cwd, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await loop.sleep(seconds)

    def which(self, name: str) -> str | None:
        """`shutil.which`, imported on first use (a sidecar's start does without shutil)."""
        import shutil

        return shutil.which(name)
