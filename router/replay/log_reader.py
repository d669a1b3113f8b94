"""A reader of the decision log (`<agent dir>/router/log/decisions*.jsonl`).

One JSON object per line (`v`, `time`, `session`, `event`, `seq`, `rules`, `actions`,
`signals`, `model`, ...); unknown fields are ignored, unparsable lines skipped and counted.
Rotated files are read oldest first: `decisions.N.jsonl` ... `decisions.1.jsonl`, then
`decisions.jsonl`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.load.paths import display_path, log_order
from router.replay.session_file import Problem

MAX_PROBLEMS = 20  # problems kept for the report; the rest are only counted


@dataclass(frozen=True)
class Record:
    """The fields of one decision record the replay uses."""

    session: str
    event: str
    seq: int
    rules: tuple[str, ...]  # the ids that fired
    actions: tuple[dict[str, Any], ...]
    signals: dict[str, dict[str, Any]]
    model: str | None
    policy: str | None = None  # the digest of the policy in force (`sha256:…`)
    time: str | None = None  # when it was decided (UTC ISO)


@dataclass
class DecisionLog:
    """Records by (session, event type, seq), and what could not be read."""

    records: dict[tuple[str, str, int], Record] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    skipped: int = 0
    problems: list[Problem] = field(default_factory=list)
    _index: dict[str, list[Record]] | None = field(default=None, repr=False)
    _indexed: int = field(default=0, repr=False)

    def get(self, session: str, event: str, seq: int) -> Record | None:
        return self.records.get((session, event, seq))

    def sessions(self) -> set[str]:
        return set(self._by_session())

    def of_session(self, session: str) -> list[Record]:
        """The records of one session, in log order."""
        return self._by_session().get(session, [])

    def _by_session(self) -> dict[str, list[Record]]:
        if self._index is None or self._indexed != len(self.records):
            self._index = {}
            for record in self.records.values():
                self._index.setdefault(record.session, []).append(record)
            self._indexed = len(self.records)
        return self._index

    def skip(self, problem: Problem) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)


def read_logs(paths: Iterable[Path]) -> DecisionLog:
    """Read log files in rotation order; a later record of the same key replaces an earlier one."""
    log = DecisionLog()
    for path in log_order(paths):
        shown = display_path(path)
        log.files.append(shown)
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError as exc:
            log.skip(Problem(shown, 0, f"cannot read: {exc.strerror or exc}"))
            continue
        for number, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                _add(log, line, shown, number)
    return log


def _add(log: DecisionLog, line: str, path: str, number: int) -> None:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        log.skip(Problem(path, number, "not JSON; skipped"))
        return
    record = parse_record(data)
    if record is None:
        log.skip(Problem(path, number, "not a decision record (needs session, event, seq); skipped"))
        return
    log.records[(record.session, record.event, record.seq)] = record


def parse_record(data: Any) -> Record | None:
    """A Record from one decoded line, None when the key fields are missing or of the wrong type."""
    if not isinstance(data, dict):
        return None
    session, event, seq = data.get("session"), data.get("event"), data.get("seq")
    if not isinstance(session, str) or not isinstance(event, str) or not event \
            or not isinstance(seq, int) or isinstance(seq, bool):
        return None
    rules = _list(data.get("rules"))
    fired = tuple(str(r.get("id")) for r in rules if isinstance(r, dict) and r.get("fired") is True)
    actions = _list(data.get("actions"))
    raw_signals = data.get("signals")
    signals: dict[str, Any] = raw_signals if isinstance(raw_signals, dict) else {}
    model, policy, moment = data.get("model"), data.get("policy"), data.get("time")
    return Record(session, event, seq, fired, tuple(a for a in actions if isinstance(a, dict)),
                  {str(k): v for k, v in signals.items() if isinstance(v, dict)},
                  model if isinstance(model, str) else None, policy if isinstance(policy, str) else None,
                  moment if isinstance(moment, str) else None)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
