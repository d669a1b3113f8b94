"""The commands that set the router up: install, doctor, trust, untrust, update, packs, import,
serve, version."""


from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from router.commands.app import (
    _command,
    _finish,
    _format_option,
    _version_line,
)


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


Directory = Annotated[Path | None, typer.Argument(
    metavar="DIR", help="the project directory (default: the current one)")]


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


@_command("router update --dry-run --sessions ~/.pi/agent/sessions")
def update(
    source: Annotated[str | None, typer.Argument(
        metavar="SOURCE", help="a git source (its URL or lock key; default: all of them)")] = None,
    to: Annotated[str | None, typer.Option(
        "--to", metavar="REF", help="move to this tag, branch or commit (one source)")] = None,
    freeze: Annotated[bool, typer.Option(
        "--freeze", help="write the commit, with `# frozen: REF` after the entry")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="show what would change; write no policy file and no lock")] = False,
    sessions: Annotated[list[Path] | None, typer.Option(
        "--sessions", metavar="PATH",
        help="also show the recorded decisions that change (repeatable)")] = None,
    models: Annotated[Path | None, typer.Option(
        "--models", metavar="FILE", help="Pi's models.json for prices (default: the agent dir's)")] = None,
) -> None:
    """Move git sources to their newest release and show what it changes.

    A source on a version tag moves to the newest version tag; on a branch or another tag it is
    fetched again; pinned to a commit it stays (unless --to). Rewrites the `use:` entry in place
    and router.lock, drops lock entries nothing uses, and lists the rules added, removed and
    changed, and the vars and settings changed (with the rules that read each var).
    """
    from router.commands import update as command
    from router.load.paths import agent_dir

    options = command.Options(source, to=to, freeze=freeze, dry_run=dry_run,
                              sessions=tuple(sessions or ()), models=models)
    _finish(*command.run(options, cwd=Path.cwd(), agent=agent_dir()))


@_command("router packs")
def packs(fmt: Annotated[str, _format_option("text", "json")] = "text") -> None:
    """List the packs `use:` can name, and where each comes from.

    Built-in packs, then those of installed Python distributions (entry point group
    pi_policy_router.packs).
    """
    from router.commands import packs as command

    _finish(*command.run(fmt=fmt))


@_command("router import ~/.pi/agent/pi-cuttle.json", name="import")
def import_(
    source: Annotated[Path | None, typer.Argument(
        metavar="FILE", help="the settings file (default: the pack's, in the agent dir)")] = None,
    pack: Annotated[str | None, typer.Option(
        "--pack", metavar="NAME", help="the pack whose `provides.import:` to follow (default: the one whose "
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


@_command("router serve --cwd .")
def serve(
    cwd: Annotated[Path | None, typer.Option(
        "--cwd", metavar="DIR", help="the project directory (default: the current one)")] = None,
    agent: Annotated[Path | None, typer.Option(
        "--agent-dir", metavar="DIR", help="Pi's agent directory (default: ~/.pi/agent)")] = None,
    policy: Annotated[list[Path] | None, typer.Option(
        "--policy", metavar="FILE", help="an extra policy file, loaded last (repeatable)")] = None,
    warm: Annotated[Path | None, typer.Option(
        "--warm", metavar="SOCKET", help="keep the engine loaded and serve each connection to this "
        "Unix socket with a forked sidecar (the bridge starts it; docs/protocol.md)")] = None,
) -> None:
    """Run the sidecar on stdio.

    The bridge starts it; see docs/protocol.md.
    """
    from router.runtime.server import main as serve_main

    argv = [*(["--cwd", str(cwd)] if cwd else []), *(["--agent-dir", str(agent)] if agent else [])]
    argv += [arg for path in policy or [] for arg in ("--policy", str(path))]
    argv += ["--warm", str(warm)] if warm else []
    _finish(serve_main(argv), "")


@_command("router version")
def version() -> None:
    """Print the router's version (same as router --version)."""
    _finish(0, _version_line())
