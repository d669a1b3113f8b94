"""router.testing and `router test` (router.commands.test): cases, inline examples, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.commands import test as test_command
from router.decision import Decision, Effect
from router.model import Expectation
from router.testing import compare, run_examples
from tests.helpers import compile_ok, write

POLICY = """
signals:
  p: {complete: {prompt: "rate {text}"}, fallback: "0.1"}
rules:
  - id: greet
    on: input
    when: "text == 'hi'"
    do: [{notify: hello}, {set: {greeted: true, ds.band: react}}]
  - id: rate
    on: input
    when: "text == 'rate' and signals.p > 0.5"
    do: [{notify: high}]
  - id: never
    on: turn_end
    when: "false"
"""

CASES = """
cases:
  - name: greets
    event: {type: input, text: hi}
    expect:
      fired: [greet]
      actions: [{notify: {text: hello}}, {set: {greeted: true}}]
      state: {greeted: true, ds.band: react}
  - name: waits for the signal
    event: {type: input, text: rate}
    expect: {pending: p}
  - name: signal given
    event: {type: input, text: rate}
    signals: {p: 0.9}
    expect: {fired: [rate]}
  - name: signal failed
    event: {type: input, text: rate}
    signal_errors: {p: timeout}
    expect: {fired: []}
"""

FAILING = """
cases:
  - name: wrong action
    event: {type: input, text: hi}
    expect:
      actions: [{notify: {text: bye}}]
  - name: wrong state
    event: {type: input, text: hi}
    expect: {state: {greeted: false}}
  - name: bad event
    event: {type: input, txt: hi}
    expect: {fired: []}
  - name: unexpected pending
    event: {type: input, text: rate}
    expect: {fired: []}
