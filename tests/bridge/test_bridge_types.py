"""`tsc --noEmit` (strict, `checkJs`) over the bridge and its unit tests, against the installed Pi's types.

The bridge is JavaScript (router/bridge/*.mjs, what Pi loads) with JSDoc types; its types-only
declarations are `.d.ts` files, which `skipLibCheck` would skip: a second run checks them without it
(and reads only what it says about this project's files, not about Pi's packages).

The shipped router/bridge/tsconfig.json names no path of this machine: a temporary tsconfig extends
it with where the harness installed Pi's packages and Node's types.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.bridge_node import BRIDGE_DIR, TESTS_DIR, node_install, run_node
from tests.e2e.pi_harness import PiInstall

__all__ = ["node_install"]


def typecheck_config(tmp_path: Path, install: PiInstall) -> Path:
    """A tsconfig that extends the shipped one with the type locations of `install`."""
    modules = install.node_modules
    config = {
        "extends": str(BRIDGE_DIR / "tsconfig.json"),
        "compilerOptions": {
            "typeRoots": [str(modules / "@types")],
            "paths": {"@earendil-works/*": [str(modules / "@earendil-works" / "*" / "dist" / "index.d.ts")]},
        },
        "include": [str(BRIDGE_DIR / "*.mjs"), str(BRIDGE_DIR / "*.d.ts"), str(TESTS_DIR / "*.ts")],
    }
    path = tmp_path / "tsconfig.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def test_the_bridge_type_checks_strictly(tmp_path: Path, node_install: PiInstall) -> None:
    config = typecheck_config(tmp_path, node_install)
    done = run_node(node_install, str(node_install.tsc), "--noEmit", "-p", str(config), "--pretty", "false")
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), \
        f"tsc found problems:\n{done.stdout}{done.stderr}"


def test_the_bridge_s_own_declarations_type_check(tmp_path: Path, node_install: PiInstall) -> None:
    config = typecheck_config(tmp_path, node_install)
    done = run_node(node_install, str(node_install.tsc), "--noEmit", "-p", str(config), "--pretty", "false",
                    "--skipLibCheck", "false")
    ours = [line for line in (done.stdout + done.stderr).splitlines()
            if line.strip() and "node_modules" not in line.split("(")[0]]
    assert ours == [], "tsc found problems in the bridge's declarations:\n" + "\n".join(ours)


def test_the_bridge_is_javascript_with_checked_types() -> None:
    """One committed source per module: the .mjs Pi loads; no TypeScript twin, and tsc checks the JS."""
    assert sorted(path.name for path in BRIDGE_DIR.glob("*.ts") if not path.name.endswith(".d.ts")) == []
    options = json.loads((BRIDGE_DIR / "tsconfig.json").read_text())["compilerOptions"]
    assert options["allowJs"] is True and options["checkJs"] is True


def test_the_shipped_tsconfig_is_strict_and_names_no_machine_path() -> None:
    text = (BRIDGE_DIR / "tsconfig.json").read_text()
    options = json.loads(text)["compilerOptions"]
    assert options["strict"] is True and options["noEmit"] is True
    assert str(Path.home()) not in text and "/.cache/" not in text and "node_modules" not in text


def test_pi_types_are_imported_as_types_only() -> None:
    """Nothing of Pi is imported at run time (Pi loads the bridge; its packages are Pi's business),
    except pi-tui, which the panel imports lazily."""
    for path in sorted([*BRIDGE_DIR.glob("*.mjs"), *BRIDGE_DIR.glob("*.d.ts")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("import ") and "@earendil-works/" in line:
                where = f"{path.name}:{number}: {line}"
                assert path.name.endswith(".d.ts") and line.startswith("import type "), where


JSDOC_TYPE = re.compile(r"@(?:type|param|returns|template|typedef|satisfies|implements)\s*\{([^}]*)\}")
ANY = re.compile(r"(:\s*any\b|<any\b|\bas any\b|\bany\[\]|\bany\s*[|&>,)]|[|&]\s*any\b)")


def test_no_any_in_the_bridge() -> None:
    """Pi's own types where they exist, `unknown` narrowed where Pi says nothing (tsc allows an
    explicit `any` even in strict mode, so this looks for one)."""
    for path in sorted([*BRIDGE_DIR.glob("*.mjs"), *BRIDGE_DIR.glob("*.d.ts"), *TESTS_DIR.glob("*.ts")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.strip()
            if path.suffix == ".mjs":  # JSDoc types: what is between the braces of a tag
                for found in JSDOC_TYPE.findall(code):
                    assert not re.search(r"\bany\b", found), f"{path.name}:{number}: {code}"
                continue
            if code.startswith(("*", "/*", "//")):
                continue
            assert not ANY.search(code.split(" // ")[0]), f"{path.name}:{number}: {code}"
