"""What the replay knows of an event's external signals: the value recorded in the decision log,
a recorded failure, or nothing (the signal's fallback applies), and the outcomes mapping that
answers each signal where the evaluation first reads it (docs/decisions.md, "External signals
answered where they are read")."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from router.compile.ir import CompiledPolicy
from router.engine.decision import SignalOutcome
from router.replay.log_reader import Record

NOT_RECORDED = "not recorded in the decision log (replay): the fallback applies"
RECORDED_FAILURE = "failed when recorded"
SOURCES = ("recorded", "recorded_failure", "fallback")


def known(record: Record | None, name: str) -> tuple[str, SignalOutcome | None]:
    """What the replay knows of external signal `name` (its source in SOURCES) and the outcome it
    gives; None for a value recorded as computed (given as a value: a stub of one is not)."""
    recorded = record.signals.get(name) if record is not None else None
    if recorded is not None and recorded.get("source") in ("live", "cache") and "value" in recorded \
            and not recorded.get("redacted"):
        return "recorded", None
    if recorded is not None:
        return "recorded_failure", SignalOutcome(error=str(recorded.get("error") or RECORDED_FAILURE))
    return "fallback", SignalOutcome(error=NOT_RECORDED)


def give(record: Record | None, name: str, values: dict[str, Any], outcomes: dict[str, SignalOutcome]) -> str:
    """Give the pending external signal `name` what the replay knows of it (its recorded value in
    `values`, else its outcome in `outcomes`); its source (SOURCES)."""
    source, outcome = known(record, name)
    if outcome is None:
        assert record is not None  # only a record has a value
        values[name] = record.signals[name]["value"]
    else:
        outcomes[name] = outcome
    return source


class Answers(Mapping[str, SignalOutcome]):
    """The outcomes of one event's external signals as the replay knows them, each made when the
    evaluation first reads it (the order `take` gives their sources in); a signal recorded with its
    value has none here (it is given as a value)."""

    def __init__(self, policy: CompiledPolicy, record: Record | None) -> None:
        self.policy, self.record = policy, record
        self.given: dict[str, SignalOutcome] = {}
        self._read: list[str] = []

    def get(self, name: str, default: Any = None) -> Any:
        found = self.given.get(name)
        if found is not None:
            return found
        spec = self.policy.signals.get(name)
        if spec is None or not spec.external:
            return default
        source, outcome = known(self.record, name)
        if outcome is None:
            return default
        self.given[name] = outcome
        self._read.append(source)
        return outcome

    def take(self) -> list[str]:
        """The sources of the outcomes made since the last call, in the order they were read."""
        read, self._read = self._read, []
        return read

    def __getitem__(self, name: str) -> SignalOutcome:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(self.given)

    def __len__(self) -> int:
        return len(self.given)
