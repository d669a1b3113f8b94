"""The `router` console script and `python -m router`: `router serve` starts the sidecar without
loading the command line's libraries (typer, click, pydantic); everything else goes to the CLI."""

from __future__ import annotations

import sys

from router.runtime.lean import SERVE_OPTIONS


def runs_serve_directly(argv: list[str]) -> bool:
    """The sidecar's own options skip typer's parsing; help and mistakes go through typer."""
    options = {arg.split("=", 1)[0] for arg in argv[2:] if arg.startswith("-")}
    return len(argv) > 1 and argv[1] == "serve" and options <= set(SERVE_OPTIONS)


def main() -> None:
    """Dispatch: the sidecar directly, anything else through the command line."""
    if runs_serve_directly(sys.argv):
        from router.runtime.lean import import_server

        sys.exit(import_server().main(sys.argv[2:]))
    from router.commands.cli import main as cli_main

    cli_main()
