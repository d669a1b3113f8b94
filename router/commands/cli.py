"""The `router` command line: each command parses, calls one function, renders, exits.

Exit codes: 0 clean, 1 diagnostics or failing tests, 2 usage, 3 internal error, 130 interrupt.

Help is plain text from click's formatter (no rich panels) with explicit metavars and one
example per command; usage mistakes print `error: …` and one `help:` line, never a traceback.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from router import __version__
from router.diagnostics.errors import RouterError
from router.diagnostics.suggest import closest

F = TypeVar("F", bound=Callable[..., Any])
COMPLETION_OPTIONS = {
    "install_completion": ("--install-completion [SHELL]",
                           "Install tab completion for bash, zsh, fish or powershell "
                           "(default: the current shell)."),
    "show_completion": ("--show-completion [SHELL]",
                        "Print the completion script, to copy it or customize the installation."),
}


class UsageMistake(typer.BadParameter):
    """A usage mistake the router finds itself: an `error:` message and a `help:` hint (exit 2)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def format_message(self) -> str:
        return f"{self.message}\n  help: {self.hint}" if self.hint else self.message


class UnknownCommand(UsageMistake):
    """`router lnt`: names the closest command."""

    def __init__(self, name: str, commands: Iterable[str], command_path: str) -> None:
        guess = closest(name, commands)
        listing = f"'{command_path} -h' lists the commands"
        super().__init__(f"unknown command {name!r}",
                         f"did you mean '{guess}'? ({listing})" if guess else listing)


# ---- help rendering (the same with and without rich, with vendored or separate click) ----

def _option_label(param: Any) -> str:
    if param.name in COMPLETION_OPTIONS:
        return COMPLETION_OPTIONS[param.name][0]
    label = ", ".join(sorted(param.opts, key=len))
    if param.secondary_opts:
        label += " / " + ", ".join(sorted(param.secondary_opts, key=len))
    if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
        label += f" {param.metavar or param.name.upper()}"
    return label


def _argument_label(param: Any) -> str:
    label = str(param.metavar or param.name.upper())
    return f"{label}..." if param.nargs != 1 else label


def _option_help(param: Any) -> str:
    if param.name in COMPLETION_OPTIONS:
        return COMPLETION_OPTIONS[param.name][1]
    return str(param.help or "")


def _format_params(command: Any, ctx: Any, formatter: Any) -> None:
    """Arguments and Options sections: explicit metavars, the help text, no type or default tags."""
    arguments, options = [], []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            arguments.append((_argument_label(param), str(getattr(param, "help", None) or "")))
        else:
            options.append((_option_label(param), _option_help(param)))
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows)


def _usage_pieces(command: Any, ctx: Any) -> list[str]:
    """`[OPTIONS] [PATH]...`: the same brackets whichever click formats it."""
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            label = param.metavar or param.name.upper()
            pieces.append(f"{label if param.required else f'[{label}]'}{'...' if param.nargs != 1 else ''}")
    return pieces


def _format_example(command: Any, formatter: Any) -> None:
    if command.epilog:
        with formatter.section("Example"):
            formatter.write_text(command.epilog)


def _parse_in(parse: Callable[[Any, list[str]], list[str]], ctx: Any, args: list[str]) -> list[str]:
    """Run click's parser, attaching `ctx` to its usage errors (click leaves some without one)."""
    try:
        return parse(ctx, args)
    except Exception as exc:
        if _is_usage_error(exc) and getattr(exc, "ctx", None) is None:
            exc.ctx = ctx  # type: ignore[attr-defined]
            exc.cmd = ctx.command  # type: ignore[attr-defined]
        raise


class RouterCommand(TyperCommand):
    """A command whose help lists plain options and ends with its example (the epilog)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage_pieces(self, ctx)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format_params(self, ctx, formatter)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        _format_example(self, formatter)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return _parse_in(super().parse_args, ctx, args)


class RouterGroup(TyperGroup):
    """The `router` group: plain help, and `unknown command` with a did-you-mean."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format_params(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        _format_example(self, formatter)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return _parse_in(super().parse_args, ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if (name and not name.startswith("-") and not ctx.resilient_parsing
                and self.get_command(ctx, name) is None):
            raise UnknownCommand(name, self.list_commands(ctx), ctx.command_path)
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=RouterGroup,
    help="Policy engine for the Pi coding agent: ordered YAML rules decide models, "
         "tools, compaction and answers.",
    epilog="router lint .pi/router.yaml",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _command(example: str, name: str | None = None) -> Callable[[F], F]:
    """Register a command with its one example."""
    return app.command(name, cls=RouterCommand, epilog=example)


