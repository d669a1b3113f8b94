"""runtime.executor: local effects, bridge signals, child `pi` processes, files and machine-wide slots."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from router.actions.signals.child import CHILD_FLAGS
from router.engine.decision import Decision, Effect, SignalOutcome, SignalRequest
from router.runtime.executor import Executor, budget_ms
from router.runtime.filelock import read_json
from router.trust.capabilities import ROUTER_LOG
from tests.helpers import HANGING_PI, assert_group_gone, stub

ROOT = Path(__file__).resolve().parent.parent.parent
RECORDING_PI = f"""#!{sys.executable}
import json, os, stat, sys
argv = sys.argv[1:]
system = argv[argv.index("--system-prompt") + 1] if "--system-prompt" in argv else None
mode = stat.S_IMODE(os.stat(system).st_mode) if system else None
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "argv.json"), "w") as f:
    json.dump({{"argv": argv, "cwd": os.getcwd(), "stdin": sys.stdin.read(),
               "system_prompt": open(system).read() if system else None, "system_mode": mode}}, f)
code = int(os.environ.get("PI_STUB_EXIT", "0"))
if code:
    sys.stderr.write(os.environ.get("PI_STUB_STDERR", ""))
    sys.exit(code)
print('  {{"answers": []}}  ')
"""
HOLDER = """
import asyncio, sys
from router.engine.decision import SignalRequest
from router.runtime.executor import Executor
async def main():
    ex = Executor(None, cwd=".")
    got = await ex.compute(SignalRequest("s", "slot", {"dir": sys.argv[1], "max": 1, "wait_ms": 5000}))
    print("held", got.result, flush=True)
    for line in sys.stdin:
        ex.release("turn")
        print("released", flush=True)
