"""The HTML reports of `router report`, `router replay --html` and `router diff --html`: the figures
(router/replay/report_data.py) with the policy version in force, written by the one renderer
(router/replay/report_html.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from router.compile.ir import CompiledPolicy
from router.replay.log_files import record_time
from router.replay.report_data import Figures
from router.replay.report_html import render
from router.runtime.decision_record import policy_digest


def policy_rows(policy: CompiledPolicy) -> list[tuple[str, str]]:
    """The policy a replay ran: its digest (as decision records name it), files and git commits."""
    rows = [("digest", policy_digest(policy))]
    rows += [("file", f.label) for f in policy.files if f.used_by is None and f.origin is None]
    rows += [("git source", f"{f.origin.repo} @ {f.origin.commit} ({f.origin.path})")
             for f in policy.files if f.origin is not None]
    return rows


def recorded_policies(records: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The policy digests the records name: decisions, first and last time of each."""
    counts: Counter[str] = Counter()
    spans: dict[str, list[str]] = {}
    commits: dict[str, str] = {}
    for record in records:
        digest = record.get("policy")
        if not isinstance(digest, str) or not digest:
            continue
        counts[digest] += 1
        moment = record_time(record)
        if moment is not None:
            spans.setdefault(digest, []).append(moment.isoformat(timespec="seconds"))
        version = record.get("policy_version")
        if isinstance(version, (str, dict)) and version:
            commits[digest] = str(version)
    rows = []
    for digest, count in counts.most_common():
        times = sorted(spans.get(digest, []))
        when = f", {times[0]} to {times[-1]}" if times else ""
        rows.append(("digest", f"{digest} ({plural(count, 'decision')}{when})"))
        if digest in commits:
            rows.append(("version", commits[digest]))
    return rows


def write(path: Path, figures: Figures) -> str | None:
    """Write the page; what went wrong, if anything (never a traceback)."""
    try:
        path.write_text(render(figures), encoding="utf-8")
    except OSError as exc:
        return f"error: cannot write {path}: {exc.strerror or exc}"
    return None


def written(path: Path, figures: Figures) -> str:
    return f"wrote {path} ({plural(len(figures.turns), 'turn')}, {plural(len(figures.records), 'decision')})"


def change_rows(changes: Iterable[Any]) -> list[dict[str, Any]]:
    """`router diff`'s changed turns as the report's rows: one per changed aspect."""
    from router.replay.diff import _show, _signed

    rows = []
    for change in changes:
        for index, (aspect, (old, new)) in enumerate(change.changes.items()):
            delta = _signed(change.cost_delta) if index == 0 and change.cost_delta is not None else None
            rows.append({"session": change.session, "turn": change.turn, "what": aspect,
                         "old": _show(aspect, old), "new": _show(aspect, new), "delta": delta})
    return rows


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def title_of(kind: str, sessions: Sequence[Any]) -> str:
    return f"{kind} of {plural(len(sessions), 'session')}"
