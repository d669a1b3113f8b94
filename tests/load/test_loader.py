"""load.loader and the layering half of compile.compiler: use:, overrides, disable, placement, groups."""

from __future__ import annotations

from pathlib import Path

from router.compile.compiler import compile_files, load_policy
from router.load.loader import layer_paths, load_layers, pack_names, packs_dir
from tests.helpers import codes, decide, texts, write

BASE = """
vars: {x: 1, y: 2}
signals:
  s: {expr: "'base'"}
rules:
  - id: r1
    on: input
    do: [{notify: one}]
  - id: r2
    on: input
    do: [{notify: two}]
  - id: r3
    on: input
    group: side
    do: [{notify: three}]
"""


def layered(tmp_path: Path, top: str) -> tuple:
    write(tmp_path, BASE, "base.yaml")
    return compile_files([("file", write(tmp_path, "use: [./base.yaml]\n" + top, "top.yaml"))])


def ids(policy) -> list[str]:
    return [r.id for r in policy.rules]


def test_use_loads_used_file_first(tmp_path: Path) -> None:
    policy, found = layered(tmp_path, "rules:\n  - id: r9\n    on: input\n")
    assert found == [] and ids(policy) == ["r1", "r2", "r3", "r9"]
    assert [Path(f.path).name for f in policy.files] == ["base.yaml", "top.yaml"]


def test_override_by_id_replaces_rule_in_place(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "rules:\n  - id: r1\n    on: input\n    do: [{notify: ONE}]\n")
    assert ids(policy) == ["r1", "r2", "r3"]
    assert Path(policy.rules[0].file).name == "top.yaml"
    assert texts(decide(policy, {"type": "input"})) == ["ONE", "three"]


def test_override_keeps_group_of_the_overridden_rule(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "rules:\n  - id: r3\n    on: input\n    do: [{notify: THREE}]\n")
    assert policy.rule("r3").group == "side"


def test_disable_removes_rule_of_earlier_layer(tmp_path: Path) -> None:
    policy, found = layered(tmp_path, "disable: [r1]\n")
    assert found == [] and ids(policy) == ["r2", "r3"]
    assert texts(decide(policy, {"type": "input"})) == ["two", "three"]


def test_disable_accepts_a_single_string(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "disable: r2\n")
    assert ids(policy) == ["r1", "r3"]


def test_enabled_false_removes_rule(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "rules:\n  - id: r1\n    on: input\n    enabled: false\n")
    assert ids(policy) == ["r2", "r3"]


def test_before_places_rule_and_takes_anchor_group(tmp_path: Path) -> None:
    policy, _ = layered(
        tmp_path, "rules:\n  - id: r0\n    on: input\n    before: r3\n    do: [{notify: zero}]\n"
    )
    assert ids(policy) == ["r1", "r2", "r0", "r3"]
    assert policy.rule("r0").group == "side"
    assert texts(decide(policy, {"type": "input"})) == ["one", "zero"]


def test_after_places_rule_after_anchor(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "rules:\n  - id: r5\n    on: input\n    after: r1\n")
    assert ids(policy) == ["r1", "r5", "r2", "r3"]


def test_override_with_after_moves_the_rule(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "rules:\n  - id: r1\n    on: input\n    after: r2\n")
    assert ids(policy) == ["r2", "r1", "r3"]


def test_explicit_group_wins_over_anchor_group(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "rules:\n  - id: r0\n    on: input\n    before: r3\n    group: own\n")
    assert policy.rule("r0").group == "own"


def test_file_group_is_default_group_of_its_rules(tmp_path: Path) -> None:
    policy, _ = layered(
        tmp_path, "group: extra\nrules:\n  - id: r9\n    on: input\n    do: [{notify: nine}]\n"
    )
    assert policy.rule("r9").group == "extra" and policy.rule("r1").group == "main"
    assert texts(decide(policy, {"type": "input"})) == ["one", "three", "nine"]


def test_vars_later_layer_overrides(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "vars: {x: 10}\n")
    assert dict(policy.vars) == {"x": 10, "y": 2}


def test_vars_literal_replaced_by_env_var_and_back(tmp_path: Path) -> None:
    policy, _ = layered(tmp_path, "vars:\n  x: {env: MY_X, type: number, default: 5}\n")
    assert "x" not in policy.vars and policy.env_vars["x"]["env"] == "MY_X"
    assert policy.vars_for({"MY_X": "7"})["x"] == 7 and policy.vars_for({})["x"] == 5
    assert "MY_X" in policy.env_names


def test_signals_later_layer_overrides(tmp_path: Path) -> None:
    policy, _ = layered(
        tmp_path,
        "signals:\n  s: {expr: \"'top'\"}\nrules:\n  - id: r1\n    on: input\n"
        "    do: [{notify: '{signals.s}'}]\n",
    )
    assert texts(decide(policy, {"type": "input"}))[0] == "top"


