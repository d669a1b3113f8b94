"""Shared helpers for the `decision` pack's end-to-end tests (test_pack_decision*.py).

The fake provider answers both the parent session and the decision delegate: the delegate's
requests carry its system prompt ("You are the decision delegate ..."), whether they come from the
child `pi --print ...` process or, with PI_DECISION_ROUTER_VIA=registry, from Pi's model registry
in-process. The child's argv and stdin are recorded by a stub `PI_DECISION_ROUTER_PI_BIN` that
execs the real pi shim.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.e2e.fake_chat import ChatSummary, content_text
from tests.e2e.fake_provider import Reply
from tests.e2e.helpers_router import RouterRig, tool_call

JsonDict = dict[str, Any]
POLICY = "use: [decision]\n"
DELEGATE_MARK = "You are the decision delegate"
SUMMARY_MARK = "context summarization assistant"
MARKER = "[pi-decision-router]"
ALIASES = ("question", "questionnaire", "ask_question", "ask_user_question", "AskUserQuestion")
CHILD_FLAGS = ["--print", "--no-session", "--no-tools", "--no-extensions", "--no-skills",
               "--no-prompt-templates", "--no-themes", "--no-context-files", "--thinking", "off"]
FALLBACK_REASON = ("Child agent was unavailable or returned an invalid answer; fallback policy selected "
                   "the recommended/default option or first option.")
OPEN_REASON = "No options were provided; fallback policy supplied an unattended default."
CHILD_OFF = {"attempted": False, "status": "fallback", "command": "disabled", "error": "child agent disabled"}
STATUS_ON = "Decision Router: [ON] | Enter /decision-router-toggle to switch"
STATUS_OFF = "Decision Router: [OFF] | Enter /decision-router-toggle to switch"
AUDIT_KEYS = ["timestamp", "cwd", "toolName", "questions", "answers", "child"]
ANSWER_KEYS = ["id", "value", "label", "reason", "confidence", "source"]


# -- the fake provider's two audiences ---------------------------------------------------------


def is_delegate(body: JsonDict) -> bool:
    """Whether a chat request body comes from the decision delegate (child or registry)."""
    messages = body.get("messages") or []
    return bool(messages) and DELEGATE_MARK in content_text(messages[0].get("content"))


def is_summary(body: JsonDict) -> bool:
    """Whether a chat request body is Pi's compaction summary request."""
    messages = body.get("messages") or []
    return bool(messages) and SUMMARY_MARK in content_text(messages[0].get("content"))


def delegate_prompt(body: JsonDict) -> JsonDict:
    """The JSON decision prompt (the delegate request's last user message)."""
    return dict(json.loads(content_text(body["messages"][-1]["content"])))


ChildFn = Callable[[JsonDict], Reply]


class Provider:
    """The fake provider's script: the parent gets ``parent`` replies in order (then "done"),
    the delegate gets ``child(prompt)``, and compaction summary requests get a short summary."""

    def __init__(self, rig: RouterRig, parent: Iterable[Reply] = (), child: ChildFn | None = None) -> None:
        self.parent: deque[Reply] = deque(parent)
        self.child: ChildFn = child or (lambda _prompt: Reply(text="not json at all"))
        rig.fake.script.fn = self

    def __call__(self, body: JsonDict) -> Reply:
        if is_delegate(body):
            return self.child(delegate_prompt(body))
        if is_summary(body):
            return Reply(text="SUMMARY OF THE EARLIER WORK", prompt_tokens=300)
        return self.parent.popleft() if self.parent else Reply(text="done")


def delegate_requests(rig: RouterRig) -> list[ChatSummary]:
    return [r for r in rig.fake.chat_requests() if is_delegate(r.body)]


def parent_requests(rig: RouterRig) -> list[ChatSummary]:
    return [r for r in rig.fake.chat_requests() if not is_delegate(r.body) and not is_summary(r.body)]


def answers_json(answers: list[JsonDict]) -> Reply:
    return Reply(text=json.dumps({"answers": answers}))


def pick_first(prompt: JsonDict) -> Reply:
    """A child that answers every question with its first option's label (all labels for multi)."""
    answers = []
    for question in prompt["questions"]:
        labels = [o["label"] for o in question["options"]] or ["free text from the child"]
        value: Any = labels if question["multiSelect"] else labels[0]
        answers.append({"id": question["id"], "value": value, "reason": "child picked it", "confidence": 0.9})
    return answers_json(answers)


def decide(arguments: Any, **reply: Any) -> Reply:
    """An assistant reply that calls decision_request with ``arguments``."""
    return tool_call("decision_request", arguments, **reply)


# -- files and the environment -------------------------------------------------------------------


def audit_path(rig: RouterRig) -> Path:
    return rig.tmp / "audit" / "decisions.jsonl"


def decision_env(rig: RouterRig, **extra: str) -> dict[str, str]:
    """The rig's environment plus the audit log in tmp and ``extra``."""
    return {**rig.env, "PI_DECISION_ROUTER_AUDIT_LOG": str(audit_path(rig)), **extra}


def audit_records(rig: RouterRig) -> list[JsonDict]:
    path = audit_path(rig)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def recording_pi(rig: RouterRig) -> tuple[Path, Path]:
    """A PI_DECISION_ROUTER_PI_BIN stub that records argv, stdin, the `--system-prompt` file's
    text, cwd and pid, then execs the real pi with the same stdin (replayed from a file)."""
    log = rig.tmp / "child-argv.jsonl"
    stub = rig.tmp / "pi-recording"  # the router runs only binaries named pi, pi-…
    stub.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, tempfile\n"
        "argv = sys.argv[1:]\n"
        "data = sys.stdin.buffer.read()\n"
        "system = argv[argv.index('--system-prompt') + 1] if '--system-prompt' in argv else None\n"
        f"with open({str(log)!r}, 'a') as fh:\n"
        "    fh.write(json.dumps({'argv': argv, 'stdin': data.decode(), 'cwd': os.getcwd(),\n"
        "                         'pid': os.getpid(),\n"
        "                         'system_prompt': open(system).read() if system else None}) + '\\n')\n"
        "replay = tempfile.TemporaryFile()\n"
        "replay.write(data)\n"
        "replay.seek(0)\n"
        "os.dup2(replay.fileno(), 0)\n"
        f"os.execv({str(rig.install.bin_dir / 'pi')!r}, ['pi', *argv])\n"
    )
    stub.chmod(0o755)
    return stub, log


def recorded_calls(log: Path) -> list[JsonDict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []


def failing_pi(rig: RouterRig, code: int = 3) -> Path:
    """A PI_DECISION_ROUTER_PI_BIN that exits with ``code`` at once (a child that fails)."""
    stub = rig.tmp / f"pi-failing-{code}"
    stub.write_text(f"#!/bin/sh\necho 'child broke' >&2\nexit {code}\n")
    stub.chmod(0o755)
    return stub


def tool_text(chat: ChatSummary) -> str:
    [text] = chat.texts("tool")[-1:]
    return text
