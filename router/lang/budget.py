"""The evaluation budget: time and built size across all operations of one event's evaluation.

Each operation is bounded on its own (`expr.Limits`, `functions.MAX_TEXT`), but many bounded
operations can still add up: a comprehension of large strings, thousands of rules, a regex that
backtracks. A Budget counts, for one event (all the rules, signals and templates evaluated for it,
across the re-evaluations after each external signal) or for one `router explain` / `router test`
case, the evaluation time and the characters and items built; past either limit the evaluation
stops with BudgetExceeded (RT404), naming the expression that was running. Waiting for signals
(the executor's work) is not evaluation time.

The active budget is a context variable set by `Budget.running()`: helper functions, operators
and regexes reach it without an argument on every call, and concurrent evaluations (one per
asyncio task or thread) each see their own.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BudgetLimits:
    """What one evaluation may use; normal policies use a small fraction of it."""

    time_ms: int = 1000
    size: int = 50_000_000  # characters of text and items of arrays and objects built


DEFAULT_BUDGET = BudgetLimits()


class BudgetExceeded(Exception):
    """The evaluation used up its budget; `source` is the expression that was running."""

    code = "RT404"

    def __init__(self, message: str, *, source: str = "") -> None:
        self.message = message
        self.source = source
        super().__init__(message)


class Budget:
    """Time and size used by one evaluation (not shared between events)."""

    def __init__(self, limits: BudgetLimits = DEFAULT_BUDGET) -> None:
        self.limits = limits
        self.spent = 0.0  # seconds of evaluation in earlier runs
        self.started: float | None = None
        self.deadline = 0.0  # perf_counter() value at which the time runs out (while running)
        self.size = 0
        self.max_size = limits.size
        self.charges = 0

    def elapsed(self) -> float:
        """Seconds of evaluation so far."""
        running = time.perf_counter() - self.started if self.started is not None else 0.0
        return self.spent + running

    def remaining(self) -> float:
        """Seconds of evaluation left (at least a millisecond, for a regex timeout)."""
        return max(0.001, self.limits.time_ms / 1000 - self.elapsed())

    def check(self) -> None:
        """BudgetExceeded once the time is used up."""
        if time.perf_counter() > self.deadline and self.elapsed() * 1000 > self.limits.time_ms:
            raise BudgetExceeded(f"evaluation took more than {self.limits.time_ms} ms for one event")

    def spend(self, size: int) -> None:
        """Count `size` characters or items built; check the size, and the time every 32 charges."""
        self.size += size
        self.charges += 1
        if self.size > self.max_size or not self.charges & 31:
            self.settle()

    def settle(self) -> None:
        """BudgetExceeded when the size or the time is used up."""
        if self.size > self.max_size:
            raise BudgetExceeded(f"evaluation built more than {self.limits.size:,} characters and items "
                                 "for one event")
        self.check()

    @contextmanager
    def running(self) -> Iterator[Budget]:
        """Make this the active budget and count the time until the block ends."""
        if _ACTIVE.get() is self:
            yield self
            return
        token = _ACTIVE.set(self)
        self.started = time.perf_counter()
        self.deadline = self.started + self.limits.time_ms / 1000 - self.spent
        try:
            yield self
        finally:
            self.spent += time.perf_counter() - self.started
            self.started = None
            self.deadline = 0.0
            _ACTIVE.reset(token)


_ACTIVE: ContextVar[Budget | None] = ContextVar("router_budget", default=None)


def active() -> Budget | None:
    """The budget of the evaluation running in this context, if any."""
    return _ACTIVE.get()


def spend(size: int) -> None:
    """Charge the active budget (nothing outside an evaluation)."""
    budget = _ACTIVE.get()
    if budget is not None:
        budget.spend(size)


def remaining() -> float:
    """Seconds the active evaluation has left (the whole default budget outside one)."""
    budget = _ACTIVE.get()
    return budget.remaining() if budget is not None else DEFAULT_BUDGET.time_ms / 1000


_SIZED = frozenset({str, list, dict, tuple})


def size_of(value: object) -> int:
    """What building `value` costs: its length for text, arrays and objects, else 1."""
    return len(value) if isinstance(value, (str, list, dict, tuple)) else 1


def charged(impl: Callable[..., Any]) -> Callable[..., Any]:
    """`impl` charging the size of its result to the active budget (every helper function)."""
    get, sized = _ACTIVE.get, _SIZED

    @functools.wraps(impl)
    def run(*args: Any) -> Any:
        result = impl(*args)
        budget = get()
        if budget is not None:  # Budget.spend, inlined: this runs on every helper call
            budget.size += len(result) if type(result) in sized else 1
            budget.charges += 1
            if budget.size > budget.max_size or not budget.charges & 31:
                budget.settle()
        return result

    return run
