"""Python and TypeScript agree on the actions the bridge applies and on each action's fields.

The bridge's apply table (router/bridge/apply.mjs) exports its keys and the fields each entry reads;
tests/bridge/print_actions.mjs prints them; this compares them with the pydantic params models of
router/actions/ whose registry entry says the bridge carries them out (`runs="bridge"`).
"""

from __future__ import annotations

from typing import Any

from router.actions import ACTIONS
from router.actions.panel import PanelItem
from router.engine.decision import Effect
from router.runtime.executor import _for_bridge
from tests.bridge_node import TESTS_DIR, node_install, node_json
from tests.e2e.pi_harness import PiInstall

__all__ = ["node_install"]

# Fields the executor resolves before the bridge sees the action (`_for_bridge`): thinking's
# ceiling is applied to its level in Python.
RESOLVED_IN_PYTHON = {"thinking": {"ceiling"}}


def python_side() -> dict[str, list[str]]:
    """Each action the bridge receives, with the fields of its params model it receives."""
    return {name: sorted(set(spec.params.model_fields) - RESOLVED_IN_PYTHON.get(name, set()))
            for name, spec in ACTIONS.items() if spec.runs == "bridge"}


def typescript_side(install: PiInstall) -> dict[str, Any]:
    printed: dict[str, Any] = node_json(install, TESTS_DIR / "print_actions.ts")
    return printed


def test_the_same_actions_with_the_same_fields(node_install: PiInstall) -> None:
    ts, py = typescript_side(node_install)["actions"], python_side()
    assert sorted(ts) == sorted(py), (f"only in TypeScript: {sorted(set(ts) - set(py))}; "
                                      f"only in Python: {sorted(set(py) - set(ts))}")
    differ = {name: {"typescript": ts[name], "python": py[name]} for name in py if ts[name] != py[name]}
    assert differ == {}


def test_the_panel_items_have_the_same_fields(node_install: PiInstall) -> None:
    assert typescript_side(node_install)["panel_item"] == sorted(PanelItem.model_fields)


def test_the_fields_resolved_in_python_never_reach_the_bridge() -> None:
    effect = Effect(rule_id="r", action="thinking", params={"level": "high", "ceiling": "low"})
    sent = _for_bridge(effect)
    received = set(ACTIONS["thinking"].params.model_fields) - RESOLVED_IN_PYTHON["thinking"]
    assert set(sent["params"]) == received
    assert sent["params"] == {"level": "low"}


def test_only_bridge_actions_reach_the_bridge() -> None:
    assert {name for name, spec in ACTIONS.items() if spec.runs != "bridge"} == {
        "set", "unset", "log", "audit", "save", "release"}
