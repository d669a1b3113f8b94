"""`router replay`: recorded Pi sessions through the policy, offline (docs/replay.md)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from router.commands import policy_note, replay_policies, report
from router.commands.explain import load
from router.compile.ir import CompiledPolicy
from router.diagnostics.diagnostic import render_text
from router.replay.parallel import job_count
from router.replay.render import replay_json, replay_text
from router.replay.report_data import from_runs
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
    found, notes = replay_policies.groups(inputs.sessions, policy, given=bool(policy_files))
    for line in notes + replay_policies.digest_warnings(found, inputs.log):
        print(line, file=sys.stderr)
    runs = replay_groups(found, inputs, progress=options.progress, jobs=job_count(options.jobs))
    projects = replay_policies.projects(inputs.sessions)
    replay_policies.stamp(runs, projects)
    warn_problems(inputs, runs)
    baseline = baseline_of(options, inputs)
    if options.html is not None:
        figures = from_runs(runs, inputs.sessions, inputs.catalog, baseline, report.title_of("Replay", runs))
        figures.policy = report.policy_rows(policy)
        problem = report.write(options.html, figures)
        if problem:
            return 1, problem
        print(report.written(options.html, figures), file=sys.stderr)
    total = summarize(runs, inputs.catalog, baseline)
    code = 1 if any(r.error is not None for r in runs) else 0  # a session that could not be replayed
    if options.summary:
        if fmt == "json":
            return code, summary_json(total, runs, inputs, policy_note.files_json(policy.files), projects)
        return code, summary_text(total, runs, inputs, policy_note.policy_line(policy.files))
    per_session = [(r, _one(r, inputs, baseline)) for r in runs]
    if fmt == "json":
        return code, replay_json(total, per_session, inputs, policy_note.files_json(policy.files), projects)
    return code, replay_text(total, per_session, inputs, policy_note.policy_line(policy.files))


def replay_groups(found: list[replay_policies.Group], inputs: Inputs, *, progress: bool,
                  jobs: int = 1) -> list[SessionRun]:
    """Each group's sessions through its policy, the runs in the sessions' order; the totals'
    tiers and baseline see every policy's prices (the current policy's last, so they win)."""
    runs: dict[str, SessionRun] = {}
    for group in reversed(found):
        inputs.catalog.declare(group.policy.prices)
        for run in replay_all(group.policy, replace(inputs, sessions=group.sessions), progress=progress,
                              jobs=jobs):
            runs[run.path] = run
    return [runs[s.path] for s in inputs.sessions if s.path in runs]


def _one(run: SessionRun, inputs: Inputs, baseline: str | None) -> Summary:
    summary = Summary(baseline_model=baseline)
    add_run(summary, run, inputs.catalog)
    return summary