def _either(choices: tuple[str, ...]) -> str:
    """`text, json or sarif`."""
    return ", ".join(choices[:-1]) + f" or {choices[-1]}"


def _choice(*choices: str, what: str) -> dict[str, Any]:
    """Option settings that accept one of `choices` (checked while parsing) and complete them."""
    expected = _either(choices)

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise UsageMistake(f"unknown {what} {value!r}", f"expected {expected}")
        return value

    def complete(incomplete: str) -> list[str]:
        return [c for c in choices if c.startswith(incomplete)]

    return {"callback": check, "autocompletion": complete}


def _format_option(*choices: str) -> Any:
    return typer.Option("--format", "-f", metavar="FORMAT", help=f"{_either(choices)} (default: text)",
                        **_choice(*choices, what="format"))


Paths = Annotated[list[Path] | None, typer.Argument(
    metavar="PATH", help="policy files or directories (default: the layered policy)")]


def _color(no_color: bool) -> bool:
    return not no_color and sys.stdout.isatty() and "NO_COLOR" not in os.environ


def _finish(code: int, text: str, *, err: bool = False) -> None:
    if text:
        typer.echo(text, err=err)
    raise typer.Exit(code)


def _version_line() -> str:
    return f"router {__version__} (Python {sys.version.split()[0]})"


