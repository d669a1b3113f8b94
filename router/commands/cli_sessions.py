"""The commands over recorded sessions and decisions: replay, diff, log, shadow-report, report."""


from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from router.commands.app import (
    UsageMistake,
    _command,
    _finish,
    _format_option,
)

if TYPE_CHECKING:
    from router.load.prices import Catalog

SessionPaths = Annotated[list[Path], typer.Argument(
    metavar="PATH", help="Pi session files or directories (searched recursively)")]


SessionOption = Annotated[str | None, typer.Option(
    "--session", metavar="S", help="only sessions whose id or path contains S")]


ModelsOption = Annotated[Path | None, typer.Option(
    "--models", metavar="FILE", help="Pi's models.json for prices (default: the agent dir's)")]


BaselineOption = Annotated[str | None, typer.Option(
    "--baseline", metavar="REF", help="the model of the all-cloud cost baseline (default: the priciest)")]


LogOption = Annotated[Path | None, typer.Option(
    "--log", metavar="PATH", help="a log directory or file (default: the agent dir's router/log)")]


SinceOption = Annotated[str | None, typer.Option(
    "--since", metavar="T", help="only decisions since T: a duration (10m, 2h, 1d) or an ISO time")]


@_command("router replay ~/.pi/agent/sessions --format json")
def replay(
    paths: SessionPaths,
    policy: Annotated[list[Path] | None, typer.Option(
        "--policy", "-p", metavar="FILE",
        help="policy file instead of the layered policy (repeatable)")] = None,
    log: LogOption = None,
    fmt: Annotated[str, _format_option("text", "json")] = "text",
    session: SessionOption = None,
    models: ModelsOption = None,
    baseline: BaselineOption = None,
    html: Annotated[Path | None, typer.Option(
        "--html", metavar="FILE", help="also write the replayed decisions as one HTML page")] = None,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", metavar="N", min=0,
        help="replay in N worker processes (0: one per core); the output is the same as with 1")] = 1,
    summary: Annotated[bool, typer.Option(
        "--summary", help="totals only (sessions, turns, changed turns, cost): no per-session rows")] = False,
) -> None:
    """Replay recorded Pi sessions through the policy, offline.

    Rebuilds each session's events from Pi's session files, evaluates them with recorded signal
    values (the decision log) or the signals' fallbacks, and totals rules, models, tools and cost.
    """
    from router.commands import replay as command

    options = command.Options(list(paths), log=log, session=session, models=models, baseline=baseline,
                              html=html, jobs=jobs, summary=summary)
    _finish(*command.run(options, policy_files=policy or [], fmt=fmt))


@_command("router diff main:.pi/router.yaml .pi/router.yaml --sessions dir/ -f markdown")
def diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="policy file or git revision (REV:PATH)")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="policy file or git revision (REV:PATH)")],
    sessions: Annotated[list[Path] | None, typer.Option(
        "--sessions", metavar="PATH", help="Pi session files or directories (repeatable)")] = None,
    log: LogOption = None,
    fmt: Annotated[str, _format_option("text", "markdown", "json")] = "text",
    fail_on_change: Annotated[bool, typer.Option(
        "--fail-on-change", hidden=True, help="kept for scripts: a change always exits 1")] = False,
    session: SessionOption = None,
    models: ModelsOption = None,
    baseline: BaselineOption = None,
    html: Annotated[Path | None, typer.Option(
        "--html", metavar="FILE",
        help="also write the new policy's replay and the changed turns as one HTML page")] = None,
) -> None:
    """Compare two policies on recorded sessions, turn by turn.

    Shows the rules, vars and settings the two differ in, each turn whose model, tools, compaction
    or answer changes, and the cost delta. REV:PATH reads the tree at REV (the files PATH uses and
    the lock committed there). Exit 0: nothing changed; 1: a turn or how often a rule fires
    changed; 2: no comparison (a usage mistake, a side that does not compile, no sessions).
    """
    from router.commands import diff as command

    del fail_on_change  # a change exits 1 with or without it
    if not sessions:
        raise UsageMistake("diff needs recorded sessions", "router diff OLD NEW --sessions PATH")
    options = command.Options(list(sessions), log=log, session=session, models=models, baseline=baseline,
                              html=html)
    _finish(*command.run(old, new, options, fmt=fmt))


