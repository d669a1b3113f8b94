"""One home per action and per signal kind: the registries and every runner agree on the names."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from router.actions import ACTIONS, RUNS, runner, signals
from router.actions.signals import registry as signal_registry
from router.commands.docgen import signals_page
from router.load.model import Signal
from router.runtime.executor import Executor
from router.trust.capabilities import CAPABILITIES

SIGNAL_KINDS = signal_registry()


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


def test_the_signal_registry_is_the_files_of_its_folder_each_declaring_its_own_name() -> None:
    """A kind is its file: every file in router/actions/signals/ is a kind, named for the file,
    and nothing else lists one (the policy model, the executor and the docs read the registry)."""
    folder = Path(signals.__file__).parent
    files = sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))
    assert sorted(SIGNAL_KINDS) == files and signals.kind_names()[0] == "expr"
    assert {name: spec.module for name, spec in SIGNAL_KINDS.items()} == {
        name: f"router.actions.signals.{name}" for name in files}
    for name, spec in SIGNAL_KINDS.items():
        assert (spec.params is None) == (name == "expr"), name
        assert (signals.computation(name) is None) == (spec.runs == "interpreter"), name


@pytest.mark.parametrize("kind", sorted(set(SIGNAL_KINDS) - {"expr"}))
def test_the_signal_reference_comes_from_each_kinds_file(kind: str) -> None:
    """docs/reference/signals.md's section of a kind: its file's summary, its `<Kind>Signal`
    docstring and each of that class's fields."""
    spec = SIGNAL_KINDS[kind]
    page = signals_page()
    section = page.split(f"## `{kind}`\n", 1)[1].split("\n## ", 1)[0]
    doc = inspect.cleandoc(spec.params.__doc__ or "")
    assert spec.summary[1:] in section and doc.splitlines()[0] in section
    assert all(f"| `{field}`" in section for field in _signal_model(kind).model_fields), kind
    assert _signal_model(kind).__name__ == spec.params.__name__ == signals.params_name(kind)


def test_signal_kind_files_import_no_pydantic() -> None:
    code = ("import sys\nfrom router.actions.signals import registry, computation\n"
            "[computation(k) for k in registry()]\nprint('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
