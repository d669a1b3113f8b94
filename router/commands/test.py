"""`router test`: run test files and inline examples, report PASS/FAIL and unexercised rules.

Without paths it runs the project's and the user's tests: the inline examples of the layered
policy's own files (not those of the built-in packs) and `.pi/*.test.yaml` plus the user's
`router.test.yaml`. `packs=True` (`--packs`) adds the built-in packs' own tests and examples.
A test file or policy that does not load counts as one failure.
"""

from __future__ import annotations

import json
from pathlib import Path

from router.commands import policy_note
from router.compile.compiler import LoadedPolicy, compile_layers, complete, load_layered
from router.compile.ir import CompiledPolicy
from router.diagnostics.code_names import FILE_UNREADABLE
from router.diagnostics.diagnostic import Diagnostic, Span, has_errors, render_text, sort_diagnostics
from router.diagnostics.errors import SourceError
from router.load.loader import PolicyFile, describe_files
from router.load.paths import display_path, packs_dir
from router.testing.coverage import Coverage
from router.testing.coverage import coverage as count_coverage
from router.testing.runner import (
    CaseResult,
    TestReport,
    default_test_files,
    is_test_file,
    policy_paths_for,
    read_test_file,
    run_cases,
    run_examples,
)


def collect(paths: list[Path], *, cwd: Path) -> tuple[list[Path], list[Path]]:
    """Split the given paths into test files and policy files (directories are searched)."""
    if not paths:
        return default_test_files(cwd), []
    tests, policies = [], []
    for path in paths:
        if path.is_dir():
            tests += sorted(path.glob("*.test.yaml"))
        elif is_test_file(path):
            tests.append(path)
        else:
            policies.append(path)
    return tests, policies


def pack_tests() -> tuple[list[Path], list[Path]]:
    """The built-in packs' test files and pack files (for their inline examples)."""
    files = sorted(packs_dir().glob("*.yaml"))
    return [p for p in files if is_test_file(p)], [p for p in files if not is_test_file(p)]


def run_tests(paths: list[Path], *, cwd: Path, packs: bool = False) -> TestReport:
    """Run the given paths, else the project's and the user's tests (see the module docstring)."""
    report = TestReport()
    tests, policies = collect(paths, cwd=cwd)
    if packs:
        more_tests, more_policies = pack_tests()
        tests, policies = tests + more_tests, policies + more_policies
    runner = _Runner(report)
    if not paths:
        runner.policy(("<layered>",), complete(load_layered(cwd)), display_path(cwd / ".pi" / "router.yaml"))
        report.not_loaded = policy_note.not_loaded(cwd)
    for path in policies:
        runner.policy((str(path.resolve()),), complete(compile_layers([("file", path)])), display_path(path))
    for path in tests:
        runner.test_file(path)
    runner.examples(packs=packs)
    runner.unexercised(packs=packs)
    return report


class _Runner:
    """Compiles each policy once, runs cases and examples into the report."""

    def __init__(self, report: TestReport) -> None:
        self.report = report
        self.seen: dict[tuple[str, ...], LoadedPolicy] = {}

    def policy(self, key: tuple[str, ...], loaded: LoadedPolicy, where: str) -> None:
        """A policy run for its examples (the layered one, or a path given)."""
        self.report.policies.append(loaded.files)
        self._record(key, loaded, where)

    def compile(self, paths: list[Path], where: str) -> LoadedPolicy:
        key = tuple(str(p.resolve()) for p in paths)
        if key in self.seen:
            loaded = self.seen[key]
            if loaded.policy is None:
                self.report.results.append(_broken(where, [], "policy does not compile"))
            return loaded
        return self._record(key, complete(compile_layers([("file", p) for p in paths])), where)

    def _record(self, key: tuple[str, ...], loaded: LoadedPolicy, where: str) -> LoadedPolicy:
        self.seen[key] = loaded
        self.report.diagnostics += loaded.diagnostics
        if loaded.policy is None:
            self.report.results.append(_broken(where, loaded.diagnostics, "policy does not compile"))
        return loaded

    def test_file(self, path: Path) -> None:
        try:
            test, doc = read_test_file(path)
        except SourceError as exc:
            self.report.tests.append((path, []))
            self.report.diagnostics += exc.diagnostics
            self.report.results.append(_broken(display_path(path), exc.diagnostics,
                                               "test file does not load"))
            return
        loaded = self.compile(policy_paths_for(path, test), doc.path)
        self.report.tests.append((path, loaded.files))
        if loaded.policy is not None:
            self.report.results += run_cases(loaded.policy, test, doc)

    def examples(self, *, packs: bool) -> None:
        done: set[tuple[str, int, int]] = set()  # an example runs once, whatever loads its file
        for policy in self.policies():
            for result in run_examples(policy, packs=packs):
                key = (result.span.path, result.span.line, result.span.col)
                if key not in done:
                    done.add(key)
                    self.report.results.append(result)

    def unexercised(self, *, packs: bool) -> None:
        """Count the rules coverage is about (not the built-in packs' without `packs`), each once,
        and list those no case or example fired."""
        fired = {rule_id for result in self.report.results for rule_id in result.fired}
        listed: set[tuple[str, str]] = set()
        for policy in self.policies():
            pack_files = {f.path for f in policy.files if f.layer == "pack"}
            for rule in policy.rules:
                if (not packs and rule.file in pack_files) or (rule.file, rule.id) in listed:
                    continue
                listed.add((rule.file, rule.id))
                self.report.counted.append((rule.file, rule.id))
                if rule.id not in fired:
                    self.report.unexercised.append(rule)

    def policies(self) -> list[CompiledPolicy]:
        return [loaded.policy for loaded in self.seen.values() if loaded.policy is not None]


