"""`router test`: run test files and inline examples, report PASS/FAIL and unexercised rules."""

from __future__ import annotations

import json
from pathlib import Path

from router.compile import compile_files, load_policy
from router.compiled import CompiledPolicy
from router.diagnostics import Diagnostic, has_errors, render_text
from router.errors import SourceError
from router.testing import TestReport, policy_paths_for, read_test_file, run_cases, run_examples


def collect(paths: list[Path], *, cwd: Path) -> tuple[list[Path], list[Path]]:
    """Split the given paths into test files and policy files (directories are searched)."""
    if not paths:
        found = sorted((cwd / ".pi").glob("*.test.yaml")) if (cwd / ".pi").is_dir() else []
        return found, []
    tests, policies = [], []
    for path in paths:
        if path.is_dir():
            tests += sorted(path.glob("*.test.yaml"))
        elif ".test." in path.name:
            tests.append(path)
        else:
            policies.append(path)
    return tests, policies


def run_tests(paths: list[Path], *, cwd: Path) -> TestReport:
    report = TestReport()
    tests, policies = collect(paths, cwd=cwd)
    seen: dict[tuple[str, ...], CompiledPolicy] = {}
    if not paths:
        policy, diagnostics = load_policy(cwd)
        report.diagnostics += diagnostics
        if policy is not None:
            seen[("<layered>",)] = policy
    for path in policies:
        _compile_into(seen, [path], report)
    for path in tests:
        try:
            test, doc = read_test_file(path)
        except SourceError as exc:
            report.diagnostics += exc.diagnostics
            continue
        policy = _compile_into(seen, policy_paths_for(path, test), report)
        if policy is not None:
            report.results += run_cases(policy, test, doc)
    done: set[tuple[str, int, int]] = set()  # an example runs once, whatever loads its file
    for policy in seen.values():
        for result in run_examples(policy):
            key = (result.span.path, result.span.line, result.span.col)
            if key not in done:
                done.add(key)
                report.results.append(result)
    fired = {rule_id for result in report.results for rule_id in result.fired}
    listed: set[tuple[str, str]] = set()
    for policy in seen.values():
        for rule in policy.rules:
            if rule.id not in fired and (rule.file, rule.id) not in listed:
                listed.add((rule.file, rule.id))
                report.unexercised.append(rule)
    return report


def _compile_into(seen: dict[tuple[str, ...], CompiledPolicy], paths: list[Path],
                  report: TestReport) -> CompiledPolicy | None:
    key = tuple(str(p.resolve()) for p in paths)
    if key in seen:
        return seen[key]
    policy, diagnostics = compile_files([("file", p) for p in paths])
    report.diagnostics += diagnostics
    if policy is not None:
        seen[key] = policy
    return policy


def render(report: TestReport, *, fmt: str) -> str:
    """The report as text (one line per case, diffs, a summary) or JSON."""
    if fmt == "json":
        return json.dumps({
            "results": [r.to_dict() for r in report.results],
            "passed": len(report.results) - report.failed, "failed": report.failed,
            "unexercised": [{"rule": r.id, "path": r.file, "line": r.span.line} for r in report.unexercised],
            "diagnostics": [d.to_dict() for d in report.diagnostics],
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
    if report.unexercised:
        lines.append("rules no test exercised:")
        lines += [f"  {r.id} ({r.file}:{r.span.line})" for r in report.unexercised]
    return "\n".join(lines)


def exit_code(report: TestReport) -> int:
    if has_errors(report.diagnostics) or report.failed or not report.results:
        return 1
    return 0


def no_tests_message(report: TestReport) -> Diagnostic | None:
    if report.results:
        return None
    return Diagnostic("RT100", "no test cases or inline examples found", None,
                      help="add `examples:` to rules or a *.test.yaml file with `cases:`")