def _catalog(models: Path | None) -> Catalog:
    """The prices a report of the decision log uses: Pi's models.json (`--models`, else the agent
    dir's) and the `provides.prices` of the policy in force here, as `router replay` prices turns
    (a note on stderr when that policy does not compile: the registry's prices alone then)."""
    from router.commands.replay import load_policy
    from router.load.paths import agent_dir
    from router.load.prices import read_catalog

    catalog = read_catalog(models or agent_dir() / "models.json")
    policy, _ = load_policy([])
    if policy is None:
        typer.echo("note: the policy here does not compile (router lint): its provides.prices are not "
                   "used", err=True)
    else:
        catalog.declare(policy.prices)
    return catalog


def _log_records(log: Path | None, since: str | None) -> tuple[list[dict[str, Any]], str]:
    """The decision records of the log (filtered by `since`) and a note on skipped lines."""
    from router.commands.log import default_location
    from router.replay.log_files import Filter, ReadStats, read_records, resolve_files

    keep = Filter(since=_since(since))
    stats = ReadStats()
    records = [r for r in read_records(resolve_files(log or default_location()), stats) if keep(r)]
    return records, (f"skipped {stats.skipped} line(s) that are not JSON records" if stats.skipped else "")


def _since(text: str | None) -> Any:
    from router.replay.log_files import SinceError, parse_since

    if text is None:
        return None
    try:
        return parse_since(text)
    except SinceError as exc:
        raise UsageMistake(str(exc), "router log --since 2h") from None


@_command("router log --since 2h --rule block-rm", name="log")
def log_(
    follow: Annotated[bool, typer.Option(
        "--follow", "-F", help="keep printing decisions as they come")] = False,
    session: Annotated[str | None, typer.Option(
        "--session", metavar="S", help="only this session (an id or its first characters)")] = None,
    project: Annotated[str | None, typer.Option(
        "--project", metavar="P",
        help="only this project: its name, its digest's first characters, or its directory "
        "(a path with a `/`, or `.`)")] = None,
    rule: Annotated[str | None, typer.Option(
        "--rule", metavar="R", help="only decisions where rule R fired (or would, shadow)")] = None,
    since: SinceOption = None,
    fmt: Annotated[str, _format_option("text", "json")] = "text",
    log: LogOption = None,
) -> None:
    """Show the decision log, one line per decision.

    Reads the rotated files oldest first; --format json prints one object per decision.
    """
    from router.commands import log as command
    from router.replay.log_files import Filter

    keep = Filter(session=session, rule=rule, since=_since(since), project=command.project_wanted(project))
    try:
        code, note = command.run(log or command.default_location(), keep=keep, fmt=fmt, follow_log=follow)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    _finish(code, note, err=True)


@_command("router shadow-report --since 7d", name="shadow-report")
def shadow_report(fmt: Annotated[str, _format_option("text", "json")] = "text", log: LogOption = None,
                  since: SinceOption = None, models: ModelsOption = None) -> None:
    """How the rules marked `shadow: true` would have done.

    From the decision log: how often each would have fired, whether the model, tools or block it
    would have led to are what the session had, the cost of its turns on its model, and an example
    of each disagreement.
    """
    from router.commands import shadow_report as command

    records, note = _log_records(log, since)
    if note:
        typer.echo(note, err=True)
    stats = command.shadow_stats(records, _catalog(models))
    render = command.render_json if fmt == "json" else command.render_text
    _finish(0, render(stats, decisions=len(records)))


@_command("router report --html report.html --since 7d", name="report")
def report(
    html: Annotated[Path, typer.Option("--html", metavar="FILE", help="the HTML file to write")],
    log: LogOption = None,
    since: SinceOption = None,
    title: Annotated[str, typer.Option(
        "--title", metavar="TEXT", help="the page's title")] = "Router decisions",
    models: ModelsOption = None,
    baseline: BaselineOption = None,
) -> None:
    """Write one self-contained HTML page about the decision log.

    Turns by model and tier (turns, tokens, cost), the saving against all-cloud, cost over time,
    per project, session and rule, blocked tool calls, fallbacks, the policy version; no network.
    """
    from router.commands import report as command
    from router.replay.report_data import from_log

    records, note = _log_records(log, since)
    if note:
        typer.echo(note, err=True)
    catalog = _catalog(models)
    figures = from_log(records, catalog, baseline or catalog.priciest(), title)
    figures.policy = command.recorded_policies(records)
    problem = command.write(html, figures)
    if problem:
        _finish(1, problem, err=True)
    _finish(0, command.written(html, figures))