asyncio.run(main())
"""


def bridge_replying(reply: Any, calls: list[tuple[str, dict[str, Any], float]]) -> Any:
    async def bridge(method: str, params: dict[str, Any], timeout: float) -> Any:
        calls.append((method, params, timeout))
        if isinstance(reply, Exception):
            raise reply
        return reply(method, params) if callable(reply) else reply

    return bridge


def compute(executor: Executor, kind: str, params: dict[str, Any], questions: Any = None) -> SignalOutcome:
    return asyncio.run(executor.compute(SignalRequest("sig", kind, params, questions or {})))


# --- apply: effects for the bridge, local effects ---------------------------------------------------


def apply(executor: Executor, *effects: Effect) -> Any:
    return executor.apply(Decision("input", effects=effects))


def test_apply_model_before_thinking_others_keep_their_order(tmp_path: Path) -> None:
    applied = apply(Executor(None, cwd=str(tmp_path)), Effect("notify", {"text": "a"}, "r1"),
                    Effect("thinking", {"level": "high"}, "r2"), Effect("tools", {"only": ["read"]}, "r3"),
                    Effect("model", {"ref": "fake/m"}, "r4"), Effect("status", {"key": "k"}, "r5"))
    assert applied.actions[:2] == [{"action": "model", "params": {"ref": "fake/m"}, "rule": "r4"},
                                   {"action": "thinking", "params": {"level": "high"}, "rule": "r2"}]
    assert [a["action"] for a in applied.actions[2:]] == ["notify", "tools", "status"]
    assert applied.warnings == []


@pytest.mark.parametrize(("level", "ceiling", "sent"), [("high", "low", "low"), ("low", "high", "low"),
                                                        ("weird", "low", "weird"), ("max", None, "max")])
def test_apply_thinking_capped_by_its_ceiling(tmp_path: Path, level: str, ceiling: Any, sent: str) -> None:
    effect = Effect("thinking", {"level": level, "ceiling": ceiling}, "r")
    assert apply(Executor(None, cwd=str(tmp_path)), effect).actions == [
        {"action": "thinking", "params": {"level": sent}, "rule": "r"}]


def test_apply_log_to_file_and_to_router_log_with_timestamp(tmp_path: Path) -> None:
    router_log = tmp_path / "agent" / "router" / "router.log"
    executor = Executor(None, cwd=str(tmp_path), log_file=router_log)
    applied = apply(executor, Effect("log", {"text": "one", "file": str(tmp_path / "d" / "x.log")}, "r"),
                    Effect("log", {"text": "two", "file": ROUTER_LOG}, "rr"))
    assert applied.actions == [] and applied.warnings == []
    assert (tmp_path / "d" / "x.log").read_text() == "one\n"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d rule rr: two\n", router_log.read_text())


@pytest.mark.parametrize("target", ["", None])
def test_apply_log_file_rendering_empty_skips_the_line(tmp_path: Path, target: Any) -> None:
    executor = Executor(None, cwd=str(tmp_path), log_file=tmp_path / "router.log")
    applied = apply(executor, Effect("log", {"text": "debug", "file": target}, "r"))
    assert (applied.actions, applied.warnings, os.listdir(tmp_path)) == ([], [], [])


def test_apply_audit_line_with_timestamp_private_file(tmp_path: Path) -> None:
    target = tmp_path / "audit" / "audit.jsonl"
    records = [{"record": {"tool": "ask", "n": 1}}, {"record": {"timestamp": "mine", "x": "é"}},
               {"record": {"x": 1}, "stamp": False}, {"record": ["a"]}]
    effects = [Effect("audit", {"file": str(target), **record}, "r") for record in records]
    apply(Executor(None, cwd=str(tmp_path)), *effects)
    lines = target.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    assert list(first) == ["timestamp", "tool", "n"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["timestamp"])
    stamp = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00"))
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=1)
    assert lines[1:] == ['{"timestamp": "mine", "x": "é"}', '{"x": 1}', '["a"]']
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_apply_save_by_key_and_by_path(tmp_path: Path) -> None:
    target = str(tmp_path / "settings.json")
    apply(Executor(None, cwd=str(tmp_path)),
          Effect("save", {"file": target, "key": "/srv/a.b", "value": {"enabled": False}}, "r"),
          Effect("save", {"file": target, "path": ["policy", "threshold"], "value": 0.4}, "r"),
          Effect("save", {"file": target, "path": "policy.mode", "value": "cost"}, "r"))
    assert read_json(Path(target)) == {"/srv/a.b": {"enabled": False},
                                       "policy": {"threshold": 0.4, "mode": "cost"}}


def test_apply_save_values_with_a_backup_and_a_broken_file_left_alone(tmp_path: Path) -> None:
    target, broken = tmp_path / "c.json", tmp_path / "broken.json"
    target.write_text('{"mine": 1, "policy": {"mode": "cost"}}')
    broken.write_text('{"a": 1,}')
    values = {"autoSelect": True, "policy.threshold": 0.6}
    applied = apply(Executor(None, cwd=str(tmp_path)),
                    Effect("save", {"file": str(target), "values": values, "backup": True}, "r"),
                    Effect("save", {"file": str(broken), "key": "autoSelect", "value": True,
                                    "backup": True}, "rb"))
    assert read_json(target) == {"mine": 1, "policy": {"mode": "cost", "threshold": 0.6},
                                 "autoSelect": True}
    assert (tmp_path / "c.json.bak").read_text() == '{"mine": 1, "policy": {"mode": "cost"}}'
    assert applied.warnings == [f"rule rb: save failed: {broken}:1:9: not valid JSON: Expecting property "
                                "name enclosed in double quotes (a trailing comma: JSON allows none) [RT501]"]
    assert broken.read_text() == '{"a": 1,}'
    assert not (tmp_path / "broken.json.bak").exists()


def test_apply_forget_removes_a_key_keeps_the_rest_and_writes_nothing_when_it_is_absent(
        tmp_path: Path) -> None:
    target, broken, missing = tmp_path / "c.json", tmp_path / "broken.json", tmp_path / "none.json"
    target.write_text('{\n    "mine": 1,\n    "policy": {"mode": "cost", "threshold": 0.6},\n'
                      '    "auto": true\n}\n')
    broken.write_text('{"a": 1,}')
    applied = apply(Executor(None, cwd=str(tmp_path)),
                    Effect("forget", {"file": str(target), "path": "policy.threshold", "backup": True}, "r"),
                    Effect("forget", {"file": str(target), "key": "auto"}, "r"),
                    Effect("forget", {"file": str(target), "path": ["policy", "absent", "deeper"]}, "r"),
                    Effect("forget", {"file": str(missing), "key": "auto"}, "r"),
                    Effect("forget", {"file": str(broken), "key": "a"}, "rb"),
                    Effect("forget", {"file": str(target), "key": "", "path": None}, "re"))
    assert target.read_text() == '{\n    "mine": 1,\n    "policy": {\n        "mode": "cost"\n    }\n}\n'
    assert read_json(tmp_path / "c.json.bak") == {"mine": 1, "policy": {"mode": "cost", "threshold": 0.6},
                                                   "auto": True}
    assert not missing.exists() and broken.read_text() == '{"a": 1,}'
    assert [w.split(": forget failed: ")[0] for w in applied.warnings] == ["rule rb", "rule re"]
    assert applied.warnings[1] == \
        "rule re: forget failed: no key to forget (key or path rendered empty) [RT501]"
    assert applied.actions == []


def test_apply_failing_local_effects_become_warnings(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    executor = Executor(None, cwd=str(tmp_path), log_file=blocker / "router.log")
    applied = apply(executor, Effect("audit", {"file": str(blocker / "a.jsonl"), "record": {}}, "ra"),
                    Effect("log", {"text": "x", "file": str(blocker / "x.log")}, "rl"),
                    Effect("save", {"file": str(blocker / "s.json"), "key": "k", "value": 1}, "rs"),
                    Effect("audit", {"file": None, "record": {}}, "rn"), Effect("notify", {}, "ok"))
    assert [w.split(":")[0] for w in applied.warnings] == ["rule ra", "rule rl", "rule rs", "rule rn"]
    assert "audit failed: " in applied.warnings[0] and str(blocker) in applied.warnings[0]
    assert applied.warnings[3] == "rule rn: audit failed: no audit file [RT501]"
    assert [a["rule"] for a in applied.actions] == ["ok"]
    executor.log("the router log is unwritable too")  # never raises


@pytest.mark.parametrize("effect", [
    pytest.param(Effect("save", {"file": "s.json", "key": None, "path": [], "value": 1}, "r"),
                 id="save-path-list"),
    pytest.param(Effect("save", {"file": "s.json", "key": None, "path": "", "value": 2}, "r"),
                 id="save-path-empty"),
])
def test_apply_save_without_a_key_is_a_warning_not_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, effect: Effect
) -> None:
    monkeypatch.chdir(tmp_path)
    assert apply(Executor(None, cwd=str(tmp_path)), effect).warnings == [
        "rule r: save failed: no key to save under (key, path or values rendered empty) [RT501]"]
    assert "None" not in (read_json(tmp_path / "s.json") or {})


def test_apply_log_with_a_lone_surrogate_is_written_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    effect = Effect("log", {"text": "cut \ud83d", "file": "l.log"}, "r")
    applied = apply(Executor(None, cwd=str(tmp_path)), effect)
    assert applied.warnings == []
    assert "cut \\ud83d" in (tmp_path / "l.log").read_text(encoding="utf-8")


# --- signals through the bridge ---------------------------------------------------------------------


def test_compute_classify_request_and_answers(tmp_path: Path) -> None:
    calls: list[Any] = []
    executor = Executor(bridge_replying({"answers": {"complexity": 0.8}}, calls), cwd=str(tmp_path))
    questions = {"complexity": {"type": "score", "instructions": "How complex?"}}
    outcome = compute(executor, "classify", {"model": "llama.cpp/kev", "state": {"prompt": "x"},
                                             "timeout_ms": 3000, "max_retries": 2}, questions)
    assert (outcome.result, outcome.error) == ({"complexity": 0.8}, None)
    assert outcome.elapsed_ms is not None and outcome.elapsed_ms >= 0
    assert calls == [("classify", {"model": "llama.cpp/kev", "questions": questions, "state": {"prompt": "x"},
                                   "timeoutMs": 3000, "maxRetries": 2}, 4.0)]
    compute(executor, "classify", {"model": "m", "timeout_ms": "soon"}, questions)
    assert calls[1][1]["timeoutMs"] == 4000 and calls[1][1]["state"] == {} and calls[1][2] == 5.0


MISSING = "classifier gave no answer for complexity"


@pytest.mark.parametrize(("reply", "error"), [
    (None, "classifier returned no answer"), ([1], "classifier returned no answer"),
    ({"stopReason": "error", "errorMessage": "model not loaded"}, "model not loaded"),
    ({"stopReason": "aborted"}, "aborted"), ({"error": "no answer from Pi in 5s"}, "no answer from Pi in 5s"),
    ({"answers": {"other": 1}}, MISSING), ({"stopReason": "stop"}, MISSING),
    (RuntimeError("bridge gone"), "RuntimeError: bridge gone")])
def test_compute_classify_failures_are_outcome_errors(tmp_path: Path, reply: Any, error: str) -> None:
    executor = Executor(bridge_replying(reply, []), cwd=str(tmp_path))
    outcome = compute(executor, "classify", {"model": "m"}, {"complexity": {"type": "bool"}})
    assert (outcome.result, outcome.error) == (None, error)


@pytest.mark.parametrize(("reply", "result", "error"), [
    ({"text": "hello"}, "hello", None), ({"text": None}, "", None), ({"error": "429"}, None, "429"),
    (None, None, "completion failed: no answer from Pi"), ({"error": ""}, "", None)])
def test_compute_complete(tmp_path: Path, reply: Any, result: Any, error: Any) -> None:
    calls: list[Any] = []
    executor = Executor(bridge_replying(reply, calls), cwd=str(tmp_path))
    outcome = compute(executor, "complete", {"model": "fake/m", "system_prompt": "S", "prompt": "P"})
    assert (outcome.result, outcome.error) == (result, error)
    assert calls == [("complete", {"model": "fake/m", "systemPrompt": "S", "prompt": "P", "timeoutMs": 45000},
                      46.0)]


@pytest.mark.parametrize(("reply", "result"), [({"value": "b"}, "b"), ({"value": None}, None), ({}, None),
                                               (None, None), ("b", None)])
def test_compute_ask(tmp_path: Path, reply: Any, result: Any) -> None:
    calls: list[Any] = []
    executor = Executor(bridge_replying(reply, calls), cwd=str(tmp_path))
    outcome = compute(executor, "ask", {"select": ["a", "b"], "title": "Pick", "timeout_ms": 1000})
    assert (outcome.result, outcome.error) == (result, None)
    assert calls == [("ask", {"select": ["a", "b"], "title": "Pick", "placeholder": None}, 1.0)]


def test_compute_probe_classifier_and_models(tmp_path: Path) -> None:
    def reply(method: str, params: dict[str, Any]) -> Any:
        if method == "classify":
            return {"answers": {"probe": "yes"}}
        return {"text": "OK"} if params["model"] == "fake/up" else {"error": "401"}

    calls: list[Any] = []
    executor = Executor(bridge_replying(reply, calls), cwd=str(tmp_path))
    question = {"instructions": "Probe?", "criteria": {"yes": "y", "no": "n"}}
    outcome = compute(executor, "probe", {"classifier": "llama.cpp/kev", "models": ["fake/up", "fake/down"],
                                          "prompt": "Say OK.", "question": question})
    assert [(r["ref"], r["kind"], r["ok"], r["error"]) for r in outcome.result] == [
        ("llama.cpp/kev", "classifier", True, None), ("fake/up", "model", True, None),
        ("fake/down", "model", False, "401")]
    assert calls[0][1]["questions"] == {"probe": {"type": "choice", **question}}
    assert [c[1]["prompt"] for c in calls[1:]] == ["Say OK.", "Say OK."]
    single = compute(executor, "probe", {"models": "fake/up", "prompt": "Say OK."})
    assert [r["ref"] for r in single.result] == ["fake/up"]
    unworded = compute(executor, "probe", {"classifier": "l/k", "models": "fake/up"})
    assert [r["error"] for r in unworded.result] == ["probe: the policy declares no classifier question",
                                                     "probe: the policy declares no prompt"]
    assert compute(executor, "shell", {}).error == "unknown signal kind 'shell'"


# --- child pi --------------------------------------------------------------------------------------


def test_compute_which_finds_a_name_on_path_and_keeps_a_path(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    program = tmp_path / "bin" / "pi"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", str(program.parent))
    executor = Executor(bridge_replying(None, []), cwd=str(tmp_path))
    assert compute(executor, "which", {"name": "pi"}).result == str(program)
    assert compute(executor, "which", {"name": "~/tools/pi"}).result == str(Path.home() / "tools" / "pi")
    missing = compute(executor, "which", {"name": "pi-missing"})
    assert (missing.result, missing.error) == (None, "which: pi-missing is not on PATH")


def test_compute_child_argv_seed_flags_then_model_prompt_on_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompt and the system prompt never reach the command line (`ps` shows it to every
    local user): the prompt is written to stdin, the system prompt to a 0600 file, removed after."""
    pi = stub(tmp_path / "bin", RECORDING_PI)
    (tmp_path / "proj").mkdir()
    prompt = '{\n  "cwd": "/x",\n  "secret": "PROMPT-TEXT"\n}'
    outcome = compute(Executor(None, cwd=str(tmp_path / "proj")), "child", {
        "pi_bin": str(pi), "provider": "fake", "model": "m1", "system_prompt": "You decide. SYSTEM-TEXT",
        "prompt": prompt})
    assert (outcome.result, outcome.error) == ('{"answers": []}', None)
    recorded = json.loads((tmp_path / "bin" / "argv.json").read_text())
    system_file = recorded["argv"][-1]
    assert recorded["argv"] == ["--print", "--no-session", "--no-tools", "--no-extensions", "--no-skills",
                                "--no-prompt-templates", "--no-themes", "--no-context-files", "--thinking",
                                "off", "--provider", "fake", "--model", "m1", "--system-prompt", system_file]
    assert not any("PROMPT-TEXT" in part or "SYSTEM-TEXT" in part for part in recorded["argv"])
    assert recorded["stdin"] == prompt
    assert (recorded["system_prompt"], recorded["system_mode"]) == ("You decide. SYSTEM-TEXT", 0o600)
    assert not Path(system_file).exists() and not Path(system_file).parent.exists()
    assert recorded["cwd"] == str(tmp_path / "proj")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")  # pi from PATH
    assert compute(Executor(None, cwd=str(tmp_path)), "child", {"prompt": "P"}).error is None
    recorded = json.loads((tmp_path / "bin" / "argv.json").read_text())
    assert (recorded["argv"], recorded["stdin"]) == ([*CHILD_FLAGS], "P")


