"""The lean coercion of plain parameters (router/commands/lean_params.py) gives what typer's own
pydantic adapters give, value for value, and hands the rest to them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._coercion import build_runtime_param, resolve_type_descriptor
from typer.models import OptionInfo

from router.commands import lean_params

# A NUL cannot reach a command line: the values any argv could hold (and Path defaults).
ARGV_TEXT = st.text(st.characters(blacklist_characters="\x00", codec="utf-8"), max_size=30)


class FakeParam:
    """The little of a typer parameter that `install` and the coercion read."""

    multiple = False
    required = False

    def __init__(self, annotation: Any, **info: Any) -> None:
        self.type_descriptor = resolve_type_descriptor(annotation, OptionInfo(**info))
        self._runtime_param = None
        self.nargs = -1 if getattr(annotation, "__origin__", None) is list else 1


def both(annotation: Any, value: Any, **info: Any) -> tuple[Any, Any]:
    """(typer's result, the lean result) for `value`, or the error message each raised."""
    param = FakeParam(annotation, **info)
    lean_params.install([param])
    assert param._runtime_param is not None, "a plain parameter gets the lean coercion"

    def outcome(runtime: Any) -> Any:
        try:
            return runtime.coerce(value, param=param, ctx=None)
        except Exception as exc:  # the same kind of error with the same message
            return (type(exc).__name__, str(exc))

    return outcome(build_runtime_param(param.type_descriptor)), outcome(param._runtime_param)


@settings(deadline=None)  # the first example builds typer's pydantic adapters
@given(ARGV_TEXT)
def test_text_coerces_as_typer_does(value: str) -> None:
    for annotation in (str, Path, list[str], list[Path]):
        typer_result, lean_result = both(annotation, value)
        assert lean_result == typer_result
        assert type(lean_result) is type(typer_result)


@settings(deadline=None)  # the first example builds typer's pydantic adapters
@given(st.lists(ARGV_TEXT, max_size=4))
def test_lists_coerce_as_typer_does(values: list[str]) -> None:
    for annotation in (list[str], list[Path]):
        typer_result, lean_result = both(annotation, values)
        assert lean_result == typer_result
        assert [type(v) for v in lean_result] == [type(v) for v in typer_result]


@settings(deadline=None)  # the first example builds typer's pydantic adapters
@given(st.one_of(st.integers(-5, 5), ARGV_TEXT, st.none()))
def test_numbers_coerce_as_typer_does_in_and_out_of_bounds(value: Any) -> None:
    typer_result, lean_result = both(int, value, min=0)
    assert lean_result == typer_result
    typer_float, lean_float = both(float, float(value) if isinstance(value, int) else value, min=0, max=3)
    assert lean_float == typer_float


@pytest.mark.parametrize("value", [True, False, None, "yes", "0", "", "maybe"])
def test_bools_coerce_as_typer_does(value: Any) -> None:
    typer_result, lean_result = both(bool, value)
    assert lean_result == typer_result


def test_a_missing_path_fails_with_typers_message(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    typer_result, lean_result = both(Path, missing, exists=True)
    assert lean_result == typer_result
    assert "does not exist" in str(lean_result)


def test_other_types_keep_typers_coercion() -> None:
    """A parser, an explicit path type or another annotation: typer builds its own adapter."""
    params = [FakeParam(str, parser=str.upper), FakeParam(Path, path_type=str), FakeParam(dict[str, int])]
    lean_params.install(params)
    assert [p._runtime_param for p in params] == [None, None, None]


def test_a_command_that_reads_no_policy_imports_no_pydantic() -> None:
    """`router version`, `router --help` and `router explain RT301` run without pydantic."""
    import subprocess
    import sys

    code = ("import sys\nfrom router.commands.cli import main\nsys.argv = ['router', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('pydantic' in sys.modules, file=sys.stderr)")
    for argv in (["version"], ["--help"], ["explain", "RT301"], ["lint", "-h"]):
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                              check=True, timeout=60)
        assert done.stderr.strip().splitlines()[-1] == "False", argv


def test_the_lean_path_runs_with_the_pinned_typer_and_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """constraints.txt pins a typer the module was checked against; any other typer coerces
    everything itself (the module reaches into typer's private modules)."""
    import typer

    pinned = [line.split("==", 1)[1].strip() for line in
              (Path(__file__).resolve().parents[2] / "constraints.txt").read_text().splitlines()
              if line.startswith("typer==")]
    assert pinned and pinned[0].startswith(lean_params.TESTED_TYPER), \
        f"typer {pinned} is pinned: check lean_params against it, then move TESTED_TYPER"
    lean_params.lean_class.cache_clear()
    monkeypatch.setattr(typer, "__version__", "0.30.0")
    try:
        assert lean_params.lean_class() is None
        param = FakeParam(str)
        lean_params.install([param])
        assert param._runtime_param is None
    finally:
        lean_params.lean_class.cache_clear()
