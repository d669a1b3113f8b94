"""The installed `router` console script: usage mistakes, version, help pages and shell completion.

Every test runs the script next to this Python in a subprocess, as a user's shell would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
ROUTER = Path(sys.executable).parent / "router"
COMMANDS = ["lint", "explain", "test", "schema", "init", "install", "doctor", "serve", "import", "docs",
            "replay", "diff", "eval", "update",
            "version"]
BOXES = re.compile("[╭╮╰╯│─]")
NOISE = re.compile(r"<\w+(\[\w+\])?>|\[default:|\b(TEXT|INTEGER|BOOLEAN|FLOAT|FILENAME)\b|--no-(?!color)")


def router(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the console script; a plain 80-column, colourless, isolated environment."""
    assert ROUTER.is_file(), f"no console script at {ROUTER}: install the package (pip install -e .)"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("_ROUTER_COMPLETE", "_TYPER_"))}
    base.update({"NO_COLOR": "1", "COLUMNS": "80", "TERM": "dumb"})
    return subprocess.run([str(ROUTER), *args], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**base, **(env or {})}, stdin=subprocess.DEVNULL, check=False)


@pytest.fixture(autouse=True)
def isolated_agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))


@pytest.mark.parametrize(
    ("args", "error", "hint"),
    [
        (["lnt"], "error: unknown command 'lnt'",
         "help: did you mean 'lint'? ('router -h' lists the commands)"),
        (["frobnicate"], "error: unknown command 'frobnicate'", "help: 'router -h' lists the commands"),
        (["lint", "--bogus"], "error: unknown option '--bogus'", "help: 'router lint -h' lists the options"),
        (["lint", "--frmat", "json"], "error: unknown option '--frmat'", "help: did you mean '--format'?"),
        (["--bogus"], "error: unknown option '--bogus'", "help: 'router -h' lists the options"),
        (["explain", "--event"], "error: option '--event' requires an argument",
         "help: write it as 'router explain --event FILE'"),
        (["schema", "--out"], "error: option '--out' requires an argument",
         "help: write it as 'router schema --out DIR'"),
        (["explain", "--no-color=yes"], "error: option '--no-color' does not take a value",
         "help: write it as 'router explain --no-color'"),
        (["lint", "--format", "xml"], "error: unknown format 'xml'", "help: expected text, json or sarif"),
        (["test", "-f", "sarif"], "error: unknown format 'sarif'", "help: expected text, json or junit"),
        (["explain", "--mode", "all", "--event", "x.json"], "error: unknown mode 'all'",
         "help: expected full, fails or matched"),
        (["schema", "nope"], "error: unknown schema 'nope'", "help: expected policy or event"),
        (["schema", "--check"], "error: --check needs --out", "help: router schema --out DIR --check"),
        (["explain"], "error: explain needs an event file or a diagnostic code",
         "help: router explain --event FILE"),
        (["version", "extra"], "error: got unexpected extra argument", "help: see 'router version -h'"),
        (["serve", "--bogus"], "error: unknown option '--bogus'",
         "help: 'router serve -h' lists the options"),
    ],
)
def test_usage_mistake_is_two_lines_on_stderr_exit_2(args: list[str], error: str, hint: str) -> None:
    done = router(*args)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and not BOXES.search(done.stderr)
    assert done.stdout == "" and len(lines) == 2, done.stderr
    assert lines[0].startswith(error) and lines[1].startswith(f"  {hint}"), done.stderr


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_flag_prints_the_version_command_line(flag: str) -> None:
    done, command = router(flag), router("version")
    assert done.returncode == 0 and command.returncode == 0 and done.stderr == ""
    assert done.stdout == command.stdout and re.fullmatch(r"router \S+ \(Python \S+\)\n", done.stdout)


def test_bare_router_prints_the_help_exit_0() -> None:
    bare, help_ = router(), router("--help")
    assert bare.returncode == 0 and bare.stderr == "" and bare.stdout == help_.stdout
    assert bare.stdout.startswith("Usage: router [OPTIONS] COMMAND [ARGS]...")
    assert all(re.search(rf"^  {name}\s", bare.stdout, re.MULTILINE) for name in COMMANDS)


@pytest.mark.parametrize("command", [[], *([name] for name in COMMANDS)])
def test_short_h_is_long_help(command: list[str]) -> None:
    short, long = router(*command, "-h"), router(*command, "--help")
    assert short.returncode == 0 and long.returncode == 0 and short.stdout == long.stdout
    assert short.stdout.startswith(f"Usage: {' '.join(['router', *command])} [OPTIONS]")


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_has_one_example_and_no_type_noise(command: str) -> None:
    done = router(command, "--help")
    text = done.stdout
    assert done.returncode == 0 and text.count("Example:") == 1, text
    example = text.split("Example:\n", 1)[1].strip().splitlines()
    assert len(example) == 1 and example[0].startswith(f"router {command}"), text
    assert not NOISE.search(text) and not BOXES.search(text), text


def test_lint_help_page() -> None:
    text = router("lint", "-h").stdout
    assert text.startswith("Usage: router lint [OPTIONS] [PATH]...\n")
    assert re.search(r"^  PATH\.\.\.\s+policy files or directories", text, re.MULTILINE)
    assert re.search(r"^  -f, --format FORMAT\s+text, json or sarif \(default: text\)$", text, re.MULTILINE)
    assert text.rstrip().endswith("Example:\n  router lint .pi/router.yaml")


@pytest.mark.parametrize("command", [[], ["lint"], ["explain"]])
def test_help_is_the_same_without_rich(command: list[str]) -> None:
    with_rich = router(*command, "-h")
    without = router(*command, "-h", env={"TYPER_USE_RICH": "0"})
    assert with_rich.returncode == 0 and with_rich.stdout == without.stdout


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o default -F _router_completion router"),
                                               ("zsh", "#compdef router")])
def test_show_completion_prints_the_named_shells_script(shell: str, marker: str) -> None:
    done = router("--show-completion", shell, env={"SHELL": "/bin/bash"})
    assert done.returncode == 0 and marker in done.stdout and "_ROUTER_COMPLETE" in done.stdout, done.stderr


def test_install_completion_writes_into_home(tmp_path: Path) -> None:
    done = router("--install-completion", "bash", env={"HOME": str(tmp_path), "SHELL": "/bin/bash"})
    script = tmp_path / ".bash_completions" / "router.sh"
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "_router_completion" in script.read_text(encoding="utf-8")
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("words", "expected"),
    [("router li", ["lint"]), ("router lint --format ", ["text", "json", "sarif"]),
     ("router explain --mode f", ["full", "fails"])],
)
def test_bash_completion_answers(words: str, expected: list[str]) -> None:
    done = router(env={"_ROUTER_COMPLETE": "complete_bash", "COMP_WORDS": words,
                       "COMP_CWORD": str(len(words.split(" ")) - 1)})
    assert done.returncode == 0 and done.stdout.split() == expected, done.stdout + done.stderr


def test_exit_codes_clean_and_diagnostics(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - id: a\n    on: inptu\n", encoding="utf-8")
    clean, broken = router("lint", str(ROOT / "rules" / "default.yaml")), router("lint", str(bad))
    assert clean.returncode == 0 and broken.returncode == 1 and "[RT205]" in broken.stdout
    assert "Traceback" not in clean.stderr + broken.stderr