def test_compute_child_that_never_reads_stdin(tmp_path: Path) -> None:
    """A child exiting without reading a large prompt: the closed pipe is not an error."""
    pi = stub(tmp_path / "bin", "#!/bin/sh\necho done\n")
    outcome = compute(Executor(None, cwd=str(tmp_path)), "child",
                      {"pi_bin": str(pi), "prompt": "x" * 1_000_000})
    assert (outcome.result, outcome.error) == ("done", None)


@pytest.mark.parametrize(("stderr", "error"), [("first\nbad model\n", "child exited with code 3: bad model"),
                                               ("", "child exited with code 3")])
def test_compute_child_non_zero_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stderr: str,
                                     error: str) -> None:
    pi = stub(tmp_path / "bin", RECORDING_PI)
    monkeypatch.setenv("PI_STUB_EXIT", "3")
    monkeypatch.setenv("PI_STUB_STDERR", stderr)
    outcome = compute(Executor(None, cwd=str(tmp_path)), "child", {"pi_bin": str(pi), "prompt": "P"})
    assert (outcome.result, outcome.error) == (None, error)


def test_compute_child_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pi = stub(tmp_path / "bin", HANGING_PI)
    outcome = compute(Executor(None, cwd=str(tmp_path)), "child",
                      {"pi_bin": str(pi), "prompt": "P", "timeout_ms": 1000})
    assert (outcome.result, outcome.error) == (None, "timeout after 1000ms")
    assert_group_gone(int((tmp_path / "bin" / "pid").read_text()))


