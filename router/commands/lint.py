"""`router lint`: report every problem of a policy as located diagnostics."""

from __future__ import annotations

from pathlib import Path

from router import __version__
from router.codes import CODES
from router.compile import compile_files, load_policy
from router.diagnostics import Diagnostic, has_errors, render_json, render_sarif, render_text
from router.errors import SourceError
from router.lint import run_checks
from router.source import read_text


def policy_files(paths: list[Path]) -> list[Path]:
    """Files to lint: the given files, and the policy YAML files inside given directories."""
    found = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.glob("*.y*ml") if ".test." not in p.name)
        else:
            found.append(path)
    return found


def lint_paths(paths: list[Path], *, cwd: Path | None = None) -> list[Diagnostic]:
    """Diagnostics of the layered policy of `cwd` (no paths) or of each given file."""
    if not paths:
        policy, diagnostics = load_policy(cwd or Path.cwd())
        return diagnostics + (run_checks(policy) if policy else [])
    diagnostics = []
    for path in policy_files(paths):
        policy, found = compile_files([("file", path)])
        diagnostics += found + (run_checks(policy) if policy else [])
    return diagnostics


def run(paths: list[Path], *, fmt: str = "text", cwd: Path | None = None) -> tuple[int, str]:
    """Lint and render; exit code 1 when any error was found."""
    diagnostics = lint_paths(paths, cwd=cwd)
    if fmt == "json":
        out = render_json(diagnostics)
    elif fmt == "sarif":
        out = render_sarif(diagnostics, version=__version__,
                           rules_doc={code: info.title for code, info in CODES.items()})
    else:
        out = render_text(diagnostics, source_lines=_sources(diagnostics))
    return (1 if has_errors(diagnostics) else 0), out


def _sources(diagnostics: list[Diagnostic]) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {}
    for diag in diagnostics:
        if diag.span and diag.span.path not in lines:
            try:  # read_text: regular files of bounded size only (never /dev/zero or a FIFO)
                lines[diag.span.path] = read_text(Path(diag.span.path)).splitlines()
            except SourceError:
                lines[diag.span.path] = []
    return lines
