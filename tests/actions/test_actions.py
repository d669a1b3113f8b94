"""router.actions: the fixed action vocabulary documents itself and its examples compile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from router.actions import ACTIONS, action_names
from router.compile.compiler import compile_files
from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import Severity
from router.events.catalog import EVENT_TYPES
from tests.helpers import compile_ok, decide


def _rule_with(example: str, event_type: str, tmp_path: Path) -> tuple[CompiledPolicy | None, list]:
    var_names = sorted(set(re.findall(r"vars\.(\w+)", example)))
    signal_names = sorted(set(re.findall(r"signals\.(\w+)", example)))
    lines = ["vars:"] + [f"  {n}: x" for n in var_names] if var_names else []
    if signal_names:
        lines += ["signals:"] + [f'  {n}: {{expr: "null"}}' for n in signal_names]
    env_names = sorted(set(re.findall(r"env\.(\w+)", example)))
    if env_names:
        lines.append(f"env: [{', '.join(env_names)}]")
    lines += ["rules:", "  - id: r", f"    on: {event_type}", "    do:"]
    lines += [f"      {line}" for line in example.splitlines()]
    path = tmp_path / f"{event_type}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return compile_files([("file", path)])


def test_action_names_sorted_and_registered() -> None:
    assert action_names() == sorted(ACTIONS) and len(ACTIONS) >= 20


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_action_has_params_docstring_and_example(name: str) -> None:
    spec = ACTIONS[name]
    assert (spec.params.__doc__ or "").strip(), f"{spec.params.__name__} needs a docstring"
    assert spec.example.startswith(f"- {name}:"), spec.example
    assert spec.name == name and (spec.events is None or spec.events <= set(EVENT_TYPES))


def _compiled_example(name: str, tmp_path: Path) -> CompiledPolicy:
    """The example of action `name` compiled in a rule on the first event type where it compiles."""
    spec = ACTIONS[name]
    attempts = {}
    for event_type in sorted(spec.events) if spec.events else ["input", *EVENT_TYPES]:
        policy, found = _rule_with(spec.example, event_type, tmp_path)
        errors = [f"{d.code} {d.message}" for d in found if d.severity is Severity.ERROR]
        if policy is not None and not errors:
            return policy
        attempts[event_type] = errors
    pytest.fail(f"example of {name} does not compile on any event type: {attempts}")


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_action_example_compiles_inside_a_rule(name: str, tmp_path: Path) -> None:
    policy = _compiled_example(name, tmp_path)
    assert [a.name for a in policy.rules[0].actions] == [name]


@pytest.mark.parametrize(
    ("item", "action", "params"),
    [
        ("- notify: hi", "notify", {"text": "hi"}),
        ("- tools: [read, edit]", "tools", {"only": ["read", "edit"]}),
        ("- model: fake/fake-cloud", "model", {"ref": "fake/fake-cloud"}),
        ("- unset: [a, b.c]", "unset", ["a", "b.c"]),
    ],
)
def test_action_shorthand_expands_to_params(tmp_path: Path, item: str, action: str, params: object) -> None:
    policy = compile_ok(tmp_path, f"rules:\n  - id: r\n    on: input\n    do:\n      {item}\n")
    (effect,) = decide(policy, {"type": "input"}).effects
    assert effect.action == action
    if isinstance(params, dict):
        assert {k: effect.params[k] for k in params} == params
    else:
        assert effect.params == params


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_action_describe_returns_text(name: str, tmp_path: Path) -> None:
    (action,) = _compiled_example(name, tmp_path).rules[0].actions
    text = action.describe(_plain(action.params))
    assert isinstance(text, str) and text.strip()


def _plain(tree: object) -> object:
    from router.lang.expr.expression import Template

    if isinstance(tree, Template):
        return tree.source
    if isinstance(tree, dict):
        return {k: _plain(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_plain(v) for v in tree]
    return tree


@pytest.mark.parametrize(("params", "text"), [
    ({"level": "high"}, "set thinking level high"),
    ({"level": "high", "ceiling": "xhigh"}, "set thinking level high (ceiling xhigh)"),
    # thinking off in a default Pi: a ceiling of the current level leaves it off, and says so
    ({"level": "high", "ceiling": "off"}, "set thinking level off: high capped by the ceiling off"),
    ({"level": "high", "ceiling": "bogus"}, "set thinking level high (ceiling bogus)"),
])
def test_thinking_describe_says_what_the_ceiling_leaves(params: dict[str, str], text: str) -> None:
    from router.actions.thinking import describe_thinking

    assert describe_thinking(params) == text
