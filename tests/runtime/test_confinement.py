"""Issue 23, part A: what the router reads from a project, what it writes to its logs, and that
hostile input ends in a located error (exit 1 or 2), never an internal error (exit 3).

The CLI rows run the installed console script in a subprocess, in a real git repository under a
temporary HOME whose secret-looking files a cloned repository links to.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.commands.install import bridge_text
from router.diagnostics.errors import SourceError
from router.engine.decision import Decision, Effect
from router.lang.budget import DEADLINE_ENV, DEADLINE_RANGE_MS
from router.load.file_reading import read_text
from router.load.prices import Catalog
from router.load.source import parse_source
from router.replay.report_data import from_log
from router.replay.report_html import FIELD_CHARS, MAX_ROWS, render
from router.replay.session_file import read_session
from router.runtime.executor import Executor
from router.runtime.log_line import escape_line, unescape_line
from router.runtime.project_content import data_files
from tests.gitrepo import Project, make_project

ROUTER = Path(sys.executable).parent / "router"  # the console script of this environment
SECRETS = {
    ".git-credentials": "https://alice:ghp_TOKEN0123456789abcdef@github.com\n",
    ".netrc": "machine api.example.com login alice password NETRC-PASSWORD-42\n",
    ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
                       "-----END OPENSSH PRIVATE KEY-----\n",
    "secrets.yaml": "OPENAI_API_KEY: sk-SECRET-OPENAI-KEY-0042\n",
}
MARKERS = ("ghp_TOKEN0123456789abcdef", "NETRC-PASSWORD-42", "BEGIN OPENSSH", "b3BlbnNzaC1rZXk",
           "sk-SECRET-OPENAI-KEY-0042", "OPENAI_API_KEY")
ENV_MARKER = "ROUTER_TEST_ENV_SECRET"
COMPREHENSION = "length([[j for j in range(200)] for i in range(200)]) > 0"


def far_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidecar's deadline (and with it each rule's time allowance) far past what the size limit
    needs: the size limit must be what stops the comprehension, on a loaded machine too (with the
    250 ms allowance a busy machine ran out of time first: RT404, not RT403)."""
    monkeypatch.setenv(DEADLINE_ENV, str(DEADLINE_RANGE_MS[1]))


def run(project: Project, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The console script in the project (the timeout guards against a hang; it asserts nothing)."""
    env = {**project.env, ENV_MARKER: "env-value-that-must-not-print"}
    return subprocess.run([str(ROUTER), *args], cwd=project.root, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A cloned repository (a real git repository) under a HOME holding secret-looking files."""
    made = make_project(tmp_path)
    for name, text in SECRETS.items():
        path = made.home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "init", "-q", str(made.root)], check=True, capture_output=True, timeout=60)
    (made.root / ".pi").mkdir()
    return made


