"""What compiling one rule needs to know about the whole policy, and a rule as layering placed it."""

from __future__ import annotations

from dataclasses import dataclass, field

from router.diagnostics.diagnostic import Diagnostic, Severity, Span
from router.load.loader import PolicyFile
from router.load.model import Rule


@dataclass
class Entry:
    rule: Rule
    file: PolicyFile
    index: int
    group: str


@dataclass
class Context:
    """What compiling one rule needs to know about the whole policy."""

    var_names: frozenset[str]
    signal_names: frozenset[str]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    commands: frozenset[str] = frozenset()  # the declared slash commands (for `command:`)
    reads: dict[tuple[str, str], list[tuple[Span, tuple[str, ...]]]] = field(default_factory=dict)

    def error(self, code: str, message: str, span: Span, *, help: str | None = None,
              rule_id: str | None = None, severity: Severity = Severity.ERROR) -> None:
        self.diagnostics.append(Diagnostic(code, message, span, severity, help=help, rule_id=rule_id))
