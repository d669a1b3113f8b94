"""The `panel` action: its parameters are checked where they are written, and the cuttle pack's
`/cuttle config` is a panel in Pi's TUI (a text view in every other mode)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from router.compile.ir import CompiledPolicy
from tests.helpers import compile_ok, compile_text, decide, only, texts, where

USER_JSON = {
    "classifier": {"model": "llama.cpp/kev"},
    "catalog": {"local": ["fake/local-8b"], "cloud": ["fake/cloud-a", "fake/cloud-b"]},
    "policy": {"threshold": 0.6},
    "maxConcurrent": 3,
}


def panel_rule(*items: str) -> str:
    """A policy whose command `mine` opens a panel of `items` (YAML flow mappings)."""
    rows = "".join(f"            - {item}\n" for item in items)
    return textwrap.dedent("""\
        version: 1
        commands: [{name: mine, description: settings}]
        rules:
          - id: show
            on: command
            do:
              - panel:
                  id: mine
                  title: Mine
                  command: mine
                  items:
        """) + rows


@pytest.mark.parametrize(
    ("items", "line", "message"),
    [
        (["{key: mode, kind: choice}"], 12, "item 'mode': a choice needs choices"),
        (["{key: on, kind: bool, choices: [a]}"], 12, "choices belong to kind choice, not bool"),
        (["{key: n, kind: text, max: 3}"], 12, "min and max belong to kind number, not text"),
        (["{key: n, kind: toggle}"], 12, "'text', 'number', 'bool', 'choice', 'list' or 'json'"),
        (["{key: a}", "{key: a, kind: bool}"], 8, "item keys must be unique; twice: a"),
    ],
)
def test_panel_items_are_checked_where_they_are_written(
    tmp_path: Path, items: list[str], line: int, message: str
) -> None:
    _, found = compile_text(tmp_path, panel_rule(*items))
    problem = only(found, "RT207")
    assert message in problem.message and problem.rule_id == "show"
    assert where(problem)[0] == line


def test_panel_is_valid_on_command_events_only(tmp_path: Path) -> None:
    text = panel_rule("{key: a}").replace("on: command", "on: input")
    _, found = compile_text(tmp_path, text)
    assert "'panel' applies to: command" in (only(found, "RT309").help or "")


def test_panel_items_render_their_values_with_their_types(tmp_path: Path) -> None:
    policy = compile_ok(tmp_path, panel_rule(
        "{key: on, kind: bool, value: '{vars.on}'}",
        "{key: refs, kind: list, value: '{vars.refs}', description: 'refs of {vars.who}'}",
    ).replace("rules:", "vars: {on: true, refs: [a, b], who: me}\nrules:"))
    [params] = decide(policy, {"type": "command", "name": "mine", "args": ""}).actions("panel")
    assert params["items"][0] | {"value": None} == {
        "key": "on", "label": None, "value": None, "description": None, "kind": "bool",
        "choices": None, "min": None, "max": None}
    assert [i["value"] for i in params["items"]] == [True, ["a", "b"]]
    assert params["items"][1]["description"] == "refs of me"
    assert (params["command"], params["args"], params["refresh"]) == ("mine", "", None)


@pytest.fixture
def cuttle(tmp_path: Path) -> CompiledPolicy:
    return compile_ok(tmp_path, "version: 1\nuse: [cuttle]\n")


def config_command(policy: CompiledPolicy, mode: str, args: str = "config",
                   user_json: Any = USER_JSON) -> Any:
    event = {"type": "command", "name": "cuttle", "args": args, "argv": args.split(),
             "session": {"mode": mode}}
    return decide(policy, event, signals={"user_json": user_json})


def test_cuttle_config_in_the_tui_is_one_panel_of_the_settings(cuttle: CompiledPolicy) -> None:
    decision = config_command(cuttle, "tui")
    assert decision.fired == ("cu-config-panel",)
    [panel] = decision.actions("panel")
    assert (panel["id"], panel["title"], panel["command"], panel["args"], panel["refresh"]) == (
        "cuttle-config", "cuttle config", "cuttle", "config set", "config")
    assert panel["text"] == ("Changes are written to ~/.pi/agent/pi-cuttle.json at once and apply from "
                             "the next routing decision. Warnings: unknown catalog model fake/local-8b; "
                             "unknown catalog model fake/cloud-a; unknown catalog model fake/cloud-b")
    items = {item["key"]: item for item in panel["items"]}
    # the classifier, the catalogs, the policy and the concurrency cap, with the values in force
    keys = ("classifier.model", "catalog.local", "catalog.cloud", "policy.threshold", "policy.mode",
            "maxConcurrent", "autoSelect")
    assert {k: items[k]["value"] for k in keys} == {
        "classifier.model": "llama.cpp/kev", "catalog.local": ["fake/local-8b"],
        "catalog.cloud": ["fake/cloud-a", "fake/cloud-b"], "policy.threshold": 0.6,
        "policy.mode": "complexity", "maxConcurrent": 3, "autoSelect": False}
    threshold = items["policy.threshold"]
    assert (threshold["kind"], threshold["min"], threshold["max"]) == ("number", 0, 1)
    assert items["policy.mode"]["choices"] == ["complexity", "cost"]
    assert items["catalog.capabilities"]["kind"] == "json" and items["catalog.capabilities"]["value"] == {}
    assert all(item["description"] for item in panel["items"])
    assert len(items) == len(panel["items"]) == 25


@pytest.mark.parametrize("mode", ["rpc", "print", "json", "cli"])
def test_cuttle_config_elsewhere_keeps_the_text_view(cuttle: CompiledPolicy, mode: str) -> None:
    decision = config_command(cuttle, mode)
    assert decision.fired == ("cu-config",) and decision.actions("panel") == []
    [text] = texts(decision)
    assert text.startswith("cuttle config (edit ~/.pi/agent/pi-cuttle.json, or /cuttle config set")
    assert "\nmaxConcurrent: 3\n" in text


def test_cuttle_config_with_arguments_is_not_a_panel(cuttle: CompiledPolicy) -> None:
    assert config_command(cuttle, "tui", "config set policy.threshold").fired == ("cu-config",)


@pytest.mark.parametrize(
    ("value", "saved"),
    [('"llama.cpp/kev 9b"', "llama.cpp/kev 9b"), ("0.7", 0.7), ('["a","b"]', ["a", "b"]),
     ("two words", "two words")],
)
def test_cuttle_config_set_reads_the_panels_json(cuttle: CompiledPolicy, value: str, saved: Any) -> None:
    decision = config_command(cuttle, "tui", f"config set classifier.model {value}")
    [save] = decision.actions("save")
    assert (save["path"], save["value"]) == ("classifier.model", saved)
    assert texts(decision) == [f"cuttle: classifier.model = {value} (in ~/.pi/agent/pi-cuttle.json); "
                               "it applies from the next routing decision"]