def test_commands_and_tools_merged_by_name(tmp_path: Path) -> None:
    write(
        tmp_path,
        "commands: [{name: c1, description: old}, {name: c2}]\ntools: [{name: t1, description: old}]\n",
        "base.yaml",
    )
    top = write(
        tmp_path,
        "use: [./base.yaml]\ncommands: [{name: c1, description: new}]\n"
        "tools: [{name: t1, description: new}]\n",
        "top.yaml",
    )
    policy, _ = compile_files([("file", top)])
    assert {c["name"]: c["description"] for c in policy.commands} == {"c1": "new", "c2": ""}
    assert [t["description"] for t in policy.tools] == ["new"]


def test_use_same_file_twice_loaded_once(tmp_path: Path) -> None:
    write(tmp_path, BASE, "base.yaml")
    write(tmp_path, "use: [./base.yaml]\n", "mid.yaml")
    top = write(tmp_path, "use: [./base.yaml, ./mid.yaml]\n", "top.yaml")
    policy, found = compile_files([("file", top)])
    assert found == [] and ids(policy) == ["r1", "r2", "r3"]
    assert [Path(f.path).name for f in policy.files] == ["base.yaml", "mid.yaml", "top.yaml"]


def test_use_paths_relative_to_the_using_file(tmp_path: Path) -> None:
    write(tmp_path, BASE, "shared/base.yaml")
    write(tmp_path, "use: [./base.yaml]\n", "shared/mid.yaml")
    policy, found = compile_files([("file", write(tmp_path, "use: [shared/mid.yaml]\n", "top.yaml"))])
    assert found == [] and ids(policy) == ["r1", "r2", "r3"]


def test_use_builtin_pack_by_name(tmp_path: Path) -> None:
    policy, found = compile_files([("file", write(tmp_path, "use: [default]\n"))])
    assert found == [] and policy.files[0].layer == "pack" and policy.files[0].group == "default"
    assert all(r.group == "default" for r in policy.rules) and policy.rules


def test_pack_names_lists_yaml_packs() -> None:
    assert "default" in pack_names() and (packs_dir() / "default.yaml").is_file()


def test_layer_paths_pack_user_project(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    write(tmp_path, "rules: []\n", "agent/router.yaml")
    write(tmp_path, "rules: []\n", "proj/.pi/router.yaml")
    layers = layer_paths(tmp_path / "proj", agent=agent)
    assert [name for name, _ in layers] == ["pack", "user", "project"]
    assert [name for name, _ in layer_paths(tmp_path / "proj", agent=agent, include_project=False)] == [
        "pack",
        "user",
    ]
    assert [name for name, _ in layer_paths(tmp_path / "nowhere", agent=tmp_path / "none")] == ["pack"]


def test_load_policy_project_overrides_user_and_pack(tmp_path: Path) -> None:
    write(tmp_path, "rules:\n  - id: mine\n    on: input\n    do: [{notify: user}]\n", "agent/router.yaml")
    write(
        tmp_path,
        "disable: [default-warn-context-full]\nrules:\n  - id: mine\n    on: input\n"
        "    do: [{notify: project}]\n",
        "proj/.pi/router.yaml",
    )
    policy, found = load_policy(tmp_path / "proj", agent=tmp_path / "agent")
    assert codes(found) == []
    assert "default-warn-context-full" not in ids(policy) and "default-rearm-context-warning" in ids(policy)
    assert texts(decide(policy, {"type": "input"})) == ["project"]


def test_load_layers_stops_at_broken_file_but_reports_all(tmp_path: Path) -> None:
    bad = write(tmp_path, "rules: [\n", "bad.yaml")
    worse = write(tmp_path, "rules:\n  - id: x\n    bogus: 1\n", "worse.yaml")
    files, found = load_layers([("file", bad), ("file", worse)])
    assert files == [] and codes(found) == ["RT101", "RT110", "RT112"]


def test_missing_layer_file_rt100(tmp_path: Path) -> None:
    policy, found = compile_files([("file", tmp_path / "missing.yaml")])
    assert policy is None and codes(found) == ["RT100"]


def test_describe_files_names_layers_and_what_they_use(tmp_path: Path) -> None:
    from router.load.loader import describe_files

    write(tmp_path, "version: 1\n", "agent/router.yaml")
    write(tmp_path, "version: 1\nuse: [./base.yaml]\n", "proj/.pi/team.yaml")
    write(tmp_path, "version: 1\n", "proj/.pi/base.yaml")
    write(tmp_path, "version: 1\nuse: [decision, ./team.yaml]\n", "proj/.pi/router.yaml")
    files, found = load_layers(layer_paths(tmp_path / "proj", agent=tmp_path / "agent"))
    assert found == []
    assert [(f.pack, f.layer, f.used_by) for f in files] == [
        ("default", "pack", None), (None, "user", None), ("decision", "pack", files[-1].path),
        (None, "project", files[-2].path), (None, "project", files[-1].path), (None, "project", None)]
    user, base, team, project = (f.path for f in files if f.pack is None)  # depth first
    assert describe_files(files) == (f"default pack, {user}, {project} "
                                     f"(+ decision pack, {base}, {team} via use:)")
    assert describe_files([]) == "nothing"
