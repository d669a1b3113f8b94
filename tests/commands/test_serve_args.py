"""`router serve`'s options (router/runtime/server.py): the quick reading of the bridge's command
line agrees with argparse on every command line, and argparse still answers the rest."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from router.runtime.serve_args import ServeArgs, _argparse, parse_args

NAMES = ["--cwd", "--agent-dir", "--policy", "--warm", "--forked-from", "--cw", "--polic", "--other", "-h",
         "--help", "--", "x"]
VALUES = ["/tmp/p", "", "-1", "-x", "--cwd", "a=b", "é", " "]
TOKEN = st.one_of(st.sampled_from(NAMES), st.sampled_from(VALUES),
                  st.builds(lambda n, v: f"{n}={v}", st.sampled_from(NAMES), st.sampled_from(VALUES)))


def outcome(parse: Callable[[list[str]], ServeArgs], argv: list[str]) -> ServeArgs | str:
    """What `parse(argv)` gives: its arguments, or the exit argparse took."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return parse(argv)
        except SystemExit as exc:
            return f"exit {exc.code}"


@given(st.lists(TOKEN, max_size=6))
def test_the_quick_reading_agrees_with_argparse(argv: list[str]) -> None:
    assert outcome(parse_args, argv) == outcome(_argparse, argv)


def test_the_bridge_command_line_is_read_without_argparse() -> None:
    code = ("import sys\nfrom router.runtime.server import parse_args\n"
            "args = parse_args(['--cwd', '/p', '--agent-dir=/a', '--policy', 'x.yaml', '--policy',"
            " 'y.yaml'])\n"
            "print(args.cwd, args.agent_dir, args.policy, 'argparse' in sys.modules)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(maxsplit=2) == ["/p", "/a", "('x.yaml', 'y.yaml') False\n"]


def test_a_mistake_still_gets_argparse_s_error() -> None:
    wrong = subprocess.run([sys.executable, "-P", "-m", "router", "serve", "--cwd"], capture_output=True,
                           text=True, check=False, stdin=subprocess.DEVNULL)
    assert wrong.returncode == 2 and "argument --cwd: expected one argument" in wrong.stderr
