"""The `router` command line: lint, test, explain, schema, init, exit codes and failure surfaces."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from router.commands import cli
from router.commands import schema as schema_command
from tests.helpers import write

ROOT = Path(__file__).parent.parent.parent
DEFAULT = str(ROOT / "rules" / "default.yaml")
TURN_END = str(ROOT / "examples" / "events" / "turn_end.json")

SIGNAL_POLICY = """
signals:
  p: {complete: {prompt: "rate {text}"}, fallback: "0.2"}
rules:
  - id: rate
    on: input
    when: "signals.p > 0.5"
    do: [{notify: "p={signals.p}"}]
"""


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli.app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def run_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """Run the real entry point (cli.main) in-process: exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", ["router", *args])
    with pytest.raises(SystemExit) as info:
        cli.main()
    captured = capsys.readouterr()
    return int(info.value.code or 0), captured.out, captured.err


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("NO_COLOR", "1")


def test_lint_clean_exit_0() -> None:
    result = CliRunner().invoke(cli.app, ["lint", DEFAULT])
    assert (result.exit_code, result.stdout) == (0, "Found 0 errors, 0 warnings.\n")
    assert result.stderr == "policy: default pack\n"


def test_lint_errors_exit_1_through_real_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "rules:\n  - id: a\n    on: inptu\n")
    code, out, err = run_main(monkeypatch, capsys, "lint", str(path))
    assert code == 1 and "[RT205]" in out and "Found 1 error, 0 warnings." in out
    assert err == f"policy: {path}\n"  # which files were linted, on stderr: stdout stays parseable


def test_lint_unknown_format_usage_exit_2() -> None:
    code, out = invoke("lint", "--format", "xml", DEFAULT)
    assert code == 2 and "expected text, json or sarif" in out


def test_lint_subprocess_exit_codes(tmp_path: Path) -> None:
    bad = write(tmp_path, "rules:\n  - id: a\n    on: inptu\n")
    for path, expected in ((DEFAULT, 0), (str(bad), 1)):
        done = subprocess.run(
            [sys.executable, "-m", "router", "lint", path],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
        assert done.returncode == expected, done.stdout + done.stderr
        assert "Traceback" not in done.stderr


def test_test_command_failing_case_shows_diff_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "rules:\n  - id: a\n    on: input\n    do: [{notify: hi}]\n", "p.yaml")
    write(
        tmp_path,
        "cases:\n  - name: c\n    event: {type: input}\n    expect: {actions: [{notify: {text: no}}]}\n",
        "p.test.yaml",
    )
    code, out = invoke("test", "p.test.yaml")
    assert code == 1 and "p.test.yaml:2: c: FAIL" in out and "actions differ" in out and "FAIL: 1/1" in out


def test_test_command_passing_exit_0_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke("test", DEFAULT)
    assert code == 0 and "PASS: 4/4" in out
    code, out = invoke("test", "--format", "json", DEFAULT)
    assert code == 0 and json.loads(out)["passed"] == 4


def test_test_command_no_tests_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "rules:\n  - id: a\n    on: input\n", "p.yaml")
    code, out = invoke("test", "p.yaml")
    assert code == 1 and "no test cases or inline examples found" in out and "  a (p.yaml:2)" in out


def test_explain_text_trace_and_decision() -> None:
    code, out = invoke("explain", "--event", TURN_END, "--policy", DEFAULT)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "event: turn_end (model=fake/fake-cloud)"
    assert lines[1] == "policy: default pack"
    assert any(
        line.endswith("rule default-warn-context-full: enter") and "default.yaml:" in line for line in lines
    )
    assert any(
        "| when usage.percent >= vars.context_warn_percent" in line and "usage.percent=92.0" in line
        for line in lines
    )
    assert "decision: 2 actions from rule default-warn-context-full" in lines
    assert any(line.startswith("  1. notify (warning): Context is 92% full") for line in lines)
    assert 'state after: {"default_context_warned": true}' in lines


def test_explain_json_has_trace_and_effects() -> None:
    code, out = invoke("explain", "--event", TURN_END, "--policy", DEFAULT, "--format", "json")
    body = json.loads(out)
    assert code == 0 and body["fired"] == ["default-warn-context-full"]
    assert [e["action"] for e in body["effects"]] == ["notify", "set"]
    assert [t["kind"] for t in body["trace"]][:3] == ["rule", "cond", "fire"]
    assert body["state"] == {"default_context_warned": True} and body["dry_run_signals"] == []
    assert [(f["pack"], f["layer"], f["used_by"]) for f in body["files"]] == [("default", "file", None)]


