"""Text and JSON renderings of a replay."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from router.replay.report_html import MAX_ROWS, cut_field
from router.replay.runner import SessionRun
from router.replay.sources import Inputs
from router.replay.summary import Summary

SIGNAL_WORDS = {"recorded": "from the decision log", "recorded_failure": "recorded as failed (fallback)",
                "fallback": "not recorded (fallback)"}


def replay_json(total: Summary, sessions: list[tuple[SessionRun, Summary]], inputs: Inputs,
                policy_files: list[dict[str, Any]],
                projects: Mapping[str, Mapping[str, str | None]] | None = None) -> str:
    """`projects`: session path -> the session's `{name, digest}` (as the live record has it)."""
    projects = projects or {}
    body = {**total.to_dict(), "policy": policy_files, "log": _log(inputs),
            "per_session": [{"id": run.id, "path": run.path, "project": projects.get(run.path),
                             **summary.to_dict(),
                             "turn_outcomes": [{"turn": t.number, "line": t.line, **t.outcome(),
                                                "recorded_model": t.recorded_model,
                                                "estimated_cost": t.estimated_cost,
                                                "recorded_cost": t.recorded_cost}
                                               for t in sorted(run.turns.values(), key=lambda t: t.number)
                                               if t.answered]}
                            for run, summary in sessions]}
    body["problems"] = _problems(total, inputs)
    return json.dumps(body, indent=2, ensure_ascii=False, default=str)


def replay_text(total: Summary, sessions: list[tuple[SessionRun, Summary]], inputs: Inputs,
                policy_line: str) -> str:
    lines = [policy_line, _read_line(inputs), ""]
    for run, summary in sessions:
        lines.append(f"session {cut_field(run.id)} ({run.path}): {summary.events} events, "
                     f"{summary.decisions} evaluated, {summary.turns} turns"
                     + ("" if run.logged else "; not in the decision log"))
        lines.append(f"  models: {_share(summary.models, summary.turns)}")
        if summary.rules:
            lines.append(f"  rules: {_counts(summary.rules)}")
    lines += ["", f"total: {total.sessions} sessions, {total.events} events, {total.decisions} evaluated "
                  f"(decisions), {total.turns} turns"]
    lines += _section(total)
    problems = _problems(total, inputs)
    if problems:
        lines += ["", f"problems ({len(problems)}):",
                  *(f"  {cut_field(p, 400)}" for p in problems[:MAX_ROWS])]
        lines += [f"  … {len(problems) - MAX_ROWS} more"] if len(problems) > MAX_ROWS else []
    return "\n".join(lines)


def _section(total: Summary) -> list[str]:
    lines = [f"  rules fired: {_counts(total.rules) or 'none'}"]
    if total.shadow:
        lines.append(f"  shadow rules (not applied): {_counts(total.shadow)}")
    if total.recorded_rules:
        lines.append(f"  fired when recorded (decision log): {_counts(total.recorded_rules)}")
    lines += [
        f"  models: {_share(total.models, total.turns) or 'none'}",
        f"  recorded models: {_share(total.recorded_models, total.turns) or 'none'}",
        f"  tiers: {_share(total.tiers, total.turns) or 'none'}",
        f"  tool sets: {_counts(total.tools) or 'none'}",
        f"  compactions asked: {total.compactions} (cancelled: {total.cancelled_compactions}); "
        f"answers: {total.answers}; blocked tool calls: {total.blocked}",
        "  signals: " + ", ".join(f"{total.signals.get(k, 0)} {w}" for k, w in SIGNAL_WORDS.items()),
        f"  cost: estimated {total.estimated.text()}; recorded {total.recorded.text()}; all-cloud "
        + (f"({total.baseline_model}) {total.baseline.text()}" if total.baseline_model
           else "unknown (no priced model)"),
    ]
    if total.errors:
        lines.append(f"  evaluation errors: {_counts(total.errors)}")
    return lines


def _problems(total: Summary, inputs: Inputs) -> list[str]:
    return [str(p) for p in inputs.missing] + total.problems + [str(p) for p in inputs.log.problems]


def _read_line(inputs: Inputs) -> str:
    log = inputs.log
    if not log.files:
        logged = "no decision log"
    else:
        skipped = f", {log.skipped} lines skipped" if log.skipped else ""
        logged = f"decision log: {len(log.files)} files, {len(log.records)} records{skipped}"
    models = f"models: {inputs.catalog.source}" if inputs.catalog.source else "models: none (prices unknown)"
    return f"read: {len(inputs.sessions)} session files; {logged}; {models}"


def _log(inputs: Inputs) -> dict[str, Any]:
    return {"files": inputs.log.files, "records": len(inputs.log.records), "skipped": inputs.log.skipped,
            "models": inputs.catalog.source}


def _counts(counter: Counter[str]) -> str:
    return _listed(f"{cut_field(key)} {count}" for key, count in counter.most_common())


def _share(counter: Counter[str], total: int) -> str:
    return _listed(f"{cut_field(key)} {count} ({count * 100 / total:.0f}%)"
                   for key, count in counter.most_common() if total)


def _listed(items: Iterable[str]) -> str:
    """At most MAX_ROWS items, comma separated; the rest counted (a page of bounded size)."""
    shown = list(items)
    more = f", … {len(shown) - MAX_ROWS} more" if len(shown) > MAX_ROWS else ""
    return ", ".join(shown[:MAX_ROWS]) + more
