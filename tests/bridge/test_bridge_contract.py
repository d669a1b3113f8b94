"""Python and TypeScript agree on the actions the bridge applies, each action's fields and their types.

The types: router/bridge/actions.d.ts is generated from the pydantic params models of the actions
whose registry entry says the bridge carries them out (`runs="bridge"`; router/commands/bridge_types.py).
The committed file must equal a fresh generation, and the bridge's apply table (router/bridge/apply.mjs)
is typed by it, so tsc (tests/bridge/test_bridge_types.py) holds every entry to its action's field types
and reports a missing or an extra one. The names: the table exports its keys and the fields each
entry reads; tests/bridge/print_actions.ts prints them; this compares them with the models' fields.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import pytest

from router.actions import registry
from router.actions._build import model_of
from router.actions.panel import PanelItem
from router.commands import bridge_types
from router.commands.bridge_types import RESOLVED_IN_PYTHON
from router.engine.decision import Effect
from router.runtime.executor import _for_bridge
from tests.bridge_node import TESTS_DIR, node_install, node_json
from tests.e2e.pi_harness import PiInstall

__all__ = ["node_install"]

BRIDGE_DIR = bridge_types.TARGET.parent
ACTIONS = registry()


def python_side() -> dict[str, list[str]]:
    """Each action the bridge receives, with the fields of its params model it receives."""
    return {name: sorted(set(spec.params.model_fields) - RESOLVED_IN_PYTHON.get(name, frozenset()))
            for name, spec in ACTIONS.items() if spec.runs == "bridge"}


def typescript_side(install: PiInstall) -> dict[str, Any]:
    printed: dict[str, Any] = node_json(install, TESTS_DIR / "print_actions.ts")
    return printed


def test_the_committed_action_types_are_generated_from_the_registry() -> None:
    assert not bridge_types.stale(), "run `python -m router.commands.bridge_types` and commit the result"


def test_the_action_types_say_what_python_accepts() -> None:
    text = bridge_types.text()
    for line in ["\tonly: string[] | string | null;", '\tlevel: "info" | "warning" | "error";',
                 "\tis_error: boolean | null;", "\titems: PanelItem[];", "\tmin: number | null;",
                 "\tvalue: unknown;", "export type CancelParams = Record<never, never>;",
                 "\tthinking: ThinkingParams;", "export type ActionName = keyof ActionParams;"]:
        assert line in text, line
    assert "ceiling" not in text.split("export interface ThinkingParams")[1].split("}")[0]
    assert sorted(re.findall(r"^\t(\w+): \w+Params;$", text, re.MULTILINE)) == sorted(python_side())


@pytest.mark.parametrize(("annotation", "expected"), [
    (list[str] | str | None, "string[] | string | null"), (Literal["a", "b"], '"a" | "b"'), (Any, "unknown"),
    (dict[str, int], "Record<string, number>"), (list[int | None], "(number | null)[]"), (float, "number"),
])
def test_annotations_become_typescript(annotation: Any, expected: str) -> None:
    assert bridge_types.typescript(annotation, []) == expected


def test_an_unknown_annotation_is_refused_not_guessed() -> None:
    with pytest.raises(TypeError, match="no TypeScript"):
        bridge_types.typescript(bytes, [])


def test_the_apply_table_is_typed_by_the_generated_types() -> None:
    """tsc checks the table against the generated `ActionParams`: one entry per action, no more."""
    apply = (BRIDGE_DIR / "apply.mjs").read_text(encoding="utf-8")
    assert "/** @type {Table} */\nexport const ACTIONS = {" in apply
    types = (BRIDGE_DIR / "types.d.ts").read_text(encoding="utf-8")
    assert "export type Table = { [K in ActionName]: Entry<ActionParams[K]> };" in types
    assert 'export type * from "./actions.js";' in types
    generated = r'^import type \{ ActionName, ActionParams, [^}]*\} from "./actions.js";$'
    assert re.search(generated, types, re.MULTILINE)
    for spec in ACTIONS.values():  # none written by hand
        assert not re.search(rf"^export (interface|type) {spec.params.__name__}\b", types, re.MULTILINE)


def test_the_same_actions_with_the_same_fields(node_install: PiInstall) -> None:
    ts, py = typescript_side(node_install)["actions"], python_side()
    assert sorted(ts) == sorted(py), (f"only in TypeScript: {sorted(set(ts) - set(py))}; "
                                      f"only in Python: {sorted(set(py) - set(ts))}")
    differ = {name: {"typescript": ts[name], "python": py[name]} for name in py if ts[name] != py[name]}
    assert differ == {}


def test_the_panel_items_have_the_same_fields(node_install: PiInstall) -> None:
    assert typescript_side(node_install)["panel_item"] == sorted(model_of(PanelItem).model_fields)


def test_the_fields_resolved_in_python_never_reach_the_bridge() -> None:
    effect = Effect(rule_id="r", action="thinking", params={"level": "high", "ceiling": "low"})
    sent = _for_bridge(effect)
    received = set(ACTIONS["thinking"].params.model_fields) - RESOLVED_IN_PYTHON["thinking"]
    assert set(sent["params"]) == received
    assert sent["params"] == {"level": "low"}


def test_only_bridge_actions_reach_the_bridge() -> None:
    assert {name for name, spec in ACTIONS.items() if spec.runs != "bridge"} == {
        "set", "unset", "log", "audit", "save", "forget", "release"}


def generated_interfaces(text: str) -> dict[str, dict[str, str]]:
    """Each interface of the generated file: field -> its TypeScript type."""
    return {name: dict(re.findall(r"^\t(\w+): (.+);$", body, re.MULTILINE))
            for name, body in re.findall(r"^export interface (\w+) \{\n(.*?)^\}", text, re.MULTILINE | re.S)}


def typed_fields(model: Any, skip: frozenset[str]) -> dict[str, str]:
    """Each field of `model` the bridge receives, with the TypeScript of its annotation."""
    return {name: bridge_types.typescript(field.annotation, []) for name, field in model.model_fields.items()
            if name not in skip}


def test_the_panel_items_have_the_same_field_types() -> None:
    """A panel item's fields and the type of each, as the bridge is typed by them (actions.d.ts),
    equal the Python model's: a changed type on either side fails here, not in a user's panel."""
    model = model_of(PanelItem)
    committed = generated_interfaces((BRIDGE_DIR / "actions.d.ts").read_text(encoding="utf-8"))["PanelItem"]
    assert committed == typed_fields(model, frozenset())
    assert committed["kind"] == '"text" | "number" | "bool" | "choice" | "list" | "json"'
    assert committed["choices"] == "string[] | null" and committed["value"] == "unknown"


def test_every_generated_interface_has_its_models_field_types() -> None:
    """The same for each action's parameters (and the nested models they hold): the committed
    types are the models' types, field by field."""
    committed = generated_interfaces((BRIDGE_DIR / "actions.d.ts").read_text(encoding="utf-8"))
    models = {spec.params.__name__: (name, spec.params) for name, spec in ACTIONS.items()
              if spec.runs == "bridge"}
    for interface, (action, model) in models.items():
        if interface not in committed:  # a params model without fields is a `Record<never, never>` type
            assert not set(model.model_fields) - RESOLVED_IN_PYTHON.get(action, frozenset()), interface
            continue
        skip = RESOLVED_IN_PYTHON.get(action, frozenset())
        assert committed[interface] == typed_fields(model, skip), interface


def test_the_panel_reads_its_items_through_the_generated_type() -> None:
    """panel.mjs's item fields are keyed by the generated `PanelItem` (tsc then holds every read to
    its type), and no hand-written copy of it exists."""
    panel = (BRIDGE_DIR / "panel.mjs").read_text(encoding="utf-8")
    types = (BRIDGE_DIR / "types.d.ts").read_text(encoding="utf-8")
    assert "@type {Record<keyof PanelItem, true>}" in panel
    assert "export type Item = Wire<PanelItem> & { key: string };" in types
    assert not re.search(r"^export (interface|type) PanelItem\b", types, re.MULTILINE)
