"""The bridge's JavaScript (router/bridge/*.mjs), generated from its TypeScript (router/bridge/*.ts).

Pi imports a `.mjs` extension with Node's own module loader; a `.ts` one goes through jiti, a
transpiler, which costs a `pi -p` about 12 ms more (docs/performance.md). Each `.mjs` is its `.ts`
with the types erased by Node 22's `module.stripTypeScriptTypes`, which blanks them out in place
(every line and column stays where it was, so a stack trace's `file.mjs:line:col` points into the
`.ts` as well), its `./x.ts` imports renamed `./x.mjs`, and one last line saying where it comes from.
A module of types only (types.ts) has no `.mjs`: nothing imports it at run time.

    python -m tests.bridge_js          # regenerate after editing a .ts (Node 22 from the e2e cache)
    python -m tests.bridge_js --check  # exit 1 when a .mjs is missing, stale or left over

tests/test_bridge_js.py runs the check, so a stale `.mjs` fails the suite.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.bridge_node import BRIDGE_DIR, TIMEOUT_S
from tests.e2e.pi_harness import PiInstall, ensure_pi

STRIP = r"""
import { stripTypeScriptTypes } from "node:module";
let input = "";
for await (const chunk of process.stdin) input += chunk;
const sources = JSON.parse(input);
const out = {};
for (const [name, text] of Object.entries(sources)) out[name] = stripTypeScriptTypes(text, { mode: "strip" });
process.stdout.write(JSON.stringify(out));
"""
# a relative module specifier ending in .ts, in `from "…"`, `import("…")` or `import "…"`
SPECIFIER = re.compile(r"""(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])(\.{1,2}/[^"'\n]+)\.ts\2""")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)  # only to tell whether any code is left
LEFT_OVER = re.compile(r"""(["'])\.{1,2}/[^"'\n]+\.ts\1""")


def footer(source: str) -> str:
    return f"\n// Generated from {source} by tests/bridge_js.py (types erased): edit the .ts, then run it.\n"


def sources(directory: Path = BRIDGE_DIR) -> dict[str, str]:
    """The bridge's TypeScript modules by file name."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(directory.glob("*.ts"))}


def generate(install: PiInstall, modules: dict[str, str]) -> dict[str, str]:
    """`{"x.mjs": javascript}` for `{"x.ts": typescript}`."""
    done = subprocess.run([str(install.node), "--disable-warning=ExperimentalWarning", "--input-type=module",
                           "-e", STRIP], input=json.dumps(modules), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Node could not erase the types:\n{done.stderr[-4000:]}")
    stripped: dict[str, str] = json.loads(done.stdout)
    result = {}
    for name, text in stripped.items():
        if not COMMENT.sub("", text).strip():
            continue  # types only (and comments): its imports were erased with the types
        javascript = SPECIFIER.sub(lambda m: f"{m[1]}{m[2]}{m[3]}.mjs{m[2]}", text)
        if left := LEFT_OVER.search(javascript):
            raise RuntimeError(f"{name}: a .ts specifier is left after renaming: {left[0]}")
        result[name.removesuffix(".ts") + ".mjs"] = javascript.rstrip("\n") + "\n" + footer(name)
    return result


def differences(expected: dict[str, str], directory: Path = BRIDGE_DIR) -> list[str]:
    """What differs between the generated files and those in `directory` (names, with why)."""
    found = {path.name: path.read_text(encoding="utf-8") for path in directory.glob("*.mjs")}
    problems = [f"{name}: missing" for name in sorted(set(expected) - set(found))]
    problems += [f"{name}: stale" for name in sorted(set(expected) & set(found))
                 if found[name] != expected[name]]
    problems += [f"{name}: left over (no {name[:-4]}.ts, or one of types only)"
                 for name in sorted(set(found) - set(expected))]
    return problems


def write(expected: dict[str, str], directory: Path = BRIDGE_DIR) -> None:
    for path in directory.glob("*.mjs"):
        if path.name not in expected:
            path.unlink()
    for name, text in expected.items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python -m tests.bridge_js [--check]", file=sys.stderr)
        return 2
    expected = generate(ensure_pi(), sources())
    if argv == ["--check"]:
        problems = differences(expected)
        for problem in problems:
            print(f"router/bridge/{problem}", file=sys.stderr)
        if problems:
            print("run `python -m tests.bridge_js` to regenerate the bridge's JavaScript", file=sys.stderr)
        return 1 if problems else 0
    write(expected)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
