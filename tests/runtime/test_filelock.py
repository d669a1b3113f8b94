"""router.runtime.filelock: appends and JSON updates shared by several processes never lose or mix data."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from router.runtime.filelock import (
    JsonFileError,
    append_line,
    load_json,
    read_json,
    update_json,
    update_json_values,
)

FORK = multiprocessing.get_context("fork")
WORKERS = 4
LINES = 150
WIDTH = 20_000  # far above PIPE_BUF: a torn write would show


def _append_many(path: str, worker: int) -> None:
    for i in range(LINES):
        append_line(Path(path), f"{worker}:{i}:" + chr(ord("a") + worker) * WIDTH)


def _update_many(path: str, worker: int, count: int) -> None:
    for i in range(count):
        update_json(Path(path), f"w{worker}-{i}", {"worker": worker, "i": i})


@contextmanager
def _workers(processes: list[BaseProcess]) -> Iterator[list[BaseProcess]]:
    """Start ``processes``; whatever happens, none is left running afterwards."""
    try:
        for process in processes:
            process.start()
        yield processes
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            if process.pid is not None:
                process.join(10)


def _run_all(target: Callable[..., None], args_of: Callable[[int], tuple[object, ...]]) -> None:
    with _workers([FORK.Process(target=target, args=args_of(w)) for w in range(WORKERS)]) as processes:
        for process in processes:
            process.join(60)
            assert process.exitcode == 0


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_append_line_concurrent_processes_never_interleave_or_lose_lines(tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl"
    _run_all(_append_many, lambda w: (str(target), w))
    lines = target.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    assert len(lines) == WORKERS * LINES
    seen = set()
    for line in lines:
        worker, index, body = line.split(":")
        assert body == chr(ord("a") + int(worker)) * WIDTH
        seen.add((int(worker), int(index)))
    assert seen == {(w, i) for w in range(WORKERS) for i in range(LINES)}
    for worker in range(WORKERS):  # each process's own lines keep their order
        order = [int(line.split(":")[1]) for line in lines if line.startswith(f"{worker}:")]
        assert order == list(range(LINES))


def test_append_line_new_file_private_and_parents_created(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "log.txt"
    append_line(target, "one\n")
    append_line(target, "two")
    assert target.read_text() == "one\ntwo\n"
    assert _mode(target) == 0o600


def test_append_line_keeps_existing_content(tmp_path: Path) -> None:
    target = tmp_path / "log.txt"
    target.write_text("old\n")
    append_line(target, "é new")
    assert target.read_text(encoding="utf-8") == "old\né new\n"


def test_update_json_concurrent_processes_keep_every_key(tmp_path: Path) -> None:
    target = tmp_path / "store.json"
    _run_all(_update_many, lambda w: (str(target), w, 25))
    data = json.loads(target.read_text())
    assert set(data) == {f"w{w}-{i}" for w in range(WORKERS) for i in range(25)}
    assert data["w3-24"] == {"worker": 3, "i": 24}
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".store.json.router-lock", "store.json"]  # no temp files


def test_update_json_readers_always_see_valid_json(tmp_path: Path) -> None:
    target = tmp_path / "store.json"
    update_json(target, "seed", "x" * 5000)
    writers = [FORK.Process(target=_update_many, args=(str(target), w, 40)) for w in range(2)]
    with _workers(writers) as processes:
        reads = 0
        while any(p.is_alive() for p in processes) or reads == 0:
            text = target.read_text(encoding="utf-8")
            assert isinstance(json.loads(text), dict), text[:200]
            reads += 1
        for process in processes:
            process.join(60)
            assert process.exitcode == 0
    assert len(read_json(target)) == 81


def test_update_json_nested_path_creates_objects_and_replaces_scalars(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    update_json(target, ["policy", "threshold"], 0.5)
    update_json(target, ["policy", "mode"], "cost")
    update_json(target, "top", 1)
    update_json(target, ["top", "inner"], True)
    assert read_json(target) == {"policy": {"threshold": 0.5, "mode": "cost"}, "top": {"inner": True}}
    assert _mode(target) == 0o600
    assert target.read_text().endswith("}\n")


@pytest.mark.parametrize(("content", "problem"), [
    ("[1, 2]", "not a JSON object (it holds an array); not overwriting it"),
    ('"text"', "not a JSON object (it holds a string); not overwriting it"),
    ("not json", "1:1: not valid JSON: Expecting value"),
    ('{\n  "a": 1,\n}\n', "3:1: not valid JSON: Expecting property name enclosed in double quotes"
                         " (a trailing comma: JSON allows none)"),
    ('{\n  // mine\n  "a": 1\n}', "2:3: not valid JSON: Expecting property name enclosed in double quotes"
                               " (a comment: JSON has none)"),
])
def test_update_json_never_overwrites_a_file_that_is_not_a_json_object(
    tmp_path: Path, content: str, problem: str
) -> None:
    target = tmp_path / "s.json"
    target.write_text(content)
    with pytest.raises(JsonFileError) as failure:
        update_json(target, "k", "v", backup=True)
    assert str(failure.value) == f"{target}{'' if problem.startswith('not a') else ':'}{problem}".replace(
        f"{target}not a", f"{target}: not a")
    assert target.read_text() == content
    assert not (tmp_path / "s.json.bak").exists()


@pytest.mark.parametrize("content", ["", "  \n", "\ufeff"])
def test_update_json_blank_file_starts_over(tmp_path: Path, content: str) -> None:
    target = tmp_path / "s.json"
    target.write_text(content, encoding="utf-8")
    update_json(target, "k", "v")
    assert read_json(target) == {"k": "v"}


def test_update_json_keeps_keys_order_indentation_and_bom_and_backs_up(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    original = '\ufeff{\n    "zeta": {"x": 1},\n    "autoSelect": false,\n    "mine": [1, 2]\n}\n'
    target.write_text(original, encoding="utf-8")
    assert update_json(target, "autoSelect", True, backup=True) is True
    assert target.read_text(encoding="utf-8") == (
        '\ufeff{\n    "zeta": {\n        "x": 1\n    },\n    "autoSelect": true,\n    "mine": [\n'
        '        1,\n        2\n    ]\n}\n')
    assert (tmp_path / "s.json.bak").read_text(encoding="utf-8") == original
    assert _mode(tmp_path / "s.json.bak") == 0o600


def test_update_json_that_changes_nothing_does_not_write(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_text('{"a":  true}')
    assert update_json(target, "a", True, backup=True) is False
    assert target.read_text() == '{"a":  true}'
    assert not (tmp_path / "s.json.bak").exists()


def test_update_json_values_sets_several_in_one_write_and_one_backup(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_text('{"policy": {"mode": "cost"}, "x": 1}')
    update_json_values(target, [(["policy", "threshold"], 0.6), (["catalog"], {"local": ["a"]})], backup=True)
    assert read_json(target) == {"policy": {"mode": "cost", "threshold": 0.6}, "x": 1,
                                 "catalog": {"local": ["a"]}}
    assert (tmp_path / "s.json.bak").read_text() == '{"policy": {"mode": "cost"}, "x": 1}'


def test_update_json_missing_file_has_no_backup(tmp_path: Path) -> None:
    update_json(tmp_path / "new.json", "a", 1, backup=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".new.json.router-lock", "new.json"]


def test_update_json_failed_write_leaves_file_and_no_temp(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "s.json"
    update_json(target, "k", 1)

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        update_json(target, "more", 2)
    assert read_json(target) == {"k": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".s.json.router-lock", "s.json"]


def test_update_json_writes_strict_json(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    update_json(target, "k", {"inf": float("inf"), "nan": float("nan"), "thing": Path("a/b")})
    text = target.read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}")) == {
        "k": {"inf": None, "nan": None, "thing": "a/b"}}


def test_read_json_missing_or_invalid_is_none(tmp_path: Path) -> None:
    assert read_json(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{")
    assert read_json(tmp_path / "bad.json") is None
    (tmp_path / "ok.json").write_text('{"a": [1]}')
    assert read_json(tmp_path / "ok.json") == {"a": [1]}


def test_append_line_unwritable_directory_raises_os_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError):
        append_line(blocker / "sub" / "log.txt", "x")
    assert os.listdir(tmp_path) == ["file"]


def test_load_json_skips_a_bom_and_locates_errors(tmp_path: Path) -> None:
    target = tmp_path / "c.json"
    assert load_json(target) is None
    target.write_text('\ufeff{"a": 1}', encoding="utf-8")
    assert load_json(target) == {"a": 1}
    target.write_text('\ufeff{"a": [1,\n  2,]}', encoding="utf-8")
    with pytest.raises(JsonFileError, match=r"c\.json:2:5: not valid JSON: Expecting value \(a trailing"):
        load_json(target)
    target.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(JsonFileError, match=r"c\.json: not UTF-8 text \(byte 7\)"):
        load_json(target)


# --- whole lines or nothing --------------------------------------------------------------------


def _short_writes(monkeypatch: pytest.MonkeyPatch, keep: int) -> list[int]:
    """os.write writes only `keep` bytes of each call (a disk that fills up mid-line)."""
    real, calls = os.write, []

    def short(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real(fd, bytes(data)[:keep])

    monkeypatch.setattr(os, "write", short)
    return calls


def test_append_line_short_write_leaves_no_partial_line(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "audit.jsonl"
    append_line(target, '{"n": 1}')
    calls = _short_writes(monkeypatch, 5)
    record = '{"n": 2, "text": "a record the disk has no room for"}'
    with pytest.raises(OSError) as info:
        append_line(target, record)
    assert info.value.errno == errno.ENOSPC and calls == [len(record) + 1]  # one write of the whole line
    assert target.read_bytes() == b'{"n": 1}\n'  # cut back: nothing of the record stays
    monkeypatch.undo()
    append_line(target, '{"n": 3}')
    assert target.read_text().splitlines() == ['{"n": 1}', '{"n": 3}']


def test_append_line_enospc_leaves_no_partial_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "router.log"
    append_line(target, "first")
    real = os.write

    def full(fd: int, data: bytes) -> int:
        real(fd, bytes(data)[:3])  # some bytes reached the file before the disk was full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        append_line(target, "second line")
    assert target.read_bytes() == b"first\n"


def test_append_line_after_a_partial_line_starts_a_new_line(tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl"
    target.write_bytes(b'{"n": 1}\n{"n": 2, "cut')  # left by another program
    append_line(target, '{"n": 3}')
    assert target.read_text().splitlines() == ['{"n": 1}', '{"n": 2, "cut', '{"n": 3}']
