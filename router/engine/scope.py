"""The evaluation scope: event fields plus vars, state and lazily computed signals."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator, Mapping
from typing import Any, Protocol

from router.compile.ir import CompiledPolicy, CompiledSignal
from router.diagnostics.code_names import SIGNAL_FAILED
from router.diagnostics.errors import ExpressionError
from router.engine.decision import SignalOutcome
from router.engine.signal_deps import state_dependent
from router.engine.signal_memo import Branch, Leaf, SignalMemo, Unfreezable, freeze
from router.lang.expr.evaluator import Evaluator, run_expression
from router.lang.expr.layered import Layered


class EvaluationContext(Protocol):
    """What signals read from the evaluation they belong to (the interpreter's run)."""

    @property
    def scope(self) -> Mapping[str, Any]: ...
    @property
    def evaluator(self) -> Evaluator: ...
    @property
    def sandbox(self) -> Mapping[str, Any]: ...
    @property
    def sandbox_evaluator(self) -> Evaluator: ...


class SignalNeeded(Exception):
    """Raised inside evaluation when an external signal has no value yet."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(name)


class Signals(Mapping[str, Any]):
    """`signals.<name>`: computed on first read, then cached.

    Expression signals are computed here; external ones come from `outcomes` (what the executor
    produced) and raise SignalNeeded when missing. A failure uses the signal's `fallback` and
    records the reason in `errors` (`signal_errors.<name>` in expressions). External signals are
    computed at most once per event; expression signals that read state (router/engine/
    signal_deps.py) are computed again after a rule writes state, so they always reflect the state
    they read. The others are set aside and come back at their next read, as if computed again.
    With a `memo` (router/engine/signal_memo.py), an expression signal whose inputs are the same as
    at an earlier computation takes that computation's value and failure.
    """

    def __init__(self, policy: CompiledPolicy, outcomes: Mapping[str, SignalOutcome],
                 values: Mapping[str, Any], run: EvaluationContext | None = None,
                 memo: SignalMemo | None = None) -> None:
        self.policy = policy
        self.outcomes = outcomes
        self.provided = dict(values)
        self.values: dict[str, Any] = dict(values)  # type: ignore[assignment]
        self.errors: dict[str, str] = {}
        self.run = run
        self.codes: dict[str, str] = {}  # the catalogued code of each failure in `errors`
        self._busy: set[str] = set()
        self._kept: dict[str, tuple[Any, str | None, str | None]] = {}  # set aside at a state write
        self.memo = memo
        self.tokens: dict[str, Hashable] = {}  # what each value is, for the memo's traces
        self._frames: list[list[tuple[str, Hashable]]] = []  # the signals each memoized computation reads
        self._vars_key: Hashable = None
        self._path_keys: dict[tuple[str, ...], Hashable] = {}  # read from the scope, until a state write

    @property
    def scope(self) -> Mapping[str, Any]:
        return self.run.scope if self.run is not None else {}

    @property
    def evaluator(self) -> Evaluator:
        assert self.run is not None, "expression signals need the evaluation they belong to"
        return self.run.evaluator

    def _context(self, spec: CompiledSignal,
                 extra: Mapping[str, Any] | None = None) -> tuple[Mapping[str, Any], Evaluator]:
        """The scope and evaluator of a signal: a project layer's signals see the granted env only,
        and a signal with `let:` its bindings on top; `extra` names (a transform's `result`) below them."""
        if spec.sandboxed and self.run is not None:
            scope, evaluator = self.run.sandbox, self.run.sandbox_evaluator
        else:
            scope, evaluator = self.scope, self.evaluator
        if extra:
            scope = {**scope, **extra}  # a scope of its own: the evaluation's scope is never written
        if spec.bindings:
            layered = Layered(scope, lazy=dict(spec.bindings))
            return layered, Evaluator(layered)
        return scope, (Evaluator(scope) if extra else evaluator)

    def state_changed(self) -> None:
        """Forget expression signals (they may read state); keep external and provided values.

        A signal that cannot read state is set aside with its failure instead: its next read gives
        back what computing it again would (and puts it back where that would)."""
        self._path_keys.clear()
        volatile = state_dependent(self.policy)
        for name in [n for n in self.values if n not in self.provided]:
            spec = self.policy.signals.get(name)
            if spec is not None and not spec.external:
                value = self.values.pop(name)
                error, code = self.errors.pop(name, None), self.codes.pop(name, None)
                if name not in volatile:
                    self._kept[name] = (value, error, code)

    def __getitem__(self, name: str) -> Any:
        if name not in self.policy.signals and name not in self.values:
            raise KeyError(name)
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.policy.signals)

    def __len__(self) -> int:
        return len(self.policy.signals)

    def get(self, name: str, default: Any = None) -> Any:
        if self._frames and (name in self.values or name in self.policy.signals):
            value = self._get(name, default)
            self._note(name)
            return value
        return self._get(name, default)

    def _get(self, name: str, default: Any) -> Any:
        if name in self.values:
            return self.values[name]
        if name in self._kept:
            return self._restore(name)
        spec = self.policy.signals.get(name)
        if spec is None or name in self._busy:
            return default
        self._busy.add(name)
        try:
            value = self._compute(spec) if self.memo is None else self._remembered(spec, self.memo)
        finally:
            self._busy.discard(name)
        self.values[name] = value
        return value

    # --- the memo -----------------------------------------------------------------------------

    def _token(self, name: str) -> Hashable:
        """What the signal's value is: its memo entry, else its value and failure, frozen."""
        token = self.tokens.get(name)
        if token is None:
            try:
                frozen = freeze(self.values.get(name))
                token = ("v", self.memo.intern(frozen) if self.memo else frozen, self.errors.get(name),
                         self.codes.get(name))
            except Unfreezable:
                token = ("once", object())  # never equal: what reads it is not reused
            self.tokens[name] = token
        return token

    def _note(self, name: str) -> None:
        """The memoized computation in progress read signal `name`."""
        frame = self._frames[-1]
        if all(dep != name for dep, _ in frame):
            frame.append((name, self._token(name)))

    def _remembered(self, spec: CompiledSignal, memo: SignalMemo) -> Any:
        """The signal from the memo when what it reads is what it read before, else computed (and
        remembered)."""
        name = spec.name
        self.tokens.pop(name, None)
        plan = memo.plan(spec)
        if plan is not None and self._vars_key is None:
            self._vars_key = memo.vars_key(self.scope.get("env"))
        key = None if plan is None else memo.static_key(plan, self.scope, self._vars_key, self._path_keys)
        if key is None:
            return self._compute(spec)
        frame: list[tuple[str, Hashable]] = []
        self._frames.append(frame)
        try:
            node = memo.root(name, key)
            while isinstance(node, Branch):  # read what the computation would read, in its order
                self.get(node.dep)
                node = node.next.get(self._token(node.dep))
            if isinstance(node, Leaf):
                memo.hits += 1
                return self._hit(name, node)
            frame.clear()
            value = self._compute(spec)
        finally:
            self._frames.pop()
        memo.misses += 1
        token = memo.remember(name, key, frame, (value, self.errors.get(name), self.codes.get(name)))
        if token is not None:
            self.tokens[name] = token
        return value

    def _hit(self, name: str, leaf: Leaf) -> Any:
        value, error, code = leaf.result
        if error is not None:
            self.errors[name] = error
        if code is not None:
            self.codes[name] = code
        self.tokens[name] = leaf.token
        return value

    def _restore(self, name: str) -> Any:
        value, error, code = self._kept.pop(name)
        if error is not None:
            self.errors[name] = error
        if code is not None:
            self.codes[name] = code
        self.values[name] = value
        return value

    def _compute(self, spec: CompiledSignal) -> Any:
        if spec.kind == "expr":
            assert spec.expr is not None
            scope = self._context(spec)[0] if spec.sandboxed or spec.bindings else self.scope
            try:
                return self._transformed(spec, run_expression(spec.expr, scope))
            except ExpressionError as exc:
                return self._fail(spec, exc.message, exc.code)
        outcome = self.outcomes.get(spec.name)
        if outcome is None:
            raise SignalNeeded(spec.name)
        if outcome.error is not None:
            return self._fail(spec, outcome.error)
        try:
            return self._transformed(spec, outcome.result)
        except ExpressionError as exc:
            return self._fail(spec, f"invalid result: {exc.message}")

    def _transformed(self, spec: CompiledSignal, result: Any) -> Any:
        if spec.transform is None:
            return result
        return self._context(spec, {"result": result})[1].value(spec.transform)

    def _fail(self, spec: CompiledSignal, reason: str, code: str = SIGNAL_FAILED) -> Any:
        """Record why the signal failed (an expression signal: its evaluation error's code; an
        external one: RT502) and use its fallback."""
        self.errors[spec.name] = reason
        self.codes[spec.name] = code
        if spec.fallback is None:
            return None
        try:
            return self._context(spec)[1].value(spec.fallback)
        except ExpressionError as exc:
            self.errors[spec.name] = f"{reason}; fallback failed: {exc.message}"
            return None


class SignalErrors(Mapping[str, Any]):
    """`signal_errors.<name>`: the failure text of a signal (computing the signal first), or null."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals

    def get(self, name: str, default: Any = None) -> Any:
        if name in self.signals.policy.signals:
            self.signals.get(name)
        return self.signals.errors.get(name, default)

    def __getitem__(self, name: str) -> Any:
        if name not in self.signals.policy.signals:
            raise KeyError(name)
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.signals.errors)

    def __len__(self) -> int:
        return len(self.signals.errors)


def lookup(scope: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """Read a dotted path from the scope (for trace bindings)."""
    value: Any = scope
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def show_value(value: Any, limit: int = 80) -> str:
    """A short JSON-ish rendering of a value for traces."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