@pytest.mark.parametrize(("name", "runs"), [("notpi", False), ("python3", False), ("pip", False),
                                            ("pi-dev", True), ("pi.mjs", True)])
def test_compute_child_binary_not_named_pi_refused(tmp_path: Path, name: str, runs: bool) -> None:
    binary = stub(tmp_path / "bin", RECORDING_PI, name=name)
    outcome = compute(Executor(None, cwd=str(tmp_path)), "child", {"pi_bin": str(binary), "prompt": "P"})
    assert (tmp_path / "bin" / "argv.json").exists() is runs
    assert outcome.error is None if runs else "is not a pi binary" in str(outcome.error)


def test_compute_child_missing_binary(tmp_path: Path) -> None:
    outcome = compute(Executor(None, cwd=str(tmp_path)), "child", {"pi_bin": str(tmp_path / "pi")})
    assert outcome.error is not None and outcome.error.startswith("child failed to start: ")


# --- files and slots -------------------------------------------------------------------------------


def test_compute_load_by_key_whole_or_missing(tmp_path: Path) -> None:
    executor, target = Executor(None, cwd=str(tmp_path)), tmp_path / "s.json"
    target.write_text('{"/srv/a": {"enabled": false}, "n": 1}')
    assert compute(executor, "load", {"file": str(target), "key": "/srv/a"}).result == {"enabled": False}
    assert compute(executor, "load", {"file": str(target)}).result == {"/srv/a": {"enabled": False}, "n": 1}
    assert compute(executor, "load", {"file": str(target), "key": "zz"}).result is None
    assert compute(executor, "load", {"file": str(tmp_path / "none.json"), "key": "n"}).result is None
    assert compute(executor, "load", {"file": ""}).result is None
    (tmp_path / "list.json").write_text("[1]")
    assert compute(executor, "load", {"file": str(tmp_path / "list.json"), "key": "0"}).result is None
    (tmp_path / "bom.json").write_text('\ufeff{"n": 2}', encoding="utf-8")
    assert compute(executor, "load", {"file": str(tmp_path / "bom.json"), "key": "n"}).result == 2


