"""The stage packages import only in the allowed directions (docs/architecture.md), and the
sidecar's start path stays free of the heavy libraries."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROUTER = Path(__file__).resolve().parent.parent.parent / "router"

# Each stage package and the stages it may import (the root package `router` and `router.packs`,
# which hold only the version and data, may be imported by any stage).
ALLOWED: dict[str, set[str]] = {
    "diagnostics": set(),
    "lang": {"diagnostics"},
    "events": {"diagnostics", "lang"},
    "trust": {"diagnostics", "lang"},
    "actions": {"diagnostics", "lang", "trust"},
    "load": {"diagnostics", "lang", "events", "trust", "actions"},
    "compile": {"diagnostics", "lang", "events", "trust", "actions", "load"},
    "engine": {"diagnostics", "lang", "events", "trust", "actions", "compile"},
    "testing": {"diagnostics", "lang", "events", "trust", "actions", "load", "compile", "engine"},
    "lint": {"diagnostics", "lang", "events", "trust", "actions", "load", "compile", "engine", "testing"},
    "runtime": {"diagnostics", "lang", "events", "trust", "actions", "load", "compile", "engine"},
    "replay": {"diagnostics", "lang", "events", "trust", "actions", "load", "compile", "engine"},
    "commands": {"diagnostics", "lang", "events", "trust", "actions", "load", "compile", "engine",
                 "testing", "lint", "runtime", "replay"},
}
FREE = {"router", "packs"}


def _stage(path: Path) -> str | None:
    parts = path.relative_to(ROUTER).parts
    return parts[0] if len(parts) > 1 else None


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every `router.…` module the file imports, at any depth (functions, TYPE_CHECKING too)."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "router":
                found += [(f"router.{alias.name}", node.lineno) for alias in node.names]
            elif node.module.startswith("router."):
                found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.startswith("router.")]
    return found


def _violations() -> list[str]:
    problems = []
    for path in sorted(ROUTER.rglob("*.py")):
        stage = _stage(path)
        for module, line in _imports(path):
            target = module.split(".")[1]
            if stage is None or target == stage or target in FREE or not (ROUTER / target).is_dir():
                continue
            if target not in ALLOWED.get(stage, set()):
                problems.append(f"{path.relative_to(ROUTER.parent)}:{line}: {stage} imports {module}")
    return problems


def test_every_stage_package_has_a_rule() -> None:
    stages = {p.name for p in ROUTER.iterdir() if (p / "__init__.py").exists()}
    assert stages - {"bridge"} == set(ALLOWED)


def test_imports_follow_the_allowed_directions() -> None:
    assert _violations() == []


def test_the_allowed_directions_have_no_cycle() -> None:
    done: set[str] = set()

    def visit(stage: str, path: tuple[str, ...]) -> None:
        assert stage not in path, " -> ".join((*path, stage))
        for lower in ALLOWED[stage] - done:
            visit(lower, (*path, stage))
        done.add(stage)

    for stage in ALLOWED:
        visit(stage, ())


def test_the_checker_sees_a_wrong_direction(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("def f():\n    from router.runtime.server import main\n")
    assert _imports(bad) == [("router.runtime.server", 2)]


SERVE_PATH = [
    "router.commands.entry", "router.runtime.server", "router.engine.interpreter", "router.compile.cache",
]


@pytest.mark.parametrize("module", SERVE_PATH)
def test_the_serve_path_imports_no_heavy_library(module: str) -> None:
    code = (f"import sys, {module}\n"
            "print(sorted(m for m in ('pydantic', 'ruamel', 'typer', 'click') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_serve_path_defers_what_only_some_sessions_use() -> None:
    """A child process, a file written whole, a shell lookup, a command line other than the
    bridge's: their modules are imported where they are used, not at a sidecar's start (~10 ms)."""
    code = ("import sys, router.runtime.server\n"
            "print(sorted(m for m in ('subprocess', 'tempfile', 'shutil', 'argparse') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


CLI_REGISTRATION_FREE = ("pydantic", "ruamel", "jmespath", "router.compile", "router.load", "router.engine",
                         "router.lang", "router.events", "router.actions", "router.runtime", "router.testing",
                         "router.lint", "router.replay", "router.trust")


def test_the_command_lines_registration_imports_no_engine() -> None:
    """Importing the CLI (every command registered) loads typer and the commands' signatures only:
    each command imports its libraries and stages inside its function (docs/decisions.md)."""
    code = ("import sys, router.commands.cli\n"
            f"print(sorted(m for m in sys.modules if m.startswith({CLI_REGISTRATION_FREE!r})))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_package_ships() -> None:
    """pyproject.toml lists its packages: a new stage package left out would be missing when installed."""
    import tomllib

    config = tomllib.loads((ROUTER.parent / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROUTER.parent).parts) for p in ROUTER.rglob("__init__.py")}
    assert listed == found | {"router.packs"}


def test_one_module_is_named_compiler() -> None:
    """The policy compiler is `compile/compiler.py`; the expression and query closures, and the
    compiled form (`compile/ir.py`), are named for what they are."""
    assert sorted(str(p.relative_to(ROUTER)) for p in ROUTER.rglob("compiler.py")) == ["compile/compiler.py"]


CODE_HOMES = {"diagnostics/codes.py", "diagnostics/code_names.py"}
NOT_YET_CONVERTED: set[str] = set()
"""Reshaped on another branch while the codes became constants: the codemod that converted the
rest converts it after the merge, and then it leaves this set (the test fails until it does)."""


def _bare_codes(path: Path) -> list[int]:
    """Lines of string literals that are a whole diagnostic code ("RT205"), f-strings' parts too."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"RT\d{3}", node.value)]


