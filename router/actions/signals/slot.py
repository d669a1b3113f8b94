"""`slot`: one of N machine-wide slots (a lock file each), held until `release` or the session ends."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from router.actions._base import Field, Params
from router.actions._local import path_of
from router.actions.signals import Request, SignalLocal, SignalOutcome, as_int, kind, timeout
from router.trust.capabilities import FS_WRITE

KIND = kind("slot", "executor", "one of N machine-wide slots", 30000, timeout_field="wait_ms",
            capabilities={"dir": FS_WRITE}, zero_timeout=True)


class SlotSignal(Params):
    """Take one of `max` machine-wide slots (a lock file per slot under `dir`); released by the
    `release` action or when the process ends. Waits up to `wait_ms`; the value is the slot
    number, or null when none freed up in time."""

    dir: str = Field(description="template: the directory of the slot locks")
    max: int | str = Field(description="template: how many slots exist")
    name: str = Field("turn", description="the handle `release` names")
    wait_ms: int | str = 30000


async def compute(local: SignalLocal, request: Request) -> SignalOutcome:
    params = request.params
    name = str(params.get("name") or "turn")
    if name in local.slots:
        return SignalOutcome(result=local.slots[name][0])
    directory = path_of(params.get("dir"))
    count = as_int(params.get("max"), 1)
    if directory is None:
        return SignalOutcome(error="slot: no directory")
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout(request) / 1000
    while True:
        taken = _try_slots(directory, count)
        if taken is not None:
            local.slots[name] = taken
            return SignalOutcome(result=taken[0])
        if time.monotonic() >= deadline:
            return SignalOutcome(result=None)
        await local.sleep(0.05)


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
