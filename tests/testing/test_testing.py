"""router.testing.runner and `router test` (router.commands.test): cases, inline examples, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.commands import test as test_command
from router.engine.decision import Decision, Effect
from router.load.model import Expectation
from router.load.paths import display_path
from router.testing.runner import compare, run_examples
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


# --- a policy that uses a pack: expectations look at the own layer --------------------------------

USES_DECISION = """
version: 1
use: [decision]
signals:
  mine: {complete: {prompt: "rate {text}"}}
rules:
  - id: warn
    on: turn_end
    when: "usage.percent >= 80"
    continue: true
    do: [{notify: full}]
    examples:
      - name: own rule only
        event: {type: turn_end, usage: {percent: 85}}
        expect: {fires: true, fired: [warn, also], actions: [{notify: {text: full}}, {notify: {text: also}}]}
      - name: the rule's own actions
        event: {type: turn_end, usage: {percent: 85}}
        expect: {scope: rule, fired: [warn], actions: [{notify: {text: full}}]}
  - id: also
    on: turn_end
    when: "usage.percent >= 80"
    do: [{notify: also}]
  - id: rate
    on: input
    when: "signals.mine > 0.5"
    do: [{notify: rated}]
"""


def decision_project(tmp_path: Path, cases: str) -> Path:
    write(tmp_path, USES_DECISION, "pol.yaml")
    return write(tmp_path, cases, "pol.test.yaml")


def test_cases_compare_only_own_rules_and_pack_signals_take_dry_run_values(tmp_path: Path) -> None:
    cases = """
    cases:
      - name: own rules, without naming the pack's or its saved_mode signal
        event: {type: turn_end, usage: {percent: 85}}
        expect: {fired: [warn, also], actions: [{notify: {text: full}}, {notify: {text: also}}]}
      - name: nothing of ours fires
        event: {type: turn_end, usage: {percent: 10}}
        expect: {fires: false, fired: [], actions: []}
    """
    report = test_command.run_tests([decision_project(tmp_path, cases)], cwd=tmp_path)
    assert [(r.name, r.passed, r.problems) for r in report.results][:2] == [
        ("own rules, without naming the pack's or its saved_mode signal", True, []),
        ("nothing of ours fires", True, []),
    ]
    assert "dr-compaction-rearm" in report.results[0].fired  # the pack did run
    assert [(r.name, r.passed) for r in report.results[2:]] == [
        ("warn example own rule only", True),
        ("warn example the rule's own actions", True),
    ]


def test_scope_all_compares_every_rule_and_the_diff_names_what_was_left_out(tmp_path: Path) -> None:
    cases = """
    cases:
      - name: all rules
        event: {type: turn_end, usage: {percent: 85}}
        expect: {scope: all, fired: [dr-compaction-rearm, warn, also]}
      - name: all rules, wrong
        event: {type: turn_end, usage: {percent: 85}}
        expect: {scope: all, fired: [warn, also]}
      - name: own rules, wrong
        event: {type: turn_end, usage: {percent: 85}}
        expect: {fired: [warn]}
    """
    report = test_command.run_tests([decision_project(tmp_path, cases)], cwd=tmp_path)
    right, wrong_all, wrong_own = report.results[:3]
    assert right.passed and not wrong_all.passed and not wrong_own.passed
    assert '+  "dr-compaction-rearm",' in wrong_all.problems[0]
    assert "not compared" not in wrong_all.problems[0]
    assert wrong_own.problems[0].startswith("fired differ")
    assert wrong_own.problems[0].splitlines()[-1] == (
        "(not compared: dr-compaction-rearm also fired; `expect: {scope: all}` compares every rule)")


def test_own_external_signal_still_waits_and_a_pack_signal_can_be_expected_pending(tmp_path: Path) -> None:
    cases = """
    cases:
      - name: own signal without a value
        event: {type: input, text: x}
        expect: {fired: []}
      - name: own signal given
        event: {type: input, text: x}
        signals: {mine: 0.9}
        expect: {fired: [rate]}
      - name: a pack signal, expected to wait
        event: {type: turn_end, usage: {percent: 85}}
        expect: {pending: saved_mode}
      - name: a pack signal given a value
        event: {type: turn_end, usage: {percent: 85}}
        signals: {saved_mode: {enabled: false, autoCompaction: false}}
        expect: {scope: all, fired: [warn, also]}
    """
    results = test_command.run_tests([decision_project(tmp_path, cases)], cwd=tmp_path).results[:4]
    assert [r.passed for r in results] == [False, True, True, True]
    assert "evaluation waits for signal 'mine'" in results[0].problems[0]


def test_scope_rule_in_a_test_case_fails_with_a_reason(tmp_path: Path) -> None:
    cases = "cases:\n  - name: r\n    event: {type: input}\n    expect: {scope: rule, fires: true}\n"
    (result, *_) = test_command.run_tests([project(tmp_path, cases)], cwd=tmp_path).results
    assert not result.passed and "`scope: rule` needs the rule of an inline example" in result.problems[0]


def test_compare_scope_defaults() -> None:
    effects = tuple(Effect("notify", {"text": r}, r) for r in ("pack", "a", "b"))
    decision = Decision("input", effects=effects, fired=("pack", "a", "b"))
    own = frozenset({"a", "b"})
    both = [{"notify": {"text": "a"}}, {"notify": {"text": "b"}}]
    assert compare(decision, Expectation(fired=["a", "b"], actions=both), own=own) == []
    example = Expectation(fired=["a", "b"], actions=both, fires=True)
    assert compare(decision, example, rule_id="a", own=own) == []
    narrow = Expectation(scope="rule", fired=["a"], actions=both[:1])
    assert compare(decision, narrow, rule_id="a", own=own) == []
    assert compare(decision, Expectation(scope="all", fired=["pack", "a", "b"]), own=own) == []
    assert compare(decision, Expectation(fires=False), rule_id="b", own=frozenset({"a"}))
    assert compare(decision, Expectation(fires=False), own=frozenset({"c"})) == []  # no own rule fired


# --- what `router test` runs, and how broken files count ------------------------------------------


def test_broken_test_file_counts_as_a_failure_in_the_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    good = project(tmp_path, CASES)
    broken = write(tmp_path, "cases:\n  - name: x\n    event: {type: input}\n    expct: {}\n",
                   "broken.test.yaml")
    yaml_error = write(tmp_path, "cases: [\n", "yaml.test.yaml")
    report = test_command.run_tests([good, broken, yaml_error], cwd=tmp_path)
    lines = test_command.render(report, fmt="text").splitlines()
    assert "PASS: 4/6" in lines and "FAIL: 2/6" in lines
    at = lines.index("broken.test.yaml:2: test file does not load: FAIL")  # at its first error
    assert lines[at + 1] == "  2 errors, listed above"  # RT110 expct, RT112 expect
    assert "yaml.test.yaml:2: test file does not load: FAIL" in lines
    assert test_command.exit_code(report) == 1
    body = json.loads(test_command.render(report, fmt="json"))
    assert (body["passed"], body["failed"]) == (4, 2)


def test_a_policy_that_does_not_compile_counts_once_per_test_file(tmp_path: Path) -> None:
    write(tmp_path, "rules:\n  - id: a\n    on: inptu\n", "pol.yaml")
    first = write(tmp_path, CASES, "pol.test.yaml")
    second = write(tmp_path, "policy: pol.yaml\n" + CASES, "more.test.yaml")
    report = test_command.run_tests([first, second], cwd=tmp_path)
    assert [(r.name, r.passed) for r in report.results] == [("policy does not compile", False)] * 2
    assert [d.code for d in report.diagnostics] == ["RT205"]  # reported once


def test_default_run_is_the_projects_and_the_users_tests_not_the_packs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    write(tmp_path, USES_DECISION, "proj/.pi/router.yaml")
    write(tmp_path, "cases:\n  - name: mine\n    event: {type: input, text: x}\n    signals: {mine: 0.9}\n"
          "    expect: {fired: [rate]}\n", "proj/.pi/router.test.yaml")
    write(tmp_path, "rules:\n  - id: user-rule\n    on: input\n    do: [{notify: u}]\n", "agent/router.yaml")
    write(tmp_path, "cases:\n  - name: the user's\n    event: {type: input}\n"
          "    expect: {fired: [user-rule]}\n", "agent/router.test.yaml")
    monkeypatch.chdir(tmp_path / "proj")
    report = test_command.run_tests([], cwd=tmp_path / "proj")
    assert sorted(r.name for r in report.results) == ["mine", "the user's", "warn example own rule only",
                                                      "warn example the rule's own actions"]
    assert report.failed == 0 and [r.id for r in report.unexercised] == []
    with_packs = test_command.run_tests([], cwd=tmp_path / "proj", packs=True)
    assert with_packs.failed == 0 and len(with_packs.results) > 100
    assert any(r.name.startswith("default-warn-context-full example") for r in with_packs.results)
    lines = test_command.notes(report)
    assert lines[0] == f"policy: default pack, {display_path(agent / 'router.yaml')}, .pi/router.yaml " \
                       "(+ decision pack via use:)"
    assert lines[1] == "tests: .pi/router.test.yaml against .pi/router.yaml (+ decision pack via use:)"


def test_no_tests_message_points_at_packs_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    report = test_command.run_tests([], cwd=tmp_path)
    missing = test_command.no_tests_message(report)
    assert report.results == [] and missing is not None and "--packs" in (missing.help or "")
