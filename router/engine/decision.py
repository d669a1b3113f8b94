"""What the interpreter returns: effects to carry out, the new state, or a signal it waits for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from router.actions.signals import SignalOutcome as SignalOutcome  # what a kind's file returns
from router.diagnostics.diagnostic import Diagnostic

if TYPE_CHECKING:
    from router.trust.capabilities import Confinement


@dataclass(frozen=True)
class Effect:
    """One action with its parameters rendered, and the rule that asked for it."""

    action: str
    params: Any
    rule_id: str
    shadow: bool = False
    confined: Mapping[str, str] = field(default_factory=dict, compare=False)  # checked: capability
    confinement: Confinement | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {self.action: self.params}


@dataclass(frozen=True)
class SignalRequest:
    """An external signal the executor must compute before evaluation can finish."""

    name: str
    kind: str
    params: dict[str, Any]
    questions: dict[str, Any] = field(default_factory=dict)
    rule_id: str | None = None  # the rule whose evaluation first needed the signal
    confined: Mapping[str, str] = field(default_factory=dict, compare=False)  # checked: capability
    confinement: Confinement | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Decision:
    """The outcome of one event: effects in order, shadowed ones apart, and the new state."""

    event_type: str
    effects: tuple[Effect, ...] = ()
    shadowed: tuple[Effect, ...] = ()
    fired: tuple[str, ...] = ()
    state: dict[str, Any] = field(default_factory=dict)
    state_changed: bool = False
    errors: tuple[Diagnostic, ...] = ()
    signals: dict[str, Any] = field(default_factory=dict)
    signal_errors: dict[str, str] = field(default_factory=dict)
    pending: SignalRequest | None = None
    signal_codes: dict[str, str] = field(default_factory=dict)  # the code of each signal error

    def actions(self, name: str) -> list[Any]:
        """Parameters of every effect of action `name`, in order."""
        return [e.params for e in self.effects if e.action == name]