def test_test_command_packs_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke("test")
    assert code == 1 and "no test cases or inline examples found" in out
    code, out = invoke("test", "--packs")
    assert code == 0 and "FAIL: 0/" in out and "decision.test.yaml:" in out


@pytest.mark.parametrize(
    ("mode", "present", "absent"),
    [
        ("matched", "default-warn-context-full: enter", "skipped"),
        ("fails", "skipped", "default-warn-context-full: enter"),
    ],
)
def test_explain_modes_filter_trace(mode: str, present: str, absent: str) -> None:
    code, out = invoke("explain", "--event", TURN_END, "--policy", DEFAULT, "--mode", mode)
    assert code == 0 and present in out and absent not in out


def test_explain_signal_values_and_errors(tmp_path: Path) -> None:
    policy = str(write(tmp_path, SIGNAL_POLICY))
    event = str(write(tmp_path, '{"type": "input", "text": "x"}', "e.json"))
    code, out = invoke("explain", "-e", event, "-p", policy, "--signal", "p=0.9")
    assert code == 0 and "signal p = 0.9" in out and "1. notify" in out and "p=0.9" in out
    code, out = invoke("explain", "-e", event, "-p", policy, "--signal-error", "p=boom")
    assert code == 0 and "signal p = 0.2  (failed: boom; fallback used)" in out and "no rule fired" in out


def test_explain_dry_run_external_signals(tmp_path: Path) -> None:
    policy = str(write(tmp_path, SIGNAL_POLICY))
    event = str(write(tmp_path, "type: input\ntext: x\n", "e.yaml"))
    code, out = invoke("explain", "-e", event, "-p", policy, "--format", "json")
    body = json.loads(out)
    assert code == 0 and body["dry_run_signals"] == ["p"] and body["signals"]["p"] == 0.2
    assert "not computed in a dry run" in body["signal_errors"]["p"]


@pytest.mark.parametrize("code_arg", ["RT301", "rt301"])
def test_explain_code_prints_page(code_arg: str) -> None:
    code, out = invoke("explain", code_arg)
    assert code == 0 and out.startswith("## RT301: unknown event field")
    assert "**What it does.**" in out and "**Why it matters.**" in out and "```yaml" in out


def test_explain_unknown_code_exit_1() -> None:
    code, out = invoke("explain", "RT999")
    assert code == 1 and "unknown code 'RT999'" in out


def test_explain_without_event_usage_exit_2() -> None:
    code, _ = invoke("explain")
    assert code == 2


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ('{"type": "input", "txt": 1}', ":1:19: error: unknown event field 'txt' [RT131]"),
        ('{"type": "inptu"}', "error: unknown event type 'inptu' [RT130]"),
        ("[1, 2]", ":1:1: error: an event must be a mapping with a `type` [RT130]"),
        ('{"type": "input", "text": [1]}', "error: event field 'text'"),
        ('{"type": "input"', "error: invalid YAML"),
    ],
)
def test_explain_bad_event_file_located_error_exit_1(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    document: str,
    expected: str,
) -> None:
    event = write(tmp_path, document, "event.json")
    code, out, err = run_main(monkeypatch, capsys, "explain", "--event", str(event), "--policy", DEFAULT)
    assert code == 1 and expected in err and "Traceback" not in err + out
    assert err.splitlines()[0].startswith(str(event))


