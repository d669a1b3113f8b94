"""`router serve`'s command line: the options the bridge and the warm sidecar pass are read by
hand (argparse and its parser cost a sidecar's start 4.5 ms); anything else goes to argparse."""

from __future__ import annotations

import os
from dataclasses import dataclass

from router.load.paths import agent_dir as default_agent_dir
from router.runtime import lean


@dataclass(frozen=True)
class ServeArgs:
    cwd: str
    agent_dir: str
    policy: tuple[str, ...]
    warm: str | None
    forked_from: str | None


def parse_args(argv: list[str]) -> ServeArgs:
    """`router serve`'s options. A command line of these options with their values (what the
    bridge and the warm sidecar pass) is read here; anything else (`--help`, a mistake, a repeated
    option) goes to argparse for its usage, errors and rules. Importing argparse and building its
    parser cost a sidecar's start 4.5 ms."""
    values: dict[str, list[str]] = {}
    rest = list(argv)
    while rest:
        name, sep, value = rest.pop(0).partition("=")
        if name not in lean.SERVE_OPTIONS or not (sep or _plain_value_follows(rest)):
            return _argparse(argv)
        values.setdefault(name, []).append(value if sep else rest.pop(0))
    if any(len(found) > 1 for name, found in values.items() if name != "--policy"):
        return _argparse(argv)
    one = {name: found[0] for name, found in values.items()}
    return ServeArgs(cwd=one["--cwd"] if "--cwd" in one else os.getcwd(),
                     agent_dir=one["--agent-dir"] if "--agent-dir" in one else str(default_agent_dir()),
                     policy=tuple(values.get("--policy", [])), warm=one.get("--warm"),
                     forked_from=one.get("--forked-from"))


def _plain_value_follows(rest: list[str]) -> bool:
    """A value comes next that argparse would take as one (it refuses anything starting with `-`
    here: an option, or a negative number, which goes to argparse to decide)."""
    return bool(rest) and not rest[0].startswith("-")


def _argparse(argv: list[str]) -> ServeArgs:
    import argparse

    parser = argparse.ArgumentParser(prog="router serve", description="the router sidecar (stdio)")
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("--agent-dir", default=str(default_agent_dir()))
    parser.add_argument("--policy", action="append", default=[], help="an extra policy file, last")
    parser.add_argument("--warm", metavar="SOCKET", help="serve each connection to this Unix socket "
                        "with a forked sidecar (router/runtime/warm.py)")
    parser.add_argument("--forked-from", metavar="PID", help=argparse.SUPPRESS)  # by the warm sidecar
    args = parser.parse_args(argv)
    return ServeArgs(cwd=args.cwd, agent_dir=args.agent_dir, policy=tuple(args.policy), warm=args.warm,
                     forked_from=args.forked_from)
