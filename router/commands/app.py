"""The `router` command line's machinery: the typer app, plain help, usage mistakes, options.

Exit codes: 0 clean, 1 diagnostics or failing tests, 2 usage, 3 internal error, 130 interrupt.

Help is plain text from click's formatter (no rich panels) with explicit metavars and one
example per command; usage mistakes print `error: …` and one `help:` line, never a traceback.
The commands register in router/commands/cli_*.py; router/commands/cli.py is the entry point.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from router import __version__
from router.commands.lean_params import install as install_lean
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
    """Run click's parser (the plain parameters coerced without pydantic: lean_params.py), attaching
    `ctx` to its usage errors (click leaves some without one)."""
    install_lean(ctx.command.get_params(ctx))
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
        from router.load.git_fetching import fetching

        ctx.with_resource(fetching())  # for this command only (tests run many in one process)


def _kinds(exc: BaseException) -> set[str]:
    """The class names of `exc` (typer vendors click from 0.29 on, so match by name, not import)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def _is_usage_error(exc: BaseException) -> bool:
    return "ClickException" in _kinds(exc) and hasattr(exc, "format_message")
