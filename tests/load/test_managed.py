"""The managed layer: `$ROUTER_MANAGED_DIR/router.yaml` above the user's, with `locked: true` rules
that neither the user's file nor a project can override, disable or move ahead of (RT609)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.load.managed import SYSTEM_DIR, managed_dir
from router.load.paths import layer_paths
from router.runtime.project_content import read_project_content
from router.runtime.session_policy import load_session_policy
from tests.gitrepo import Project, dedent, make_project

MANAGED = """
version: 1
rules:
  - id: no-force-push
    locked: true
    on: tool_call
    match: "tool.name == 'bash' && contains(tool.input.command, '--force')"
    do: [{block: "force pushes are not allowed here"}]
  - id: managed-default
    on: input
    when: "text == 'hi'"
    do: [{notify: managed}]
"""

FORCE_PUSH = json.dumps({"type": "tool_call",
                         "tool": {"name": "bash", "input": {"command": "git push --force"}}})


@pytest.fixture
def project(tmp_path: Path) -> Project:
    found = make_project(tmp_path)
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "router.yaml").write_text(dedent(MANAGED))
    found.env["ROUTER_MANAGED_DIR"] = str(managed)
    return found


def test_the_managed_dir_is_the_env_var_else_the_system_path(tmp_path: Path) -> None:
    assert managed_dir({}) == SYSTEM_DIR == Path("/etc/pi-policy-router")
    assert managed_dir({"ROUTER_MANAGED_DIR": str(tmp_path)}) == tmp_path


def test_the_managed_layer_loads_after_the_default_pack_before_the_user(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTER_MANAGED_DIR", project.env["ROUTER_MANAGED_DIR"])
    (project.agent).mkdir(parents=True)
    (project.agent / "router.yaml").write_text("version: 1\n")
    layers = [layer for layer, _ in layer_paths(project.root, agent=project.agent)]
    assert layers == ["pack", "managed", "user"]


def test_a_project_cannot_disable_override_or_jump_ahead_of_a_locked_rule(project: Project) -> None:
    project.policy("""
        version: 1
        disable: [no-force-push, managed-default]
        rules:
          - id: no-force-push
            on: tool_call
            do: []
          - id: sneak-ahead
            before: no-force-push
            on: tool_call
            do: []
    """)

    lint = project.router("lint", "--format", "json")
    explained = project.router("explain", "--event", "-", stdin=FORCE_PUSH)

    found = [(d["code"], d["rule_id"], d["line"]) for d in json.loads(lint.stdout)["diagnostics"]]
    assert lint.returncode == 1
    assert ("RT609", "no-force-push", 4) in found  # the override
    assert ("RT609", "sneak-ahead", 8) in found  # before: a locked rule
    assert [d for d in json.loads(lint.stdout)["diagnostics"]
            if d["code"] == "RT609" and "disables the locked rule 'no-force-push'" in d["message"]]
    assert not [d for d in json.loads(lint.stdout)["diagnostics"] if "managed-default" in d["message"]]
    assert explained.returncode == 0, explained.stderr
    assert "[managed, locked] rule no-force-push: enter" in explained.stdout
    assert "decision: 1 action from rule no-force-push" in explained.stdout


def test_at_run_time_the_lower_rule_is_dropped_and_the_user_told(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTER_MANAGED_DIR", project.env["ROUTER_MANAGED_DIR"])
    project.policy("version: 1\ndisable: [no-force-push]\n")
    content, _ = read_project_content(project.root, project.agent)
    assert content is not None

    loaded = load_session_policy(project.root, project.agent, records={}, approved=content.digest)

    assert loaded.policy is not None and loaded.trust.applies
    assert "no-force-push" in [r.id for r in loaded.policy.by_event["tool_call"]]
    (refusal,) = loaded.policy.refused
    assert (refusal.code, refusal.kind, refusal.layer) == ("RT609", "disable", "project")
    assert "of the project policy refused: it disables the locked rule" in refusal.warning()


def test_lint_lists_every_rule_with_its_layer(project: Project) -> None:
    project.agent.mkdir(parents=True)
    (project.agent / "router.yaml").write_text(
        "version: 1\nrules:\n  - {id: mine, on: input, when: \"text == 'x'\", do: [{notify: x}]}\n")
    done = project.router("lint", "--rules")

    assert done.returncode == 0, done.stdout
    rows = [line.split() for line in done.stdout.splitlines()[1:5]]
    assert [row[:2] for row in rows] == [["default-warn-context-full", "pack"],
                                         ["default-rearm-context-warning", "pack"],
                                         ["no-force-push", "managed,"], ["managed-default", "managed"]]
    assert rows[2][2] == "locked" and rows[2][3].endswith("managed/router.yaml:3")


def test_locked_outside_the_managed_layer_is_a_warning(project: Project) -> None:
    project.policy("""
        version: 1
        rules:
          - {id: mine, locked: true, on: input, when: "text == 'x'", do: [{notify: x}]}
    """)
    done = project.router("lint", "--format", "json")
    (warning,) = [d for d in json.loads(done.stdout)["diagnostics"] if d["code"] == "RT609"]
    assert warning["severity"] == "warning" and "only the managed policy's rules" in warning["message"]
