"""Shared helpers for the router's tests: write policies, compile them, evaluate events; stub
executables and process-group checks for the executor and server tests."""

from __future__ import annotations

import contextlib
import os
import signal
import textwrap
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from router.compile.compiler import compile_files
from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.diagnostics.errors import ExpressionError
from router.engine.decision import Decision, SignalOutcome
from router.engine.interpreter import evaluate
from router.engine.trace import Tracer
from router.lang.expr.evaluator import Evaluator
from router.lang.expr.expression import compile_expression, compile_template
from router.lang.expr.syntax import ExpressionSyntaxError
from router.load.event_documents import complete_event


def write(tmp_path: Path, yaml_text: str, name: str = "policy.yaml") -> Path:
    """Write dedented YAML text to `tmp_path/name` and return the path."""
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(yaml_text).lstrip("\n"), encoding="utf-8")
    return path


def compile_text(
    tmp_path: Path, yaml_text: str, name: str = "policy.yaml"
) -> tuple[CompiledPolicy | None, list[Diagnostic]]:
    """Write one policy file and compile it alone."""
    return compile_files([("file", write(tmp_path, yaml_text, name))])


def compile_ok(tmp_path: Path, yaml_text: str, name: str = "policy.yaml") -> CompiledPolicy:
    """Compile a policy that must have no errors (warnings are allowed)."""
    policy, diagnostics = compile_text(tmp_path, yaml_text, name)
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    assert policy is not None and not errors, [f"{d.span}: {d.message} [{d.code}]" for d in errors]
    return policy


def codes(diagnostics: Iterable[Diagnostic]) -> list[str]:
    """The codes of the diagnostics, sorted."""
    return sorted(d.code for d in diagnostics)


def only(diagnostics: Iterable[Diagnostic], code: str) -> Diagnostic:
    """The single diagnostic with `code`."""
    found = [d for d in diagnostics if d.code == code]
    assert len(found) == 1, [(d.code, d.message) for d in diagnostics]
    return found[0]


def where(diagnostic: Diagnostic) -> tuple[int, int]:
    """(line, col) of a diagnostic."""
    assert diagnostic.span is not None, diagnostic
    return diagnostic.span.line, diagnostic.span.col


def event(event_type: str, **fields: Any) -> dict[str, Any]:
    """A complete normalized event of `event_type` with `fields` set."""
    return complete_event({"type": event_type, **fields})


def decide(
    policy: CompiledPolicy,
    event_doc: Mapping[str, Any],
    *,
    state: Mapping[str, Any] | None = None,
    outcomes: Mapping[str, SignalOutcome] | None = None,
    signals: Mapping[str, Any] | None = None,
    tracer: Tracer | None = None,
) -> Decision:
    """Evaluate a (partial) event document against the policy."""
    full = complete_event(dict(event_doc))
    return evaluate(policy, full, state=state, outcomes=outcomes, signal_values=signals, tracer=tracer)


def texts(decision: Decision, action: str = "notify") -> list[Any]:
    """The `text` parameter of every effect of `action`."""
    return [p.get("text") if isinstance(p, dict) else p for p in decision.actions(action)]


def run(source: str, **scope: Any) -> Any:
    """Evaluate an expression against keyword names."""
    return Evaluator(scope).value(compile_expression(source))


def render(source: str, **scope: Any) -> Any:
    """Render a template against keyword names."""
    return Evaluator(scope).render(compile_template(source))


def refused(source: str) -> ExpressionSyntaxError:
    """The compile error of an expression that must not compile."""
    with pytest.raises(ExpressionSyntaxError) as info:
        compile_expression(source)
    return info.value


def fails(source: str, **scope: Any) -> ExpressionError:
    """The evaluation error of an expression that must fail."""
    with pytest.raises(ExpressionError) as info:
        run(source, **scope)
    return info.value


def same_value(left: Any, right: Any) -> bool:
    """Equal values of the same types all the way down (so 1 is not True and 1.0 is not 1)."""
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same_value(x, y) for x, y in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same_value(left[k], right[k]) for k in left)
    return type(left) is type(right) and bool(left == right)


# --- stub executables and their process groups ---------------------------------------------------

HANGING_PI = """#!/bin/sh
echo $$ > "$(dirname "$0")/pid"
sleep 60 &
echo $! > "$(dirname "$0")/gpid"
wait
"""


def stub(directory: Path, text: str, name: str = "pi") -> Path:
    """Write an executable script ``directory/name`` (parents created)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of the process group remains (fields 3 and 5 of stat)."""
    stats = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            stats.append(entry.read_text().rsplit(")", 1)[1].split())
    return any(int(fields[2]) == pgid and fields[0] not in ("Z", "X") for fields in stats)


def assert_group_gone(pgid: int) -> None:
    """The process group ``pgid`` is gone within 5 s; SIGKILL to it afterwards in any case."""
    deadline = time.monotonic() + 5  # SIGKILL is sent; the kernel may need a moment to finish the exits
    try:
        while group_alive(pgid):
            assert time.monotonic() < deadline, f"process group {pgid} still alive"
            time.sleep(0.01)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def record_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Register the expression function `count_calls(x) -> x` for one test, recording every call
    (each computation of a signal that uses it); the list of values it was called with."""
    from router.lang.functions import FUNCTIONS, Function

    seen: list[Any] = []

    def count_calls(value: Any) -> Any:
        seen.append(value)
        return value

    monkeypatch.setitem(FUNCTIONS, "count_calls",
                        Function("count_calls", count_calls, 1, 1, "Record a call.", "count_calls(1) == 1"))
    return seen
