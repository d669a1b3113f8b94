"""Diagnostic records: one shape for every problem the router reports, with renderers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from router.diagnostics.redact import redact_text  # a token in a URL never reaches a CI log


class Severity(StrEnum):
    """How bad a diagnostic is; errors make `router lint` exit 1."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Span:
    """A place in a source file, 1-based line and column."""

    path: str
    line: int = 1
    col: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding: a stable code, where it is, what is wrong and how to fix it."""

    code: str
    message: str
    span: Span | None = None
    severity: Severity = Severity.ERROR
    key_path: str = ""
    help: str | None = None
    rule_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def at(self, span: Span | None, key_path: str | None = None) -> Diagnostic:
        """Return a copy placed at `span` (and `key_path` when given)."""
        return replace(self, span=span, key_path=self.key_path if key_path is None else key_path)

    def sort_key(self) -> tuple[str, int, int, str]:
        span = self.span or Span("")
        return (span.path, span.line, span.col, self.code)

    def to_dict(self) -> dict[str, Any]:
        span = self.span
        return {
            "code": self.code,
            "severity": str(self.severity),
            "message": self.message,
            "path": span.path if span else None,
            "line": span.line if span else None,
            "col": span.col if span else None,
            "key_path": self.key_path or None,
            "rule_id": self.rule_id,
            "help": self.help,
        }


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sort by (path, line, col, code) and drop exact duplicates."""
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for diag in diagnostics:
        key = (diag.sort_key(), diag.message)
        if key not in seen:
            seen.add(key)
            unique.append(diag)
    return sorted(unique, key=Diagnostic.sort_key)


def count(diagnostics: Sequence[Diagnostic]) -> tuple[int, int]:
    """Return (errors, warnings)."""
    errors = sum(1 for d in diagnostics if d.severity is Severity.ERROR)
    return errors, len(diagnostics) - errors


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


def render_text(diagnostics: Sequence[Diagnostic], *,
                source_lines: dict[str, list[str]] | None = None) -> str:
    """`path:line:col: severity: message [CODE]`, a `help:` line, then the count trailer."""
    out: list[str] = []
    for diag in sort_diagnostics(diagnostics):
        where = f"{diag.span}: " if diag.span else ""
        out.append(f"{where}{diag.severity}: {diag.message} [{diag.code}]")
        lines = (source_lines or {}).get(diag.span.path) if diag.span and shows_excerpt(diag) else None
        if lines and diag.span and 0 < diag.span.line <= len(lines):
            text = redact_text(lines[diag.span.line - 1])
            out.append(f"  | {text}")
            out.append("  | " + " " * (diag.span.col - 1) + "^")
        if diag.help:
            out.append(f"  help: {diag.help}")
    errors, warnings = count(diagnostics)
    out.append(f"Found {errors} error{'s' if errors != 1 else ''}, "
               f"{warnings} warning{'s' if warnings != 1 else ''}.")
    return "\n".join(out)


EXCERPT_SUFFIXES = (".yaml", ".yml", ".json")


def shows_excerpt(diagnostic: Diagnostic) -> bool:
    """Whether a renderer may quote the diagnostic's source line: only of YAML (or JSON) files, and
    never of a file that turned out not to be a policy (binary, not YAML, not a mapping)."""
    span = diagnostic.span
    return (span is not None and span.path.endswith(EXCERPT_SUFFIXES)
            and diagnostic.extra.get("excerpt", True) is not False)


def render_json(diagnostics: Sequence[Diagnostic]) -> str:
    errors, warnings = count(diagnostics)
    body = {
        "diagnostics": [d.to_dict() for d in sort_diagnostics(diagnostics)],
        "errors": errors,
        "warnings": warnings,
    }
    return json.dumps(body, indent=2, ensure_ascii=False)


def render_sarif(diagnostics: Sequence[Diagnostic], *, version: str, rules_doc: dict[str, str]) -> str:
    """SARIF 2.1.0, one run, one result per diagnostic."""
    ordered = sort_diagnostics(diagnostics)
    codes = sorted({d.code for d in ordered})
    results = []
    for diag in ordered:
        result: dict[str, Any] = {
            "ruleId": diag.code,
            "level": "error" if diag.severity is Severity.ERROR else "warning",
            "message": {"text": diag.message + (f"\nhelp: {diag.help}" if diag.help else "")},
        }
        if diag.span:
            result["locations"] = [{
                "physicalLocation": {
                    "artifactLocation": {"uri": diag.span.path},
                    "region": {"startLine": diag.span.line, "startColumn": diag.span.col},
                }
            }]
        results.append(result)
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "router",
                "version": version,
                "rules": [{"id": c, "shortDescription": {"text": rules_doc.get(c, c)}} for c in codes],
            }},
            "results": results,
        }],
    }
    return json.dumps(sarif, indent=2, ensure_ascii=False)
