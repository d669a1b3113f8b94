"""What `lint`, `test`, `explain` and `doctor` say about the policy files they used.

Text output gets a `policy:` line on stderr (stdout stays parseable), JSON output a `files` field.
Run from a subdirectory of a project, they also warn that the project's `.pi/router.yaml` above
would not be loaded by a Pi started here: Pi reads `.pi/` in its working directory only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from router.load.loader import PolicyFile, describe_files
from router.load.paths import display_path, project_policy_above


def policy_line(files: Iterable[PolicyFile], *, named: Path | None = None) -> str:
    """`policy: default pack, ~/.pi/agent/router.yaml, .pi/router.yaml (+ decision pack via use:)`;
    `named` is the file asked for, mentioned when it did not load."""
    loaded = list(files)
    if named is not None and not any(f.source == named.resolve() for f in loaded):
        return f"policy: {display_path(named)} (does not load)"
    return "policy: " + describe_files(loaded)


def failure_line(failure: Mapping[str, str], event_type: str | None = None) -> str | None:
    """`if the engine cannot answer: tool_call refused (failure policy closed) …`, for the events
    that fail closed (only `event_type`'s when given); None when none does."""
    closed = [event for event, mode in failure.items() if mode == "closed"
              and (event_type is None or event == event_type)]
    if not closed:
        return None
    return (f"if the engine cannot answer: {', '.join(closed)} refused (failure policy closed); "
            "other events go on as Pi would")


def files_json(files: Iterable[PolicyFile]) -> list[dict[str, Any]]:
    """The files as JSON records, each file once (the first time it appears)."""
    records: dict[str, dict[str, Any]] = {}
    for f in files:
        record = f.to_dict()
        records.setdefault(str(record["path"]), record)
    return list(records.values())


def not_loaded(cwd: Path) -> list[dict[str, str]]:
    """Project files near `cwd` that a Pi started in `cwd` would not load, with where to start it."""
    above = project_policy_above(cwd)
    if above is None:
        return []
    root = above.parent.parent
    return [{"path": display_path(above), "start_pi_in": display_path(root),
             "reason": "Pi reads .pi/ only in its working directory, not in its parents"}]


def warning_text(item: dict[str, str]) -> str:
    """What to say about one entry of `not_loaded`."""
    return (f"{item['path']} would NOT be loaded by a Pi started here ({item['reason']}); "
            f"start pi in {item['start_pi_in']}")


def warning_lines(items: Iterable[dict[str, str]]) -> list[str]:
    """One `warning:` line per entry of `not_loaded`."""
    return [f"warning: {warning_text(item)}" for item in items]


def emit(lines: Iterable[str]) -> None:
    """Write notes to stderr, so that stdout holds only the command's own output."""
    for line in lines:
        print(line, file=sys.stderr)