def _broken(where: str, diagnostics: list[Diagnostic], what: str) -> CaseResult:
    """A test file or policy that does not load: one failure, at its first error."""
    errors = [d for d in diagnostics if d.severity == "error"]
    span = next((d.span for d in sort_diagnostics(errors) if d.span is not None), None) or Span(where)
    problem = f"{len(errors)} error{'s' if len(errors) != 1 else ''}, listed above" if errors else "see above"
    return CaseResult(what, span, False, [problem])


def render(report: TestReport, *, fmt: str, coverage: bool = False) -> str:
    """The report as text (one line per case, diffs, a summary), JSON or JUnit XML; with
    `coverage`, the rule coverage too (text and JSON; JUnit's goes to stderr in `run`)."""
    if fmt == "junit":
        from router.commands.junit import render as junit

        return junit(report)
    if fmt == "json":
        extra = {"coverage": rule_coverage(report).to_dict()} if coverage else {}
        return json.dumps({
            "results": [r.to_dict() for r in report.results],
            "passed": len(report.results) - report.failed, "failed": report.failed,
            "unexercised": [{"rule": r.id, "path": r.file, "line": r.span.line} for r in report.unexercised],
            "diagnostics": [d.to_dict() for d in report.diagnostics],
            "files": policy_note.files_json(f for files in _all_files(report) for f in files),
            "tests": [{"path": display_path(path), "files": policy_note.files_json(files)}
                      for path, files in report.tests],
            "not_loaded": report.not_loaded,
            **extra,
        }, indent=2, ensure_ascii=False)
    lines = []
    errors = [d for d in report.diagnostics if d.severity == "error"]
    if errors:
        lines.append(render_text(errors))
    for result in report.results:
        lines.append(f"{result.span.path}:{result.span.line}: {result.name}: "
                     f"{'PASS' if result.passed else 'FAIL'}")
        lines += [f"  {line}" for problem in result.problems for line in problem.splitlines()]
    total = len(report.results)
    lines += [f"PASS: {total - report.failed}/{total}", f"FAIL: {report.failed}/{total}"]
    if coverage:
        lines += rule_coverage(report).lines()
    if report.unexercised:
        lines.append("rules no test exercised:")
        lines += [f"  {r.id} ({r.file}:{r.span.line})" for r in report.unexercised]
    return "\n".join(lines)


def notes(report: TestReport) -> list[str]:
    """The stderr lines of a text report: the policies used, the test files, warnings."""
    lines = [policy_note.policy_line(files) for files in report.policies if files]
    lines += [f"tests: {display_path(path)} against {describe_files(files)}" if files
              else f"tests: {display_path(path)} (does not load)" for path, files in report.tests]
    return list(dict.fromkeys(lines)) + policy_note.warning_lines(report.not_loaded)


def rule_coverage(report: TestReport) -> Coverage:
    """The rules the cases and examples exercised, of those the run counts, per file."""
    return count_coverage(report.counted, (rule_id for r in report.results for rule_id in r.fired))


def _all_files(report: TestReport) -> list[list[PolicyFile]]:
    return [*report.policies, *(files for _, files in report.tests)]


def exit_code(report: TestReport) -> int:
    if has_errors(report.diagnostics) or report.failed or not report.results:
        return 1
    return 0


def no_tests_message(report: TestReport) -> Diagnostic | None:
    if report.results:
        return None
    return Diagnostic(FILE_UNREADABLE, "no test cases or inline examples found", None,
                      help="add `examples:` to rules or a *.test.yaml file with `cases:` "
                           "(`router test --packs` runs the built-in packs' own tests)")


def run(paths: list[Path], *, cwd: Path, fmt: str = "text", packs: bool = False, coverage: bool = False,
        min_coverage: float | None = None) -> tuple[int, str]:
    """Run and render; a text report gets its `policy:`/`tests:` lines and warnings on stderr.
    `coverage` (implied by `min_coverage`) reports the rule coverage; under `min_coverage`
    percent the run fails with a line that says so."""
    report = run_tests(paths, cwd=cwd, packs=packs)
    coverage = coverage or min_coverage is not None
    text = render(report, fmt=fmt, coverage=coverage)
    if fmt != "json":
        policy_note.emit(notes(report))
    if fmt == "junit" and coverage:
        policy_note.emit(rule_coverage(report).lines())
    missing = no_tests_message(report)
    if fmt == "text" and missing is not None:
        text = f"{text}\nerror: {missing.message}\n  help: {missing.help}"
    elif fmt == "junit" and missing is not None:
        policy_note.emit([f"error: {missing.message}"])
    code = exit_code(report)
    if min_coverage is not None and rule_coverage(report).below(min_coverage):
        gate = rule_coverage(report).gate_line(min_coverage)
        if fmt == "text":
            text = f"{text}\n{gate}"
        else:
            policy_note.emit([gate])
        code = 1
    return code, text
