"""Rule coverage of `router test` (router/testing/coverage.py): rules exercised of all, per file,
and the `--min-coverage` gate, as a function and through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from router.testing.coverage import coverage, shown
from tests.gitrepo import Project, dedent, make_project

POLICY = """
version: 1
use: [./base.yaml]
rules:
  - id: read-only
    on: input
    when: "text == 'review'"
    do: [{tools: {only: [read]}}]
    examples:
      - event: {type: input, text: review}
        expect: {fires: true}
  - id: never-tested
    on: input
    when: "text == 'zzz'"
    do: [{notify: z}]
"""

BASE = """
version: 1
rules:
  - id: no-force
    on: tool_call
    match: "tool.name == 'bash' && contains(tool.input.command, '--force')"
    do: [{block: "no force pushes"}]
    examples:
      - event: {type: tool_call, tool: {name: bash, input: {command: "git push --force"}}}
        expect: {fires: true}
"""


def test_coverage_counts_each_rule_once_per_file_in_the_order_met() -> None:
    found = coverage([("team.yaml", "a"), ("base.yaml", "b"), ("team.yaml", "c"), ("team.yaml", "a")],
                     ["a", "b", "zzz"])
    assert (found.exercised, found.rules) == (2, 3)
    assert found.lines() == ["coverage: 2/3 rules (67%)", "  team.yaml: 1/2 (50%)", "  base.yaml: 1/1 (100%)"]
    assert found.to_dict()["files"][0] == {"path": "team.yaml", "rules": 2, "exercised": 1, "percent": 50.0}
    assert coverage([], []).lines() == ["coverage: no rules"] and not coverage([], []).below(100)


def test_the_gate_compares_exactly_and_the_summary_never_rounds_to_all_or_nothing() -> None:
    seven_of_nine = coverage([("p.yaml", f"r{i}") for i in range(9)], [f"r{i}" for i in range(7)])
    assert seven_of_nine.lines()[0] == "coverage: 7/9 rules (78%)"
    assert seven_of_nine.below(78) and not seven_of_nine.below(77.7)
    assert seven_of_nine.gate_line(80) == "error: rule coverage 7/9 (77.8%) is below --min-coverage 80%"
    assert (shown(99.6), shown(0.2), shown(100.0), shown(0.0)) == ("99%", "1%", "100%", "0%")


@given(rules=st.integers(1, 300), data=st.data())
def test_below_is_the_exact_ratio(rules: int, data: st.DataObject) -> None:
    exercised = data.draw(st.integers(0, rules))
    minimum = data.draw(st.one_of(st.integers(0, 100).map(float), st.floats(0, 100, allow_nan=False)))
    found = coverage([("p.yaml", f"r{i}") for i in range(rules)], [f"r{i}" for i in range(exercised)])
    numerator, denominator = minimum.as_integer_ratio()
    assert found.below(minimum) == (exercised * 100 * denominator < numerator * rules)


def project(tmp_path: Path) -> Project:
    found = make_project(tmp_path)
    policy = found.policy(POLICY)
    (policy.parent / "base.yaml").write_text(dedent(BASE))
    return found


def test_router_test_reports_coverage_of_the_projects_own_rules(tmp_path: Path) -> None:
    done = project(tmp_path).router("test", "--coverage")

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("coverage: 2/3 rules (67%)")  # the default pack's rules are not counted
    assert lines[start + 1:start + 3] == ["  .pi/base.yaml: 1/1 (100%)", "  .pi/router.yaml: 1/2 (50%)"]
    assert lines[lines.index("rules no test exercised:") + 1:] == ["  never-tested (.pi/router.yaml:11)"]


def test_min_coverage_fails_below_and_passes_at_or_above(tmp_path: Path) -> None:
    proj = project(tmp_path)

    below = proj.router("test", "--min-coverage", "70")
    above = proj.router("test", "--min-coverage", "66")
    as_json = proj.router("test", "--format", "json", "--min-coverage", "90")
    junit = proj.router("test", "--format", "junit", "--min-coverage", "90")
    wrong = proj.router("test", "--min-coverage", "120")

    assert below.returncode == 1 and below.stdout.splitlines()[-1] == \
        "error: rule coverage 2/3 (66.7%) is below --min-coverage 70%"
    assert above.returncode == 0 and "coverage: 2/3 rules (67%)" in above.stdout
    assert as_json.returncode == 1
    body = json.loads(as_json.stdout)
    assert (body["coverage"]["rules"], body["coverage"]["exercised"], body["failed"]) == (3, 2, 0)
    assert "error: rule coverage 2/3 (66.7%) is below --min-coverage 90%" in as_json.stderr
    assert junit.returncode == 1 and junit.stdout.startswith("<?xml")
    assert "coverage: 2/3 rules (67%)" in junit.stderr and "below --min-coverage 90%" in junit.stderr
    assert wrong.returncode == 2 and "--min-coverage 120 is not a percentage" in wrong.stderr


def test_without_the_flags_the_report_is_unchanged(tmp_path: Path) -> None:
    done = project(tmp_path).router("test")
    assert done.returncode == 0 and "coverage:" not in done.stdout
    assert "coverage" not in json.loads(project(tmp_path / "j").router("test", "--format", "json").stdout)
