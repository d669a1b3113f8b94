"""`slot`: one of N machine-wide slots (a lock file each), held until `release` or the session ends."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from router.actions._local import path_of
from router.engine.decision import SignalOutcome, SignalRequest
from router.runtime import loop
from router.runtime.signals import as_int, timeout

if TYPE_CHECKING:
    from router.runtime.executor import Executor


async def compute(executor: Executor, request: SignalRequest) -> SignalOutcome:
    params = request.params
    name = str(params.get("name") or "turn")
    if name in executor.slots:
        return SignalOutcome(result=executor.slots[name][0])
    directory = path_of(params.get("dir"))
    count = as_int(params.get("max"), 1)
    if directory is None:
        return SignalOutcome(error="slot: no directory")
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout(request) / 1000
    while True:
        taken = _try_slots(directory, count)
        if taken is not None:
            executor.slots[name] = taken
            return SignalOutcome(result=taken[0])
        if time.monotonic() >= deadline:
            return SignalOutcome(result=None)
        await loop.sleep(0.05)


def _try_slots(directory: Path, count: int) -> tuple[int, int] | None:
    for number in range(count):
        fd = os.open(directory / f"slot-{number}.lock",
                     os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return number, fd
    return None
