"""`router replay --summary`: the totals of a large corpus, without per-session or per-turn rows.

Sessions (and those that failed, each named), events, decisions, turns, the turns whose model the
replayed policy changes, the model and tier shares, and the cost: estimated against the recorded
cost and the all-cloud baseline, each with how its turns were priced (registry, policy, local).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from router.load.prices import usd
from router.replay.render import SIGNAL_WORDS, _counts, _problems, _read_line, _share
from router.replay.report_html import MAX_ROWS, cut_field
from router.replay.runner import SessionRun
from router.replay.sources import Inputs
from router.replay.summary import Summary


def changed_turns(runs: list[SessionRun]) -> int:
    """Answered turns whose replayed model differs from the recorded one."""
    return sum(1 for run in runs for turn in run.turns.values()
               if turn.answered and turn.model != turn.recorded_model)


def saving(total: Summary) -> float | None:
    """All-cloud cost less the estimated cost, when both priced every turn (else no figure)."""
    if total.baseline_model is None or total.estimated.unknown or total.baseline.unknown \
            or not total.estimated.known:
        return None
    return total.baseline.usd - total.estimated.usd


def summary_text(total: Summary, runs: list[SessionRun], inputs: Inputs, policy_line: str) -> str:
    failed = [r for r in runs if r.error is not None]
    changed = changed_turns(runs)
    lines = [policy_line, _read_line(inputs), "",
             f"sessions: {total.sessions} ({len(failed)} failed); events: {total.events}; "
             f"decisions (evaluated events): {total.decisions}; turns: {total.turns}",
             f"turns whose model changes: {changed} of {total.turns}"
             + (f" ({changed * 100 / total.turns:.1f}%)" if total.turns else ""),
             f"models: {_share(total.models, total.turns) or 'none'}",
             f"tiers: {_share(total.tiers, total.turns) or 'none'}",
             f"rules fired: {_counts(total.rules) or 'none'}",
             "signals: " + ", ".join(f"{total.signals.get(k, 0)} {w}" for k, w in SIGNAL_WORDS.items()),
             f"cost: estimated {total.estimated.text()}; recorded {total.recorded.text()}",
             "all-cloud: " + (f"({total.baseline_model}) {total.baseline.text()}" if total.baseline_model
                              else "unknown (no priced model)")]
    cut = saving(total)
    if cut is not None:
        share = f" ({cut * 100 / total.baseline.usd:.1f}%)" if total.baseline.usd else ""
        lines.append(f"saving against all-cloud: {usd(cut)}{share}")
    if total.errors:
        lines.append(f"evaluation errors: {_counts(total.errors)}")
    if failed:
        lines += ["", f"failed sessions ({len(failed)}):",
                  *(f"  {cut_field(r.path, 200)}: {cut_field(r.error or '', 400)}"
                    for r in failed[:MAX_ROWS])]
        lines += [f"  … {len(failed) - MAX_ROWS} more"] if len(failed) > MAX_ROWS else []
    problems = _problems(total, inputs)
    if problems:
        lines += ["", f"problems: {len(problems)} (on stderr, one per line)"]
    return "\n".join(lines)


def project_counts(runs: list[SessionRun], projects: Mapping[str, Mapping[str, str | None]]
                   ) -> list[dict[str, Any]]:
    """The replayed sessions per project (`name`, `digest`, `sessions`), most first; sessions
    without a project are counted under `name` and `digest` null."""
    counts = Counter((projects.get(r.path) or {}).get("digest") for r in runs)
    names = {(p or {}).get("digest"): (p or {}).get("name") for p in projects.values()}
    return [{"name": names.get(digest), "digest": digest, "sessions": n}
            for digest, n in sorted(counts.items(), key=lambda item: (-item[1], item[0] or ""))]


def summary_json(total: Summary, runs: list[SessionRun], inputs: Inputs, policy_files: list[dict[str, Any]],
                 projects: Mapping[str, Mapping[str, str | None]] | None = None) -> str:
    """`projects`: session path -> the session's `{name, digest}` (as the live record has it)."""
    body = {**total.to_dict(), "policy": policy_files, "changed_turns": changed_turns(runs),
            "projects": project_counts(runs, projects or {}),
            "saving": None if (cut := saving(total)) is None else round(cut, 6),
            "failed_sessions": [{"id": r.id, "path": r.path, "error": r.error} for r in runs if r.error],
            "log": {"files": inputs.log.files, "records": len(inputs.log.records),
                    "skipped": inputs.log.skipped, "models": inputs.catalog.source}}
    body["problems"] = _problems(total, inputs)
    return json.dumps(body, indent=2, ensure_ascii=False, default=str)
