"""The `router` command line: each command parses, calls one function, renders, exits.

Exit codes: 0 clean, 1 diagnostics or failing tests, 2 usage, 3 internal error, 130 interrupt.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Annotated

import typer

from router import __version__
from router.errors import RouterError

app = typer.Typer(help="Policy engine for the Pi coding agent: ordered YAML rules decide models, "
                       "tools, compaction and answers.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)

Format = Annotated[str, typer.Option("--format", "-f", help="text, json or sarif (lint only)")]
Paths = Annotated[list[Path] | None, typer.Argument(help="policy files or directories")]


def _color(no_color: bool) -> bool:
    return not no_color and sys.stdout.isatty() and "NO_COLOR" not in os.environ


def _finish(code: int, text: str, *, err: bool = False) -> None:
    if text:
        typer.echo(text, err=err)
    raise typer.Exit(code)


@app.command()
def lint(paths: Paths = None, fmt: Format = "text") -> None:
    """Check a policy: YAML, keys, expressions, names, fields, unreachable rules, examples."""
    from router.commands import lint as command

    if fmt not in ("text", "json", "sarif"):
        _finish(2, f"unknown format {fmt!r}; expected text, json or sarif", err=True)
    _finish(*command.run(paths or [], fmt=fmt))


@app.command()
def explain(
    code: Annotated[str | None, typer.Argument(help="a diagnostic code such as RT301")] = None,
    event: Annotated[str | None, typer.Option("--event", "-e", help="event file (JSON/YAML) or -")] = None,
    state: Annotated[str | None, typer.Option("--state", help="session state file (JSON/YAML)")] = None,
    signal: Annotated[list[str] | None, typer.Option("--signal", help="NAME=VALUE for a signal")] = None,
    signal_error: Annotated[list[str] | None, typer.Option("--signal-error",
                                                           help="NAME=TEXT: make a signal fail")] = None,
    policy: Annotated[list[Path] | None, typer.Option(
        "--policy", "-p", help="policy files instead of the layered policy")] = None,
    mode: Annotated[str, typer.Option(help="full, fails or matched")] = "full",
    fmt: Format = "text",
    no_color: Annotated[bool, typer.Option("--no-color")] = False,
) -> None:
    """Dry-run one event through the policy and show every rule's verdict and the decision."""
    if fmt not in ("text", "json"):
        _finish(2, f"unknown format {fmt!r}; expected text or json", err=True)
    if mode not in ("full", "fails", "matched"):
        _finish(2, f"unknown mode {mode!r}; expected full, fails or matched", err=True)
    from router.codes import CODES, render_code
    from router.commands import explain as command
    from router.diagnostics import render_text

    if code is not None:
        info = CODES.get(code.upper())
        _finish(0 if info else 1, render_code(info) if info else f"unknown code {code!r}")
    if event is None:
        _finish(2, "give --event FILE (or - for stdin), or a code such as RT301", err=True)
    loaded = command.load(policy or [], cwd=Path.cwd())
    compiled, diagnostics = loaded.policy, loaded.diagnostics
    if compiled is None:
        _finish(1, render_text(diagnostics), err=True)
    assert compiled is not None and event is not None
    explanation = command.explain_event(
        compiled, command.load_event(event), state=command.load_state(state),
        values=command.parse_assignments(signal or []),
        errors={k: str(v) for k, v in command.parse_assignments(signal_error or []).items()})
    if fmt == "json":
        _finish(0, command.render_json(explanation))
    _finish(0, command.render_text(explanation, compiled, mode=mode, color=_color(no_color)))


@app.command("test")
def test_(paths: Paths = None, fmt: Format = "text",
          packs: Annotated[bool, typer.Option(help="also run the built-in packs' own tests")] = False,
          ) -> None:
    """Run the project's tests (*.test.yaml) and its rules' inline examples."""
    if fmt not in ("text", "json"):
        _finish(2, f"unknown format {fmt!r}; expected text or json", err=True)
    from router.commands import test as command

    _finish(*command.run(paths or [], cwd=Path.cwd(), fmt=fmt, packs=packs))


