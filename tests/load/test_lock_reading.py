"""A project's `router.lock` comes with the clone: a FIFO or a device in its place is refused,
never read (it would hang or exhaust the router)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from router.load.git_lock import Lock
from router.load.git_spec import GitSourceError


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_lock_that_is_no_regular_file_is_refused_without_reading(tmp_path: Path, kind: str) -> None:
    lock = tmp_path / "router.lock"
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to("/dev/zero")
    with pytest.raises(GitSourceError, match="not a readable lock file"):
        Lock.read(lock)


def test_an_absent_lock_is_empty(tmp_path: Path) -> None:
    assert Lock.read(tmp_path / "router.lock").sources == {}
