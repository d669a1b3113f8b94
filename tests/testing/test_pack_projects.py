"""A real project whose `.pi/router.yaml` `use:`s the built-in packs, run through the installed
`router` console script: its own inline examples and `.pi/router.test.yaml` pass without naming a
pack rule or signal, the commands say which policy files are in force, and run from a
subdirectory they warn that a Pi started there would not load the project's file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.load.paths import display_path, pack_names
from tests.helpers import write

ROUTER = Path(sys.executable).parent / "router"

OWN_RULES = r"""
rules:
  - id: warn-when-context-is-full
    on: turn_end
    when: "usage.percent >= 80 and not state.context_warned"
    do:
      - notify: {text: "Context is {usage.percent:.0f}% full.", level: warning}
      - set: {context_warned: true}
    examples:
      - name: warns at 85%
        event: {type: turn_end, usage: {percent: 85}}
        expect:
          fires: true
          actions:
            - notify: {text: "Context is 85% full.", level: warning}
            - set: {context_warned: true}
          state: {context_warned: true}
      - name: quiet while usage is unknown
        event: {type: turn_end}
        expect: {fires: false, fired: [], actions: []}
  - id: hello-on-start
    on: session_start
    do: [{notify: "policy ready"}]
    examples:
      - event: {type: session_start}
        expect: {fired: [hello-on-start], actions: [{notify: {text: policy ready}}]}
  - id: no-force-push
    on: tool_call
    match: "tool.name == 'bash'"
    when: "regex(tool.input.command, 'push\\s+(-f|--force)')"
    do: [{block: "no force pushes"}]
    examples:
      - event: {type: tool_call, tool: {name: bash, input: {command: "git push --force"}}}
        expect: {fires: true, actions: [{block: {reason: no force pushes}}]}
      - event: {type: tool_call, tool: {name: bash, input: {command: "ls"}}}
        expect: {fires: false}
  - id: greet
    on: input
    when: "text == 'hi'"
    do: [{notify: hello}]
    examples:
      - event: {type: input, text: hi, model: {provider: deepseek, id: deepseek-v4-pro}}
        expect: {fired: [greet], actions: [{notify: {text: hello}}]}
  - id: my-status
    on: command
    match: "name == 'my-status'"
    do: [{notify: "status ok"}]
    examples:
      - event: {type: command, name: my-status}
        expect: {fires: true}
"""

OWN_CASES = """
cases:
  - name: the first warning, with its exact text
    event: {type: turn_end, usage: {tokens: 85000, context_window: 100000, percent: 85}}
    expect:
      fired: [warn-when-context-is-full]
      actions:
        - notify: {text: "Context is 85% full.", level: warning}
        - set: {context_warned: true}
      state: {context_warned: true}
  - name: nothing of ours between the warning and the re-arm
    event: {type: turn_end, usage: {percent: 85}}
    state: {context_warned: true}
    expect: {fires: false, fired: [], actions: []}
  - name: a new session says hello
    event: {type: session_start}
    expect: {fired: [hello-on-start], actions: [{notify: {text: policy ready}}]}
  - name: greets on a DeepSeek model
    event: {type: input, text: hi, model: {provider: deepseek, id: deepseek-v4-pro}}
    expect: {fired: [greet], actions: [{notify: {text: hello}}]}
  - name: other input is left alone
    event: {type: input, text: "write the tests"}
    expect: {fires: false}
  - name: a force push is blocked
    event: {type: tool_call, tool: {name: bash, input: {command: "git push -f origin main"}}}
    expect: {fired: [no-force-push], actions: [{block: {}}]}
  - name: the status command
    event: {type: command, name: my-status}
    expect: {fired: [my-status], actions: [{notify: {text: status ok}}]}
