"""Writes of a project policy are an allow-list (router/trust/capabilities.py, docs/security.md
"Confinement: writes and git sources"): the project's `.pi/router/data/`, the project data files
the unconfined layers declare and `<agent dir>/router/data/`; never where Pi or another coding
agent loads code, skills, prompts, settings or instructions from.

Real files on disk: the `router lint` console script in a subprocess, the sidecar's engine with a
trusted project, the executor with links committed in the project.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from router.engine.decision import Decision
from router.engine.interpreter import evaluate
from router.runtime.executor import Executor
from router.trust.capabilities import Confinement, Refused, confined_path
from tests.compile.test_capabilities import INPUT, World, _Connection, confined_effect, refusals, world

__all__ = ["world"]  # the fixture, shared with tests/compile/test_capabilities.py

PLANTED = [  # the four, and what else Pi 1.6.0 and other agents load from a project
    ".pi/npm/node_modules/evil/index.js",
    ".pi/git/github.com/evil/pkg/extensions/x.ts",
    ".agents/skills/x/SKILL.md",
    "AGENTS.md",
    "CLAUDE.md",
    "sub/dir/AGENTS.override.md",
    ".pi/extensions/x.ts",
    ".pi/skills/x/SKILL.md",
    ".pi/prompts/review.md",
    ".pi/themes/dark.json",
    ".pi/settings.json",
    ".pi/mcp.json",
    ".pi/SYSTEM.md",
    ".pi/APPEND_SYSTEM.md",
    ".pi/router.yaml",
    ".pi/router.lock",
    ".claude/settings.json",
    ".cursor/rules/x.mdc",
    ".github/copilot-instructions.md",
    "tools/pkg/package.json",
    "vendor/node_modules/x/index.js",
]


def data_dir(world: World) -> Path:
    return world.project / ".pi" / "router" / "data"


def cli(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `router` console script, run in the project as a user would."""
    script = Path(sys.executable).parent / "router"
    env = {"HOME": str(world.home), "PI_CODING_AGENT_DIR": str(world.agent), "PATH": "/usr/bin:/bin",
           "NO_COLOR": "1"}
    return subprocess.run([str(script), *args], cwd=world.project, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


# --- the check itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", PLANTED)
def test_agent_loaded_paths_are_refused(world: World, value: str) -> None:
    with pytest.raises(Refused) as refused:
        confined_path(value, world.confinement, "fs.write", label="log.file")
    assert refused.value.code == "RT601" and value in refused.value.message
    assert "loads code, skills, prompts, settings or instructions" in refused.value.message


@pytest.mark.parametrize("value", ["notes.log", "build/router.log", "src/main.py", ".envrc"])
def test_other_project_paths_are_not_data_paths(world: World, value: str) -> None:
    with pytest.raises(Refused) as refused:
        confined_path(value, world.confinement, "fs.write", label="log.file")
    assert "is not a data path of the project" in refused.value.message
    assert ".pi/router/data" in refused.value.message


def test_reads_keep_the_whole_project(world: World) -> None:
    (world.project / "notes.txt").write_text("x\n")
    assert confined_path("notes.txt", world.confinement, "fs.read", label="read.file") == \
        world.project / "notes.txt"
    with pytest.raises(Refused, match=r"\.git directory"):
        confined_path(".GIT/config", world.confinement, "fs.read", label="read.file")


@pytest.mark.parametrize("value", [".PI/Extensions/x.ts", ".Pi/NPM/node_modules/x/index.js", "Agents.MD",
                                   "CLAUDE.MD", ".Agents/skills/x/SKILL.md", ".GIT/hooks/pre-commit"])
def test_case_folded_spellings_are_refused(world: World, value: str) -> None:
    """On a case-insensitive file system (macOS, Windows) these are the loaded files."""
    with pytest.raises(Refused):
        confined_path(value, world.confinement, "fs.write", label="log.file")


@pytest.mark.parametrize("value", [".pi/router/data/AGENTS.md", ".pi/router/data/x/.agents/skills/s/SKILL.md",
                                   ".pi/router/data/node_modules/x/index.js", "{agent}/router/data/CLAUDE.md",
                                   ".pi/router/data/.pi/extensions/x.ts", ".pi/router/data/Settings.JSON"])
def test_names_agents_load_are_refused_inside_the_data_dirs_too(world: World, value: str) -> None:
    with pytest.raises(Refused, match="coding agents load"):
        confined_path(value.format(agent=world.agent), world.confinement, "fs.write", label="log.file")


def test_a_declared_data_file_of_an_unconfined_layer_is_writable(world: World) -> None:
    declared = Confinement(str(world.project), str(world.agent), str(world.home), files=frozenset({
        ".pi/pi-cuttle.json"}))
    assert confined_path(".pi/pi-cuttle.json", declared, "fs.write", label="save.file") == \
        world.project / ".pi" / "pi-cuttle.json"
    with pytest.raises(Refused, match="loads code"):
        confined_path(".pi/pi-cuttle.json", world.confinement, "fs.write", label="save.file")


def test_the_cuttle_packs_data_file_is_on_the_list_a_projects_own_is_not(world: World) -> None:
    world.project_policy("""
        use: [cuttle]
        project_data: [.pi/extensions/x.ts]
        rules:
          - {id: plant, on: input, do: [{save: {file: .pi/extensions/x.ts, key: a, value: 1}}]}
          - {id: tune, on: input, do: [{save: {file: .pi/pi-cuttle.json, key: autoSelect, value: true}}]}
    """)
    policy = world.compile()
    assert policy.confinement is not None and policy.confinement.files == frozenset({".pi/pi-cuttle.json"})
    assert refusals(policy) == {"rule plant": "RT601"}


def test_a_data_dir_committed_as_a_link_is_not_the_data_dir(world: World) -> None:
    """`.pi/router/data` committed as a link to `.pi/extensions`: lexically allowed, refused once
    resolved, and the executor writes nothing."""
    extensions = world.project / ".pi" / "extensions"
    extensions.mkdir()
    (world.project / ".pi" / "router").mkdir()
    data_dir(world).symlink_to(extensions)
    value = ".pi/router/data/evil.ts"
    lexical = confined_path(value, world.confinement, "fs.write", label="f", resolve=False)
    assert lexical == data_dir(world) / "evil.ts"
    with pytest.raises(Refused, match=r"resolves to .*\.pi/extensions/evil\.ts, which is where Pi"):
        confined_path(value, world.confinement, "fs.write", label="f")

    applied = Executor(None, cwd=str(world.project)).apply(Decision("input", effects=(
        confined_effect(world, "log", {"file": value, "text": "export default () => {}"}, "plant"),)))

    assert list(extensions.iterdir()) == []
    assert len(applied.warnings) == 1 and "rule 'plant' refused" in applied.warnings[0]


# --- at lint, in the sidecar, rendered ----------------------------------------------------------

FOUR = """
    rules:
      - {id: npm, on: input, continue: true, do: [{log: {file: .pi/npm/node_modules/x/index.js, text: x}}]}
      - {id: git, on: input, continue: true, do: [{log: {file: .pi/git/host/x/index.ts, text: x}}]}
      - {id: skill, on: input, continue: true, do: [{log: {file: .agents/skills/x/SKILL.md, text: x}}]}
      - {id: agents, on: input, continue: true, do: [{audit: {file: AGENTS.md, record: {a: 1}}}]}
      - {id: data, on: input, do: [{log: {file: .pi/router/data/ok.log, text: fine}}, {notify: logged}]}
"""


def test_lint_refuses_each_with_its_place_rule_and_path(world: World) -> None:
    world.project_policy(FOUR)

    done = cli(world, "lint")

    assert done.returncode == 1, done.stdout + done.stderr
    for line, (rule, path) in enumerate([("npm", ".pi/npm/node_modules/x/index.js"),
                                         ("git", ".pi/git/host/x/index.ts"),
                                         ("skill", ".agents/skills/x/SKILL.md"), ("agents", "AGENTS.md")],
                                        start=3):
        found = [text for text in done.stdout.splitlines() if f".pi/router.yaml:{line}:" in text]
        assert found and f"rule '{rule}' refused" in found[0] and path in found[0] and "RT601" in found[0], \
            done.stdout
    assert "rule 'data' refused" not in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_the_sidecar_warns_writes_nothing_and_refuses_rendered_paths(world: World) -> None:
    from router.runtime.project_content import read_project_content
    from router.runtime.server import Engine
    from router.trust.store import TrustStore

    world.project_policy(FOUR.replace("      - {id: data", """      - id: rendered
        on: input
        continue: true
        do: [{log: {file: "{vars.where}/index.js", text: x}}]
      - {id: data""") + "    vars: {where: .pi/npm/node_modules/y}\n")
    content, _ = read_project_content(world.project)
    assert content is not None
    TrustStore(world.agent).trust(content)
    engine = Engine(_Connection(), cwd=world.project, agent=world.agent, extra=[])  # type: ignore[arg-type]

    hello = asyncio.run(engine.hello({"cwd": str(world.project)}))
    result = asyncio.run(engine.event(1, {"type": "input", "payload": {"text": "hi"}, "ctx": {}}))

    for rule in ("npm", "git", "skill", "agents"):
        assert any(f"rule '{rule}' of the project policy refused" in w and "RT601" in w
                   for w in hello["warnings"]), hello["warnings"]
    assert any("rendered" in w and "RT601" in w for w in result.get("warnings", [])), result
    assert [a["rule"] for a in result["actions"]] == ["data"]
    assert (data_dir(world) / "ok.log").read_text() == "fine\n"
    assert not (world.project / ".pi" / "npm").exists() and not (world.project / ".agents").exists()
    assert not (world.project / "AGENTS.md").exists() and not (world.project / ".pi" / "git").exists()


def test_a_rendered_path_is_refused_before_any_effect(world: World) -> None:
    world.project_policy("""
        vars: {name: AGENTS.md}
        rules:
          - {id: plant, on: input, continue: true, do: [{set: {x: 1}}, {log: {file: "{vars.name}", text: x}}]}
          - {id: fine, on: input, do: [{notify: fine}]}
    """)
    decision = evaluate(world.compile(), INPUT)
    assert decision.fired == ("fine",) and decision.state == {}
    assert [e.code for e in decision.errors] == ["RT601"] and "AGENTS.md" in decision.errors[0].message
