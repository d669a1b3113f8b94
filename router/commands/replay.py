"""`router replay`: recorded Pi sessions through the policy, offline (docs/replay.md)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.commands import policy_note
from router.commands.explain import load
from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import render_text
from router.replay.parallel import job_count
from router.replay.render import replay_json, replay_text
from router.replay.report_html import render
from router.replay.runner import SessionRun
from router.replay.session_file import Problem
from router.replay.sources import Inputs, gather, replay_all
from router.replay.summary import Summary, add_run, summarize
from router.replay.summary_render import summary_json, summary_text

NO_SESSIONS = "no Pi session files found in {paths} (Pi writes them under ~/.pi/agent/sessions/)"


@dataclass
class Options:
    """What `router replay` and `router diff` share."""

    paths: list[Path]
    log: Path | None = None
    session: str | None = None
    models: Path | None = None
    baseline: str | None = None
    progress: bool = True
    html: Path | None = None  # replay only: also write the replayed decisions as an HTML report
    jobs: int = 1  # worker processes (0: one per core)
    summary: bool = False  # replay only: the totals, without per-session rows


def load_policy(files: list[Path]) -> tuple[CompiledPolicy | None, str]:
    """The given policy files (with what they use), else the layered policy as `router explain`
    resolves it; on errors None and the rendered diagnostics."""
    loaded = load(files, cwd=Path.cwd())
    if loaded.policy is None:
        return None, render_text(loaded.diagnostics)
    return loaded.policy, ""


def read_inputs(options: Options) -> Inputs:
    """The sessions to replay; a file in which no line is a session entry (a text file, another
    program's JSON) is left out with a warning, so a run of only such files is an error."""
    inputs = gather(options.paths, log=options.log, models=options.models, session=options.session)
    unusable = [s for s in inputs.sessions if not s.entries and s.problems]
    inputs.missing += [Problem(s.path, 0, f"not a Pi session file: none of its lines is a session entry "
                               f"({_first_skipped(s.problems)}); skipped") for s in unusable]
    inputs.sessions = [s for s in inputs.sessions if s not in unusable]
    return inputs


def warn_problems(inputs: Inputs, runs: list[SessionRun]) -> None:
    """Unreadable files and lines on stderr, one `path:line: reason` each."""
    for problem in [*inputs.missing, *inputs.log.problems, *(p for r in runs for p in r.problems)]:
        print(f"warning: {problem}", file=sys.stderr)


def _first_skipped(problems: list[Problem]) -> str:
    first = next((p for p in problems if p.message.endswith("skipped")), problems[0])
    return f"line {first.line}: {first.message.removesuffix('; skipped')}" if first.line else first.message


def baseline_of(options: Options, inputs: Inputs) -> str | None:
    return options.baseline or inputs.catalog.priciest()


def run(options: Options, *, policy_files: list[Path], fmt: str) -> tuple[int, str]:
    policy, errors = load_policy(policy_files)
    if policy is None:
        return 1, errors
    inputs = read_inputs(options)
    if not inputs.sessions:
        warn_problems(inputs, [])
        return 1, "error: " + NO_SESSIONS.format(paths=", ".join(str(p) for p in options.paths))
    runs = replay_all(policy, inputs, progress=options.progress, jobs=job_count(options.jobs))
    warn_problems(inputs, runs)
    if options.html is not None:
        problem = write_report(options.html, [record for r in runs for record in r.records],
                               f"Replay of {len(runs)} session{'s' if len(runs) != 1 else ''}")
        if problem:
            return 1, problem
    baseline = baseline_of(options, inputs)
    total = summarize(runs, inputs.catalog, baseline)
    code = 1 if any(r.error is not None for r in runs) else 0  # a session that could not be replayed
    if options.summary:
        if fmt == "json":
            return code, summary_json(total, runs, inputs, policy_note.files_json(policy.files))
        return code, summary_text(total, runs, inputs, policy_note.policy_line(policy.files))
    per_session = [(r, _one(r, inputs, baseline)) for r in runs]
    if fmt == "json":
        return code, replay_json(total, per_session, inputs, policy_note.files_json(policy.files))
    return code, replay_text(total, per_session, inputs, policy_note.policy_line(policy.files))


def write_report(path: Path, records: list[dict[str, Any]], title: str) -> str | None:
    """Write the HTML report of `records` (router/replay/report_html.py); what went wrong, if anything."""
    try:
        path.write_text(render(records, title), encoding="utf-8")
    except OSError as exc:
        return f"error: cannot write {path}: {exc.strerror or exc}"
    print(f"wrote {path} ({len(records)} decisions)", file=sys.stderr)
    return None


def _one(run: SessionRun, inputs: Inputs, baseline: str | None) -> Summary:
    summary = Summary(baseline_model=baseline)
    add_run(summary, run, inputs.catalog)
    return summary
