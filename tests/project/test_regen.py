"""`python3 -m tests.regen`: one command regenerates every generated file, and leaves a fresh
checkout as it was (run in a copy, with --check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import regen

ROOT = Path(__file__).resolve().parent.parent.parent


def test_regenerating_leaves_the_checkout_as_it_is() -> None:
    """Every generator but `console` runs in a copy of the checkout and changes nothing there.
    `console` is the documents' own test with its update switch (the next test): the suite already
    runs that test, failing on any output it would rewrite, so running it twice would only double
    the suite's slowest module."""
    done = subprocess.run([sys.executable, "-m", "tests.regen", "--check", "--skip", "console"], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    ran = [line.split(":")[1].strip() for line in done.stdout.splitlines() if line.startswith("regen: ")][:-1]
    assert ran == [g.name for g in regen.GENERATORS if g.name != "console"]
    last = done.stdout.splitlines()[-1]
    assert last == f"regen: {len(regen.GENERATORS) - 1} generators leave the tree as it is"


def test_the_console_generator_is_the_documents_test_with_its_update_switch() -> None:
    console = next(g for g in regen.GENERATORS if g.name == "console")
    assert console.env == {"ROUTER_UPDATE_DOCS": "1"}
    assert "tests/project/test_docs_examples.py" in console.command
    selected = subprocess.run([*console.command, "--collect-only", "-n", "0"], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, check=True).stdout
    assert "test_console_examples_print_what_the_docs_say" in selected and "README.md" in selected


def test_a_changed_removed_or_new_file_is_named(tmp_path: Path) -> None:
    after = tmp_path / "after"
    (after / "gen").mkdir(parents=True)
    (after / "gen" / "same.txt").write_text("same\n")
    (after / "gen" / "stale.txt").write_text("new\n")
    (after / "gen" / "extra.txt").write_text("new\n")
    (after / "gen" / "__pycache__").mkdir()
    (after / "gen" / "__pycache__" / "x.pyc").write_bytes(b"\0")  # bytecode is not a generated file
    before = {"gen/gone.txt": regen.digest(after / "gen" / "same.txt"),
              "gen/same.txt": regen.digest(after / "gen" / "same.txt"),
              "gen/stale.txt": regen.digest(after / "gen" / "same.txt")}
    assert regen.changed(before, after) == ["gen/gone.txt", "gen/stale.txt", "gen/extra.txt (new)"]


def test_every_generated_kind_is_listed_with_what_it_writes() -> None:
    done = subprocess.run([sys.executable, "-m", "tests.regen", "--list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.splitlines() == [f"{g.name}: {g.writes}" for g in regen.GENERATORS]
    assert {"references", "schema", "bridge", "snapshots", "console"} <= {g.name for g in regen.GENERATORS}