"""


def project(tmp_path: Path, cases: str) -> Path:
    write(tmp_path, POLICY, "pol.yaml")
    return write(tmp_path, cases, "pol.test.yaml")


def test_run_tests_passing_cases_exit_0(tmp_path: Path) -> None:
    report = test_command.run_tests([project(tmp_path, CASES)], cwd=tmp_path)
    assert [(r.name, r.passed) for r in report.results] == [
        ("greets", True),
        ("waits for the signal", True),
        ("signal given", True),
        ("signal failed", True),
    ]
    assert test_command.exit_code(report) == 0 and report.diagnostics == []


def test_run_tests_unexercised_rules_listed(tmp_path: Path) -> None:
    report = test_command.run_tests([project(tmp_path, CASES)], cwd=tmp_path)
    assert [r.id for r in report.unexercised] == ["never"]
    text = test_command.render(report, fmt="text")
    assert "rules no test exercised:" in text and "  never (" in text


def test_run_tests_failures_show_diff_and_exit_1(tmp_path: Path) -> None:
    report = test_command.run_tests([project(tmp_path, FAILING)], cwd=tmp_path)
    assert [r.passed for r in report.results] == [False, False, False, False]
    assert test_command.exit_code(report) == 1
    wrong_action, wrong_state, bad_event, pending = report.results
    assert wrong_action.problems[0].startswith("actions differ")
    assert (
        '-      "text": "bye"' in wrong_action.problems[0]
        and '+      "text": "hello",' in wrong_action.problems[0]
    )
    assert wrong_state.problems[0].startswith("state differ")
    assert "unknown event field 'txt'" in bad_event.problems[0]
    assert "waits for signal 'p'" in pending.problems[0]


def test_render_text_one_line_per_case_and_summary(tmp_path: Path) -> None:
    path = project(tmp_path, CASES + FAILING.replace("cases:\n", ""))
    text = test_command.render(test_command.run_tests([path], cwd=tmp_path), fmt="text")
    lines = text.splitlines()
    assert lines[0].endswith("pol.test.yaml:2: greets: PASS")
    assert any(line.endswith(": wrong action: FAIL") for line in lines)
    assert "PASS: 4/8" in lines and "FAIL: 4/8" in lines


def test_render_json_counts_and_problems(tmp_path: Path) -> None:
    body = json.loads(
        test_command.render(test_command.run_tests([project(tmp_path, FAILING)], cwd=tmp_path), fmt="json")
    )
    assert (body["passed"], body["failed"]) == (0, 4)
    assert body["results"][0]["line"] == 2 and body["results"][0]["problems"]
    assert [u["rule"] for u in body["unexercised"]] == ["rate", "never"]


def test_run_tests_no_cases_exit_1(tmp_path: Path) -> None:
    path = write(tmp_path, "rules:\n  - id: a\n    on: input\n", "plain.yaml")
    report = test_command.run_tests([path], cwd=tmp_path)
    assert report.results == [] and test_command.exit_code(report) == 1
    assert test_command.no_tests_message(report) is not None


def test_run_tests_policy_named_by_test_file(tmp_path: Path) -> None:
    write(tmp_path, POLICY, "policies/main.yaml")
    path = write(tmp_path, "policy: policies/main.yaml\n" + CASES, "checks.test.yaml")
    report = test_command.run_tests([path], cwd=tmp_path)
    assert report.failed == 0 and len(report.results) == 4


def test_run_tests_bad_test_file_located_diagnostics(tmp_path: Path) -> None:
    write(tmp_path, POLICY, "pol.yaml")
    path = write(
        tmp_path, "cases:\n  - name: x\n    event: {type: input}\n    expectt: {}\n", "pol.test.yaml"
    )
    report = test_command.run_tests([path], cwd=tmp_path)
    assert sorted(d.code for d in report.diagnostics) == ["RT110", "RT112"]
    assert next(d for d in report.diagnostics if d.code == "RT110").span.line == 4
    assert test_command.exit_code(report) == 1


def test_run_tests_broken_policy_reported(tmp_path: Path) -> None:
    write(tmp_path, "rules:\n  - id: a\n    on: inptu\n", "pol.yaml")
    report = test_command.run_tests([write(tmp_path, CASES, "pol.test.yaml")], cwd=tmp_path)
    assert [d.code for d in report.diagnostics] == ["RT205"] and test_command.exit_code(report) == 1


def test_run_tests_directory_and_default_dot_pi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    write(tmp_path, POLICY, ".pi/router.yaml")
    write(tmp_path, CASES, ".pi/router.test.yaml")
    report = test_command.run_tests([], cwd=tmp_path)
    assert len([r for r in report.results if r.span.path.endswith("router.test.yaml")]) == 4
    assert report.failed == 0


def test_inline_examples_run_against_whole_policy(tmp_path: Path) -> None:
    policy = compile_ok(
        tmp_path,
        """
        rules:
          - id: first
            on: input
            continue: true
            do: [{set: {seen: true}}]
          - id: second
            on: input
            when: "state.seen"
            do: [{notify: second}]
            examples:
              - name: sees first
                event: {type: input}
                expect: {fired: [first, second], state: {seen: true}}
              - event: {type: input}
                expect: {fires: false}
        """,
    )
    results = run_examples(policy)
    assert [(r.name, r.passed) for r in results] == [
        ("second example sees first", True),
        ("second example 2", False),
    ]
    assert results[1].span.line == 14


def test_compare_actions_params_subset_and_exact_order() -> None:
    decision = Decision(
        "input",
        effects=(Effect("notify", {"text": "a", "level": "info"}, "r"), Effect("set", {"x": 1}, "r")),
        fired=("r",),
        state={"x": 1},
    )
    assert compare(decision, Expectation(actions=[{"notify": {"text": "a"}}, {"set": {"x": 1}}])) == []
    assert compare(decision, Expectation(actions=[{"set": {"x": 1}}, {"notify": {"text": "a"}}]))
    assert compare(decision, Expectation(actions=[{"notify": {"text": "a"}}]))
    assert compare(decision, Expectation(fired=["r"], fires=True), rule_id="r") == []
    assert compare(decision, Expectation(fires=False), rule_id="r")


def test_compare_state_subset_with_dotted_keys() -> None:
    decision = Decision("input", state={"ds": {"band": "react", "n": 1}, "other": 2})
    assert compare(decision, Expectation(state={"ds.band": "react"})) == []
    assert compare(decision, Expectation(state={"ds.band": "spec"}))
    assert compare(decision, Expectation(state={"missing": None})) == []  # null: absent or null
    assert compare(decision, Expectation(state={"other": None}))


def test_compare_state_nested_mapping_is_a_subset() -> None:
    decision = Decision("input", state={"ds": {"band": "react", "n": 1}})
    assert compare(decision, Expectation(state={"ds": {"band": "react"}})) == []
