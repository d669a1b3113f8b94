"""Every console example of the docs runs and prints what the docs say it prints.

The convention (docs/development.md, "Console examples in the docs"):

- A fenced block marked ```` ```console ```` holds commands and their output. A line starting with
  `$ ` is a command (a line ending in `\\` continues on the next one); the lines after it, up to the
  next command, are its expected standard output and standard error, merged. A line right after
  the command that starts with `> ` continues it too (the shell's prompt inside a quoted string).
  Trailing blank lines of an output are not part of it.
- A fenced block whose info string carries `file=PATH` (```` ```yaml file=.pi/router.yaml ````) is
  written to PATH before the examples after it run; PATH is relative to the project, or starts
  with `~/` for the home directory.
- Each document runs from top to bottom in its own fresh project `~/project` (empty but for the
  files the document writes), with an empty home directory, `PI_CODING_AGENT_DIR=~/.pi/agent`,
  and the `router` of this Python first on `PATH`. Commands run through `bash -c`.
- Output is compared exactly after normalizing the temporary home (shown as `/home/user`), the
  router's install location (shown as a checkout in `~/pi-policy-router` with its `.venv`) and
  version numbers.
- Blocks that must not run (installation, Pi itself, the network) are ```` ```bash ```` or
  ```` ```text ````; a ```` ```text ```` block never starts a line with `$ `.

`ROUTER_UPDATE_DOCS=1 python3 -m pytest tests/project/test_docs_examples.py` rewrites the expected
outputs in the documents instead of failing.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from router.load.paths import packs_dir

ROOT = Path(__file__).resolve().parent.parent.parent
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("*/*.md")])
UPDATE = os.environ.get("ROUTER_UPDATE_DOCS", "") not in ("", "0")
COMMAND_TIMEOUT_S = 900  # a hang guard, not a deadline: a loop of eight commands took over 120 s at load 17

FENCE = re.compile(r"^(`{3,})([^`\s]*)(.*)$")
VERSION = re.compile(r"\b(router|Python) \d+(?:\.\d+)+\S*")
TRACE_LINE = re.compile(r"^(\S+:\d+) {2,}(\S.*)$")

SAMPLE_HOME = "/home/user"
SAMPLE_CHECKOUT = "pi-policy-router"
SAMPLE_SCRIPTS = f"{SAMPLE_HOME}/{SAMPLE_CHECKOUT}/.venv/bin"
INTERPRETER = re.compile(re.escape(SAMPLE_SCRIPTS) + r"/python[\d.]*\b")


@dataclass
class Command:
    """One `$ ` command of a console block and the output the document expects."""

    line: int                         # 1-based line of the `$ ` in the document
    source: list[str]                 # the command's lines as written (with `$ ` and `\`)
    expected: list[str] = field(default_factory=list)

    @property
    def shell(self) -> str:
        """The command as the shell gets it (without the `$ ` and `> ` prompts)."""
        first, *rest = self.source
        return "\n".join([first[2:], *(line[2:] if line.startswith("> ") else line for line in rest)])


@dataclass
class Block:
    """A fenced block: its language, attributes, body lines and where the body sits."""

    lang: str
    attrs: dict[str, str]
    body: list[str]
    start: int                        # 0-based index of the first body line
    end: int                          # 0-based index of the closing fence

    def commands(self) -> list[Command]:
        commands: list[Command] = []
        continued = False
        for offset, text in enumerate(self.body):
            if continued or (text.startswith("> ") and commands and not commands[-1].expected):
                commands[-1].source.append(text)
            elif text.startswith("$ "):
                commands.append(Command(self.start + offset + 1, [text]))
            elif commands:
                commands[-1].expected.append(text)
            elif text.strip():
                raise ValueError(f"line {self.start + offset + 1}: console output before any `$ ` command")
            continued = bool(commands) and not commands[-1].expected and text.endswith("\\")
        for command in commands:
            while command.expected and not command.expected[-1].strip():
                command.expected.pop()
        return commands


def parse_blocks(lines: list[str]) -> list[Block]:
    """The fenced blocks of a Markdown document (fences at the start of a line)."""
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, lang, rest = opening.groups()
        attrs = dict(item.split("=", 1) for item in rest.split() if "=" in item)
        close = index + 1
        while close < len(lines) and not (lines[close].startswith(fence) and not lines[close].strip("`")):
            close += 1
        blocks.append(Block(lang, attrs, lines[index + 1:close], index + 1, close))
        index = close + 1
    return blocks


@dataclass
class Sandbox:
    """A fresh home directory with an empty project in it, and how to show its paths."""

    home: Path

    @property
    def project(self) -> Path:
        return self.home / "project"

    def environment(self) -> dict[str, str]:
        scripts = Path(sys.executable).parent
        return {"PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
                "HOME": str(self.home), "PI_CODING_AGENT_DIR": str(self.home / ".pi" / "agent"),
                "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "NO_COLOR": "1", "TERM": "dumb",
                "COLUMNS": "100", "TMPDIR": str(self.home.parent)}

    def path(self, name: str) -> Path:
        return self.home / name[2:] if name.startswith("~/") else self.project / name

    def normalize(self, text: str) -> str:
        """Machine-specific paths replaced by the documented sample ones, trace columns re-aligned."""
        replacements = [(str(packs_dir()), f"~/{SAMPLE_CHECKOUT}/rules"),
                        (str(Path(sys.executable).parent), SAMPLE_SCRIPTS),
                        (str(self.home.resolve()), SAMPLE_HOME), (str(self.home), SAMPLE_HOME)]
        for real, sample in sorted(replacements, key=lambda pair: -len(pair[0])):
            text = text.replace(real, sample)
        text = INTERPRETER.sub(f"{SAMPLE_SCRIPTS}/python3", text)
        return realign("\n".join(line.rstrip() for line in text.splitlines()))

    def run(self, command: Command, cwd: Path | None = None) -> list[str]:
        done = subprocess.run(["bash", "-c", command.shell], cwd=cwd or self.project, env=self.environment(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=COMMAND_TIMEOUT_S, check=False)
        lines = self.normalize(done.stdout).splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        return lines


def realign(text: str) -> str:
    """Pad the `file:line` column of explain traces again, as `router explain` pads it."""
    paragraphs = text.split("\n\n")
    for number, paragraph in enumerate(paragraphs):
        lines = paragraph.split("\n")
        places = [TRACE_LINE.match(line) for line in lines]
        width = max((len(m.group(1)) for m in places if m), default=0)
        paragraphs[number] = "\n".join(f"{m.group(1).ljust(width)}  {m.group(2)}" if m else line
                                       for line, m in zip(lines, places, strict=True))
    return "\n\n".join(paragraphs)


def same(expected: list[str], actual: list[str]) -> bool:
    return [VERSION.sub(r"\1 <version>", line) for line in expected] == \
           [VERSION.sub(r"\1 <version>", line) for line in actual]


def rendered(commands: list[Command], outputs: list[list[str]]) -> list[str]:
    """A console block's body with the given outputs."""
    body: list[str] = []
    for number, (command, output) in enumerate(zip(commands, outputs, strict=True)):
        body += command.source + output
        if output and number + 1 < len(commands):
            body.append("")
    return body