def test_compute_load_of_a_file_that_is_not_json_is_a_located_error(tmp_path: Path) -> None:
    target = tmp_path / "c.json"
    target.write_text('{\n  "a": 1, // mine\n}')
    outcome = compute(Executor(None, cwd=str(tmp_path)), "load", {"file": str(target)})
    assert (outcome.result, outcome.error) == (None, f"{target}:2:11: not valid JSON: Expecting property "
                                               "name enclosed in double quotes (a comment: JSON has none)")


def test_compute_read_last_non_empty_lines(tmp_path: Path) -> None:
    executor, target = Executor(None, cwd=str(tmp_path)), tmp_path / "x.log"
    target.write_text("a\n\nb\n  \nc\nd\n")
    assert compute(executor, "read", {"file": str(target), "tail": 2}).result == ["c", "d"]
    assert compute(executor, "read", {"file": str(target)}).result == ["a", "b", "c", "d"]
    assert compute(executor, "read", {"file": str(tmp_path / "missing")}).result == []


def test_compute_records_days_and_limit(tmp_path: Path) -> None:
    now, target, executor = datetime.now(UTC), tmp_path / "stats.jsonl", Executor(None, cwd=str(tmp_path))
    stamps = [(now - timedelta(days=10)).isoformat().replace("+00:00", "Z"), None, "garbage",
              (now - timedelta(hours=2)).isoformat(), now.isoformat().replace("+00:00", "Z")]
    lines = [json.dumps({"timestamp": t, "n": n} if t else {"n": n}) for n, t in enumerate(stamps, 1)]
    target.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")

    def numbers(**params: Any) -> list[int]:
        return [r["n"] for r in compute(executor, "records", {"file": str(target), **params}).result]

    assert numbers() == [1, 2, 3, 4, 5]
    assert numbers(days=1) == [4, 5]
    assert numbers(days="30") == [1, 4, 5]
    assert numbers(limit=2) == [4, 5]
    assert numbers(days="") == [1, 2, 3, 4, 5]
    assert compute(executor, "records", {"file": str(target), "days": "week"}).error == \
        "days must be a number, got 'week'"
    assert compute(executor, "records", {"file": str(tmp_path / "none.jsonl")}).result == []