def shown(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def assert_quiet(done: subprocess.CompletedProcess[str]) -> None:
    """No secret, no environment, no traceback and no internal error in the output."""
    out = shown(done)
    assert not [m for m in MARKERS if m in out], out
    assert "env-value-that-must-not-print" not in out and "Traceback" not in out
    assert "internal error" not in out and done.returncode in (0, 1, 2), out


# --- reads ------------------------------------------------------------------------------------


@pytest.mark.parametrize("secret", sorted(SECRETS))
def test_lint_of_a_policy_linked_to_a_secret_refuses_it_and_never_quotes_it(project: Project,
                                                                             secret: str) -> None:
    (project.root / ".pi" / "router.yaml").symlink_to(project.home / secret)
    for command in (("lint",), ("lint", ".pi/router.yaml")):
        done = run(project, *command)
        assert_quiet(done)
        assert done.returncode == 1 and "RT605" in done.stdout and f"~/{secret}" in done.stdout


@pytest.mark.parametrize("command", [("test",), ("trust", "--yes"), ("explain", "-e", "-"), ("doctor",)])
def test_other_commands_never_quote_a_policy_linked_to_a_secret(project: Project,
                                                                command: tuple[str, ...]) -> None:
    (project.root / ".pi" / "router.yaml").symlink_to(project.home / ".git-credentials")
    assert_quiet(run(project, *command, stdin='{"type": "input", "text": "hi"}'))


def test_a_policy_linked_to_proc_self_environ_never_prints_the_environment(project: Project) -> None:
    (project.root / ".pi" / "router.yaml").symlink_to("/proc/self/environ")
    commands = [("lint",), ("lint", "--format", "json"), ("lint", "--format", "sarif"), ("test",)]
    runs = {command: run(project, *command) for command in commands}
    for done in runs.values():
        assert_quiet(done)
        assert ENV_MARKER not in shown(done) and "HOME=" not in shown(done)
    assert "a file of /proc" in runs["lint",].stdout


def test_a_test_file_linked_out_of_the_project_is_not_read(project: Project) -> None:
    (project.root / ".pi" / "ci.test.yaml").symlink_to(project.home / "secrets.yaml")
    for command in ("lint", "test"):
        done = run(project, command)
        assert_quiet(done)
        assert done.returncode == 1 and "RT104" in shown(done) and "outside the project" in shown(done)


def test_a_link_that_stays_inside_the_project_is_followed(project: Project) -> None:
    policies = project.root / "policies"
    policies.mkdir()
    (policies / "main.yaml").write_text("version: 1\nrules:\n  - id: inside\n    on: input\n"
                                        "    do: [{notify: hi}]\n")
    (project.root / ".pi" / "router.yaml").symlink_to("../policies/main.yaml")
    done = run(project, "lint", "--rules")
    assert done.returncode == 0, shown(done)
    assert "inside" in done.stdout


def test_the_users_own_policy_may_be_a_link_to_a_dotfiles_repository(project: Project) -> None:
    dotfiles = project.home / "dotfiles" / "router.yaml"
    dotfiles.parent.mkdir()
    dotfiles.write_text("version: 1\nrules:\n  - id: mine\n    on: input\n    do: [{notify: hi}]\n")
    project.agent.mkdir(parents=True)
    (project.agent / "router.yaml").symlink_to(dotfiles)
    done = run(project, "lint", "--rules")
    assert done.returncode == 0, shown(done)
    assert "mine" in done.stdout


def test_a_file_that_is_not_yaml_is_named_never_shown(project: Project) -> None:
    policy = project.root / ".pi" / "router.yaml"
    for text in ('version: 1\npassword: "NETRC-PASSWORD-42\n', "a: *OPENAI_API_KEY\n",
                 "rules: [BEGIN OPENSSH\n", "a: [sk-SECRET-OPENAI-KEY-0042, {\n"):
        policy.write_text(text)
        done = run(project, "lint")
        assert_quiet(done)
        assert done.returncode == 1 and "RT101" in done.stdout and ".pi/router.yaml:" in done.stdout
        assert "  | " not in done.stdout  # no excerpt


@pytest.mark.parametrize("make", ["fifo", "directory-entry", "binary", "utf8", "huge", "dev-zero"])
def test_hostile_policy_files_end_in_a_clear_error(project: Project, make: str) -> None:
    policy = project.root / ".pi" / "router.yaml"
    if make == "fifo":
        os.mkfifo(policy)  # opened non-blocking by the router: no writer needed, no hang
    elif make == "directory-entry":
        (project.root / ".pi" / "team.yaml").mkdir()
        policy.write_text("version: 1\nuse: [./team.yaml]\n")
    elif make == "binary":
        policy.write_bytes(b"\x00\x01\x02ELF\x7f" * 100)
    elif make == "utf8":
        policy.write_bytes(b"version: 1\nrules: []\n# caf\xc3\n")
    elif make == "huge":
        with policy.open("wb") as handle:  # sparse: 100 MB on paper, nothing on the disk
            handle.truncate(100 * 1024 * 1024)
    else:
        policy.symlink_to("/dev/zero")
    for command in ("lint", "test", "explain"):
        done = run(project, command, *(("-e", "-") if command == "explain" else ()),
                   stdin='{"type": "input", "text": "hi"}')
        assert_quiet(done)
        # a link out of the project is a refusal: explain runs the rest of the policy, as Pi does
        assert done.returncode == (0 if (make, command) == ("dev-zero", "explain") else 1), shown(done)
    out = run(project, "lint").stdout
    expected = {"fifo": "a FIFO, not a regular file", "directory-entry": "RT120", "binary": "RT101",
                "utf8": ".pi/router.yaml:3:6: error: cannot read", "huge": "RT103", "dev-zero": "RT605"}
    assert expected[make] in out, out


def test_read_text_refuses_kernel_files_and_links_out_of_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as proc:
        read_text(Path("/proc/self/environ"))
    assert proc.value.diagnostics[0].code == "RT104"
    area = tmp_path / "project"
    area.mkdir()
    (tmp_path / "outside.yaml").write_text("a: 1\n")
    (area / "in.yaml").write_text("a: 1\n")
    (area / "out.yaml").symlink_to(tmp_path / "outside.yaml")
    (area / "alias.yaml").symlink_to("in.yaml")
    assert read_text(area / "alias.yaml", within=area) == "a: 1\n"
    with pytest.raises(SourceError) as out:
        read_text(area / "out.yaml", within=area)
    refused = out.value.diagnostics[0]
    assert refused.code == "RT104" and "outside the project" in refused.message
    assert read_text(area / "out.yaml") == "a: 1\n"  # without `within` (the user's own file): followed


def test_a_parse_error_diagnostic_carries_no_excerpt_and_no_quoted_text() -> None:
    with pytest.raises(SourceError) as caught:
        parse_source("a: *sk_SECRET_alias\n", ".pi/router.yaml")
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.extra.get("excerpt") is False and "sk_SECRET" not in diagnostic.message


def test_the_sidecars_data_files_are_read_only_inside_the_project(project: Project) -> None:
    pi = project.root / ".pi"
    (pi / "out.json").symlink_to(project.home / "secrets.yaml")
    os.mkfifo(pi / "pipe.json")
    (pi / "environ.json").symlink_to("/proc/self/environ")
    (pi / "ok.json").write_text("{}")
    names = [".pi/out.json", ".pi/pipe.json", ".pi/environ.json", ".pi/ok.json"]
    found = dict(data_files(project.root, names))
    assert found[pi / "out.json"] is None and found[pi / "pipe.json"] is None
    assert found[pi / "environ.json"] is None and found[pi / "ok.json"] is not None


def test_a_project_bridge_file_linked_out_of_its_folder_is_not_read(tmp_path: Path) -> None:
    folder = tmp_path / ".pi" / "extensions" / "pi-policy-router"
    folder.mkdir(parents=True)
    (tmp_path / "secret.json").write_text('{"command": ["NETRC-PASSWORD-42"]}')
    (folder / "router-bridge.json").symlink_to(tmp_path / "secret.json")
    os.mkfifo(folder / "index.mjs")
    assert bridge_text(folder / "router-bridge.json") is None and bridge_text(folder / "index.mjs") is None


def test_a_session_file_that_is_a_fifo_is_a_problem_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "s.jsonl")
    session = read_session(tmp_path / "s.jsonl")
    assert session.entries == [] and "a FIFO" in session.problems[0].message