"""

OWN_IDS = {"warn-when-context-is-full", "hello-on-start", "no-force-push", "greet", "my-status"}
PACK_SETS = [[name] for name in pack_names()] + [[n for n in pack_names() if n != "default"]]


def make_project(root: Path, packs: list[str]) -> Path:
    write(root, f"version: 1\nuse: [{', '.join(packs)}]\n" + OWN_RULES, ".pi/router.yaml")
    write(root, OWN_CASES, ".pi/router.test.yaml")
    (root / "src" / "deep").mkdir(parents=True)
    return root


def router(cwd: Path, agent: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed console script in `cwd` with its own agent dir (no user policy)."""
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent), "NO_COLOR": "1"}
    return subprocess.run([str(ROUTER), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent"
    path.mkdir()
    return path


def test_the_console_script_is_installed() -> None:
    assert ROUTER.is_file(), f"{ROUTER} is missing: install the package (pip install -e .)"


@pytest.mark.parametrize("packs", PACK_SETS, ids=["+".join(p) for p in PACK_SETS])
def test_own_examples_and_cases_pass_with_packs_in_use(tmp_path: Path, agent: Path, packs: list[str]) -> None:
    root = make_project(tmp_path / "proj", packs)
    done = router(root, agent, "test", "--format", "json")
    body = json.loads(done.stdout)
    failing = [(r["name"], r["problems"]) for r in body["results"] if not r["passed"]]
    assert (done.returncode, failing, body["diagnostics"]) == (0, [], [])
    names = {(Path(r["path"]).name, r["name"]) for r in body["results"]}
    assert len([n for n in names if n[0] == "router.test.yaml"]) == 7
    assert len([n for n in names if n[0] == "router.yaml"]) == 7  # the own examples only
    assert all(r["name"].split(" example")[0] in OWN_IDS for r in body["results"]
               if r["path"].endswith("router.yaml"))
    if packs != ["default"]:  # the packs really took part: their rules fired in our cases
        fired = {rule for r in body["results"] for rule in r["fired"]}
        assert fired - OWN_IDS, fired
    used = {f["pack"] for f in body["files"] if f["used_by"] == ".pi/router.yaml"}
    assert used == set(packs) - {"default"}
    assert [u["rule"] for u in body["unexercised"]] == []  # pack rules are not ours to cover


@pytest.mark.parametrize("packs", PACK_SETS, ids=["+".join(p) for p in PACK_SETS])
def test_project_using_packs_lints_clean_with_its_test_file(tmp_path: Path, agent: Path,
                                                            packs: list[str]) -> None:
    root = make_project(tmp_path / "proj", packs)
    done = router(root, agent, "lint")
    assert (done.returncode, done.stdout) == (0, "Found 0 errors, 0 warnings.\n"), done.stdout
    assert done.stderr.splitlines()[0].startswith("policy: default pack, .pi/router.yaml")


def test_text_output_names_the_files_on_stderr(tmp_path: Path, agent: Path) -> None:
    root = make_project(tmp_path / "proj", ["decision", "deepseek"])
    done = router(root, agent, "test")
    assert done.returncode == 0 and done.stdout.splitlines()[-2:] == ["PASS: 14/14", "FAIL: 0/14"]
    assert done.stderr.splitlines() == [
        "policy: default pack, .pi/router.yaml (+ decision pack, deepseek pack via use:)",
        "tests: .pi/router.test.yaml against .pi/router.yaml (+ decision pack, deepseek pack via use:)",
    ]
    assert "warning" not in done.stderr


def test_packs_flag_runs_the_built_in_packs_own_tests(tmp_path: Path, agent: Path) -> None:
    """`router test --packs` is the CI check of rules/*.test.yaml and the packs' examples."""
    root = make_project(tmp_path / "proj", ["decision"])
    done = router(root, agent, "test", "--packs", "--format", "json")
    body = json.loads(done.stdout)
    assert done.returncode == 0 and body["failed"] == 0, [r for r in body["results"] if not r["passed"]]
    tested = {Path(t["path"]).name for t in body["tests"]}
    assert {f"{name}.test.yaml" for name in pack_names() if name != "default"} <= tested
    assert any(Path(r["path"]).name == "default.yaml" for r in body["results"])
    assert sum(1 for r in body["results"] if Path(r["path"]).name == "decision.test.yaml") > 10
    without = json.loads(router(root, agent, "test", "--format", "json").stdout)
    assert without["passed"] == 14 and body["passed"] > 100


def test_explicit_pack_tests_path_still_runs_them(agent: Path) -> None:
    from router.load.paths import packs_dir

    done = router(packs_dir(), agent, "test", str(packs_dir()))
    assert done.returncode == 0 and "FAIL: 0/" in done.stdout, done.stdout[-3000:]


REASON = "Pi reads .pi/ only in its working directory, not in its parents"


def warning_of(root: Path) -> str:
    """The warning for a project at `root` (shown with ~ when it is under the home directory)."""
    return (f"warning: {display_path(root / '.pi' / 'router.yaml')} would NOT be loaded by a Pi "
            f"started here ({REASON}); start pi in {display_path(root)}")


@pytest.mark.parametrize("command", [["lint"], ["test"], ["explain", "-e", "event.json"]])
def test_from_a_subdirectory_the_commands_warn_about_the_project_file(
        tmp_path: Path, agent: Path, command: list[str]) -> None:
    root = make_project(tmp_path / "proj", ["decision"])
    here = root / "src" / "deep"
    (here / "event.json").write_text('{"type": "input", "text": "hi"}')
    done = router(here, agent, *command)
    assert warning_of(root) in done.stderr.splitlines(), done.stderr
    if command == ["lint"]:
        assert done.returncode == 0 and done.stderr.splitlines()[0] == "policy: default pack"
    if command == ["test"]:  # nothing of the project runs here: say so, and fail
        assert done.returncode == 1 and "no test cases or inline examples found" in done.stdout
    if command[0] == "explain":
        assert done.returncode == 0 and "policy: default pack" in done.stdout.splitlines()
        assert "decision: no rule fired" in done.stdout


def test_from_a_subdirectory_lint_json_lists_what_is_not_loaded(tmp_path: Path, agent: Path) -> None:
    root = make_project(tmp_path / "proj", ["decision"])
    done = router(root / "src", agent, "lint", "--format", "json")
    body = json.loads(done.stdout)
    assert [f["pack"] for f in body["files"]] == ["default"]
    assert body["not_loaded"] == [{"path": display_path(root / ".pi" / "router.yaml"),
                                   "start_pi_in": display_path(root),
                                   "reason": REASON}]
    at_root = json.loads(router(root, agent, "lint", "--format", "json").stdout)
    assert at_root["not_loaded"] == [] and [f["display"] for f in at_root["files"]][-1] == ".pi/router.yaml"


def test_from_a_subdirectory_doctor_warns(tmp_path: Path, agent: Path) -> None:
    root = make_project(tmp_path / "proj", ["decision"])
    done = router(root / "src" / "deep", agent, "doctor")
    lines = done.stdout.splitlines()
    assert "ok   policy: 2 rules from default pack" in lines
    assert f"warn project policy: {warning_of(root).removeprefix('warning: ')}" in lines


def test_a_nested_project_file_is_not_a_warning(tmp_path: Path, agent: Path) -> None:
    root = make_project(tmp_path / "proj", ["decision"])
    inner = root / "src"
    write(inner, "version: 1\n", ".pi/router.yaml")
    done = router(inner, agent, "lint")
    assert done.returncode == 0 and "warning" not in done.stderr
    assert done.stderr.splitlines() == ["policy: default pack, .pi/router.yaml"]