def test_diagnostic_codes_are_named_constants_outside_the_catalogue() -> None:
    """A use site imports its code from router/diagnostics/code_names.py (docs/decisions.md)."""
    found = {str(p.relative_to(ROUTER)): lines for p in sorted(ROUTER.rglob("*.py"))
             if (lines := _bare_codes(p))}
    assert {f: lines for f, lines in found.items() if f not in CODE_HOMES | NOT_YET_CONVERTED} == {}
    assert set(found) >= NOT_YET_CONVERTED  # a converted file leaves NOT_YET_CONVERTED


def test_the_code_checker_sees_a_bare_code(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('d = Diagnostic("RT205", "x")\n'
                     'line = f"{codes.get(n, \'RT502\')} failed"\nok = "RT2050"\n')
    assert _bare_codes(probe) == [1, 2]


MAX_MODULE_LINES = 400
LONG_MODULES: set[str] = set()
"""Modules still over the size, each to be split along its seams (docs/decisions.md, "Names and
seams"); a module leaves the set when it is split, and no other may grow past the size."""
TABLES = {"diagnostics/codes.py"}
"""Modules that are a table, not code: the catalogue has one entry per code and grows with it."""


def test_no_module_grows_past_the_size_unless_listed() -> None:
    long = {str(p.relative_to(ROUTER)) for p in ROUTER.rglob("*.py")
            if len(p.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES}
    assert long - LONG_MODULES - TABLES == set()
    assert long >= LONG_MODULES, "a module that is no longer long leaves LONG_MODULES"


TEST_HOMES = {"project", "e2e", "reliability", "corpus", "snapshots"}
"""Test folders that are no stage: whole-project checks, the real-Pi and fault suites, their data."""


def test_tests_mirror_the_stages() -> None:
    """Each test module lives in tests/<stage>/ for the router package it tests (or a TEST_HOMES
    folder); none at the top of tests/, where only shared helpers live."""
    tests = ROUTER.parent / "tests"
    assert sorted(p.name for p in tests.glob("test_*.py")) == []
    stages = {p.name for p in ROUTER.iterdir() if p.is_dir() and not p.name.startswith("__")}
    folders = {p.parent.relative_to(tests).parts[0] for p in tests.rglob("test_*.py")}
    assert folders - stages - TEST_HOMES == set()
