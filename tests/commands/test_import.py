"""router.commands.import_: a pi-cuttle.json becomes `vars.cuttle` + `use: cuttle` in router.yaml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from router.commands.import_ import ImportSpec, choose_import, import_cuttle, import_settings, pack_imports
from router.commands.lint import lint_paths

CONFIG = {
    "classifier": {"model": "llama.cpp/kev", "fallback": "heuristic", "timeoutMs": 3000},
    "catalog": {"local": ["llama.cpp/small"], "cloud": ["fake/cloud-cheap"]},
    "policy": {"mode": "complexity", "threshold": 0.6, "reclassify": "session"},
}
EXISTING = """\
# my router policy
version: 1
use: [decision]   # answers questions
vars:
  audit_note: kept  # a var of mine
rules:
  - id: hi
    on: input
    when: "vars.audit_note == 'kept'"
    do: [{notify: hi}]
"""


def source(tmp_path: Path, config: Any = CONFIG, text: str | None = None) -> Path:
    path = tmp_path / "pi-cuttle.json"
    path.write_text(text if text is not None else json.dumps(config, indent=2), encoding="utf-8")
    return path


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def test_import_into_missing_target_creates_a_policy(tmp_path: Path) -> None:
    target = tmp_path / "agent" / "router.yaml"
    code, message = import_cuttle(source(tmp_path), target)
    assert code == 0
    assert load(target) == {"version": 1, "vars": {"cuttle": CONFIG}, "use": ["cuttle"]}
    assert message.splitlines()[0] == f"imported {tmp_path / 'pi-cuttle.json'} into {target} " \
                                      "(vars.cuttle, use: cuttle)"
    assert message.splitlines()[-1] == f"next: router lint {target}"


def test_import_keeps_comments_keys_and_rules(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text(EXISTING)
    assert import_cuttle(source(tmp_path), target)[0] == 0
    text = target.read_text()
    for comment in ("# my router policy", "# answers questions", "# a var of mine"):
        assert comment in text
    data = load(target)
    assert data["use"] == ["decision", "cuttle"]
    assert data["vars"] == {"audit_note": "kept", "cuttle": CONFIG}
    assert data["rules"] == [{"id": "hi", "on": "input", "when": "vars.audit_note == 'kept'",
                              "do": [{"notify": "hi"}]}]
    assert list(data) == ["version", "use", "vars", "rules"]


def test_import_result_lints_clean(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text(EXISTING)
    import_cuttle(source(tmp_path), target)
    assert [(d.code, d.message) for d in lint_paths([target])] == []


def test_import_use_cuttle_added_once(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text("version: 1\nuse: [cuttle]\n")
    import_cuttle(source(tmp_path), target)
    assert load(target)["use"] == ["cuttle"]
    import_cuttle(source(tmp_path, {"autoSelect": True}), target, force=True)
    assert load(target)["use"] == ["cuttle"]


def test_import_use_as_a_single_string_becomes_a_list(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text("version: 1\nuse: decision\n")
    import_cuttle(source(tmp_path), target)
    assert load(target)["use"] == ["decision", "cuttle"]


def test_import_existing_vars_cuttle_refused_without_force(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text("version: 1\nvars:\n  cuttle: {autoSelect: true}\n")
    before = target.read_text()
    code, message = import_cuttle(source(tmp_path), target)
    assert code == 1 and "already has vars.cuttle" in message and "--force" in message
    assert target.read_text() == before


def test_import_force_replaces_vars_cuttle(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text("version: 1\nvars:\n  cuttle: {autoSelect: true}\n")
    assert import_cuttle(source(tmp_path), target, force=True)[0] == 0
    assert load(target)["vars"]["cuttle"] == CONFIG


def test_import_invalid_json_reported_with_line_and_column(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    bad = source(tmp_path, text='{\n  "classifier": {\n    "model": "x",,\n  }\n}\n')
    code, message = import_cuttle(bad, target)
    assert code == 1
    assert message.startswith(f"{bad}:3:18: error: not valid JSON: ")
    assert not target.exists()


@pytest.mark.parametrize("text", ["[1, 2]", '"text"', "3", "null"])
def test_import_non_object_json_refused(tmp_path: Path, text: str) -> None:
    code, message = import_cuttle(source(tmp_path, text=text), tmp_path / "router.yaml")
    assert code == 1 and "expected a JSON object (the pi-cuttle.json settings), not " in message
    assert not (tmp_path / "router.yaml").exists()


def test_import_missing_source_refused(tmp_path: Path) -> None:
    code, message = import_cuttle(tmp_path / "nope.json", tmp_path / "router.yaml")
    assert (code, message) == (1, f"{tmp_path / 'nope.json'}: file not found")


def test_import_target_not_a_mapping_left_untouched(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text("- just\n- a list\n")
    code, message = import_cuttle(source(tmp_path), target)
    assert code == 1 and "not a mapping" in message
    assert target.read_text() == "- just\n- a list\n"


def test_import_empty_target_file_gets_version(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text("# nothing yet\n")
    assert import_cuttle(source(tmp_path), target)[0] == 0
    assert load(target) == {"version": 1, "vars": {"cuttle": CONFIG}, "use": ["cuttle"]}


def test_import_target_with_empty_vars_does_not_crash(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    target.write_text("version: 1\nvars:\n")
    code, _ = import_cuttle(source(tmp_path), target)
    assert code == 0 and load(target)["vars"] == {"cuttle": CONFIG}


def test_import_reads_a_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    code, _ = import_cuttle(source(tmp_path, text="\ufeff" + json.dumps(CONFIG)), target)
    assert code == 0
    assert load(target)["vars"]["cuttle"] == CONFIG


# --- the pack's `import:` declaration ------------------------------------------------------------


def test_the_cuttle_pack_declares_its_import() -> None:
    spec = pack_imports()["cuttle"]
    assert (spec.pack, spec.file, spec.var, spec.keys) == ("cuttle", "pi-cuttle.json", "cuttle", None)
    assert spec.known is not None and {"classifier", "catalog", "policy"} <= set(spec.known)
    assert set(pack_imports()) == {"cuttle"}


def test_choose_import_by_pack_by_file_name_or_the_only_one(tmp_path: Path) -> None:
    assert isinstance(choose_import(None, None), ImportSpec)
    assert choose_import(None, tmp_path / "pi-cuttle.json") == pack_imports()["cuttle"]
    assert choose_import("decision", None) == \
        "pack 'decision' declares no import (packs that do: cuttle)"


def test_import_key_by_key_takes_only_the_declared_keys(tmp_path: Path) -> None:
    spec = ImportSpec("mine", "mine.json", keys={"classifier": "my_classifier", "absent": "my_absent"})
    target = tmp_path / "router.yaml"
    code, message = import_settings(spec, source(tmp_path), target)
    assert code == 0, message
    assert load(target) == {"version": 1, "vars": {"my_classifier": CONFIG["classifier"]}, "use": ["mine"]}
    assert "(vars.my_classifier, use: mine)" in message.splitlines()[0]


def test_import_declaration_errors_are_located(tmp_path: Path) -> None:
    policy = tmp_path / "pack.yaml"
    policy.write_text("version: 1\nimport: {file: ../x.json, var: cuttle}\n")
    [problem] = [(d.code, str(d.span), d.message) for d in lint_paths([policy])]
    assert problem[0] == "RT111" and problem[1].startswith(f"{policy}:2:") and "agent dir" in problem[2]
    policy.write_text("version: 1\nimport: {file: x.json, var: cuttle, keys: {a: b}}\n")
    assert "exactly one of `var`" in lint_paths([policy])[0].message
    policy.write_text("version: 1\nimport: {file: x.json, vars: cuttle}\n")
    assert [d.code for d in lint_paths([policy])] == ["RT110"]


def test_cli_import_follows_the_pack_declaration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from router.commands import cli

    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "pi-cuttle.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    result = CliRunner().invoke(cli.app, ["import"])
    assert result.exit_code == 0, result.output
    assert load(agent / "router.yaml") == {"version": 1, "vars": {"cuttle": CONFIG}, "use": ["cuttle"]}
    refused = CliRunner().invoke(cli.app, ["import", "--pack", "deepseek"])
    assert (refused.exit_code, refused.output.strip()) == (
        1, "pack 'deepseek' declares no import (packs that do: cuttle)")


@pytest.mark.parametrize(("config", "message"), [
    ({"foo": 1, "clasifier": {}}, "not a pi-cuttle.json settings file: unknown keys 'foo', 'clasifier' "
     "(did you mean 'classifier'?); expected keys: autoSelect, catalog, classifier, gates, maxConcurrent, "
     "policy, slotWaitMs, thinkingLevels; nothing written"),
    ({"classifier": 5}, "'classifier' is 5, expected an object (as in pi-cuttle.json); nothing written"),
    ([1, 2], "expected a JSON object (the pi-cuttle.json settings), not an array"),
])
def test_import_refuses_what_is_not_the_packs_settings_and_writes_nothing(
        tmp_path: Path, config: Any, message: str) -> None:
    target = tmp_path / "agent" / "router.yaml"
    path = source(tmp_path, config)
    assert import_cuttle(path, target) == (1, f"{path}: {message}")
    assert not target.parent.exists()


def test_import_keeps_a_schema_key(tmp_path: Path) -> None:
    target = tmp_path / "router.yaml"
    assert import_cuttle(source(tmp_path, {"$schema": "x", **CONFIG}), target)[0] == 0
