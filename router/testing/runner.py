"""`router test`: run policy test files and every rule's inline `examples:`.

A test file (`*.test.yaml`) names a policy and lists cases; each case is an event (partial: the
defaults of the event model are filled in), optional state and signal values, and expectations:
the rules that fire, the actions in order (parameters compared as a subset), the state (subset)
or the external signal evaluation waits for.

Expectations are about the policy's own rules, so that `use:`-ing a built-in pack does not break
them: `fires`, `fired` and `actions` leave out the rules of the packs the file uses (an inline
example's `fires` is about its own rule) unless `expect: {scope: all}`, and a pack's
external signals without a value under `signals:` take their dry-run value (the fallback, or
null) instead of making the case wait for them.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from router.compile.ir import CompiledPolicy, CompiledRule
from router.compile.question_settings import policy_question_settings
from router.diagnostics.code_names import FILE_UNREADABLE, INVALID_VALUE
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import EventError, SourceError
from router.engine.decision import Decision, SignalOutcome
from router.engine.interpreter import evaluate
from router.load.event_documents import complete_event
from router.load.loader import PolicyFile
from router.load.model import Example, Expectation
from router.load.paths import agent_dir, display_path
from router.load.source import SourceDoc, read_source
from router.load.validation import validation_diagnostics
from router.trust.capabilities import project_area

NOT_GIVEN = "not computed in a test: pack signal '{name}' has no value under `signals:`"
SCOPE_RULE_IN_CASE = "`scope: rule` needs the rule of an inline example; in a test file use `own` or `all`"


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
    errors: tuple[Diagnostic, ...] = ()  # the evaluation errors of the case's decision

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.span.path, "line": self.span.line,
                "passed": self.passed, "problems": self.problems, "fired": list(self.fired),
                "errors": [error.to_dict() for error in self.errors]}


@dataclass
class TestReport:
    results: list[CaseResult] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unexercised: list[CompiledRule] = field(default_factory=list)
    policies: list[list[PolicyFile]] = field(default_factory=list)  # the layered or given policies
    tests: list[tuple[Path, list[PolicyFile]]] = field(default_factory=list)  # test file, its policy
    not_loaded: list[dict[str, str]] = field(default_factory=list)  # see commands.policy_note
    counted: list[tuple[str, str]] = field(default_factory=list)  # (file, rule id) coverage counts

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.passed)


@dataclass(frozen=True)
class Subject:
    """What a case is about: the example's rule (if any), the ids of the rules of its own layer
    (None: every rule) and the pack signals that take their dry-run value when not given."""

    rule_id: str | None = None
    own: frozenset[str] | None = None
    defaults: frozenset[str] = frozenset()


def subject_for(policy: CompiledPolicy, *, layers: frozenset[str], rule_id: str | None = None) -> Subject:
    """The subject of a case against `policy` whose own rules are those of `layers`."""
    layer_of = {f.path: f.layer for f in policy.files}
    own = frozenset(r.id for r in policy.rules if layer_of.get(r.file) in layers)
    return Subject(rule_id, own, pack_signals(policy) - frozenset(_own_signals(policy, layers)))


def pack_signals(policy: CompiledPolicy) -> frozenset[str]:
    """External signals whose definition in force comes from a built-in pack used by the policy."""
    owner: dict[str, str] = {}
    for f in policy.files:
        for name in f.policy.signals:
            owner[name] = f.layer
    return frozenset(name for name, layer in owner.items()
                     if layer == "pack" and name in policy.signals and policy.signals[name].external)


def _own_signals(policy: CompiledPolicy, layers: frozenset[str]) -> set[str]:
    return {name for f in policy.files if f.layer in layers for name in f.policy.signals}


def top_layers(policy: CompiledPolicy) -> frozenset[str]:
    """The layers of the files a policy was compiled from (not those they `use:`), packs excluded."""
    return frozenset(f.layer for f in policy.files if f.used_by is None and f.layer != "pack")


def is_test_file(path: Path) -> bool:
    return ".test." in path.name


def default_test_files(cwd: Path, *, agent: Path | None = None) -> list[Path]:
    """The tests `router test` runs without paths: the project's `.pi/*.test.yaml` and the user's
    `router.test.yaml` next to `~/.pi/agent/router.yaml`."""
    project = cwd / ".pi"
    found = sorted(p for p in project.glob("*.test.yaml") if p.is_file()) if project.is_dir() else []
    user = (agent or agent_dir()) / "router.test.yaml"
    return found + ([user] if user.is_file() else [])


def project_test_area(path: Path) -> Path | None:
    """The project a project's test file (`<project>/.pi/*.test.yaml`) must stay inside: its links
    may not lead out (RT104). Other test files are the ones a user names, read where they lead."""
    parent = path.absolute().parent
    if parent.name != ".pi" or path.absolute().is_relative_to(agent_dir().absolute()):
        return None
    return project_area(parent.parent, Path.home())


def lint_test_file(path: Path, *, sources: dict[str, list[str]] | None = None) -> list[Diagnostic]:
    """Located diagnostics of a test file: YAML, keys, the policy it names, each case's event.

    The policy and the events are checked even when the file does not fit the schema, so that
    one run shows every problem. `sources` receives the file's lines once it parsed (for excerpts).
    """
    try:
        doc = read_source(path, display=display_path(path), within=project_test_area(path))
    except SourceError as exc:
        return exc.diagnostics
    if sources is not None:
        sources[doc.path] = doc.lines
    try:
        TestFile.model_validate(doc.data or {})
        found: list[Diagnostic] = []
    except ValidationError as exc:
        found = validation_diagnostics(exc, doc, TestFile)
    data = doc.data if isinstance(doc.data, dict) else {}
    return found + _missing_policies(path, data, doc) + _case_problems(data, doc)


def _missing_policies(path: Path, data: dict[str, Any], doc: SourceDoc) -> list[Diagnostic]:
    named = data.get("policy")
    names = [named] if isinstance(named, str) else named if isinstance(named, list) else []
    test = TestFile(policy=None if named is None else [n for n in names if isinstance(n, str)])
    return [Diagnostic(FILE_UNREADABLE, f"the test file's policy does not exist: {display_path(target)}",
                       doc.span(("policy",)) if named is not None else doc.span(()),
                       help="`policy:` paths are relative to the test file; without `policy:` the "
                            "cases run against the file next to it without `.test`")
            for target in policy_paths_for(path, test) if not target.is_file()]


def _case_problems(data: dict[str, Any], doc: SourceDoc) -> list[Diagnostic]:
    cases = data.get("cases")
    found: list[Diagnostic] = []
    for index, case in enumerate(cases if isinstance(cases, list) else []):
        if not isinstance(case, dict):
            continue
        if "event" in case:
            try:
                complete_event(case["event"], doc=doc, base=("cases", index, "event"))
            except EventError as exc:
                found += exc.diagnostics
        expect = case.get("expect")
        if isinstance(expect, dict) and expect.get("scope") == "rule":
            found.append(Diagnostic(INVALID_VALUE, SCOPE_RULE_IN_CASE,
                                    doc.span(("cases", index, "expect", "scope"))))
    return found


def read_test_file(path: Path) -> tuple[TestFile, SourceDoc]:
    """Parse and validate a test file; raise SourceError with located diagnostics."""
    doc = read_source(path, display=display_path(path), within=project_test_area(path))
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
    """Run a test file's cases; `fired` and `actions` compare the policy's own rules (not those
    of the built-in packs it uses) unless a case says `scope: all`."""
    results = []
    subject = subject_for(policy, layers=top_layers(policy))
    for index, case in enumerate(test.cases):
        span = doc.span(("cases", index))
        if case.expect.scope == "rule":
            results.append(CaseResult(case.name, span, False, [SCOPE_RULE_IN_CASE]))
            continue
        results.append(_run(policy, case.name, span, case, subject, doc=doc, base=("cases", index, "event")))
    return results


def run_examples(policy: CompiledPolicy, *, packs: bool = True) -> list[CaseResult]:
    """Run every rule's inline examples (with `packs=False`, not those of built-in packs pulled in
    by `use:` or the default layer).

    An example documents its rule as its own file defines it: it runs against the policy of that
    file alone (with what the file `use:`s), so other packs and later layers do not change it. A
    file that does not compile on its own (it reads vars of another layer) runs against the
    whole policy instead. Its expectations look at the rules of its file's layer (the packs that
    file uses are left out), its `fires` at its own rule.
    """
    results = []
    standalone: dict[str, CompiledPolicy | None] = {}
    files = {f.path: f for f in policy.files}
    for rule in policy.rules:
        file = files.get(rule.file)
        if not rule.examples or (not packs and file is not None and file.layer == "pack"):
            continue
        if rule.file not in standalone:
            standalone[rule.file] = _alone(file.source if file else None, policy)
        own = standalone[rule.file] or policy
        layer = next((f.layer for f in own.files if f.path == rule.file), "file")
        subject = subject_for(own, layers=frozenset({layer}), rule_id=rule.id)
        for number, (example, span) in enumerate(rule.examples, start=1):
            name = f"{rule.id} example {example.name or number}"
            results.append(_run(own, name, span, example, subject))
    return results


def _alone(source: Path | None, policy: CompiledPolicy) -> CompiledPolicy | None:
    if source is None or len(policy.files) == 1:
        return policy
    from router.compile.compiler import compile_files

    compiled, diagnostics = compile_files([("file", source)])
    return compiled if compiled is not None and not any(d.severity == "error" for d in diagnostics) else None


def _run(policy: CompiledPolicy, name: str, span: Span, case: Example, subject: Subject, *,
         doc: SourceDoc | None = None, base: tuple[Any, ...] = ()) -> CaseResult:
    try:
        given = case.event.get("env")
        env = {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {}
        event = complete_event(case.event, doc=doc, base=base, where=str(span),
                               questions=policy_question_settings(policy, env))
    except EventError as exc:
        return CaseResult(name, span, False, [f"{d.message}" for d in exc.diagnostics])
    decision = decide(policy, event, case, subject.defaults)
    problems = compare(decision, case.expect, rule_id=subject.rule_id, own=subject.own)
    return CaseResult(name, span, not problems, problems, decision.fired, decision.errors)


def decide(policy: CompiledPolicy, event: dict[str, Any], case: Example,
           defaults: frozenset[str] = frozenset()) -> Decision:
    """Evaluate a case; a signal of `defaults` it waits for (and gives no value for, and does not
    expect to wait for) fails as in a dry run, so its fallback (or null) is used."""
    outcomes = {n: SignalOutcome(error=e) for n, e in case.signal_errors.items()}
    while True:
        decision = evaluate(policy, event, state=case.state, outcomes=outcomes, signal_values=case.signals)
        pending = decision.pending
        if pending is None or pending.name not in defaults or pending.name == case.expect.pending \
                or pending.name in outcomes:
            return decision
        outcomes[pending.name] = SignalOutcome(error=NOT_GIVEN.format(name=pending.name))


def compare(decision: Decision, expect: Expectation, *, rule_id: str | None = None,
            own: frozenset[str] | None = None) -> list[str]:
    """What differs between a decision and the expectation (empty when it passes).

    `rule_id` is an inline example's rule, `own` the ids of the rules of the case's own layer
    (None: every rule); `expect.scope` picks between them (see `_scope`).
    """
    problems = []
    if decision.pending is not None and expect.pending != decision.pending.name:
        problems.append(f"evaluation waits for signal '{decision.pending.name}'; give its value "
                        f"under `signals:` or expect `pending: {decision.pending.name}`")
    elif expect.pending is not None and decision.pending is None:
        problems.append(f"expected evaluation to wait for signal '{expect.pending}', it did not")
    if expect.fires is not None:
        wanted, subject = _scope(expect, "fires", rule_id, own)
        if any(wanted(r) for r in decision.fired) != expect.fires:
            problems.append(f"expected {subject} {'to fire' if expect.fires else 'not to fire'}; "
                            f"fired: {list(decision.fired) or 'none'}")
    if expect.fired is not None:
        wanted, subject = _scope(expect, "fired", rule_id, own)
        fired = [r for r in decision.fired if wanted(r)]
        if fired != expect.fired:
            problems.append(_diff("fired", expect.fired, fired) + _left_out(decision.fired, wanted))
    if expect.actions is not None:
        wanted, subject = _scope(expect, "actions", rule_id, own)
        effects = [e for e in decision.effects if wanted(e.rule_id)]
        actual = [e.to_dict() for e in effects]
        if len(actual) != len(expect.actions) or not all(
                _subset(e, a) for e, a in zip(expect.actions, actual, strict=False)):
            problems.append(_diff("actions", expect.actions, actual)
                            + _left_out([e.rule_id for e in decision.effects], wanted))
    if expect.state is not None:
        flat = _flatten(decision.state)
        wanted_state = _leaves(expect.state)
        if any(flat.get(k) is not None if v is None else flat.get(k, _MISSING) != v
               for k, v in wanted_state.items()):
            problems.append(_diff("state", wanted_state, {k: flat.get(k) for k in wanted_state}))
    for error in decision.errors:
        problems.append(f"evaluation error: {error.message} [{error.code}]")
    return problems


def _scope(expect: Expectation, key: str, rule_id: str | None,
           own: frozenset[str] | None) -> tuple[Callable[[str], bool], str]:
    """Which rules an expectation key looks at, and how to name them in a message.

    By default an example's `fires` looks at its rule, everything else at the rules of the own
    layer; `expect.scope` sets one scope for all three keys.
    """
    scope = expect.scope or ("rule" if rule_id is not None and key == "fires" else "own")
    if scope == "rule" and rule_id is not None:
        return (lambda r: r == rule_id), f"rule '{rule_id}'"
    if scope == "own" and own is not None:
        return own.__contains__, "a rule of this file's layer"
    return (lambda _: True), "a rule"


def _left_out(rule_ids: Iterable[str], wanted: Callable[[str], bool]) -> str:
    others = list(dict.fromkeys(r for r in rule_ids if not wanted(r)))
    if not others:
        return ""
    return (f"\n(not compared: {', '.join(others)} also fired; "
            "`expect: {scope: all}` compares every rule)")


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
