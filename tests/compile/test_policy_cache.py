"""router.compile.cache: a cached policy decides exactly like the compiled one; stale caches miss."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from router.compile import cache as policy_cache
from router.compile.cache import cache_key, cache_path, from_ir, load, save, to_ir
from router.compile.compiler import compile_files
from router.engine.interpreter import evaluate
from router.load.event_documents import complete_event
from router.load.paths import packs_dir
from tests.gitrepo import Project

TOOLS = ["read", "bash", "edit", "write", "grep"]
EVENTS = [
    {"type": "input", "text": "build a new tool", "source": "rpc", "model": {"id": "deepseek-v4-pro"},
     "tools": {"active": TOOLS, "all": TOOLS}},
    {"type": "before_agent_start", "model": {"id": "deepseek-v4-pro"}},
    {"type": "turn_end", "usage": {"percent": 97}, "tool_calls": 1},
    {"type": "command", "name": "decision-router-toggle", "tools": {"active": ["decision_request"]}},
    {"type": "command", "name": "router", "args": "status", "argv": ["status"],
     "model": {"id": "deepseek-x"}},
]
STATE = {"dr": {"enabled": True, "auto_compaction": True, "armed": True, "in_flight": False}}


def _packs(tmp_path: Path):
    path = tmp_path / "all.yaml"
    path.write_text("version: 1\nuse: [decision, deepseek, cuttle]\n")
    policy, diagnostics = compile_files([("file", path)])
    assert policy is not None, diagnostics
    return policy, path


def test_from_ir_decides_like_the_compiled_policy(tmp_path: Path) -> None:
    policy, _ = _packs(tmp_path)
    cached = from_ir(to_ir(policy))
    assert cached.event_types == policy.event_types
    assert list(cached.commands) == list(policy.commands)
    assert cached.skills == policy.skills and len(policy.skills) == 1
    for raw in EVENTS:
        event = complete_event(raw)
        one = evaluate(policy, event, state=STATE, signal_values={"user_json": None, "saved_mode": None})
        two = evaluate(cached, event, state=STATE, signal_values={"user_json": None, "saved_mode": None})
        assert one.effects == two.effects and one.state == two.state and one.fired == two.fired


def test_load_hits_when_nothing_changed_and_misses_after_an_edit(tmp_path: Path) -> None:
    policy, path = _packs(tmp_path)
    target = cache_path(tmp_path / "agent", cache_key("x"))
    candidates = [path, packs_dir() / "default.yaml"]
    save(target, policy, candidates)
    assert load(target, candidates) is not None
    os.utime(path, ns=(1, 1))
    assert load(target, candidates) is None


def test_load_misses_for_a_new_candidate_file(tmp_path: Path) -> None:
    policy, path = _packs(tmp_path)
    target = cache_path(tmp_path / "agent", cache_key("y"))
    save(target, policy, [path])
    assert load(target, [path, tmp_path / "project.yaml"]) is None


def test_load_of_a_corrupt_cache_is_a_miss(tmp_path: Path) -> None:
    target = tmp_path / "cache.json"
    target.write_text("{not json")
    assert load(target, []) is None


def test_from_ir_rule_on_two_events_is_compiled_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = policy_cache._rule
    monkeypatch.setattr(policy_cache, "_rule", lambda raw: built.append(raw["id"]) or real(raw))
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nrules:\n  - {id: both, on: [turn_start, turn_end], do: [{notify: x}]}\n")
    policy, diagnostics = compile_files([("file", path)])
    assert policy is not None, diagnostics
    cached = from_ir(to_ir(policy))
    [start], [end] = cached.by_event["turn_start"], cached.by_event["turn_end"]
    assert start is end and start.id == "both" and built == ["both"]


def test_the_cache_is_a_serializer_of_the_one_compiled_policy(tmp_path: Path) -> None:
    policy, _ = _packs(tmp_path)
    cached = from_ir(to_ir(policy))
    assert [r.id for r in cached.rules] == [r.id for r in policy.rules] and len(cached.rules) > 50
    assert to_ir(cached) == to_ir(policy)  # nothing is lost or added on the way through the cache
    last = policy.rules[-1]
    found = cached.rule(last.id)
    assert found is not None and found.index == last.index
    assert cached.rules[len(policy.rules) - 1] is cached.by_event[last.on[0]][-1]  # compiled once
    assert [r.id for r in cached.rules[:2]] == [r.id for r in policy.rules[:2]]


def _serve(project: Project, *events: dict[str, object]) -> list[dict[str, object]]:
    """`router serve` (the installed console script) in the project: hello, `events`, shutdown;
    the answers' results."""
    import subprocess
    import sys

    from router.runtime import protocol
    from tests.pipe_lines import PipeLines

    script = Path(sys.executable).parent / "router"
    messages = [{"id": 1, "method": "hello", "params": {"cwd": str(project.root)}},
                *({"id": 2 + i, "method": "event", "params": e} for i, e in enumerate(events)),
                {"id": 99, "method": "shutdown", "params": {}}]
    argv = [str(script), "serve", "--cwd", str(project.root), "--agent-dir", str(project.agent)]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          cwd=project.root, env=project.env) as process:
        assert process.stdin is not None and process.stdout is not None
        reader = PipeLines(process.stdout, "router serve")
        results = []
        try:
            for message in messages:
                process.stdin.write(protocol.encode(message))
                process.stdin.flush()
                while (answer := protocol.decode(reader.line(60))).get("method") == "progress":
                    pass
                results.append(answer["result"])
            process.stdin.close()
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return results[:-1]