# --- logs -------------------------------------------------------------------------------------


@given(st.text())
def test_the_log_line_escaper_always_yields_one_line_and_round_trips(text: str) -> None:
    line = escape_line(text)
    assert len(line.splitlines()) <= 1 and "\n" not in line and "\x1b" not in line
    assert unescape_line(line) == text


@given(st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="\\")))
def test_the_log_line_escaper_leaves_printable_text_as_it_is(text: str) -> None:
    assert escape_line(text) == text


FORGED = "done\n2026-01-01T00:00:00 trusted /etc\r\x1b[2K\u2028\u2029\x85 end"


def test_a_log_action_with_newlines_writes_one_line(tmp_path: Path) -> None:
    router_log, own = tmp_path / "router.log", tmp_path / "own.log"
    executor = Executor(None, cwd=str(tmp_path), log_file=router_log)
    executor.apply(Decision("input", effects=(Effect("log", {"text": FORGED, "file": "@router"}, "r"),
                                              Effect("log", {"text": FORGED, "file": str(own)}, "r"))))
    executor.log(f"protocol error: {FORGED}")
    for path in (router_log, own):
        lines = path.read_text().splitlines()
        assert len(lines) == (2 if path == router_log else 1) and all(FORGED not in line for line in lines)
        assert all("\x1b" not in line for line in lines) and "\\n2026-01-01T00:00:00 trusted /etc" in lines[0]
    assert unescape_line(own.read_text().rstrip("\n")) == FORGED


# --- no internal errors from input ------------------------------------------------------------