def _print_version(value: bool) -> None:
    if value:
        _finish(0, _version_line())


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Bare `router` prints the help (exit 0). Every command but the sidecar may fetch git sources."""
    if ctx.invoked_subcommand is None:
        _finish(0, ctx.get_help())
    if ctx.invoked_subcommand != "serve":
        from router.load.git_source import fetching

        ctx.with_resource(fetching())  # for this command only (tests run many in one process)


@_command("router lint .pi/router.yaml")
def lint(paths: Paths = None, fmt: Annotated[str, _format_option("text", "json", "sarif")] = "text",
         rules: Annotated[bool, typer.Option(
             "--rules", help="also list the rules in force with their layers and origins")] = False) -> None:
    """Check policy files for mistakes.

    Checks YAML, keys, expressions, names, fields, unreachable rules and inline examples.
    """
    from router.commands import lint as command

    _finish(*command.run(paths or [], fmt=fmt, rules=rules))


@_command("router explain --event event.json --mode matched")
def explain(
    code: Annotated[str | None, typer.Argument(metavar="CODE",
                                               help="a diagnostic code such as RT301")] = None,
    event: Annotated[str | None, typer.Option("--event", "-e", metavar="FILE",
                                              help="event file (JSON/YAML), or - for stdin")] = None,
    state: Annotated[str | None, typer.Option("--state", metavar="FILE",
                                              help="session state file (JSON/YAML)")] = None,
    signal: Annotated[list[str] | None, typer.Option(
        "--signal", metavar="NAME=VALUE", help="the value of a signal (repeatable)")] = None,
    signal_error: Annotated[list[str] | None, typer.Option(
        "--signal-error", metavar="NAME=MESSAGE",
        help="make a signal fail with MESSAGE (repeatable)")] = None,
    policy: Annotated[list[Path] | None, typer.Option(
        "--policy", "-p", metavar="FILE",
        help="policy file instead of the layered policy (repeatable)")] = None,
    mode: Annotated[str, typer.Option("--mode", metavar="MODE", help="full (default), fails or matched",
                                      **_choice("full", "fails", "matched", what="mode"))] = "full",
    fmt: Annotated[str, _format_option("text", "json")] = "text",
    no_color: Annotated[bool, typer.Option("--no-color", help="plain text even on a terminal")] = False,
) -> None:
    """Dry-run an event through the policy, or show a code's page.

    Shows every rule's verdict, the decision and the state after it.
    """
    from router.commands import explain as command
    from router.diagnostics.codes import CODES, render_code
    from router.diagnostics.diagnostic import render_text

    if code is not None:
        info = CODES.get(code.upper())
        _finish(0 if info else 1, render_code(info) if info else f"unknown code {code!r}")
    if event is None:
        raise UsageMistake("explain needs an event file or a diagnostic code",
                           "router explain --event FILE (- reads stdin), or router explain RT301")
    loaded = command.load(policy or [], cwd=Path.cwd())
    compiled, diagnostics = loaded.policy, loaded.diagnostics
    if compiled is None:
        _finish(1, render_text(diagnostics), err=True)
    assert compiled is not None
    explanation = command.explain_event(
        compiled, command.load_event(event), state=command.load_state(state),
        values=command.parse_assignments(signal or []),
        errors={k: str(v) for k, v in command.parse_assignments(signal_error or []).items()})
    if fmt == "json":
        _finish(0, command.render_json(explanation))
    _finish(0, command.render_text(explanation, compiled, mode=mode, color=_color(no_color)))


@_command("router test --packs", name="test")
def test_(paths: Paths = None, fmt: Annotated[str, _format_option("text", "json", "junit")] = "text",
          packs: Annotated[bool, typer.Option(
              "--packs", help="also run the built-in packs' own tests")] = False) -> None:
    """Run the project's tests and its rules' inline examples.

    Runs .pi/*.test.yaml, the user's router.test.yaml and every rule's inline examples.
    """
    from router.commands import test as command

    _finish(*command.run(paths or [], cwd=Path.cwd(), fmt=fmt, packs=packs))


@_command("router schema event")
def schema(
    kind: Annotated[str, typer.Argument(metavar="KIND", help="policy (default) or event",
                                        **_choice("policy", "event", what="schema"))] = "policy",
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", help="write both schema files into this directory")] = None,
    check: Annotated[bool, typer.Option("--check", help="exit 1 when the files in --out are stale")] = False,
) -> None:
    """Print the JSON Schema of policy files or events.

    With --out, writes both schema files instead.
    """
    from router.commands import schema as command

    if check and out is None:
        raise UsageMistake("--check needs --out", "router schema --out DIR --check")
    if out is not None and check:
        stale = command.stale(out)
        _finish(1 if stale else 0, f"stale: {', '.join(stale)}" if stale else "schemas are up to date")
    if out is not None:
        _finish(0, "\n".join(f"wrote {p}" for p in command.write(out)))
    _finish(0, command.render(kind).rstrip("\n"))


@_command("router init")
def init(force: Annotated[bool, typer.Option("--force", help="overwrite an existing file")] = False) -> None:
    """Write a starter .pi/router.yaml here.

    The file is commented and lints clean; its schema is written beside it.
    """
    from router.commands import init as command

    _finish(*command.run(Path.cwd(), force=force))


@_command("router install --project")
def install(
    project: Annotated[bool, typer.Option("--project", help="install into this project's .pi/")] = False,
    uninstall: Annotated[bool, typer.Option("--uninstall", help="remove the bridge instead")] = False,
) -> None:
    """Register the bridge extension with Pi.

    Idempotent; records this Python for the sidecar.
    """
    from router.commands import install as command
    from router.load.paths import agent_dir

    action = command.uninstall if uninstall else command.install
    _finish(*action(agent=agent_dir(), cwd=Path.cwd(), project=project))


@_command("router doctor")
def doctor() -> None:
    """Check the setup.

    Checks pi, Node, the bridge, the policy, the sidecar and the models the policy names.
    """
    from router.commands import doctor as command
    from router.load.paths import agent_dir

    _finish(*command.run(Path.cwd(), agent_dir()))


@_command("router serve --cwd .")
def serve(
    cwd: Annotated[Path | None, typer.Option(
        "--cwd", metavar="DIR", help="the project directory (default: the current one)")] = None,
    agent: Annotated[Path | None, typer.Option(
        "--agent-dir", metavar="DIR", help="Pi's agent directory (default: ~/.pi/agent)")] = None,
    policy: Annotated[list[Path] | None, typer.Option(
        "--policy", metavar="FILE", help="an extra policy file, loaded last (repeatable)")] = None,
) -> None:
    """Run the sidecar on stdio.

    The bridge starts it; see docs/protocol.md.
    """
    from router.runtime.server import main as serve_main

    argv = [*(["--cwd", str(cwd)] if cwd else []), *(["--agent-dir", str(agent)] if agent else [])]
    argv += [arg for path in policy or [] for arg in ("--policy", str(path))]
    _finish(serve_main(argv), "")


@_command("router import ~/.pi/agent/pi-cuttle.json", name="import")
def import_(
    source: Annotated[Path | None, typer.Argument(
        metavar="FILE", help="the settings file (default: the pack's, in the agent dir)")] = None,
    pack: Annotated[str | None, typer.Option(
        "--pack", metavar="NAME", help="the pack whose `import:` to follow (default: the one whose "
        "settings file FILE is, or the only one that declares an import)")] = None,
    target: Annotated[Path | None, typer.Option(
        "--target", metavar="FILE", help="the policy to write (default: the user's router.yaml)")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace vars the policy already has")] = False,
) -> None:
    """Convert a pack's JSON settings file (cuttle: pi-cuttle.json) into the YAML policy."""
    from router.commands.import_ import choose_import, import_settings
    from router.load.paths import agent_dir

    agent = agent_dir()
    spec = choose_import(pack, source)
    if isinstance(spec, str):
        _finish(1, spec)
        return
    _finish(*import_settings(spec, source or agent / spec.file, target or agent / "router.yaml", force=force))


@_command("router docs --check")
def docs(
    out: Annotated[Path, typer.Option("--out", metavar="DIR",
                                      help="the docs directory (default: docs)")] = Path("docs"),
    check: Annotated[bool, typer.Option("--check", help="exit 1 when the generated pages are stale")] = False,
) -> None:
    """Generate the reference pages from the code.

    Writes the events, actions, signals, functions and codes pages.
    """
    from router.commands import docgen
    if check:
        stale = docgen.stale(out)
        _finish(1 if stale else 0, f"stale: {', '.join(stale)}" if stale else "docs are up to date")
    _finish(0, "\n".join(f"wrote {p}" for p in docgen.write(out)))


Directory = Annotated[Path | None, typer.Argument(
    metavar="DIR", help="the project directory (default: the current one)")]


@_command("router trust --yes ~/src/myproject", name="trust")
def trust_(
    directory: Directory = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="trust without asking (for scripts)")] = False,
    list_: Annotated[bool, typer.Option("--list", help="list the trusted project policies")] = False,
) -> None:
    """Review a project's policy and trust that exact content.

    Shows what .pi/router.yaml (and every file it uses) would do, then records its SHA-256 in
    the trust store after you confirm. Pi applies a project policy only once it is trusted.
    """
    from router.load.paths import agent_dir
    from router.runtime import trust_review as command

    if list_:
        _finish(*command.list_trusted(agent_dir()))
    _finish(*command.trust(directory or Path.cwd(), agent_dir(), confirm=_confirm_trust(yes)))


@_command("router untrust ~/src/myproject")
def untrust(directory: Directory = None) -> None:
    """Forget the trust in a project's policy: Pi no longer applies it."""
    from router.load.paths import agent_dir
    from router.runtime import trust_review as command

    _finish(*command.untrust(directory or Path.cwd(), agent_dir()))


LogOption = Annotated[Path | None, typer.Option(
    "--log", metavar="PATH", help="a log directory or file (default: the agent dir's router/log)")]
SinceOption = Annotated[str | None, typer.Option(
    "--since", metavar="T", help="only decisions since T: a duration (10m, 2h, 1d) or an ISO time")]


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

    keep = Filter(session=session, rule=rule, since=_since(since))
    try:
        code, note = command.run(log or command.default_location(), keep=keep, fmt=fmt, follow_log=follow)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    _finish(code, note, err=True)


@_command("router shadow-report --since 7d", name="shadow-report")
def shadow_report(fmt: Annotated[str, _format_option("text", "json")] = "text", log: LogOption = None,
                  since: SinceOption = None) -> None:
    """How the rules marked `shadow: true` would have done.

    From the decision log: how often each would have fired, and how often it agreed with what was applied.
    """
    from router.commands import shadow_report as command

    records, note = _log_records(log, since)
    if note:
        typer.echo(note, err=True)
    stats = command.shadow_stats(records)
    render = command.render_json if fmt == "json" else command.render_text
    _finish(0, render(stats, decisions=len(records)))


@_command("router report --html report.html --since 7d", name="report")
def report(
    html: Annotated[Path, typer.Option("--html", metavar="FILE", help="the HTML file to write")],
    log: LogOption = None,
    since: SinceOption = None,
    title: Annotated[str, typer.Option(
        "--title", metavar="TEXT", help="the page's title")] = "Router decisions",
) -> None:
    """Write one self-contained HTML page about the decision log.

    Model and tier share, cost over time, hits per rule, the slowest decisions; no network needed.
    """
    from router.replay.report_html import render

    records, note = _log_records(log, since)
    if note:
        typer.echo(note, err=True)
    try:
        html.write_text(render(records, title), encoding="utf-8")
    except OSError as exc:
        _finish(1, f"error: cannot write {html}: {exc.strerror or exc}", err=True)
    _finish(0, f"wrote {html} ({len(records)} decisions)")


def _confirm_trust(yes: bool) -> Callable[[str], bool]:
    def confirm(summary: str) -> bool:
        typer.echo(summary)
        if yes:
            return True
        if not sys.stdin.isatty():
            typer.echo("error: not a terminal: give --yes to trust without asking", err=True)
            return False
        return typer.confirm("Trust this content?", default=False)

    return confirm


@_command("router update git+https://github.com/acme/policies.git")
def update(source: Annotated[str | None, typer.Argument(
        metavar="SOURCE", help="a git source (its URL or lock key; default: all of them)")] = None) -> None:
    """Move git sources to what their refs name now.

    Fetches again, rewrites router.lock and lists the rules added, removed and changed.
    """
    from router.commands import update as command
    from router.load.paths import agent_dir

    _finish(*command.run(source, cwd=Path.cwd(), agent=agent_dir()))


@_command("router packs")
def packs(fmt: Annotated[str, _format_option("text", "json")] = "text") -> None:
    """List the packs `use:` can name, and where each comes from.

    Built-in packs, then those of installed Python distributions (entry point group
    pi_policy_router.packs).
    """
    from router.commands import packs as command

    _finish(*command.run(fmt=fmt))

SessionPaths = Annotated[list[Path], typer.Argument(
    metavar="PATH", help="Pi session files or directories (searched recursively)")]
SessionOption = Annotated[str | None, typer.Option(
    "--session", metavar="S", help="only sessions whose id or path contains S")]
ModelsOption = Annotated[Path | None, typer.Option(
    "--models", metavar="FILE", help="Pi's models.json for prices (default: the agent dir's)")]
BaselineOption = Annotated[str | None, typer.Option(
    "--baseline", metavar="REF", help="the model of the all-cloud cost baseline (default: the priciest)")]


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
) -> None:
    """Replay recorded Pi sessions through the policy, offline.

    Rebuilds each session's events from Pi's session files, evaluates them with recorded signal
    values (the decision log) or the signals' fallbacks, and totals rules, models, tools and cost.
    """
    from router.commands import replay as command

    options = command.Options(list(paths), log=log, session=session, models=models, baseline=baseline)
    _finish(*command.run(options, policy_files=policy or [], fmt=fmt))


@_command("router diff main:.pi/router.yaml .pi/router.yaml --sessions sessions/")
def diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="policy file or git revision (REV:PATH)")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="policy file or git revision (REV:PATH)")],
    sessions: Annotated[list[Path] | None, typer.Option(
        "--sessions", metavar="PATH", help="Pi session files or directories (repeatable)")] = None,
    log: LogOption = None,
    fmt: Annotated[str, _format_option("text", "markdown", "json")] = "text",
    fail_on_change: Annotated[bool, typer.Option(
        "--fail-on-change", help="exit 1 when any turn changes")] = False,
    session: SessionOption = None,
    models: ModelsOption = None,
) -> None:
    """Compare two policies on recorded sessions, turn by turn.

    Shows each turn whose model, tools, compaction or answer changes, and the cost delta.
    """
    from router.commands import diff as command

    if not sessions:
        raise UsageMistake("diff needs recorded sessions", "router diff OLD NEW --sessions PATH")
    options = command.Options(list(sessions), log=log, session=session, models=models)
    _finish(*command.run(old, new, options, fmt=fmt, fail_on_change=fail_on_change))


@_command("router eval \"usage.percent >= 90\" --event examples/events/turn_end.json", name="eval")
def eval_(
    expression: Annotated[str, typer.Argument(metavar="EXPR", help="a `when` expression (or, with "
                                                                   "--jmespath, a `match`)")],
    event: Annotated[str, typer.Option("--event", "-e", metavar="FILE",
                                       help="event file (JSON/YAML), or - for stdin")],
    jmespath: Annotated[bool, typer.Option("--jmespath", help="EXPR is a JMESPath match")] = False,
    state: Annotated[str | None, typer.Option("--state", metavar="FILE",
                                              help="session state file (JSON/YAML)")] = None,
) -> None:
    """Evaluate one expression against an event and print its value as JSON."""
    from router.commands import eval_ as command

    _finish(*command.run(expression, event, jmespath=jmespath, state=state))


@_command("router version")
def version() -> None:
    """Print the router's version (same as router --version)."""
    _finish(0, _version_line())


# ---- the entry point: user mistakes, interrupts and bugs become exit codes ----

def _crash_log(exc: BaseException) -> Path:
    directory = Path(tempfile.gettempdir())
    path = directory / f"router-crash-{os.getpid()}.log"
    text = f"router {__version__}, Python {sys.version}\nargv: {sys.argv}\n\n"
    text += "".join(traceback.format_exception(exc))
    path.write_text(text, encoding="utf-8")
    return path


def _kinds(exc: BaseException) -> set[str]:
    """The class names of `exc` (typer vendors click from 0.29 on, so match by name, not import)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def _is_usage_error(exc: BaseException) -> bool:
    return "ClickException" in _kinds(exc) and hasattr(exc, "format_message")


def _sentence(text: str) -> str:
    """Click's `Option '--x' requires an argument.` as `option '--x' requires an argument`."""
    text = text.strip().splitlines()[0].rstrip(".") if text.strip() else "invalid usage"
    return text[0].lower() + text[1:] if text[1:2].islower() else text


def _param_for(ctx: Any, option: str) -> Any:
    params = ctx.command.get_params(ctx) if ctx is not None else []
    return next((p for p in params if option in (*p.opts, *p.secondary_opts)), None)


def _unknown_option(exc: Any, ctx: Any, path: str) -> tuple[str, str]:
    name = str(exc.option_name)
    known = [opt for p in (ctx.command.get_params(ctx) if ctx else []) for opt in p.opts]
    guess = next(iter(sorted(exc.possibilities or [])), None) or closest(name, known)
    listing = f"'{path} -h' lists the options"
    return f"unknown option {name!r}", f"did you mean '{guess}'? ({listing})" if guess else listing


def _option_usage(exc: Any, ctx: Any, path: str) -> tuple[str, str]:
    param = _param_for(ctx, str(exc.option_name))
    usage = _option_label(param).split(", ")[-1] if param is not None else str(exc.option_name)
    return _sentence(exc.format_message()), f"write it as '{path} {usage}'"


def _usage_lines(exc: Any) -> str:
    """`error: <message>` and one `  help: <hint>` line for a click usage error."""
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "router"
    kinds = _kinds(exc)
    if isinstance(exc, UsageMistake):
        message, hint = exc.message, exc.hint or f"see '{path} -h'"
    elif "NoSuchOption" in kinds:
        message, hint = _unknown_option(exc, ctx, path)
    elif "BadOptionUsage" in kinds and getattr(exc, "option_name", None):
        message, hint = _option_usage(exc, ctx, path)
    else:
        message, hint = _sentence(exc.format_message()), f"see '{path} -h'"
    return f"error: {message}\n  help: {hint}"


def _completion_shell_given(argv: list[str]) -> bool:
    """`--show-completion bash` names its shell (typer otherwise detects it and ignores the name)."""
    for flag in ("--install-completion", "--show-completion"):
        if any(arg.startswith(f"{flag}=") for arg in argv):
            return True
        after = argv[argv.index(flag) + 1:argv.index(flag) + 2] if flag in argv else []
        if after and not after[0].startswith("-"):
            return True
    return False


def main() -> None:
    """Entry point: dispatch, and turn user errors, interrupts and bugs into exit codes."""
    if _completion_shell_given(sys.argv[1:]):
        os.environ["_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"] = "1"
    try:
        code = app(standalone_mode=False)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except RouterError as exc:
        from router.diagnostics.diagnostic import render_text

        typer.echo(render_text(exc.diagnostics), err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if _is_usage_error(exc):
            typer.echo(_usage_lines(exc), err=True)
            sys.exit(getattr(exc, "exit_code", 2))
        if "Abort" in _kinds(exc):
            sys.exit(130)
        path = _crash_log(exc)
        typer.echo(f"router: internal error ({type(exc).__name__}: {exc}); details in {path} "
                   f"(router {__version__})", err=True)
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)
