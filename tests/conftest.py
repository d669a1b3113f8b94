"""Suite-wide markers.

`slow` marks the modules that drive whole programs many times over (the console script on every
documented example, git, tsc, mypy): the fast lane, `python3 -m pytest -m "not e2e and not slow"`,
leaves them to the whole suite (docs/development.md, "Lanes").

`timing` marks the tests whose outcome involves time: a deadline, a budget, a timeout, an idle
limit, a process stopped or killed mid-answer. Such a test must pass on a busy machine as on an
idle one (it waits for events, and where the product has a deadline it makes the slow side
deterministic), so `.ci/run` runs `pytest -m timing` a second time with two CPU-bound processes per
core beside it (docs/development.md, "The busy lane"). A module is listed here whole; a test
elsewhere can carry `@pytest.mark.timing` itself.

Before any test runs, the package and the tests are compiled to bytecode once (in the controller,
before pytest-xdist starts its workers): the suite starts `python -m router` hundreds of times, and
with `PYTHONDONTWRITEBYTECODE` set (as on CI's machine) each of those would compile every module
again from source. For the same reason every pytest process writes bytecode itself, so that its
rewritten test modules are kept for the next run and the next worker.
"""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TIMING_MODULES = frozenset({
    # the engine's own clocks: budgets, the event loop's timers, child processes, locks, logs
    "tests/runtime/test_decision_log.py",
    "tests/runtime/test_executor.py",
    "tests/lang/test_expr_security.py",
    "tests/runtime/test_filelock.py",
    "tests/runtime/test_loop.py",
    "tests/runtime/test_server.py",
    "tests/runtime/test_warm.py",
    "tests/bridge/test_bridge_unit.py",
    # a real Pi whose bridge meets deadlines, restarts, idles, or is stopped mid-answer
    "tests/e2e/test_bridge_lifecycle.py",
    "tests/e2e/test_bridge_robust.py",
    "tests/e2e/test_bridge_startup.py",
    "tests/e2e/test_bridge_warm.py",
    "tests/e2e/test_pack_decision.py",
    "tests/e2e/test_pack_decision_audit.py",
})
TIMING_DIRECTORIES = ("tests/reliability/",)
SLOW_MODULES = frozenset({
    "tests/project/test_docs_examples.py",
    "tests/commands/test_cli_console.py",
    "tests/runtime/test_confinement.py",
    "tests/load/test_gitsrc.py",
    "tests/load/test_gitsrc_confined.py",
    "tests/testing/test_pack_projects.py",
    "tests/bridge/test_bridge_types.py",
    "tests/bridge/test_bridge_unit.py",
    "tests/project/test_static.py",
    "tests/runtime/test_deadline.py",
    "tests/project/test_regen.py",
    "tests/commands/test_diff.py",
    "tests/commands/test_update.py",
    "tests/runtime/test_git_cache_trust.py",
    "tests/project/test_team_week.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of the timing modules `timing`, those of the slow modules `slow`; run the
    slow ones first, then the end-to-end ones, then the rest."""
    root = config.rootpath
    for item in items:
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if where in TIMING_MODULES or where.startswith(TIMING_DIRECTORIES):
            item.add_marker(pytest.mark.timing)
        if where in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    # the longest first (a stable sort: each module stays whole and in order): pytest-xdist hands
    # the first half to one worker and lets the other steal from the end of its queue, so the
    # last tests to run, whose length decides how long a worker waits for the other, are short
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("e2e")
               else 2)


def pytest_configure(config: pytest.Config) -> None:
    """Keep bytecode: pytest's rewritten test modules in every process, `router/` and `tests/`
    compiled once per run by the controller (not per worker)."""
    # pytest does not cache its assertion rewriting when bytecode writing is off: every worker
    # would rewrite all the test modules again on every run (most of the time collection takes)
    sys.dont_write_bytecode = False
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its controller compiled the trees
        return
    for tree in ("router", "tests"):
        compileall.compile_dir(ROOT / tree, quiet=1)
