"""A scope with local names on top: `let:` bindings (computed at first read) and template loop names.

The compiler makes sure a local name never equals a name of the scope below it (an event field,
`vars`, `state`, `signals`, …), so a local name hides nothing; lookups of other names go to the
scope below unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from router.diagnostics.errors import ExpressionError

if TYPE_CHECKING:
    from router.lang.expr.expression import Expression

_MISSING = object()


class Layered(Mapping[str, Any]):
    """`base` plus `values` (fixed local names) plus `lazy` (bindings computed once, when first read).

    A binding is evaluated in this same scope, so it sees the bindings above it; `forget()` drops
    the computed values (after a rule writes state, like expression signals).
    """

    __slots__ = ("_busy", "_done", "base", "lazy", "local")

    def __init__(self, base: Mapping[str, Any], values: Mapping[str, Any] | None = None,
                 lazy: Mapping[str, Expression] | None = None) -> None:
        self.base = base
        self.local = dict(values or {})
        self.lazy = lazy or {}
        self._done: dict[str, Any] = {}
        self._busy: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:
        value = self.local.get(name, _MISSING)
        if value is not _MISSING:
            return value
        if name in self.lazy:
            return self._binding(name)
        return self.base.get(name, default)

    def _binding(self, name: str) -> Any:
        done = self._done.get(name, _MISSING)
        if done is not _MISSING:
            return done
        if name in self._busy:  # the compiler refuses cycles; this guards hand-built scopes
            raise ExpressionError(f"let {name}: the binding depends on itself")
        from router.lang.expr.evaluator import run_expression

        self._busy.add(name)
        try:
            value = run_expression(self.lazy[name], self)
        except ExpressionError as exc:
            message = exc.message if exc.message.startswith("let ") else f"let {name}: {exc.message}"
            raise ExpressionError(message, source=self.lazy[name].source, code=exc.code) from None
        finally:
            self._busy.discard(name)
        self._done[name] = value
        return value

    def forget(self) -> None:
        """Compute the bindings again at their next read."""
        self._done.clear()

    def __getitem__(self, name: str) -> Any:
        if name in self.local or name in self.lazy:
            return self.get(name)
        return self.base[name]

    def __contains__(self, name: object) -> bool:
        return name in self.local or name in self.lazy or name in self.base

    def __iter__(self) -> Iterator[str]:
        yield from self.local
        yield from (n for n in self.lazy if n not in self.local)
        yield from (n for n in self.base if n not in self.local and n not in self.lazy)

    def __len__(self) -> int:
        return sum(1 for _ in self)
