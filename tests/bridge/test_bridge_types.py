"""`tsc --noEmit` (strict, `checkJs`) over the bridge and its unit tests, against the installed Pi's types.

The bridge is JavaScript (router/bridge/*.mjs, what Pi loads) with JSDoc types; its types-only
declarations are `.d.ts` files, which the shipped `skipLibCheck` skips. One TypeScript program,
built once for the module through TypeScript's API with `skipLibCheck` off, answers both
questions: what `tsc --noEmit` with the shipped config reports (the program's own diagnostics and
those of every file that is not a declaration file: what `skipLibCheck` leaves checked), and what
a check without `skipLibCheck` says about this project's own declaration files. Building the
program (1,557 files, Pi's packages and Node's types) is half of a `tsc` run; two runs built it
twice. Pi's own declaration files are not checked (all of them: three times the work, 82 s of CPU).

The shipped router/bridge/tsconfig.json names no path of this machine: a temporary tsconfig extends
it with where the harness installed Pi's packages and Node's types.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

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


# One program with skipLibCheck off. `checked` is what `tsc --noEmit` reports with the shipped
# config (skipLibCheck on): the config's, the options' and the global diagnostics, every file's
# syntax, and the semantic diagnostics of every file that is not a declaration file (skipLibCheck
# skips all of those; a file's own check does not depend on it). `declarations` are this project's
# own declaration files (every one outside node_modules), `declared` their semantic diagnostics:
# what `tsc --skipLibCheck false` says about them, without checking Pi's.
DIAGNOSTICS = r"""
const ts = (await import(process.argv[1])).default;
const parsed = ts.getParsedCommandLineOfConfigFile(process.argv[2], { skipLibCheck: false }, {
	...ts.sys,
	onUnRecoverableConfigFileDiagnostic: (d) => {
		throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
	},
});
const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options,
	configFileParsingDiagnostics: ts.getConfigFileParsingDiagnostics(parsed) });
const files = program.getSourceFiles();
const own = files.filter((f) => f.isDeclarationFile && !f.fileName.split("/").includes("node_modules"));
const checked = [...program.getConfigFileParsingDiagnostics(), ...program.getOptionsDiagnostics(),
	...program.getSyntacticDiagnostics(), ...program.getGlobalDiagnostics(),
	...files.filter((f) => !f.isDeclarationFile).flatMap((f) => program.getSemanticDiagnostics(f))];
const declared = own.flatMap((f) => program.getSemanticDiagnostics(f));
const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: ts.sys.getCurrentDirectory,
	getNewLine: () => "\n" };
process.stdout.write(JSON.stringify({
	sources: files.filter((f) => !f.isDeclarationFile).map((f) => f.fileName),
	declarations: own.map((f) => f.fileName),
	checked: ts.formatDiagnostics(checked, host),
	declared: ts.formatDiagnostics(declared, host),
}));
"""


@pytest.fixture(scope="module")
def diagnostics(tmp_path_factory: pytest.TempPathFactory, node_install: PiInstall) -> dict[str, Any]:
    """The one program's diagnostics (see DIAGNOSTICS), built once for this module."""
    config = typecheck_config(tmp_path_factory.mktemp("tsc"), node_install)
    typescript = node_install.tsc.parent.parent / "lib" / "typescript.js"
    done = run_node(node_install, "--input-type=module", "-e", DIAGNOSTICS, typescript.as_uri(), str(config))
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_the_bridge_type_checks_strictly(diagnostics: dict[str, Any]) -> None:
    checked = {Path(name) for name in diagnostics["sources"]}
    tests = [path for path in TESTS_DIR.glob("*.ts") if not path.name.endswith(".d.ts")]
    expected = {*BRIDGE_DIR.glob("*.mjs"), *tests}
    assert {p.resolve() for p in expected} <= {p.resolve() for p in checked}
    assert diagnostics["checked"] == "", "tsc found problems:\n" + diagnostics["checked"]


def test_the_bridge_s_own_declarations_type_check(diagnostics: dict[str, Any]) -> None:
    assert {Path(name).name for name in diagnostics["declarations"]} >= {"types.d.ts", "actions.d.ts"}
    problems = diagnostics["declared"]
    assert problems == "", "tsc found problems in the bridge's declarations:\n" + problems


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
