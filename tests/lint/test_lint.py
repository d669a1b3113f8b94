"""router.lint and `router lint`: semantic checks, output formats, exit codes, a rendering snapshot."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from router.commands import lint as lint_command
from router.diagnostics.diagnostic import Severity
from router.lint import CHECKS, run_checks
from tests.helpers import codes, compile_ok, compile_text, write

SNAPSHOTS = Path(__file__).parent.parent / "snapshots"


def lint(tmp_path: Path, text: str) -> list:
    return run_checks(compile_ok(tmp_path, text))


def test_checks_registered_for_every_lint_code() -> None:
    from router.lint import checks  # noqa: F401  (registers the checks)

    assert {"RT306", "RT307", "RT308", "RT311", "RT312", "RT313", "RT314"} <= set(CHECKS)


UNREACHABLE = """
rules:
  - id: catch-all
    on: input
    do: [{notify: hello}]
  - id: special
    on: input
    when: "text == 'x'"
    do: [{notify: special}]
"""


def test_unreachable_rule_rt306_names_the_blocker(tmp_path: Path) -> None:
    (diag,) = [d for d in lint(tmp_path, UNREACHABLE) if d.code == "RT306"]
    assert diag.rule_id == "special" and diag.span.line == 5 and diag.severity is Severity.ERROR
    assert "'catch-all'" in diag.message and "policy.yaml:2" in diag.message


@pytest.mark.parametrize(
    "change",
    [
        (
            "    do: [{notify: hello}]\n  - id: special",
            "    continue: true\n    do: [{notify: hello}]\n  - id: special",
        ),
        (
            "    do: [{notify: hello}]\n  - id: special",
            "    shadow: true\n    do: [{notify: hello}]\n  - id: special",
        ),
        (
            "    do: [{notify: hello}]\n  - id: special",
            "    when: \"text != 'x'\"\n    do: [{notify: hello}]\n  - id: special",
        ),
        ("  - id: special\n    on: input", "  - id: special\n    group: other\n    on: input"),
        ("  - id: special\n    on: input", "  - id: special\n    on: [input, turn_end]"),
    ],
)
def test_unreachable_rule_not_reported_when_reachable(tmp_path: Path, change: tuple[str, str]) -> None:
    assert "RT306" not in codes(lint(tmp_path, UNREACHABLE.replace(*change)))


def test_rule_with_no_events_reported_not_crashing(tmp_path: Path) -> None:
    _, diagnostics = compile_text(tmp_path, "rules:\n  - id: a\n    on: []\n")
    assert "RT111" in codes(diagnostics)


@pytest.mark.parametrize(
    ("pattern", "warns"),
    [
        ("(a+)+", True),
        ("(\\\\w+\\\\s?)+$", True),
        ("(a|b+)*c", True),
        ("(x{1,200})+", True),
        ("(ab)+", False),
        ("[\\\\w\\\\s]+$", False),
        ("a+b+", False),
        ("(a{1,3})+", False),
        ("recommend", False),
    ],
)
def test_catastrophic_regex_rt307(tmp_path: Path, pattern: str, warns: bool) -> None:
    found = lint(tmp_path, f"rules:\n  - id: r\n    on: input\n    when: \"regex(text, '{pattern}')\"\n")
    assert ("RT307" in codes(found)) is warns
    if warns:
        assert next(d for d in found if d.code == "RT307").severity is Severity.WARNING


def test_catastrophic_regex_in_jmespath_match_rt307(tmp_path: Path) -> None:
    found = lint(tmp_path, "rules:\n  - id: r\n    on: input\n    match: \"regex(text, '(a+)+$')\"\n")
    assert "RT307" in codes(found)


EXAMPLES = """
rules:
  - id: greet
    on: input
    when: "text == 'hi'"
    do: [{notify: hello}]
    examples:
      - name: passes
        event: {type: input, text: hi}
        expect: {fires: true, actions: [{notify: {text: hello}}]}
      - name: wrong
        event: {type: input, text: hi}
        expect: {fires: false}