FORCE_PUSH = {"type": "tool_call", "payload": {"toolName": "bash", "input": {"command": "git push --force"}},
              "ctx": {}}


def _blocks(result: dict[str, object]) -> bool:
    return "team-no-force-push" in result.get("fired", [])  # type: ignore[operator]


def test_a_new_machine_opening_pi_before_lint_and_trust_then_after_them(tmp_path: Path) -> None:
    """Issue 22: on a new machine (the project's router.lock committed, the git cache empty), Pi
    opened before `router lint` and `router trust` built a cache entry without the git source that
    stayed valid after the fetch, so the team's rules stayed off. Now: off with the reason until
    the fetch and the trust, then in force; a cleared cache says `router lint`, not `router trust`;
    after `router lint` fetches again the next engine applies the trusted policy."""
    import shutil

    from tests.gitrepo import make_project, make_repo

    repo = make_repo(tmp_path)
    project = make_project(tmp_path)
    project.policy(f"version: 1\nuse: ['{repo.source()}']\n")
    assert project.router("lint").returncode == 0  # the lock, committed with the project
    shutil.rmtree(project.cache)  # a new machine: nothing fetched
    [hello, push] = _serve(project, FORCE_PUSH)
    assert hello["trust"]["state"] == "untrusted" and not _blocks(push)  # type: ignore[index]
    assert project.router("lint").returncode == 0
    trusted = project.router("trust", "--yes")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    [hello, push] = _serve(project, FORCE_PUSH)
    assert hello["trust"]["state"] == "trusted" and _blocks(push)  # type: ignore[index]
    shutil.rmtree(project.cache)  # the cache cleared: the policy is off, and the fix is a fetch
    [hello, push] = _serve(project, FORCE_PUSH)
    trust = hello["trust"]
    assert isinstance(trust, dict) and not _blocks(push)
    assert "router lint" in trust["message"] and "router trust" not in trust["message"]
    assert trust["status"] == "router: project policy off (run router lint)"
    assert [w for w in hello["warnings"] if "not in this machine's git cache" in w]  # type: ignore[union-attr]
    assert project.router("lint").returncode == 0  # fetched again
    [hello, push] = _serve(project, FORCE_PUSH)
    assert hello["trust"]["state"] == "trusted" and _blocks(push)  # type: ignore[index]
    assert "already trusted" in project.router("trust", "--yes").stdout