def slot(executor: Executor, directory: Path, maximum: int, name: str = "turn", wait_ms: int = 100) -> Any:
    params = {"dir": str(directory), "max": maximum, "name": name, "wait_ms": wait_ms}
    return compute(executor, "slot", params)


def test_compute_slot_exclusive_until_released(tmp_path: Path) -> None:
    first, second = Executor(None, cwd=str(tmp_path)), Executor(None, cwd=str(tmp_path))
    assert slot(first, tmp_path / "slots", 1).result == 0
    assert slot(first, tmp_path / "slots", 1).result == 0  # the same name is already held
    assert slot(second, tmp_path / "slots", 1).result is None
    assert slot(second, tmp_path / "slots", 2).result == 1
    first.release("turn")
    first.release("turn")  # releasing twice is harmless
    second.release("turn")
    assert slot(second, tmp_path / "slots", 1).result == 0
    assert compute(first, "slot", {"max": 1}).error == "slot: no directory"
    assert slot(first, tmp_path / "other", 1, name="job").result == 0
    apply(first, Effect("release", {"name": "job"}, "r"))  # the `release` action
    second.release("turn")
    assert slot(second, tmp_path / "other", 1).result == 0
    second.release("turn")


@contextlib.contextmanager
def holder(directory: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding slot 0 of `directory` until it is told to release it or killed."""
    with subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, cwd=ROOT) as process:
        try:
            assert process.stdout is not None and process.stdout.readline() == "held 0\n"
            yield process
        finally:
            process.kill()


def test_compute_slot_across_processes_release_and_kill(tmp_path: Path) -> None:
    directory, mine = tmp_path / "slots", Executor(None, cwd=str(tmp_path))
    with holder(directory) as process:
        assert slot(mine, directory, 1).result is None
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("release\n")
        process.stdin.flush()
        assert process.stdout.readline() == "released\n"
        assert slot(mine, directory, 1).result == 0
        mine.release("turn")
    with holder(directory):
        assert slot(mine, directory, 1).result is None
    assert slot(mine, directory, 1).result == 0  # a killed holder's lock died with it
    mine.release("turn")


def test_compute_slot_wait_zero_does_not_wait(tmp_path: Path) -> None:
    holder = Executor(None, cwd=str(tmp_path))
    assert slot(holder, tmp_path / "s", 1).result == 0
    request = SignalRequest("s", "slot", {"dir": str(tmp_path / "s"), "max": 1, "wait_ms": 0})
    try:
        assert asyncio.run(asyncio.wait_for(Executor(None, cwd=".").compute(request), 1.5)).result is None
    finally:
        holder.release("turn")


@pytest.mark.parametrize(("kind", "params", "budget"), [
    ("classify", {}, 4000), ("classify", {"timeout_ms": 900}, 900), ("complete", {}, 45000),
    ("child", {"timeout_ms": "2000"}, 2000), ("ask", {}, 300000),
    ("slot", {}, 30000), ("slot", {"wait_ms": 60000, "timeout_ms": 5}, 60000), ("slot", {"wait_ms": 0}, 0),
    ("probe", {"models": ["a/b", "c/d"], "classifier": "l/k", "timeout_ms": 1000}, 3000),
    ("probe", {"models": "a/b"}, 10000), ("probe", {}, 10000), ("records", {"timeout_ms": 1}, 5000)])
def test_budget_ms_is_the_longest_the_signal_may_take(kind: str, params: dict[str, Any], budget: int) -> None:
    assert budget_ms(SignalRequest("s", kind, params)) == budget


def test_apply_audit_on_a_full_disk_loses_no_record_whole_and_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = tmp_path / "audit.jsonl"
    executor = Executor(None, cwd=str(tmp_path))
    record = Effect("audit", {"file": str(audit), "record": {"n": 1}, "stamp": False}, "ra")
    assert apply(executor, record).warnings == []
    real = os.write

    def full(fd: int, data: bytes) -> int:
        return real(fd, bytes(data)[: len(data) // 2])  # half a record fits on the disk

    monkeypatch.setattr(os, "write", full)
    first = apply(executor, Effect("audit", {"file": str(audit), "record": {"n": 2}, "stamp": False}, "ra"))
    second = apply(executor, Effect("audit", {"file": str(audit), "record": {"n": 3}, "stamp": False}, "ra"))
    monkeypatch.undo()
    third = apply(executor, Effect("audit", {"file": str(audit), "record": {"n": 4}, "stamp": False}, "ra"))
    [warning] = first.warnings
    assert warning.startswith(f"rule ra: audit failed: cannot write {audit}: ")
    assert warning.endswith("lines are dropped whole until it works again [RT501]")
    assert second.warnings == [] and third.warnings == []  # told once; then it works again
    assert [json.loads(line) for line in audit.read_text().splitlines()] == [{"n": 1}, {"n": 4}]


def test_apply_audit_writes_strict_json(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    effect = Effect("audit", {"file": str(audit), "record": {"p": float("nan"), "q": float("inf")},
                              "stamp": False}, "ra")
    assert apply(Executor(None, cwd=str(tmp_path)), effect).warnings == []
    assert audit.read_text() == '{"p": null, "q": null}\n'
