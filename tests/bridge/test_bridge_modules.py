"""The bridge's modules as Pi loads them: JavaScript (router/bridge/*.mjs, the one source of each),
importing only Node's own modules and each other, so Node's loader takes them as they are."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.bridge_node import BRIDGE_DIR, node_install
from tests.e2e.pi_harness import PiInstall

__all__ = ["node_install"]


def test_no_ts_specifier_survives() -> None:
    for path in sorted(BRIDGE_DIR.glob("*.mjs")):
        assert not re.search(r"""["']\.{1,2}/[^"'\n]+\.ts["']""", path.read_text(encoding="utf-8")), path.name


STATIC = re.compile(r"""^\s*(?:import|export)\b[^"';]*?\bfrom\s*["']([^"']+)["']"""
                    r"""|^\s*import\s*["']([^"']+)["']""", re.MULTILINE)
DYNAMIC = re.compile(r"\bimport\(")


def dynamic_imports(text: str) -> list[str]:
    """The argument of each `import(…)` call, up to its own closing parenthesis."""
    found = []
    for match in DYNAMIC.finditer(text):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        found.append(text[match.end():end - 1].strip())
    return found


def test_every_import_is_node_s_own_or_a_sibling_module() -> None:
    """Pi's jiti imports a `.mjs` with Node's loader and, if that throws, transpiles it again with
    Babel (the slow path, silently): a value import of a package the bridge's folder cannot
    resolve would bring it back. So the modules import only `node:` modules and each other; the
    one dynamic import is Pi's pi-tui for the panel (panel.mjs, resolved from Pi's entry)."""
    for path in sorted(BRIDGE_DIR.glob("*.mjs")):
        text = path.read_text(encoding="utf-8")
        for match in STATIC.finditer(text):
            specifier = match[1] or match[2]
            sibling = specifier.startswith("./") and (BRIDGE_DIR / specifier[2:]).is_file()
            assert specifier.startswith("node:") or sibling, f"{path.name}: {specifier}"
        dynamic = dynamic_imports(text)
        allowed = ["pathToFileURL(resolved).href", '"@earendil-works/pi-tui"']
        allowed = allowed if path.name == "panel.mjs" else []
        assert dynamic == allowed, f"{path.name}: {dynamic}"


def test_node_alone_imports_the_installed_bridge(node_install: PiInstall, tmp_path: Path) -> None:
    """The files `router install` copies load in a plain Node, from a folder with no node_modules:
    nothing in them needs jiti."""
    from router.commands import install

    code, _ = install.install(agent=tmp_path / "agent", cwd=tmp_path, project=False)
    entry = tmp_path / "agent" / "extensions" / "pi-policy-router" / "index.mjs"
    script = (f"const m = await import({json.dumps(entry.as_uri())});\n"
              "console.log(typeof m.default, typeof m.connect);")
    done = subprocess.run([str(node_install.node), "--input-type=module", "-e", script],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert code == 0 and done.returncode == 0, done.stderr
    assert done.stdout.split() == ["function", "function"]


LONGEST_FUNCTION_LINES = 50
FUNCTION_LENGTHS = r"""
const ts = (await import(process.argv[1])).default;
const fs = await import("node:fs");
const out = [];
for (const file of process.argv.slice(2)) {
	const text = fs.readFileSync(file, "utf8");
	const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
	const line = (pos) => sf.getLineAndCharacterOfPosition(pos).line;
	const visit = (node) => {
		if (ts.isFunctionLike(node) && node.body) {
			const name = node.name ? node.name.getText() : "(anonymous)";
			const first = line(node.body.getStart());
			out.push([file.split("/").pop(), first + 1, name, line(node.body.end) - first + 1]);
		}
		ts.forEachChild(node, visit);
	};
	visit(sf);
}
process.stdout.write(JSON.stringify(out));
"""


def test_no_function_is_over_fifty_lines(node_install: PiInstall) -> None:
    """Each function of the bridge, its body from `{` to `}`, measured by TypeScript's own parser."""
    typescript = node_install.tsc.parent.parent / "lib" / "typescript.js"
    modules = [str(path) for path in sorted(BRIDGE_DIR.glob("*.mjs"))]
    argv = [str(node_install.node), "--input-type=module", "-e", FUNCTION_LENGTHS, typescript.as_uri(),
            *modules]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    functions = json.loads(done.stdout)
    assert {name for _, _, name, _ in functions} >= {"registerHooks", "panelView", "applyActions"}
    assert [f"{file}:{line} {name}: {lines} lines" for file, line, name, lines in functions
            if lines > LONGEST_FUNCTION_LINES] == []


PARTS = {"lifecycle": "lifecycle.mjs", "declarations": "declarations.mjs", "guard": "guard.mjs",
         "dialogs": "dialogs.mjs", "panel": "panel.mjs", "apply": "apply.mjs", "hooks": "hooks.mjs",
         "trust": "trust.mjs"}
WRITE = re.compile(r"\bstate\.(\w+)\.(\w+)(?:\.\w+)*\s*(?:=(?!=)|\+\+|--|\+=|-=)"
                   r"|\bstate\.(\w+)\.(\w+)(?:\.\w+)*\.(?:add|delete|set|clear)\(")


def test_each_module_owns_its_state() -> None:
    """The bridge's state is one part per module that keeps state (types.d.ts: `BridgeState`): the
    module creates it (`<part>State()`, put together by index.mjs) and is the only one that writes
    it; another module reads it, or calls the owner's function (`helloAnswered`, `outageOver`, …)."""
    types = (BRIDGE_DIR / "types.d.ts").read_text(encoding="utf-8")
    declared = re.search(r"interface BridgeState extends SharedState \{(.*?)\n\}", types, re.S)
    assert declared is not None
    assert re.findall(r"readonly (\w+):", declared[1]) == list(PARTS)
    index = (BRIDGE_DIR / "index.mjs").read_text(encoding="utf-8")
    for part, module in PARTS.items():
        source = (BRIDGE_DIR / module).read_text(encoding="utf-8")
        assert re.search(rf"^export function {part}State\(\)", source, re.M), module
        assert f"{part}: {part}State()" in index, part
    for path in sorted(BRIDGE_DIR.glob("*.mjs")):
        for match in WRITE.finditer(path.read_text(encoding="utf-8")):
            part = match[1] or match[3]
            field = match[2] or match[4]
            assert PARTS.get(part, path.name) == path.name, f"{path.name} writes state.{part}.{field}"


def test_the_ownership_check_sees_a_write() -> None:
    assert WRITE.search("state.trust.helloAnswered = true;")
    assert WRITE.search("state.declarations.registered.commands.add(name)")
    assert not WRITE.search("if (state.trust.helloAnswered === true)")
