"""router doctor's checks of what else breaks Pi: the original routers, same-named tools or
commands, and a project bridge in a folder Pi does not trust."""

from __future__ import annotations

import json
import os
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


PROJECT_ONLY = [("project", Path("/p/.pi/extensions/pi-policy-router"), True)]


def test_a_project_bridge_in_a_folder_pi_trusts_is_fine(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    (agent / "trust.json").write_text(json.dumps({str(tmp_path.resolve()): True}))  # a parent folder
    [check] = doctor.check_pi_folder_trust(agent, cwd, PROJECT_ONLY)
    assert check.ok and not check.warn
    assert check.detail == (f"{agent / 'trust.json'} says yes for {tmp_path.resolve()}: Pi loads the "
                            "project's bridge")


def test_a_folder_pi_does_not_trust_fails_with_the_fix(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    (agent / "trust.json").write_text(json.dumps({str(tmp_path.resolve()): True, str(cwd.resolve()): False}))
    [check] = doctor.check_pi_folder_trust(agent, cwd, PROJECT_ONLY)
    assert not check.ok
    assert "Pi does not load the project's bridge; start `pi` here and choose Trust" in check.detail


def test_an_undecided_folder_warns_that_pi_p_skips_the_bridge(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    [check] = doctor.check_pi_folder_trust(agent, cwd, PROJECT_ONLY)
    assert check.ok and check.warn
    assert check.detail.startswith("Pi has not decided about this folder: an interactive pi asks once, "
                                   "while `pi -p` and RPC runs skip the project's bridge without a word")
    (agent / "settings.json").write_text(json.dumps({"defaultProjectTrust": "never"}))
    [never] = doctor.check_pi_folder_trust(agent, cwd, PROJECT_ONLY)
    assert not never.ok and never.detail.startswith("defaultProjectTrust is 'never' in ")


def test_with_a_user_install_the_folder_trust_does_not_matter(tmp_path: Path) -> None:
    agent, cwd = dirs(tmp_path)
    both = [("user", agent / "extensions" / "pi-policy-router", True), *PROJECT_ONLY]
    assert doctor.check_pi_folder_trust(agent, cwd, both) == []
    assert doctor.check_pi_folder_trust(agent, cwd, []) == []


def test_a_planted_fifo_is_never_read(tmp_path: Path) -> None:
    # a project's .pi/settings.json or extension source that is a FIFO would block the read forever
    agent, cwd = dirs(tmp_path)
    (cwd / ".pi" / "extensions" / "planted").mkdir(parents=True)
    os.mkfifo(cwd / ".pi" / "settings.json")
    os.mkfifo(cwd / ".pi" / "extensions" / "planted" / "index.ts")
    assert doctor.check_extensions(agent, cwd, DECISION_POLICY) == []  # it returns: nothing blocked
    assert doctor_conflicts.read_json(cwd / ".pi" / "settings.json") == {}
