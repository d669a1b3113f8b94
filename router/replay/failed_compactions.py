"""Failed compactions, which Pi's session file does not record, rebuilt from the decision log.

Pi writes a `compaction` entry when a compaction succeeds and nothing when it fails (it fires
`session_compact_failed` and moves on). The decision log knows of a failure in two ways: a
`compaction_failed` record (the recorded policy had a rule for it), or a `compact` action after
which the session has no `compaction` entry before the next prompt and no failure record (the
bridge's compaction failed, e.g. "Nothing to compact"). Each becomes a `compaction_failed` step,
placed after the last entry written before the record's time. The error text is not known (the
log keeps only a stub of it), so the step's `errorMessage` is empty.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from datetime import datetime

from router.replay.log_reader import Record
from router.replay.rebuild import Step
from router.replay.session_file import SessionFile

FAILED = "compaction_failed"


def with_failed_compactions(steps: list[Step], session: SessionFile, records: Iterable[Record]) -> list[Step]:
    """`steps` with a `compaction_failed` step for each failure the log shows (none: `steps` itself)."""
    failures = _failures(session, sorted((r for r in records if _time(r.time) is not None),
                                         key=lambda r: _time(r.time) or datetime.min))
    if not failures:
        return steps
    out = list(steps)
    for line, payload in sorted(failures, key=lambda f: f[0], reverse=True):
        at = next((i for i in range(len(out) - 1, -1, -1) if out[i].line <= line), -1)
        out.insert(at + 1, Step(FAILED, payload, line, out[at].turn if at >= 0 else 0))
    return out


def _failures(session: SessionFile, records: list[Record]) -> list[tuple[int, dict[str, object]]]:
    """(the line of the entry before it, payload) of each failed compaction."""
    moments = [(t, e.line) for e in session.entries if (t := _time(e.data.get("timestamp"))) is not None]
    moments.sort()
    times = [t for t, _ in moments]
    compactions = [t for t, line in moments
                   if any(e.line == line and e.type == "compaction" for e in session.entries)]
    found: list[tuple[int, dict[str, object]]] = []
    asked: datetime | None = None  # a `compact` action still waiting for its outcome
    for record in records:
        moment = _time(record.time) or datetime.min
        if asked is not None and any(asked < t <= moment for t in compactions):
            asked = None  # it succeeded: the session has its compaction
        if record.event == FAILED:
            found.append((_line_at(moments, times, moment), _payload(by_router=asked is not None)))
            asked = None
        elif asked is not None and record.event in ("input", "compaction_done"):
            if record.event == "input":  # the next prompt came, and no compaction before it
                found.append((_line_at(moments, times, asked), _payload(by_router=True)))
            asked = None
        if any(a.get("action") == "compact" for a in record.actions):
            asked = moment
    if asked is not None and not any(asked < t for t in compactions):
        found.append((_line_at(moments, times, asked), _payload(by_router=True)))
    return found


def _payload(*, by_router: bool) -> dict[str, object]:
    return {"reason": "manual" if by_router else "threshold", "byRouter": by_router, "errorMessage": "",
            "aborted": False}


def _line_at(moments: list[tuple[datetime, int]], times: list[datetime], moment: datetime) -> int:
    """The line of the last entry written at or before `moment` (0: before every entry)."""
    at = bisect.bisect_right(times, moment)
    return moments[at - 1][1] if at else 0


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