@app.command()
def schema(
    kind: Annotated[str, typer.Argument(help="policy or event")] = "policy",
    out: Annotated[Path | None, typer.Option(help="write both schema files into this directory")] = None,
    check: Annotated[bool, typer.Option(help="exit 1 when the files in --out are stale")] = False,
) -> None:
    """Print the JSON Schema of policy files or events (or write both with --out)."""
    from router.commands import schema as command

    if out is not None and check:
        stale = command.stale(out)
        _finish(1 if stale else 0, f"stale: {', '.join(stale)}" if stale else "schemas are up to date")
    if out is not None:
        _finish(0, "\n".join(f"wrote {p}" for p in command.write(out)))
    if kind not in command.SCHEMA_FILES:
        _finish(2, f"unknown schema {kind!r}; expected policy or event", err=True)
    _finish(0, command.render(kind).rstrip("\n"))


@app.command()
def init(force: Annotated[bool, typer.Option(help="overwrite an existing file")] = False) -> None:
    """Write a commented starter .pi/router.yaml in the current directory."""
    from router.commands import init as command

    _finish(*command.run(Path.cwd(), force=force))


@app.command()
def install(
    project: Annotated[bool, typer.Option(help="install into this project's .pi/ instead")] = False,
    uninstall: Annotated[bool, typer.Option(help="remove the bridge")] = False,
) -> None:
    """Register the bridge extension with Pi (idempotent), recording this Python for the sidecar."""
    from router.commands import install as command
    from router.paths import agent_dir

    action = command.uninstall if uninstall else command.install
    _finish(*action(agent=agent_dir(), cwd=Path.cwd(), project=project))


@app.command()
def doctor() -> None:
    """Check pi, Node, the bridge, the policy, the sidecar and the models the policy names."""
    from router.commands import doctor as command
    from router.paths import agent_dir

    _finish(*command.run(Path.cwd(), agent_dir()))


@app.command()
def serve() -> None:
    """Run the sidecar on stdio (started by the bridge; see docs/protocol.md)."""
    from router.server import main as serve_main

    _finish(serve_main(sys.argv[2:]), "")


@app.command("import")
def import_(
    source: Annotated[Path | None, typer.Argument(help="pi-cuttle.json (default: in the agent dir)")] = None,
    target: Annotated[Path | None, typer.Option(
        help="the policy to write (default: the user's router.yaml)")] = None,
    force: Annotated[bool, typer.Option(help="replace an existing vars.cuttle")] = False,
) -> None:
    """Convert an existing ~/.pi/agent/pi-cuttle.json into the YAML policy."""
    from router.commands.import_ import import_cuttle
    from router.paths import agent_dir

    agent = agent_dir()
    _finish(*import_cuttle(source or agent / "pi-cuttle.json", target or agent / "router.yaml", force=force))


@app.command()
def docs(
    out: Annotated[Path, typer.Option(help="the docs directory")] = Path("docs"),
    check: Annotated[bool, typer.Option(help="exit 1 when the generated pages are stale")] = False,
) -> None:
    """Generate the reference pages (events, actions, functions, codes) from the code."""
    from router import docgen

    if check:
        stale = docgen.stale(out)
        _finish(1 if stale else 0, f"stale: {', '.join(stale)}" if stale else "docs are up to date")
    _finish(0, "\n".join(f"wrote {p}" for p in docgen.write(out)))


@app.command()
def version() -> None:
    """Print the router's version."""
    _finish(0, f"router {__version__} (Python {sys.version.split()[0]})")


def _crash_log(exc: BaseException) -> Path:
    directory = Path(tempfile.gettempdir())
    path = directory / f"router-crash-{os.getpid()}.log"
    text = f"router {__version__}, Python {sys.version}\nargv: {sys.argv}\n\n"
    text += "".join(traceback.format_exception(exc))
    path.write_text(text, encoding="utf-8")
    return path


def _is_usage_error(exc: BaseException) -> bool:
    """A click exception (typer vendors click from 0.29 on, so match by shape, not by import)."""
    return any(c.__name__ == "ClickException" for c in type(exc).__mro__) and hasattr(exc, "show")


def main() -> None:
    """Entry point: dispatch, and turn user errors, interrupts and bugs into exit codes."""
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        from router.server import main as serve

        sys.exit(serve(sys.argv[2:]))
    try:
        code = app(standalone_mode=False)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except RouterError as exc:
        from router.diagnostics import render_text

        typer.echo(render_text(exc.diagnostics), err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if _is_usage_error(exc):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        if type(exc).__name__ == "Abort":
            sys.exit(130)
        path = _crash_log(exc)
        typer.echo(f"router: internal error ({type(exc).__name__}: {exc}); details in {path} "
                   f"(router {__version__})", err=True)
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)
