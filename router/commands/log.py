"""`router log`: the decision log, one line (or one JSON object) per decision."""

from __future__ import annotations

import bisect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from router.load.paths import LOG_NAME, agent_dir, log_dir
from router.load.prices import usd
from router.replay.log_files import (
    Filter,
    ReadStats,
    actions_of,
    fired_ids,
    follow,
    project_of,
    read_records,
    resolve_files,
    shadow_ids,
)

PARAM_WIDTH = 60


def default_location() -> Path:
    return log_dir(agent_dir())


def project_wanted(value: str | None) -> str | None:
    """What `--project` filters by: a name or a digest's first characters as given; a directory
    (`.`, or a path with a `/`) as the digest its records have, keyed with this agent dir's
    decision-log key (docs/security.md), since a keyed digest cannot be worked out by hand."""
    if value is None or not (value == "." or "/" in value):
        return value
    from router.load.paths import project_identity
    from router.runtime.decision_log import digest_key

    path = Path(value).expanduser()
    if not path.is_dir():
        return value
    identity = project_identity(path, digest_key(agent_dir()))
    return (identity or {}).get("digest") or value


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """What `--format json` prints for a decision: the record's main fields, `rules` as the ids
    that fired."""
    shown = {"time": record.get("time"), "session": record.get("session"),
             **({"project": record["project"]} if "project" in record else {}), "event": record.get("event"),
             "seq": record.get("seq"), "rules": fired_ids(record),
             "actions": [{"action": a.get("action"), "params": a.get("params"), "rule": a.get("rule")}
                         for a in actions_of(record)],
             "model": record.get("model"), "latency_ms": record.get("latency_ms"),
             "shadow": shadow_ids(record), "policy": record.get("policy")}
    for key in ("tier", "cost", "price_source", "tokens", "errors", "text"):
        if key in record:
            shown[key] = record[key]
    return shown


MIN_ID = 8  # the fewest characters of a session id shown


class SessionIds:
    """Session ids shortened as git shortens hashes: the fewest characters (at least MIN_ID) that
    tell apart every session seen so far. Pi's ids are UUIDv7, whose first characters are a
    timestamp: sessions started within seconds share their first 8. Kept sorted, so a new id is
    compared with its two neighbours only (the longest shared prefix is always a neighbour's)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._sorted: list[str] = []
        self.width = MIN_ID
        self.projects = False  # whether any record shown has a project (the column shows then)

    def add_record(self, record: dict[str, Any]) -> None:
        self.add(str(record.get("session") or "-"))
        self.projects = self.projects or isinstance(record.get("project"), dict)

    def add(self, session: str) -> None:
        if session in self.seen:
            return
        at = bisect.bisect_left(self._sorted, session)
        for other in self._sorted[max(0, at - 1):at + 1]:
            self.width = max(self.width, _common(session, other) + 1)
        self._sorted.insert(at, session)
        self.seen.add(session)

    def short(self, session: str) -> str:
        return session[: self.width]


def _common(a: str, b: str) -> int:
    """The length of the prefix two ids share."""
    length = 0
    while length < min(len(a), len(b)) and a[length] == b[length]:
        length += 1
    return length


def project_label(record: dict[str, Any]) -> str:
    """The project column: its name, else the first 8 digits of its digest, else `-`."""
    name, digest = project_of(record)
    return name or (digest[:MIN_ID] if digest else "-")


def text_line(record: dict[str, Any], ids: SessionIds | None = None) -> str:
    """`11:00:00.123 3f2a9c1e shop-api tool_call#3 block-rm: block(reason=…) [fake/m1] 1.2ms`
    (the project column only in a log whose records have projects)."""
    moment = str(record.get("time") or "?")
    full = str(record.get("session") or "-")
    session = ids.short(full) if ids is not None else full[:MIN_ID]
    event = f"{record.get('event')}#{record.get('seq')}"
    fired = fired_ids(record)
    actions = ", ".join(_action(a) for a in actions_of(record)) or "no action"
    with_project = ids.projects if ids is not None else "project" in record
    head = f"{moment} {session} {project_label(record) + ' ' if with_project else ''}{event}"
    body = f"{','.join(fired)}: {actions}" if fired else "no rule fired"
    extra = [f"[{record['model']}]"] if record.get("model") else []
    shadow = shadow_ids(record)
    if shadow:
        extra.append("shadow:" + ",".join(shadow))
    extra += _cost(record)
    latency = record.get("latency_ms")
    if isinstance(latency, (int, float)):
        extra.append(f"{latency:.1f}ms")
    return " ".join([head, body, *extra])


def _cost(record: dict[str, Any]) -> list[str]:
    """A turn's cost and where its price came from (`$0.0042 registry`), `cost unknown` for a turn
    whose model has no price; nothing for a record that is not a turn's."""
    cost, source = record.get("cost"), record.get("price_source")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return [f"{usd(float(cost))}" + (f" {source}" if isinstance(source, str) else "")]
    return ["cost unknown"] if isinstance(record.get("tokens"), dict) else []


def _action(action: dict[str, Any]) -> str:
    params = action.get("params")
    if params is None or params == {}:
        return str(action.get("action"))
    text = json.dumps(params, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) > PARAM_WIDTH:
        text = text[: PARAM_WIDTH - 1] + "…"
    return f"{action.get('action')}({text})"


def render(record: dict[str, Any], fmt: str, ids: SessionIds | None = None) -> str:
    if fmt == "json":
        return json.dumps(summary(record), ensure_ascii=False, separators=(",", ":"), default=str)
    return text_line(record, ids)


def run(location: Path, *, keep: Filter, fmt: str, follow_log: bool, out: TextIO = sys.stdout,
        stop: Callable[[], bool] = lambda: False) -> tuple[int, str]:
    """Print the matching decisions (then, with `follow_log`, each new one as it comes)."""
    stats = ReadStats()
    ids = SessionIds()

    def emit(record: dict[str, Any]) -> None:
        if keep(record):
            ids.add_record(record)
            out.write(render(record, fmt, ids) + "\n")
            out.flush()

    if follow_log and location.exists() and not location.is_dir():
        return 2, (f"error: --follow reads a log directory, and {location} is a file\n"
                   f"  help: router log --follow {location.parent}")
    files = resolve_files(location)
    if follow_log:
        files = [f for f in files if f.name != LOG_NAME]  # the live file is read by `follow`
        if not (location / LOG_NAME).exists():
            print(f"waiting for the first decision in {location} (the sidecar writes it once Pi with "
                  "the bridge made a decision; Ctrl-C stops)", file=sys.stderr, flush=True)
    earlier = [record for record in read_records(files, stats) if keep(record)]
    for record in earlier:  # every session (and whether any has a project) is known before the first line
        ids.add_record(record)
    for record in earlier:
        emit(record)
    if follow_log:
        follow(location, emit, start_at_end=False, stop=stop, stats=stats)
    if not files and not follow_log and not location.exists():
        return 0, f"no decision log at {location} (the sidecar writes it once a decision was made)"
    notes = [f"skipped {stats.skipped} line(s) that are not JSON records"] if stats.skipped else []
    if keep.session is not None and len(ids.seen) > 1:
        shown = ", ".join(sorted(ids.short(s) for s in ids.seen)[:5])
        notes.append(f"warning: --session {keep.session} matches {len(ids.seen)} sessions ({shown}); "
                     "give more of the id to pick one")
    return 0, "\n".join(notes)