def run_document(document: Path, home: Path) -> tuple[list[str], list[str]]:
    """Run a document's examples; return its mismatches and its text with the actual outputs."""
    lines = document.read_text(encoding="utf-8").split("\n")
    sandbox = Sandbox(home)
    sandbox.project.mkdir(parents=True)
    mismatches: list[str] = []
    replacements: list[tuple[Block, list[str]]] = []
    for block in parse_blocks(lines):
        if "file" in block.attrs:
            write_block(block, sandbox.path(block.attrs["file"]))
        if block.lang != "console":
            continue
        commands = block.commands()
        outputs = [sandbox.run(command) for command in commands]
        wrong = [(c, o) for c, o in zip(commands, outputs, strict=True) if not same(c.expected, o)]
        for command, output in wrong:
            diff = difflib.unified_diff(command.expected, output, "documented", "actual", lineterm="")
            mismatches.append(f"{display(document)}:{command.line}: $ {command.shell}\n" + "\n".join(diff))
        if wrong:
            replacements.append((block, rendered(commands, outputs)))
    updated = list(lines)
    for block, body in reversed(replacements):
        updated[block.start:block.end] = body
    return mismatches, updated


def write_block(block: Block, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(block.body) + "\n", encoding="utf-8")


def display(document: Path) -> str:
    return str(document.relative_to(ROOT)) if document.is_relative_to(ROOT) else document.name


def complete_policies(document: Path) -> list[Block]:
    """The YAML blocks that are whole policy files: their first line is `version: 1`."""
    blocks = parse_blocks(read_lines(document))
    return [block for block in blocks if block.lang == "yaml" and block.body[:1] == ["version: 1"]]


def console_documents() -> list[Path]:
    return [d for d in DOCUMENTS if any(b.lang == "console" for b in parse_blocks(read_lines(d)))]


def read_lines(document: Path) -> list[str]:
    return document.read_text(encoding="utf-8").split("\n")


@pytest.fixture(scope="module", autouse=True)
def router_script() -> None:
    script = Path(sys.executable).parent / "router"
    assert script.exists(), f"no `router` console script next to {sys.executable}: pip install -e ."
    assert shutil.which("bash"), "the console examples run through bash"


@pytest.mark.parametrize("document", console_documents(), ids=display)
def test_console_examples_print_what_the_docs_say(document: Path, tmp_path: Path) -> None:
    mismatches, updated = run_document(document, tmp_path / "home")
    if UPDATE and mismatches:
        document.write_text("\n".join(updated), encoding="utf-8")
        return
    assert not mismatches, ("\n\n".join(mismatches)
                            + "\n\nafter a deliberate output change: "
                              "ROUTER_UPDATE_DOCS=1 python3 -m pytest tests/project/test_docs_examples.py")