"""


def test_failing_example_rt308_located_at_the_example(tmp_path: Path) -> None:
    (diag,) = [d for d in lint(tmp_path, EXAMPLES) if d.code == "RT308"]
    assert diag.span.line == 10 and diag.severity is Severity.ERROR
    assert diag.message.startswith("greet example wrong fails")


def test_passing_examples_no_rt308(tmp_path: Path) -> None:
    assert "RT308" not in codes(lint(tmp_path, EXAMPLES.split("      - name: wrong")[0]))


def test_unused_var_and_signal_rt311(tmp_path: Path) -> None:
    found = lint(
        tmp_path,
        """
        vars: {used: 1, in_template: 2, unused: 3}
        signals:
          s1: {expr: "1"}
          s2: {expr: "2"}
          s3: {expr: "3"}
        rules:
          - id: r
            on: input
            when: "vars.used > 0 and signal_errors.s2 == null"
            do: [{notify: "{vars.in_template}"}]
            examples:
              - event: {type: input}
                signals: {s3: 1}
                expect: {fires: true}
        """,
    )
    rt311 = sorted(d.message for d in found if d.code == "RT311")
    assert rt311 == ["signal 's1' is never used", "var 'unused' is never used"]


def test_state_never_written_rt312(tmp_path: Path) -> None:
    found = lint(
        tmp_path,
        """
        rules:
          - id: w
            on: input
            continue: true
            do: [{set: {ds.band: react, count: 1}}]
          - id: r
            on: input
            when: "state.ds.band == 'react' and state.ds and state.count and state.bnd"
        """,
    )
    assert [d.message for d in found if d.code == "RT312"] == ["rule 'r' reads state.bnd, which no rule sets"]


def test_undeclared_env_rt313(tmp_path: Path) -> None:
    found = lint(
        tmp_path,
        """
        env: [DECLARED]
        vars:
          v: {env: BOUND, type: bool}
        rules:
          - id: r
            on: input
            when: "env.DECLARED and env.BOUND and env.MISSING and vars.v"
        """,
    )
    assert [d.message for d in found if d.code == "RT313"] == [
        "rule 'r' reads env.MISSING, which the policy does not declare"
    ]


def test_shadow_rule_writing_state_rt314(tmp_path: Path) -> None:
    found = lint(
        tmp_path,
        "rules:\n  - id: s\n    on: input\n    shadow: true\n    do: [{unset: [x]}]\n"
        "  - id: t\n    on: input\n    shadow: true\n    do: [{notify: x}]\n",
    )
    assert [(d.code, d.rule_id) for d in found if d.code == "RT314"] == [("RT314", "s")]


def test_default_pack_lints_clean(tmp_path: Path) -> None:
    code, out = lint_command.run([Path(__file__).parent.parent.parent / "rules" / "default.yaml"])
    assert (code, out) == (0, "Found 0 errors, 0 warnings.")


def test_built_in_packs_combined_lint_clean_and_share_no_names(tmp_path: Path) -> None:
    """A later file replaces an earlier file's signal or var of the same name, so packs that can be
    combined must not reuse a name for something else (one pack would silently break the other)."""
    from router.load.paths import packs_dir
    from router.load.source import read_source

    definitions: dict[tuple[str, str], tuple[str, object]] = {}
    for pack in sorted(packs_dir().glob("*.yaml")):
        if pack.name.endswith(".test.yaml"):
            continue
        data = read_source(pack).data or {}
        for section in ("signals", "vars"):
            for name, value in (data.get(section) or {}).items():
                seen = definitions.setdefault((section, name), (pack.stem, value))
                assert seen[1] == value, f"{section}.{name}: {seen[0]} and {pack.stem} define it differently"
    policy = write(tmp_path, "version: 1\nuse: [decision, deepseek, cuttle]\n", "all.yaml")
    code, out = lint_command.run([policy])
    assert (code, out) == (0, "Found 0 errors, 0 warnings."), out


def test_lint_text_format_lines_and_trailer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, 'rules:\n  - id: a\n    on: inptu\n  - id: b\n    on: input\n    when: "txt"\n', "p.yaml")
    code, out = lint_command.run([Path("p.yaml")])
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == "p.yaml:3:9: error: unknown event type 'inptu' in rule 'a' [RT205]"
    assert "  help: did you mean 'input'?" in lines
    assert [line for line in lines if line.startswith("p.yaml:")][1].startswith("p.yaml:6:11: error:")
    assert lines[-1] == "Found 2 errors, 0 warnings."


def test_lint_warnings_only_exit_0(tmp_path: Path) -> None:
    path = write(tmp_path, "vars: {unused: 1}\n")
    code, out = lint_command.run([path])
    assert code == 0 and out.endswith("Found 0 errors, 1 warning.")


def test_lint_json_format(tmp_path: Path) -> None:
    path = write(tmp_path, "vars: {unused: 1}\nrules:\n  - id: a\n    on: inptu\n")
    code, out = lint_command.run([path], fmt="json")
    body = json.loads(out)
    assert code == 1 and (body["errors"], body["warnings"]) == (1, 0)
    (diag,) = body["diagnostics"]
    assert {k: diag[k] for k in ("code", "severity", "line", "col", "rule_id")} == {
        "code": "RT205",
        "severity": "error",
        "line": 4,
        "col": 9,
        "rule_id": "a",
    }
    assert diag["path"].endswith("policy.yaml") and diag["help"] == "did you mean 'input'?"


def test_lint_sarif_format(tmp_path: Path) -> None:
    path = write(tmp_path, 'vars: {unused: 1}\nrules:\n  - id: a\n    on: input\n    when: "state.x"\n')
    code, out = lint_command.run([path], fmt="sarif")
    sarif = json.loads(out)
    run = sarif["runs"][0]
    assert code == 0 and sarif["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "router"
    assert [r["ruleId"] for r in run["results"]] == ["RT311", "RT312"]
    assert all(r["level"] == "warning" for r in run["results"])
    region = run["results"][1]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 3, "startColumn": 5}
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == {"RT311", "RT312"}


def test_lint_directory_skips_test_files(tmp_path: Path) -> None:
    write(tmp_path, "rules:\n  - id: a\n    on: nope\n", "a.yaml")
    write(tmp_path, "cases: []\n", "a.test.yaml")
    write(tmp_path, "rules: []\n", "b.yml")
    assert [p.name for p in lint_command.policy_files([tmp_path])] == ["a.yaml", "b.yml"]
    code, _ = lint_command.run([tmp_path])
    assert code == 1


def test_lint_without_paths_uses_layered_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    write(tmp_path, "rules:\n  - id: mine\n    on: inptu\n", "proj/.pi/router.yaml")
    code, out = lint_command.run([], cwd=tmp_path / "proj")
    assert code == 1 and "RT205" in out and "router.yaml:3:9" in out


def test_lint_text_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(SNAPSHOTS / "lint_small.yaml", tmp_path / "lint_small.yaml")
    monkeypatch.chdir(tmp_path)
    code, out = lint_command.run([Path("lint_small.yaml")])
    expected_path = SNAPSHOTS / "lint_small.txt"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        expected_path.write_text(out + "\n", encoding="utf-8")
    assert code == 1
    assert out + "\n" == expected_path.read_text(encoding="utf-8")


# --- test files -----------------------------------------------------------------------------------

BROKEN_TESTS = """\
policy: missing.yaml
cases:
  - name: a bad event type
    event: {type: inptu}
    expect: {fired: []}
  - name: an unknown field and key
    event: {type: input, txt: hi}
    expect: {fired: [], scope: rule}
    extra: 1