def test_explain_missing_event_file_rt100(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(monkeypatch, capsys, "explain", "-e", str(tmp_path / "nope.json"), "-p", DEFAULT)
    assert code == 1 and "[RT100]" in err


def test_explain_broken_policy_exit_1(tmp_path: Path) -> None:
    policy = str(write(tmp_path, "rules:\n  - id: a\n    on: inptu\n"))
    code, out = invoke("explain", "-e", TURN_END, "-p", policy)
    assert code == 1 and "[RT205]" in out


def test_schema_out_and_check(tmp_path: Path) -> None:
    out_dir = tmp_path / "schema"
    code, _ = invoke("schema", "--out", str(out_dir))
    assert code == 0 and sorted(p.name for p in out_dir.iterdir()) == [
        "event.schema.json",
        "policy.schema.json",
    ]
    assert invoke("schema", "--out", str(out_dir), "--check") == (0, "schemas are up to date\n")
    (out_dir / "policy.schema.json").write_text("{}", encoding="utf-8")
    assert invoke("schema", "--out", str(out_dir), "--check") == (1, "stale: policy.schema.json\n")


def test_schema_prints_policy_and_event_schemas() -> None:
    code, out = invoke("schema", "policy")
    body = json.loads(out)
    assert code == 0 and body["title"] == "pi-policy-router policy" and "Action" in body["$defs"]
    code, out = invoke("schema", "event")
    assert code == 0 and json.loads(out)["title"] == "pi-policy-router normalized event"
    assert invoke("schema", "nope")[0] == 2


def test_committed_schema_files_up_to_date() -> None:
    directory = ROOT / "schema"
    assert any(directory.glob("*.json")), "run `router schema --out schema`"
    assert schema_command.stale(directory) == [], "run `router schema --out schema`"


def test_init_writes_policy_that_lints_clean_and_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke("init")
    assert code == 0 and (tmp_path / ".pi" / "router.yaml").is_file()
    assert (tmp_path / ".pi" / "router.schema.json").is_file()
    lint = CliRunner().invoke(cli.app, ["lint", ".pi/router.yaml"])
    assert (lint.exit_code, lint.stdout) == (0, "Found 0 errors, 0 warnings.\n")
    code, out = invoke("test", ".pi/router.yaml")
    assert code == 0 and "FAIL: 0/" in out and "PASS: 2/2" in out


def test_init_refuses_to_overwrite_without_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("init")[0] == 0
    code, out = invoke("init")
    assert code == 1 and "already exists" in out
    assert invoke("init", "--force")[0] == 0


@pytest.mark.parametrize("linked", [".pi", ".pi/router.yaml", ".pi/router.schema.json"])
def test_init_writes_nothing_through_a_link_the_repository_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: str) -> None:
    """A cloned repository's `.pi` (or a file in it) that links to a file or folder of the user's
    (here `~/.bashrc` and `~/.config`): `router init`, even with --force, writes nothing there."""
    project, home = tmp_path / "repo", tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    bashrc = home / ".bashrc"
    bashrc.write_text("the user's\n")
    link = project / linked
    link.parent.mkdir(parents=True)
    if linked == ".pi":
        link.symlink_to(home / ".config", target_is_directory=True)
    else:
        link.symlink_to(bashrc)
    monkeypatch.chdir(project)
    code, out = invoke("init", "--force")
    assert code == 1 and f"{link} is a symbolic link" in out and "nothing was written" in out
    assert bashrc.read_text() == "the user's\n" and list((home / ".config").iterdir()) == []


def test_internal_error_exit_3_with_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from router.commands import lint as lint_command

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(lint_command, "run", explode)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code, out, err = run_main(monkeypatch, capsys, "lint", DEFAULT)
    assert code == 3 and "Traceback" not in err + out
    assert err.startswith("router: internal error (RuntimeError: kaboom); details in ")
    log = Path(err.split("details in ")[1].split(" (router")[0])
    assert log.parent == tmp_path and "RuntimeError: kaboom" in log.read_text() and "router 0.1.0" in err
    assert log.stat().st_mode & 0o777 == 0o600


def test_the_crash_log_never_writes_through_a_name_somebody_prepared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a shared machine another user can put a link at a predictable name in /tmp; the log
    goes to a new file of its own, and the file the link names stays as it was."""
    import os

    from router.commands import lint as lint_command

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("kaboom")

    victim = tmp_path / "victim"
    victim.write_text("the user's\n")
    (tmp_path / f"router-crash-{os.getpid()}.log").symlink_to(victim)
    monkeypatch.setattr(lint_command, "run", explode)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code, _, err = run_main(monkeypatch, capsys, "lint", DEFAULT)
    log = Path(err.split("details in ")[1].split(" (router")[0])
    assert code == 3 and victim.read_text() == "the user's\n" and not log.is_symlink()


def test_keyboard_interrupt_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from router.commands import lint as lint_command

    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(lint_command, "run", interrupt)
    assert run_main(monkeypatch, capsys, "lint", DEFAULT)[0] == 130


def test_version_prints_version() -> None:
    code, out = invoke("version")
    assert code == 0 and out.startswith("router 0.1.0")
