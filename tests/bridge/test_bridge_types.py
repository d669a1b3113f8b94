"""`tsc --noEmit` (strict, `checkJs`) over the bridge and its unit tests, against the installed Pi's types.

The bridge is JavaScript (router/bridge/*.mjs, what Pi loads) with JSDoc types; its types-only
declarations are `.d.ts` files, which `skipLibCheck` would skip: a second check, through
TypeScript's API with `skipLibCheck` off, asks for the diagnostics of this project's files only
(checking every declaration file of Pi's packages as well took three times as long, 82 s of CPU).

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


# The diagnostics of this project's own files (every one outside node_modules), from TypeScript's
# API with skipLibCheck off: what `tsc --skipLibCheck false` reports about them, without checking
# every declaration file of Pi's packages too (three times the work of the first run).
OWN_DIAGNOSTICS = r"""
const ts = (await import(process.argv[1])).default;
const parsed = ts.getParsedCommandLineOfConfigFile(process.argv[2], { skipLibCheck: false }, {
	...ts.sys,
	onUnRecoverableConfigFileDiagnostic: (d) => {
		throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
	},
});
const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
const own = program.getSourceFiles().filter((f) => !f.fileName.split("/").includes("node_modules"));
const diagnostics = [...parsed.errors, ...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics(),
	...own.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)])];
const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: ts.sys.getCurrentDirectory,
	getNewLine: () => "\n" };
const declarations = own.filter((f) => f.isDeclarationFile).map((f) => f.fileName);
process.stdout.write(JSON.stringify({ declarations, problems: ts.formatDiagnostics(diagnostics, host) }));
"""


def test_the_bridge_s_own_declarations_type_check(tmp_path: Path, node_install: PiInstall) -> None:
    config = typecheck_config(tmp_path, node_install)
    typescript = node_install.tsc.parent.parent / "lib" / "typescript.js"
    done = run_node(node_install, "--input-type=module", "-e", OWN_DIAGNOSTICS, typescript.as_uri(),
                    str(config))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert {Path(name).name for name in found["declarations"]} >= {"types.d.ts", "actions.d.ts"}
    assert found["problems"] == "", "tsc found problems in the bridge's declarations:\n" + found["problems"]


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
