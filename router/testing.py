"""`router test`: run policy test files and every rule's inline `examples:`.

A test file (`*.test.yaml`) names a policy and lists cases; each case is an event (partial: the
defaults of the event model are filled in), optional state and signal values, and expectations:
the exact rules that fire, the actions in order (parameters compared as a subset), the state
(subset) or the external signal evaluation waits for.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from router.compiled import CompiledPolicy, CompiledRule
from router.decision import Decision, SignalOutcome
from router.diagnostics import Diagnostic, Span
from router.errors import EventError, SourceError
from router.event_docs import complete_event
from router.interpreter import evaluate
from router.model import Example, Expectation
from router.source import SourceDoc, read_source
from router.validation import validation_diagnostics


class Case(Example):
    """A test-file case: an inline example with a required name."""

    name: str


class TestFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: str | list[str] | None = None
    cases: list[Case] = Field(default_factory=list)


@dataclass
class CaseResult:
    """The outcome of one case or inline example."""

    name: str
    span: Span
    passed: bool
    problems: list[str] = field(default_factory=list)
    fired: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.span.path, "line": self.span.line,
                "passed": self.passed, "problems": self.problems, "fired": list(self.fired)}


@dataclass
class TestReport:
    results: list[CaseResult] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unexercised: list[CompiledRule] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.passed)


def read_test_file(path: Path) -> tuple[TestFile, SourceDoc]:
    """Parse and validate a test file; raise SourceError with located diagnostics."""
    from router.paths import display_path

    doc = read_source(path, display=display_path(path))
    try:
        return TestFile.model_validate(doc.data or {}), doc
    except ValidationError as exc:
        raise SourceError(validation_diagnostics(exc, doc, TestFile)) from None


def policy_paths_for(test_path: Path, test: TestFile) -> list[Path]:
    """The policy files a test file names (relative to it), else its sibling without `.test`."""
    if test.policy is None:
        return [test_path.with_name(test_path.name.replace(".test.", "."))]
    names = [test.policy] if isinstance(test.policy, str) else test.policy
    return [test_path.parent / name for name in names]


def run_cases(policy: CompiledPolicy, test: TestFile, doc: SourceDoc) -> list[CaseResult]:
    results = []
    for index, case in enumerate(test.cases):
        span = doc.span(("cases", index))
        results.append(_run(policy, case.name, span, case.event, case.state, case.signals,
                            case.signal_errors, case.expect, doc=doc, base=("cases", index, "event")))
    return results


def run_examples(policy: CompiledPolicy) -> list[CaseResult]:
    """Run every rule's inline examples.

    An example documents its rule as its own file defines it: it runs against the policy of that
    file alone (with what the file `use:`s), so other packs and later layers do not change it. A
    file that does not compile on its own (it reads vars of another layer) runs against the
    whole policy instead.
    """
    results = []
    standalone: dict[str, CompiledPolicy | None] = {}
    sources = {f.path: f.source for f in policy.files}
    for rule in policy.rules:
        if not rule.examples:
            continue
        if rule.file not in standalone:
            standalone[rule.file] = _alone(sources.get(rule.file), policy)
        own = standalone[rule.file] or policy
        for number, (example, span) in enumerate(rule.examples, start=1):
            name = f"{rule.id} example {example.name or number}"
            results.append(_run(own, name, span, example.event, example.state, example.signals,
                                example.signal_errors, example.expect, rule_id=rule.id))
    return results


def _alone(source: Path | None, policy: CompiledPolicy) -> CompiledPolicy | None:
    if source is None or len(policy.files) == 1:
        return policy
    from router.compile import compile_files

    compiled, diagnostics = compile_files([("file", source)])
    return compiled if compiled is not None and not any(d.severity == "error" for d in diagnostics) else None


def _run(policy: CompiledPolicy, name: str, span: Span, event_doc: dict[str, Any],
         state: dict[str, Any], signals: dict[str, Any], signal_errors: dict[str, str],
         expect: Expectation, *, rule_id: str | None = None, doc: SourceDoc | None = None,
         base: tuple[Any, ...] = ()) -> CaseResult:
    try:
        event = complete_event(event_doc, doc=doc, base=base, where=str(span))
    except EventError as exc:
        return CaseResult(name, span, False, [f"{d.message}" for d in exc.diagnostics])
    outcomes = {n: SignalOutcome(error=e) for n, e in signal_errors.items()}
    decision = evaluate(policy, event, state=state, outcomes=outcomes, signal_values=signals)
    problems = compare(decision, expect, rule_id=rule_id)
    return CaseResult(name, span, not problems, problems, decision.fired)


def compare(decision: Decision, expect: Expectation, *, rule_id: str | None = None) -> list[str]:
    """What differs between a decision and the expectation (empty when it passes)."""
    problems = []
    if decision.pending is not None and expect.pending != decision.pending.name:
        problems.append(f"evaluation waits for signal '{decision.pending.name}'; give its value "
                        f"under `signals:` or expect `pending: {decision.pending.name}`")
    elif expect.pending is not None and decision.pending is None:
        problems.append(f"expected evaluation to wait for signal '{expect.pending}', it did not")
    if expect.fires is not None:
        fired = rule_id in decision.fired if rule_id is not None else bool(decision.fired)
        if fired != expect.fires:
            subject = f"rule '{rule_id}'" if rule_id is not None else "a rule"
            problems.append(f"expected {subject} {'to fire' if expect.fires else 'not to fire'}; "
                            f"fired: {list(decision.fired) or 'none'}")
    if expect.fired is not None and list(decision.fired) != expect.fired:
        problems.append(_diff("fired", expect.fired, list(decision.fired)))
    if expect.actions is not None:
        actual = [e.to_dict() for e in decision.effects]
        if len(actual) != len(expect.actions) or not all(
                _subset(e, a) for e, a in zip(expect.actions, actual, strict=False)):
            problems.append(_diff("actions", expect.actions, actual))
    if expect.state is not None:
        flat = _flatten(decision.state)
        wanted = _leaves(expect.state)
        if any(flat.get(k) is not None if v is None else flat.get(k, _MISSING) != v
               for k, v in wanted.items()):
            problems.append(_diff("state", wanted, {k: flat.get(k) for k in wanted}))
    for error in decision.errors:
        problems.append(f"evaluation error: {error.message}")
    return problems


_MISSING = object()


def _leaves(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Expected state as dotted leaf keys: `{ds: {band: x}}` checks `ds.band` only."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_leaves(value, name + "."))
        else:
            flat[name] = value
    return flat


def _subset(expected: Any, actual: Any) -> bool:
    """Objects match when every expected key matches (recursively, also inside arrays)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return False
        return all(_subset(e, a) for e, a in zip(expected, actual, strict=True))
    return bool(expected == actual)


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        flat[name] = value
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
    return flat


def _diff(what: str, expected: Any, actual: Any) -> str:
    left = json.dumps(expected, indent=2, ensure_ascii=False, default=str).splitlines()
    right = json.dumps(actual, indent=2, ensure_ascii=False, default=str).splitlines()
    body = "\n".join(difflib.unified_diff(left, right, f"expected {what}", f"actual {what}", lineterm=""))
    return f"{what} differ\n{body}"
