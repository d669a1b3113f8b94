"""The failure policy (router/compile/failure.py): per event type, open or closed when the engine
cannot answer; what each layer may declare; what the engine hands the bridge."""

from __future__ import annotations

from pathlib import Path

from router.compile.compiler import compile_files
from router.diagnostics.diagnostic import Severity
from tests.helpers import compile_ok, write

GUARD = """
version: 1
rules:
  - {id: no-force-push, on: tool_call, when: "tool.name == 'bash'", do: [{block: "no force push"}]}
  - {id: mask, on: tool_result, do: [{rewrite_result: "masked"}]}
  - {id: route, on: input, do: [{notify: "hi"}]}
  - {id: try, on: turn_end, shadow: true, do: [{notify: "x"}]}
"""


def test_events_a_rule_can_refuse_fail_closed_and_the_rest_open(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, GUARD)
    assert policy.failure == {"input": "open", "tool_call": "closed", "tool_result": "closed",
                              "turn_end": "open"}


def test_a_shadow_block_guards_nothing(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, """
        version: 1
        rules:
          - {id: maybe, on: tool_call, shadow: true, do: [{block: "no"}]}
    """)
    assert policy.failure == {"tool_call": "open"}


def test_a_file_may_declare_otherwise_and_an_unknown_event_is_located(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, GUARD + "failure_policy: {tool_call: open, tool_result: open}\n")
    assert policy.failure["tool_call"] == "open" and policy.failure["tool_result"] == "open"
    _, diagnostics = compile_files([("user", write(tmp_path, GUARD + "failure_policy: {tool_cal: open}\n"))])
    [error] = [d for d in diagnostics if d.severity is Severity.ERROR]
    assert error.code == "RT205" and "failure_policy" in error.message and "tool_call" in (error.help or "")
    assert (error.span.line, error.span.col) == (7, 18)


def test_only_what_the_bridge_can_refuse_may_be_declared(tmp_path: Path) -> None:
    _, diagnostics = compile_files([("user", write(tmp_path, GUARD + "failure_policy: {input: closed}\n"))])
    [error] = [d for d in diagnostics if d.severity is Severity.ERROR]
    assert error.code == "RT205" and "'input' always goes on as Pi would" in error.message


def test_a_project_may_close_but_never_open_the_users_guard(tmp_path: Path) -> None:
    user = write(tmp_path, GUARD, "user.yaml")
    project = write(tmp_path, "version: 1\nfailure_policy: {tool_call: open}\n", "project.yaml")
    policy, diagnostics = compile_files([("user", user), ("project", project)])
    assert policy is not None and policy.failure["tool_call"] == "closed"
    closing = write(tmp_path, "version: 1\nfailure_policy: {tool_result: closed}\n", "closing.yaml")
    policy, _ = compile_files([("user", write(tmp_path, "version: 1\n", "bare.yaml")), ("project", closing)])
    assert policy is not None and policy.failure["tool_result"] == "closed"  # a project may close
    [warning] = [d for d in diagnostics if d.code == "RT620"]
    assert warning.severity is Severity.WARNING and "cannot open `tool_call`" in warning.message


def test_the_managed_layer_keeps_an_event_closed(tmp_path: Path) -> None:
    managed = write(tmp_path, "version: 1\nfailure_policy: {tool_call: closed}\n", "managed.yaml")
    user = write(tmp_path, "version: 1\nfailure_policy: {tool_call: open}\n", "user.yaml")
    policy, diagnostics = compile_files([("managed", managed), ("user", user)])
    assert policy is not None and policy.failure["tool_call"] == "closed"
    assert [d.code for d in diagnostics if d.code == "RT620"] == ["RT620"]


def test_the_engine_declares_the_failure_policy_to_the_bridge(tmp_path: Path) -> None:
    from router.compile.cache import from_ir, to_ir

    policy = compile_ok(tmp_path, GUARD)
    assert from_ir(to_ir(policy)).failure == policy.failure  # what a cached policy declares
