"""RT332: expressions too long to read, with a hint at `let:` and multi-line templates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from router.compile.ir import CompiledPolicy
from router.diagnostics.code_names import EXPRESSION_TOO_LONG
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.lang.expr.trees import leaves
from router.lint import check
from router.load.source import KeyPath, SourceDoc, format_key_path

MAX_EXPRESSION = 200  # characters, with runs of whitespace counted as one


def expression_length(source: str) -> int:
    """The length of an expression as people read it: runs of whitespace count as one character."""
    return len(" ".join(source.split()))


_BRACE = re.compile(r"[{}]")


def placeholders(text: str) -> list[str]:
    """The expressions inside the top-level `{…}` placeholders of a template (`{{`, `}}` are text).

    Only the braces move the scan (found with a regex), other characters are skipped at once."""
    found, depth, start = [], 0, 0
    brace = _BRACE.search(text)
    while brace is not None:
        i = brace.start()
        if depth == 0 and text.startswith(("{{", "}}"), i):
            brace = _BRACE.search(text, i + 2)
            continue
        if text[i] == "{":
            depth += 1
            start = i + 1 if depth == 1 else start
        elif depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start:i])
        brace = _BRACE.search(text, i + 1)
    return found


def _template_values(value: Any, key_path: KeyPath) -> Iterator[tuple[KeyPath, str]]:
    for path, leaf in leaves(value, key_path):
        if isinstance(leaf, str):
            yield from ((path, p) for p in placeholders(leaf))


def _file_expressions(data: dict[str, Any]) -> Iterator[tuple[KeyPath, str]]:
    """Every expression of a policy file: conditions, bindings, signal sources, placeholders."""
    for index, rule in enumerate(data.get("rules") or []):
        if not isinstance(rule, dict):
            continue
        base: KeyPath = ("rules", index)
        for key in ("match", "when"):
            if isinstance(rule.get(key), str):
                yield (*base, key), rule[key]
        for name, source in (rule.get("let") or {}).items():
            if isinstance(source, str):
                yield (*base, "let", name), source
        yield from _template_values(rule.get("do") or [], (*base, "do"))
    for name, signal in (data.get("signals") or {}).items():
        if not isinstance(signal, dict):
            continue
        for key in ("expr", "transform", "fallback"):
            if isinstance(signal.get(key), str):
                yield ("signals", name, key), signal[key]
        for binding, source in (signal.get("let") or {}).items():
            if isinstance(source, str):
                yield ("signals", name, "let", binding), source
        for key, value in signal.items():
            if isinstance(value, dict):
                yield from _template_values(value, ("signals", name, key))


def long_expressions(doc: SourceDoc) -> Iterator[Diagnostic]:
    """RT332 for each expression of the file longer than MAX_EXPRESSION characters."""
    if not isinstance(doc.data, dict):
        return
    for key_path, source in _file_expressions(doc.data):
        length = expression_length(source)
        if length > MAX_EXPRESSION:
            yield Diagnostic(
                EXPRESSION_TOO_LONG, f"an expression of {length} characters in {format_key_path(key_path)} "
                f"(over {MAX_EXPRESSION} is hard to read and to review)", doc.span(key_path),
                Severity.WARNING,
                help="name its parts with `let:` bindings (or signals), and write a long text as a "
                "multi-line template (`|-` with {for …}/{if …} lines)")


@check(EXPRESSION_TOO_LONG)
def over_long_expressions(policy: CompiledPolicy) -> Iterator[Diagnostic]:
    """Expressions of your own files over MAX_EXPRESSION characters (built-in packs are not yours
    to edit, so they are not reported)."""
    for f in policy.files:
        if f.layer != "pack":
            yield from long_expressions(f.doc)