def _comprehension_policy(project: Project) -> None:
    (project.root / ".pi" / "router.yaml").write_text(
        f"version: 1\nrules:\n  - id: big\n    on: input\n    when: \"{COMPREHENSION}\"\n"
        "    do: [{notify: hi}]\n")
    (project.root / ".pi" / "router.test.yaml").write_text(
        "cases:\n  - name: a\n    event: {type: input, text: x}\n    expect: {fired: []}\n")


def test_a_comprehension_too_long_is_a_located_error_in_the_cli(project: Project) -> None:
    _comprehension_policy(project)
    explained = run(project, "explain", "-e", "-", stdin='{"type": "input", "text": "x"}')
    assert_quiet(explained)
    assert "rule 'big': when failed: Comprehension generates too many elements [RT403]" in explained.stdout
    tested = run(project, "test")
    assert_quiet(tested)


@pytest.mark.timing
def test_a_comprehension_too_long_fails_its_rule_in_the_sidecar(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.runtime.test_server import INPUT, Rig

    far_deadline(monkeypatch)
    rig = Rig(tmp_path, f"version: 1\nrules:\n  - id: big\n    on: input\n    when: \"{COMPREHENSION}\"\n"
                        "    do: [{notify: hi}]\n  - id: after\n    on: input\n    do: [{notify: ok}]\n")
    rig.hello()
    first = rig.event(INPUT)
    assert first["fired"] == ["after"]
    assert first["warnings"] == ["rule 'big': when failed: Comprehension generates too many elements [RT403]"]
    assert rig.event(INPUT)["fired"] == ["after"]  # the same engine answers again
    assert "RT403" in rig.log() and "(rule big)" in rig.log()  # the error's text is stubbed (no prompt)


@pytest.mark.parametrize("target", ["/proc/x", "a-file", "blocked", "/sys/x"])
def test_schema_out_to_an_impossible_place_is_an_error(tmp_path: Path, target: str) -> None:
    (tmp_path / "a-file").write_text("")
    (tmp_path / "blocked" / "policy.schema.json").mkdir(parents=True)  # a directory in a file's place
    done = subprocess.run([str(ROUTER), "schema", "--out", target], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 1 and done.stderr.startswith(f"error: cannot write into {target}")
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_a_huge_field_makes_a_page_of_bounded_size() -> None:
    huge = "<&" * 25_000_000  # 50 MB
    records = [{"model": huge, "tier": huge, "fired": [huge], "latency_ms": 1.0, "event": "turn_end",
                "session": huge, "time": "2026-01-01T00:00:00Z", "cost": 0.01}]
    records += [{"model": f"p/m{i}", "fired": [f"rule-{i}"], "event": "turn_end", "session": f"s{i}",
                 "time": "2026-01-01T00:00:01Z"} for i in range(5 * MAX_ROWS)]
    page = render(from_log(records, Catalog(), None, huge))
    assert len(page) < 1_000_000
    assert "[cut: 50,000,000 characters]" in page and f"{4 * MAX_ROWS + 1} more rows not shown" in page
    assert "<" * (FIELD_CHARS + 1) not in page and "&" * (FIELD_CHARS + 1) not in page


def test_a_huge_field_in_a_session_makes_a_bounded_replay(tmp_path: Path) -> None:
    from tests.replay_sessions import SessionWriter

    huge = "x" * 10_000_000
    session = SessionWriter(id="s1").start(f"fake/{huge}").user("hi").assistant(f"fake/{huge}")
    session.write(tmp_path, "s.jsonl")
    page = tmp_path / "r.html"
    done = subprocess.run([str(ROUTER), "replay", str(tmp_path / "s.jsonl"), "--html", str(page)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) < 100_000 and "[cut: 10,000,005 characters]" in done.stdout
    assert page.stat().st_size < 1_000_000 and "[cut: 10,000,005 characters]" in page.read_text()


@pytest.mark.timing
def test_engine_answers_after_a_comprehension_error_in_a_template(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.runtime.test_server import INPUT, Rig

    far_deadline(monkeypatch)
    rig = Rig(tmp_path, "version: 1\nrules:\n  - id: t\n    on: input\n"
                        "    do: [{notify: \"{length([[j for j in range(200)] for i in range(200)])}\"}]\n")
    rig.hello()
    result = asyncio.run(rig.engine.event(1, INPUT))
    assert result["warnings"] and "RT403" in result["warnings"][0]
