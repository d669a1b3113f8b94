"""`router lint`: report every problem of a policy and its test files as located diagnostics."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from router import __version__
from router.commands import policy_note
from router.commands.explain import layer_label, rule_records
from router.compile.compiler import compile_layers, load_layered
from router.compile.ir import CompiledPolicy
from router.diagnostics.codes import CODES
from router.diagnostics.diagnostic import Diagnostic, has_errors, render_json, render_sarif, render_text
from router.lint import run_checks
from router.load.loader import PolicyFile
from router.testing.runner import default_test_files, is_test_file, lint_test_file


def policy_files(paths: list[Path]) -> list[Path]:
    """Policy files to lint: the given files, and the policy YAML files inside given directories."""
    found = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.glob("*.y*ml") if not is_test_file(p))
        elif not is_test_file(path):
            found.append(path)
    return found


def test_files(paths: list[Path]) -> list[Path]:
    """Test files to lint: the given `*.test.yaml` files and those inside given directories."""
    found = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.glob("*.y*ml") if is_test_file(p))
        elif is_test_file(path):
            found.append(path)
    return found


@dataclass
class LintResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    policies: list[tuple[Path | None, list[PolicyFile]]] = field(default_factory=list)  # path asked, files
    not_loaded: list[dict[str, str]] = field(default_factory=list)
    compiled: list[CompiledPolicy] = field(default_factory=list)
    sources: dict[str, list[str]] = field(default_factory=dict)  # the test files' lines, as parsed


def lint(paths: list[Path], *, cwd: Path | None = None) -> LintResult:
    """Lint the layered policy of `cwd` and its default test files (no paths), or the given paths."""
    result = LintResult()
    if not paths:
        here = cwd or Path.cwd()
        loaded = load_layered(here)
        result.policies.append((None, loaded.files))
        result.compiled += [loaded.policy] if loaded.policy else []
        result.diagnostics += loaded.diagnostics + (run_checks(loaded.policy) if loaded.policy else [])
        result.not_loaded = policy_note.not_loaded(here)
        tests = default_test_files(here)
    else:
        for path in policy_files(paths):
            loaded = compile_layers([("file", path)])
            result.policies.append((path, loaded.files))
            result.compiled += [loaded.policy] if loaded.policy else []
            result.diagnostics += loaded.diagnostics + (run_checks(loaded.policy) if loaded.policy else [])
        tests = test_files(paths)
    for path in tests:
        result.diagnostics += lint_test_file(path, sources=result.sources)
    return result


def lint_paths(paths: list[Path], *, cwd: Path | None = None) -> list[Diagnostic]:
    """Diagnostics of the layered policy of `cwd` (no paths) or of each given file."""
    return lint(paths, cwd=cwd).diagnostics


def rule_lines(policies: list[CompiledPolicy]) -> list[str]:
    """`rules:` and one line per rule in force: id, layer (locked or not), where it is defined."""
    rules = [r for policy in policies for r in policy.rules]
    if not rules:
        return ["rules: none"]
    width = max(len(r.id) for r in rules)
    layers = max(len(layer_label(r)) for r in rules)
    return ["rules:", *(f"  {r.id.ljust(width)}  {layer_label(r).ljust(layers)}  {r.origin}" for r in rules)]


def fix(paths: list[Path], *, cwd: Path | None = None) -> list[str]:
    """`--fix`: rewrite what has a sure fix (RT335, the keys `provides:` replaced) in the given
    policy files, or in your own files of the layered policy (user and project, never a pack or
    the managed layer); one line per file touched."""
    from router.lint.moved_keys import fix_files

    if paths:
        return fix_files(policy_files(paths))
    own = [Path(f.source or f.path) for f in load_layered(cwd or Path.cwd()).files
           if f.layer in ("user", "project")]
    return fix_files(own)


def run(paths: list[Path], *, fmt: str = "text", cwd: Path | None = None,
        rules: bool = False, fix_first: bool = False) -> tuple[int, str]:
    """Lint and render; exit code 1 when any error was found. Text and SARIF output get the
    `policy:` lines (and a warning about a project file Pi would not load) on stderr; `rules`
    adds the rules in force with their layers (always in JSON); `fix_first` applies `fix` first
    (its lines on stderr)."""
    if fix_first:
        policy_note.emit(fix(paths, cwd=cwd))
    result = lint(paths, cwd=cwd)
    diagnostics = result.diagnostics
    if fmt == "json":
        body = json.loads(render_json(diagnostics))
        body["files"] = policy_note.files_json(f for _, files in result.policies for f in files)
        body["not_loaded"] = result.not_loaded
        body["rules"] = [record for policy in result.compiled for record in rule_records(policy)]
        body["failure"] = [dict(policy.failure) for policy in result.compiled]
        out = json.dumps(body, indent=2, ensure_ascii=False)
    else:
        failure = [line for policy in result.compiled if (line := policy_note.failure_line(policy.failure))]
        policy_note.emit([*(policy_note.policy_line(files, named=path) for path, files in result.policies),
                          *failure, *policy_note.warning_lines(result.not_loaded)])
        if fmt == "sarif":
            out = render_sarif(diagnostics, version=__version__,
                               rules_doc={code: info.title for code, info in CODES.items()})
        else:
            out = render_text(diagnostics, source_lines=_sources(result))
            if rules:
                out = "\n".join([*rule_lines(result.compiled), out])
    return (1 if has_errors(diagnostics) else 0), out


def _sources(result: LintResult) -> dict[str, list[str]]:
    """The lines of each policy and test file this run parsed, by the name diagnostics give it.

    Excerpts come only from the text the loader read and parsed as a policy or test file, never
    from a new read of a diagnostic's path: a refused link, a file that is not YAML or a file
    outside the project is named, never quoted."""
    lines = {f.path: f.doc.lines for _, files in result.policies for f in files}
    return {**result.sources, **lines}
