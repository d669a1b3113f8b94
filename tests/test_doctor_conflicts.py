"""router doctor's extension checks: the original routers and same-named tools or commands."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from router.commands import doctor, doctor_conflicts

DECISION_POLICY = SimpleNamespace(tools=({"name": "decision_request"},),
                                  commands=({"name": "decision-router-toggle"},))
NO_NAMES = SimpleNamespace(tools=(), commands=())


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    agent, cwd = tmp_path / "agent", tmp_path / "proj"
    (agent / "extensions").mkdir(parents=True)
    cwd.mkdir()
    return agent, cwd


def test_the_original_decision_router_fails_with_the_command_that_removes_it(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    original = agent / "extensions" / "pi-decision-router"
    original.mkdir()
    (agent / "extensions" / "pi-policy-router").mkdir()  # the bridge itself is never reported
    [check] = doctor.check_extensions(agent, cwd, DECISION_POLICY)
    assert not check.ok
    assert check.render() == (
        "FAIL extension pi-decision-router (user): the original pi-decision-router, which the `decision` "
        "pack replaces: it registers decision-router-toggle, decision_request as this policy does, so Pi "
        f"refuses to start; remove it: rm -r {original}")


def test_an_original_the_policy_does_not_clash_with_is_a_warning(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    (agent / "settings.json").write_text(json.dumps({"packages": ["npm:pi-deepseek-router@0.1.3"]}))
    [check] = doctor.check_extensions(agent, cwd, NO_NAMES)
    assert check.ok and check.warn
    assert check.label == "extension npm:pi-deepseek-router@0.1.3 (user)"
    assert check.detail.endswith("it and the router would both decide the same events; remove it: "
                                 "pi remove npm:pi-deepseek-router@0.1.3")


def test_a_project_package_is_removed_with_the_local_flag(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    (cwd / ".pi").mkdir()
    (cwd / ".pi" / "settings.json").write_text(json.dumps(
        {"packages": [{"source": "git:example.org/u/pi-cuttle@v0.5.0"}]}))
    [check] = doctor.check_extensions(agent, cwd, NO_NAMES)
    assert check.label == "extension git:example.org/u/pi-cuttle@v0.5.0 (project)"
    assert check.detail.endswith("pi remove -l git:example.org/u/pi-cuttle@v0.5.0")


def test_another_extension_registering_the_policys_tool_fails(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    other = agent / "extensions" / "ask-tools"
    (other / "src").mkdir(parents=True)
    (other / "src" / "index.ts").write_text('pi.registerTool({ name: "decision_request", run });\n')
    (agent / "extensions" / "quiet.ts").write_text("export default () => {};  // decision_request unquoted\n")
    [check] = doctor.check_extensions(agent, cwd, DECISION_POLICY)
    assert not check.ok and check.label == "extension ask-tools (user)"
    assert check.detail.startswith("registers decision_request as this policy does, so Pi refuses to start")
    assert check.detail.endswith(f"remove one of them: rm -r {other}")


def test_a_settings_path_entry_is_read_relative_to_the_settings_file(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "index.js").write_text("registerCommand('decision-router-toggle', {})\n")
    (agent / "settings.json").write_text(json.dumps({"extensions": ["../mine", "-builtin:mcp"]}))
    [check] = doctor.check_extensions(agent, cwd, DECISION_POLICY)
    assert not check.ok and "registers decision-router-toggle" in check.detail
    assert check.detail.endswith(f'delete "../mine" from "extensions" in {agent / "settings.json"}')


def test_sources_are_read_bounded_and_links_are_not_followed(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    outside = tmp_path / "outside.ts"
    outside.write_text('name: "decision_request"\n')
    ext = agent / "extensions" / "linky"
    ext.mkdir()
    (ext / "link.ts").symlink_to(outside)
    (ext / "huge.ts").write_text('"decision_request"' + " " * doctor_conflicts.MAX_BYTES)
    (ext / "node_modules").mkdir()
    (ext / "node_modules" / "dep.js").write_text('"decision_request"\n')
    assert doctor.check_extensions(agent, cwd, DECISION_POLICY) == []


def test_unreadable_settings_are_ignored(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    (agent / "settings.json").write_text("{not json")
    assert doctor_conflicts.installed(agent, cwd) == []
    assert doctor.check_extensions(agent, cwd, None) == []
