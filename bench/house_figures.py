"""The house's figures (issue 27's table), each measured from the tree as it is.

Run: python bench/house_figures.py [--action widget]

Prints one line per figure: the files an added action touched (the commit that added
`router/actions/<action>.py`, split into files edited by hand and regenerated ones), the files
outside its own that name each signal kind, the top-level keys of `Policy` (and how many of them
are the old keys `provides:` replaced), the modules over 400 lines, the functions over 50 lines,
the bare diagnostic code strings, the packs' RT332 count, their longest expression and their
`for x in [v]` stand-ins, the TypeScript twins of the bridge, the top-level fields of the bridge's
state, and the modules named compiler.py. Nothing is asserted: the tests hold the rules, this
shows where the tree stands.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROUTER = ROOT / "router"
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 50
GENERATED = ("docs/reference/", "docs/events.md", "schema/", "router/bridge/actions.d.ts", "tests/snapshots/")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def action_files(action: str) -> tuple[list[str], list[str]]:
    """The files of the commit that added router/actions/<action>.py: (by hand, regenerated)."""
    added = git("log", "--diff-filter=A", "--format=%H", "--", f"router/actions/{action}.py").split()
    if not added:
        return [], []
    files = git("show", "--name-only", "--format=", added[-1]).split()
    hand = [f for f in files if not f.startswith(GENERATED)]
    return hand, [f for f in files if f.startswith(GENERATED)]


def python_files() -> list[Path]:
    return sorted(p for p in ROUTER.rglob("*.py") if "__pycache__" not in p.parts)


def signal_mentions() -> tuple[list[str], dict[str, list[str]]]:
    """The modules besides the kinds' folder that list every kind by name (a registry of its own),
    and for each kind the modules that name its request class or single it out (`kind == "name"`):
    what adding a kind like it would have to edit besides its file."""
    from router.actions.signals import params_name, registry

    kinds = registry()
    folder = ROUTER / "actions" / "signals"
    others = [p for p in python_files() if folder not in p.parents]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in others}
    listing = [name for name, text in texts.items()
               if all(re.search(rf"""["']{kind}["']""", text) for kind in kinds if kind != "expr")]
    found: dict[str, list[str]] = {}
    for name in kinds:
        pattern = re.compile(rf"""\b{params_name(name)}\b|kind\b[^\n]*[!=]= *["']{name}["']""")
        found[name] = [file for file, text in texts.items() if pattern.search(text)]
    return listing, found


def long_modules() -> list[tuple[str, int]]:
    sizes = [(str(p.relative_to(ROUTER)), len(p.read_text(encoding="utf-8").splitlines()))
             for p in python_files()]
    tables = {"diagnostics/codes.py"}  # a table, not code (the architecture test's TABLES)
    return [(name, size) for name, size in sizes if size > MAX_MODULE_LINES and name not in tables]


def long_functions() -> list[str]:
    found = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(ROUTER)}:{node.name} ({size})")
    return found


def bare_codes() -> tuple[int, int]:
    """String literals that are a whole code ("RT205") outside the catalogue: (count, modules)."""
    homes = {"diagnostics/codes.py", "diagnostics/code_names.py"}
    counts = [sum(1 for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and re.fullmatch(r"RT\d{3}", node.value))
              for p in python_files() if str(p.relative_to(ROUTER)) not in homes]
    return sum(counts), sum(1 for c in counts if c)


def packs() -> list[Path]:
    from router.load.paths import packs_dir

    return sorted(p for p in packs_dir().glob("*.yaml") if not p.name.endswith(".test.yaml"))


def pack_figures() -> tuple[dict[str, int], int, int]:
    """RT332 per pack (linted as a user's file), the longest expression, the `for x in [v]` count."""
    from router.commands import lint as lint_command
    from router.lint.readability import _file_expressions, expression_length
    from router.load.source import read_source

    rt332, longest, stand_ins = {}, 0, 0
    for pack in packs():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _, out = lint_command.run([pack])
        rt332[pack.stem] = out.count("RT332")
        for _path, source in _file_expressions(read_source(pack).data):
            longest = max(longest, expression_length(source))
            stand_ins += len(re.findall(r"\bfor \w+ in \[[^\[\],]+\]", source))
    return rt332, longest, stand_ins


def bridge_figures() -> tuple[int, int]:
    """TypeScript sources with a JavaScript twin, and the top-level fields of the bridge's state."""
    bridge = ROUTER / "bridge"
    twins = sum(1 for p in bridge.glob("*.ts")
                if not p.name.endswith(".d.ts") and p.with_suffix(".mjs").exists())
    index = (bridge / "index.mjs").read_text(encoding="utf-8")
    body = index.split("export function createState", 1)[1].split("return {", 1)[1].split("};", 1)[0]
    fields = [item.split(":")[0].strip() for item in body.split(",") if item.strip()]
    return twins, len(fields)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--action", default="widget", help="the added action whose commit is counted")
    args = parser.parse_args()
    from router.load.model import LEGACY_PROVIDES, Policy

    hand, regenerated = action_files(args.action)
    print(f"added action `{args.action}`: {len(hand)} files by hand ({', '.join(hand)}), "
          f"{len(regenerated)} regenerated ({', '.join(regenerated)})")
    listing, mentions = signal_mentions()
    print(f"modules besides router/actions/signals/ that list the signal kinds: {len(listing)}"
          + (f" ({', '.join(listing)})" if listing else ""))
    singled = [f"{name} {len(files)}" + (f" ({', '.join(files)})" if files else "")
               for name, files in mentions.items()]
    print("signal kinds singled out elsewhere (request class or `kind == name`): " + ", ".join(singled))
    keys = list(Policy.model_fields)
    legacy = [k for k in keys if k in LEGACY_PROVIDES]
    print(f"top-level keys of Policy: {len(keys)} ({len(legacy)} of them old keys `provides:` replaced, "
          f"{len(keys) - len(legacy)} current)")
    modules = long_modules()
    print(f"modules over {MAX_MODULE_LINES} lines: {len(modules)}"
          + (f" ({', '.join(f'{n} {s}' for n, s in modules)})" if modules else ""))
    functions = long_functions()
    print(f"functions over {MAX_FUNCTION_LINES} lines (def to last line): {len(functions)}"
          + (f" ({', '.join(functions)})" if functions else ""))
    count, in_modules = bare_codes()
    print(f"bare diagnostic code strings: {count} in {in_modules} modules")
    rt332, longest, stand_ins = pack_figures()
    print(f"RT332 in the packs: {sum(rt332.values())} ({', '.join(f'{k} {v}' for k, v in rt332.items())}); "
          f"longest pack expression: {longest} characters; `for x in [v]` stand-ins: {stand_ins}")
    twins, state_fields = bridge_figures()
    print(f"bridge: {twins} TypeScript/JavaScript twins; the state's top-level fields: {state_fields}")
    print(f"modules named compiler.py: {len(list(ROUTER.rglob('compiler.py')))}; "
          f"test modules at the top of tests/: {len(list((ROOT / 'tests').glob('test_*.py')))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
