"""The commands for writing policies: lint, explain, eval, test, schema, init, docs."""


from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from router.commands.app import (
    Paths,
    UsageMistake,
    _choice,
    _color,
    _command,
    _finish,
    _format_option,
)


@_command("router lint .pi/router.yaml")
def lint(paths: Paths = None, fmt: Annotated[str, _format_option("text", "json", "sarif")] = "text",
         rules: Annotated[bool, typer.Option(
             "--rules", help="also list the rules in force with their layers and origins")] = False,
         fix: Annotated[bool, typer.Option(
             "--fix", help="first move the top-level keys that belong under provides: (RT335), "
             "comments kept")] = False) -> None:
    """Check policy files for mistakes.

    Checks YAML, keys, expressions, names, fields, unreachable rules and inline examples.
    """
    from router.commands import lint as command

    _finish(*command.run(paths or [], fmt=fmt, rules=rules, fix_first=fix))


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
    if code is not None:
        from router.diagnostics.codes import CODES, render_code

        info = CODES.get(code.upper())
        _finish(0 if info else 1, render_code(info) if info else f"unknown code {code!r}")
    if event is None:
        raise UsageMistake("explain needs an event file or a diagnostic code",
                           "router explain --event FILE (- reads stdin), or router explain RT301")
    from router.commands import explain as command
    from router.diagnostics.diagnostic import render_text

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


TestPaths = Annotated[list[str] | None, typer.Argument(
    metavar="PATH|SOURCE", help="test files, policy files or directories, or one git source "
    "git+URL@REF#FILE (default: the layered policy's tests)", show_default=False)]


@_command("router test --packs", name="test")
def test_(paths: TestPaths = None, fmt: Annotated[str, _format_option("text", "json", "junit")] = "text",
          packs: Annotated[bool, typer.Option(
              "--packs", help="also run the built-in packs' own tests")] = False,
          coverage: Annotated[bool, typer.Option(
              "--coverage", help="report the rules the tests exercised, of all, per file")] = False,
          min_coverage: Annotated[float | None, typer.Option(
              "--min-coverage", metavar="PERCENT", show_default=False,
              help="fail (exit 1) below this percentage of rules exercised (implies --coverage)")] = None,
          ) -> None:
    """Run the project's tests and its rules' inline examples.

    Runs .pi/*.test.yaml, the user's router.test.yaml and every rule's inline examples; given a
    git source, the tests of that policy in the commit its ref names.
    """
    from router.commands import test as command
    from router.load.git_spec import is_git

    if min_coverage is not None and not 0 <= min_coverage <= 100:
        raise UsageMistake(f"--min-coverage {min_coverage:g} is not a percentage",
                           "give a number from 0 to 100: --min-coverage 80")
    given = paths or []
    sources = [p for p in given if is_git(p)]
    if sources:
        if len(given) > 1:
            raise UsageMistake("router test takes one git source, alone",
                               "router test 'git+https://host/team.git@v2#team.yaml' (one run per source)")
        from router.commands import test_source

        _finish(*test_source.run(sources[0], fmt=fmt, packs=packs, coverage=coverage,
                                 min_coverage=min_coverage))
    _finish(*command.run([Path(p) for p in given], cwd=Path.cwd(), fmt=fmt, packs=packs, coverage=coverage,
                         min_coverage=min_coverage))


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
        written, text = _written(out, command.write, "router schema --out schema")
        _finish(written, text, err=written != 0)
    _finish(0, command.render(kind).rstrip("\n"))


@_command("router init")
def init(force: Annotated[bool, typer.Option("--force", help="overwrite an existing file")] = False) -> None:
    """Write a starter .pi/router.yaml here.

    The file is commented and lints clean; its schema is written beside it.
    """
    from router.commands import init as command

    _finish(*command.run(Path.cwd(), force=force))


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
    written, text = _written(out, docgen.write, "router docs --out docs")
    _finish(written, text, err=written != 0)


def _written(out: Path, write: Callable[[Path], list[Path]], example: str) -> tuple[int, str]:
    """Write generated files into `out`: (0, the `wrote` lines), or (1, a located error) when the
    directory cannot be made or a file cannot be written (/proc/x, a file, a read-only place)."""
    try:
        return 0, "\n".join(f"wrote {p}" for p in write(out))
    except OSError as exc:
        where = exc.filename or out
        return 1, (f"error: cannot write into {out}: {where}: {exc.strerror or exc}\n"
                   f"  help: --out names a directory you can write (made when missing): {example}")
