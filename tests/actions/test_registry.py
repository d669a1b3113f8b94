"""One home per action and per signal kind: the registries and every runner agree on the names."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from router.actions import ACTIONS, RUNS, runner
from router.actions.signal_kinds import SIGNAL_KINDS
from router.load.model import Signal
from router.runtime.executor import Executor
from router.trust.capabilities import CAPABILITIES


def _names(runs: str) -> set[str]:
    return {name for name, spec in ACTIONS.items() if spec.runs == runs}


def _signal_model(kind: str) -> Any:
    annotation = Signal.model_fields[kind].annotation
    return next(a for a in annotation.__args__ if hasattr(a, "model_fields"))  # type: ignore[union-attr]


def test_every_action_says_where_it_runs_and_what_it_touches() -> None:
    for name, spec in ACTIONS.items():
        assert spec.runs in RUNS, name
        assert set(spec.capabilities.values()) <= set(CAPABILITIES), name
        assert set(spec.capabilities) <= set(getattr(spec.params, "model_fields", {})), name


def test_the_executor_carries_out_exactly_the_actions_that_run_there() -> None:
    assert set(Executor(None, cwd=".").effect_handlers()) == _names("executor")
    assert {name for name in ACTIONS if runner(name)[0] == "interpreter"} == _names("interpreter") == {
        "set", "unset"}
    assert all(callable(runner(name)[1]) for name in ACTIONS if ACTIONS[name].runs != "bridge")


def test_signal_kinds_and_the_policy_model_name_the_same_kinds() -> None:
    others = ("description", "transform", "fallback", "let")
    sources = {name for name in Signal.model_fields if name not in others}
    assert sources == set(SIGNAL_KINDS)


@pytest.mark.parametrize("kind", sorted(set(SIGNAL_KINDS) - {"expr"}))
def test_each_signal_kind_declares_fields_its_model_has(kind: str) -> None:
    spec, fields = SIGNAL_KINDS[kind], set(_signal_model(kind).model_fields)
    assert set(spec.capabilities) <= fields
    assert spec.timeout_field is None or spec.timeout_field in fields
    assert spec.timeout_ms > 0 and set(spec.capabilities.values()) <= set(CAPABILITIES)


def test_the_executor_computes_every_kind_not_computed_by_the_interpreter() -> None:
    outside = {name for name, spec in SIGNAL_KINDS.items() if spec.runs != "interpreter"}
    assert set(Executor(None, cwd=".").signal_handlers()) == outside


def test_each_action_is_one_file_named_for_it_and_imports_no_pydantic() -> None:
    from router.actions._registry import declarations, module_names

    assert module_names() == sorted(ACTIONS)
    assert {name: found.module for name, found in declarations().items()} == {
        name: f"router.actions.{name}" for name in ACTIONS}
    code = ("import sys\nfrom router.actions._registry import declarations\ndeclarations()\n"
            "print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
