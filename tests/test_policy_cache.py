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