"""


def test_lint_test_file_reports_every_problem_located(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, BROKEN_TESTS, "t.test.yaml")
    found = lint_command.lint_paths([Path("t.test.yaml")])
    assert sorted((d.code, d.span.line, d.span.col) for d in found if d.span) == [
        ("RT100", 1, 9),   # the policy it names does not exist
        ("RT110", 9, 5),   # unknown key in the case
        ("RT111", 8, 32),  # scope: rule in a test file
        ("RT130", 4, 19),  # unknown event type
        ("RT131", 7, 26),  # unknown event field
    ]
    assert all(d.span and d.span.path == "t.test.yaml" for d in found)
    unknown_type = next(d for d in found if d.code == "RT130")
    assert unknown_type.help == "did you mean 'input'?"
    code, out = lint_command.run([Path("t.test.yaml")])
    assert code == 1 and out.endswith("Found 5 errors, 0 warnings.")


def test_lint_test_file_yaml_error_and_clean_file(tmp_path: Path) -> None:
    write(tmp_path, "rules: []\n", "p.yaml")
    assert lint_command.lint_paths([write(tmp_path, "cases: [\n", "p.test.yaml")])[0].code == "RT101"
    clean = "cases:\n  - name: ok\n    event: {type: input, text: hi}\n    expect: {fires: false}\n"
    assert lint_command.lint_paths([write(tmp_path, clean, "p.test.yaml")]) == []


def test_lint_directory_and_default_run_check_test_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    dot_pi = tmp_path / "proj" / ".pi"
    write(dot_pi, "rules: []\n", "router.yaml")
    write(dot_pi, "cases:\n  - name: x\n    event: {type: nope}\n    expect: {}\n", "router.test.yaml")
    assert [d.code for d in lint_command.lint_paths([dot_pi])] == ["RT130"]
    assert [d.code for d in lint_command.lint_paths([], cwd=tmp_path / "proj")] == ["RT130"]
    assert lint_command.test_files([dot_pi]) == [dot_pi / "router.test.yaml"]


def test_lint_names_the_files_on_stderr_and_in_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "version: 1\nuse: [decision, ./team.yaml]\n", ".pi/router.yaml")
    write(tmp_path, "version: 1\nrules: []\n", ".pi/team.yaml")
    code, out = lint_command.run([], cwd=tmp_path)
    assert (code, out) == (0, "Found 0 errors, 0 warnings.")
    assert capsys.readouterr().err == ("policy: default pack, .pi/router.yaml "
                                       "(+ decision pack, .pi/team.yaml via use:)\n")
    code, out = lint_command.run([], fmt="json", cwd=tmp_path)
    body = json.loads(out)
    assert [(f["display"], f["layer"], f["pack"], f["used_by"]) for f in body["files"]][1:] == [
        (body["files"][1]["display"], "pack", "decision", ".pi/router.yaml"),
        (".pi/team.yaml", "project", None, ".pi/router.yaml"),
        (".pi/router.yaml", "project", None, None),
    ]
    assert body["not_loaded"] == [] and capsys.readouterr().err == ""  # JSON: nothing on stderr


def test_lint_a_file_that_does_not_load_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "rules: [\n", "p.yaml")
    code, _ = lint_command.run([Path("p.yaml")])
    assert code == 1 and capsys.readouterr().err == "policy: p.yaml (does not load)\n"


RISKY_PATTERNS = """\
version: 1
vars:
  risky: "(a+)+$"
  fine: "ok|yes"
