"""`router`: the console script's command line (router/commands/entry.py starts it).

The app and its conventions are in router/commands/app.py; the commands register from
cli_policy.py (writing policies), cli_sessions.py (recorded sessions and decisions) and
cli_setup.py (setting the router up), in that order, which is the order `router --help` lists them.
"""


from __future__ import annotations

import copy
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import typer

from router import __version__
from router.commands import cli_policy, cli_sessions, cli_setup  # noqa: F401  (they register the commands)
from router.commands.app import UsageMistake, _is_usage_error, _kinds, _option_label, app
from router.diagnostics.errors import RouterError
from router.diagnostics.suggest import closest

__all__ = ["UsageMistake", "app", "main"]


# ---- the entry point: user mistakes, interrupts and bugs become exit codes ----

def _crash_log(exc: BaseException) -> Path:
    """The traceback in a new file of the temporary directory, 0600, never one that was there (a
    predictable name there could be another user's link to a file of yours)."""
    fd, name = tempfile.mkstemp(prefix=f"router-crash-{os.getpid()}-", suffix=".log")
    text = f"router {__version__}, Python {sys.version}\nargv: {sys.argv}\n\n"
    text += "".join(traceback.format_exception(exc))
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return Path(name)






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


def _command_name(info: Any) -> str:
    return str(info.name or typer.main.get_command_name(info.callback.__name__))


def invoked_app(argv: list[str]) -> typer.Typer:
    """`app` with only the command `argv` names (typer builds the parameters of every command it
    holds: ~20 commands' worth of start-up for one); the whole app for anything else (help, a
    root option first, an unknown name: they list the commands)."""
    named = [info for info in app.registered_commands if argv and _command_name(info) == argv[0]]
    if len(named) != 1:
        return app
    single = copy.copy(app)
    single.registered_commands = named
    return single


def main() -> None:
    """Entry point: dispatch, and turn user errors, interrupts and bugs into exit codes."""
    if _completion_shell_given(sys.argv[1:]):
        os.environ["_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"] = "1"
    try:
        code = invoked_app(sys.argv[1:])(standalone_mode=False)
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