@pytest.mark.parametrize("document", DOCUMENTS, ids=display)
def test_shell_sessions_are_marked_console(document: Path) -> None:
    """A `$ ` line outside a console block would be an example no test checks."""
    unchecked = [f"{display(document)}:{block.start + offset + 1}: {text}"
                 for block in parse_blocks(read_lines(document)) if block.lang != "console"
                 for offset, text in enumerate(block.body) if text.startswith("$ ")]
    assert not unchecked, "mark these blocks ```console (checked) or drop the `$ `:\n" + "\n".join(unchecked)


def policy_blocks() -> list[tuple[Path, int]]:
    """Each complete policy of the docs as (document, the block's first body line): one test each,
    so that pytest-xdist spreads a document's policies over its workers."""
    return [(document, block.start) for document in DOCUMENTS for block in complete_policies(document)]


@pytest.mark.parametrize(("document", "start"), policy_blocks(),
                         ids=[f"{display(d)}:{start}" for d, start in policy_blocks()])
def test_complete_policies_lint_and_test_as_documented(document: Path, start: int, tmp_path: Path) -> None:
    """A `version: 1` block lints clean (or with exactly the codes of its `lint=` attribute) and its
    examples pass, next to the other files the document writes."""
    sandbox = Sandbox(tmp_path / "home")
    sandbox.project.mkdir(parents=True)
    blocks = parse_blocks(read_lines(document))
    for block in blocks:
        if "file" in block.attrs:
            write_block(block, sandbox.path(block.attrs["file"]))
    (block,) = [block for block in complete_policies(document) if block.start == start]
    problems: list[str] = []
    where = f"{display(document)}:{block.start}"
    target = sandbox.path(block.attrs.get("file", "policy.yaml")).parent / f"doc-block-{block.start}.yaml"
    write_block(block, target)
    codes = lint_codes(sandbox, target)
    expected = sorted(filter(None, block.attrs.get("lint", "").split(",")))
    if codes != expected:
        problems.append(f"{where}: lint reports {codes or 'nothing'}, "
                        f"the block's lint= says {expected or 'nothing'}")
    if not expected and any(line.lstrip().startswith("examples:") for line in block.body):
        done = sandbox.run(Command(block.start, [f"$ router test {target.name}"]), cwd=target.parent)
        if not any(line.startswith("FAIL: 0/") for line in done):
            problems.append(f"{where}: its examples fail:\n" + "\n".join(done))
    assert not problems, "\n".join(problems)


def lint_codes(sandbox: Sandbox, policy: Path) -> list[str]:
    """The diagnostic codes `router lint FILE` reports."""
    done = subprocess.run(["router", "lint", "--format", "json", policy.name], cwd=policy.parent,
                          env=sandbox.environment(), capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, check=False)
    return sorted({d["code"] for d in json.loads(done.stdout)["diagnostics"]})


def test_console_blocks_parse_commands_outputs_and_continuations() -> None:
    lines = ["```console", "$ router lint \\", "    --format json", "[]", "", "$ echo 'a", "> b'", "a", "b",
             "", "$ true", "", "```"]
    (block,) = parse_blocks(lines)
    commands = block.commands()
    assert [c.source for c in commands] == [["$ router lint \\", "    --format json"], ["$ echo 'a", "> b'"],
                                            ["$ true"]]
    assert [c.expected for c in commands] == [["[]"], ["a", "b"], []]
    assert [c.shell for c in commands] == ["router lint \\\n    --format json", "echo 'a\nb'", "true"]
    assert rendered(commands, [["[]"], ["a", "b"], []]) == lines[1:11]


def test_file_blocks_carry_their_path() -> None:
    (block,) = parse_blocks(["```yaml file=.pi/router.yaml", "version: 1", "```"])
    assert (block.lang, block.attrs, block.body) == ("yaml", {"file": ".pi/router.yaml"}, ["version: 1"])


def test_a_wrong_output_is_reported_and_updated(tmp_path: Path) -> None:
    document = tmp_path / "guide.md"
    second = "```console\n$ echo same\nsame\n```\n"
    document.write_text("```console\n$ echo hello\nbye\n```\n\n" + second)
    mismatches, updated = run_document(document, tmp_path / "home")
    assert len(mismatches) == 1 and "-bye" in mismatches[0] and "+hello" in mismatches[0]
    assert "\n".join(updated) == "```console\n$ echo hello\nhello\n```\n\n" + second


def test_paths_and_versions_are_normalized(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path / "home")
    scripts = Path(sys.executable).parent
    text = (f"{packs_dir()}/default.yaml:13  rule a\nx.yaml:3  rule b\n{tmp_path}/home/project/f\n"
            f"sidecar: {scripts}/python3.11 -P -m router serve")
    assert sandbox.normalize(text).split("\n") == [
        f"~/{SAMPLE_CHECKOUT}/rules/default.yaml:13  rule a",
        "x.yaml:3                                  rule b",
        "/home/user/project/f",
        f"sidecar: /home/user/{SAMPLE_CHECKOUT}/.venv/bin/python3 -P -m router serve"]
    assert same(["router 0.1.0 (Python 3.11.7)"], ["router 0.2.1 (Python 3.12.1)"])
    assert not same(["Found 0 errors"], ["Found 1 error"])