signals:
  p: {expr: "regex_find(text, state.pat)"}
rules:
  - id: a
    on: input
    when: "regex(text, vars.risky) or regex(text, vars.fine) or regex(text, lower(text))"
    match: "regex(text, state.pat) || regex(text, vars.fine) || regex(text, 'ok')"
    do: [{notify: "{signals.p}"}, {set: {pat: x}}]
"""


def test_rt315_patterns_computed_from_data_warn_rt307_checks_var_patterns(tmp_path: Path) -> None:
    found = run_checks(compile_ok(tmp_path, RISKY_PATTERNS))
    rt315 = sorted(d.message for d in found if d.code == "RT315")
    assert rt315 == [
        "the regex pattern `lower(text)` in rule 'a' is computed while evaluating, so it is not checked "
        "when the policy loads",
        "the regex pattern `state.pat` in rule 'a' is computed while evaluating, so it is not checked "
        "when the policy loads",
        "the regex pattern `state.pat` in signal 'p' is computed while evaluating, so it is not checked "
        "when the policy loads",
    ]
    assert all(d.severity is Severity.WARNING for d in found if d.code == "RT315")
    assert [d.message for d in found if d.code == "RT307"] == [
        "regex '(a+)+$' in rule 'a' repeats a repeated group and can take exponential time on some inputs"]


def test_rt315_literal_and_var_patterns_do_not_warn(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, RISKY_PATTERNS.replace("state.pat", "'x'").replace(
        "lower(text)", "vars.fine").replace('"(a+)+$"', '"a+$"'))
    assert not [d for d in run_checks(policy) if d.code in ("RT315", "RT307")]
