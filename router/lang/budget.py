"""The evaluation budget: wall time and built size, per event and per rule.

Each operation is bounded on its own (`expr.Limits`, `functions.MAX_TEXT`), but many bounded
operations can still add up: a comprehension of large strings, thousands of rules. A Budget counts,
for one event (all the rules, signals and templates evaluated for it, across the re-evaluations
after each external signal) or for one `router explain` / `router test` case, the evaluation time
and the characters and items built. Each rule has an allowance of its own, the smaller of the
per-rule limits and what the event has left (`begin_rule`): a rule past it fails alone (RT404) and
the next rule gets a fresh allowance; once the event's own budget is used up the interpreter stops
evaluating (guards fail closed, docs/reliability.md). Time is wall time (`time.perf_counter`), the
clock the bridge's deadline runs on: a loaded machine cannot stretch the budget past the deadline;
a dry run, which meets no deadline, counts the thread's CPU time instead (DRY_RUN_BUDGET).
Waiting for signals (the executor's work) is not evaluation time.

The engine answers each event within EVENT_DEADLINE_MS of reading its line and announces that
figure in its `hello` (docs/protocol.md); the evaluation time is that deadline less IO_MARGIN_MS
for reading, normalizing, carrying out and writing.

The active budget is a context variable set by `Budget.running()`: helper functions, operators
and regexes reach it without an argument on every call, and concurrent evaluations (one per
asyncio task or thread) each see their own.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from router.diagnostics.code_names import BUDGET_EXCEEDED

EVENT_DEADLINE_MS = 1500  # from reading an event's line to writing its answer (signal waits apart)
IO_MARGIN_MS = 500  # of the deadline, kept for everything but evaluating the rules
DEADLINE_ENV = "ROUTER_EVENT_DEADLINE_MS"  # a longer deadline for a slow machine (or a test)
DEADLINE_RANGE_MS = (EVENT_DEADLINE_MS, 600_000)


def event_deadline_ms(environ: Mapping[str, str]) -> int:
    """The deadline the engine announces and keeps: EVENT_DEADLINE_MS, or a longer one from
    DEADLINE_ENV (clamped to DEADLINE_RANGE_MS; a value that is not a number is ignored). Never
    shorter: a guard whose engine ran out of time fails closed, so a short one would refuse more."""
    try:
        wanted = int(environ.get(DEADLINE_ENV, ""))
    except ValueError:
        return EVENT_DEADLINE_MS
    low, high = DEADLINE_RANGE_MS
    return min(max(wanted, low), high)


@dataclass(frozen=True)
class BudgetLimits:
    """What one evaluation may use; normal policies use a small fraction of it."""

    time_ms: int = EVENT_DEADLINE_MS - IO_MARGIN_MS  # wall time of the event's evaluation
    size: int = 50_000_000  # characters of text and items of arrays and objects built
    rule_ms: int = 250  # one rule's allowance of time (never more than the event has left)
    rule_size: int = 20_000_000  # one rule's allowance of size
    cpu_clock: bool = False  # time counted as this thread's CPU time, not wall time (dry runs)


DEFAULT_BUDGET = BudgetLimits()
DRY_RUN_BUDGET = BudgetLimits(time_ms=10_000, rule_ms=5_000, cpu_clock=True)
"""A dry run's (`router explain`, `router test`, replay, lint's examples): it meets no deadline, so
its time only bounds a hostile expression, and a loaded machine (a CI runner) must give the same
answers as an idle one: its time is the evaluating thread's CPU time, which other processes on
the machine do not spend. The sizes are the sidecar's."""


class BudgetExceeded(Exception):
    """The evaluation used up a budget; `source` is the expression that was running, `scope`
    says whose budget: the rule's own allowance (`rule`) or the whole event's (`event`)."""

    code = BUDGET_EXCEEDED

    def __init__(self, message: str, *, source: str = "", scope: str = "event") -> None:
        self.message = message
        self.source = source
        self.scope = scope
        super().__init__(message)


class Budget:
    """Time and size used by one evaluation (not shared between events)."""

    def __init__(self, limits: BudgetLimits = DEFAULT_BUDGET) -> None:
        self.limits = limits
        self._now = time.thread_time if limits.cpu_clock else time.perf_counter
        self.spent = 0.0  # seconds of evaluation in earlier runs
        self.started: float | None = None
        self.event_deadline = 0.0  # the clock's value at which the event's time runs out
        self.deadline = 0.0  # the deadline in force: the event's, or the running rule's if sooner
        self.size = 0
        self.max_size = limits.size  # the size in force: the event's, or the running rule's
        self.charges = 0
        self.in_rule = False

    def elapsed(self) -> float:
        """Seconds of evaluation so far."""
        running = self._now() - self.started if self.started is not None else 0.0
        return self.spent + running

    def remaining(self) -> float:
        """Seconds of evaluation the event has left (at least a millisecond)."""
        return max(0.001, self.limits.time_ms / 1000 - self.elapsed())

    def exhausted(self) -> bool:
        """Whether the event's own budget (time or size) is used up."""
        return self.size > self.limits.size or self.elapsed() * 1000 > self.limits.time_ms

    def event_message(self) -> str:
        """Why the event's budget is used up (time or size)."""
        if self.size > self.limits.size:
            return f"evaluation built more than {self.limits.size:,} characters and items for one event"
        return f"evaluation took more than {self.limits.time_ms} ms for one event"

    def begin_rule(self) -> None:
        """Give the next rule its allowance: the per-rule limits, within what the event has left."""
        now = self._now()
        self.in_rule = True
        self.deadline = min(self.event_deadline, now + self.limits.rule_ms / 1000)
        self.max_size = min(self.limits.size, self.size + self.limits.rule_size)

    def end_rule(self) -> None:
        """Back to the event's budget (between rules, signals and templates outside a rule)."""
        self.in_rule = False
        self.deadline = self.event_deadline
        self.max_size = self.limits.size

    def check(self) -> None:
        """BudgetExceeded once the time in force is used up."""
        if self._now() <= self.deadline:
            return
        if self.elapsed() * 1000 > self.limits.time_ms:
            raise BudgetExceeded(self.event_message())
        if self.in_rule:
            raise BudgetExceeded(f"the rule took more than its own {self.limits.rule_ms} ms", scope="rule")

    def spend(self, size: int) -> None:
        """Count `size` characters or items built; check the size, and the time every 32 charges."""
        self.size += size
        self.charges += 1
        if self.size > self.max_size or not self.charges & 31:
            self.settle()

    def settle(self) -> None:
        """BudgetExceeded when the size or the time in force is used up."""
        if self.size > self.max_size:
            if self.size > self.limits.size:
                raise BudgetExceeded(self.event_message())
            raise BudgetExceeded(f"the rule built more than its own {self.limits.rule_size:,} characters "
                                 "and items", scope="rule")
        self.check()

    @contextmanager
    def running(self) -> Iterator[Budget]:
        """Make this the active budget and count the time until the block ends."""
        if _ACTIVE.get() is self:
            yield self
            return
        token = _ACTIVE.set(self)
        self.started = self._now()
        self.event_deadline = self.deadline = self.started + self.limits.time_ms / 1000 - self.spent
        try:
            yield self
        finally:
            self.spent += self._now() - self.started
            self.started = None
            self.event_deadline = self.deadline = 0.0
            self.in_rule = False
            self.max_size = self.limits.size
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
