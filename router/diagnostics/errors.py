"""Exception types, one per stage; each carries the diagnostics that explain it."""

from __future__ import annotations

from collections.abc import Sequence

from router.diagnostics.code_names import EVALUATION_ERROR
from router.diagnostics.diagnostic import Diagnostic


class RouterError(Exception):
    """Base of every error the router raises on purpose (user errors, never bugs)."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(d.message for d in self.diagnostics) or type(self).__name__)


class SourceError(RouterError):
    """A policy file could not be read or parsed as YAML."""


class EventError(RouterError):
    """An event document does not fit the normalized event model."""


class ExpressionError(Exception):
    """An expression failed while being evaluated (a type error, a missing value, a limit)."""

    def __init__(self, message: str, *, source: str = "", code: str = EVALUATION_ERROR) -> None:
        self.message = message
        self.source = source
        self.code = code
        super().__init__(message)
