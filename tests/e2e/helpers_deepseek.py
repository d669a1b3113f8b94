"""Shared setup for the `deepseek` pack's end-to-end tests (test_pack_deepseek*.py).

Pi 1.6 activates read, bash, edit and write by default; the `defaultTools` setting switches on
grep, find and ls too so the `search` aliases can resolve. The probe extension reports the
active tools (`/probe-tools`) and sends extension-sourced user messages (`/probe-send`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.e2e.fake_chat import ChatSummary
from tests.e2e.helpers_router import RouterRig, command, write_extension
from tests.e2e.pi_harness import model_entry
from tests.e2e.pi_rpc import RpcPi

FULL = ["read", "bash", "edit", "write", "grep", "find", "ls"]
# Pi 1.6's setActiveTools keeps the active tools' order and appends the others, so the restored
# full set comes back in this order (the set is the snapshot's)
RESTORED = ["read", "edit", "write", "bash", "grep", "find", "ls"]
REACT = ["read", "edit", "write"]
SEARCH = ["read", "edit", "grep", "find", "ls"]  # spec and weak: read, edit, search
START = "<!-- pi-deepseek-router:start -->"
END = "<!-- pi-deepseek-router:end -->"
HANDS_ON = (
    "You are a hands-on engineer who delivers working output fast.\n"
    "Work in a tight produce, verify, fix loop and finish with a usable deliverable and a short summary."
)
GUIDANCE = "Router: classify this task (build or fix) now"
DEEP = "architecture, edge cases, and integration points"
PRO = ("--model", "fake/deepseek-v4-pro")
DISABLED = 'DeepSeek Router\nDisabled\nCurrent model ID does not start with "deepseek".'
SELECT_OPTIONS = [
    "Auto — Automatic routing (recommended)",
    "Spec — Debug / review / maintenance",
    "React — Build / implement / modify",
    "Status — Show current router status",
]

PROBE = """
export default function (pi) {
  pi.registerCommand("probe-tools", {
    description: "notify the active tools",
    handler: async (_args, ctx) => ctx.ui.notify("tools=" + pi.getActiveTools().join(","), "info"),
  });
  pi.registerCommand("probe-send", {
    description: "send the argument as an extension-sourced user message",
    handler: async (args) => pi.sendUserMessage(args),
  });
}
"""


def setup(rig: RouterRig) -> None:
    """The pack on, seven built-in tools active; extra models flash, gpt-5, DeepSeek-Coder-V3, deepseek/x."""
    path = rig.agent / "models.json"
    data = json.loads(path.read_text())
    fake = data["providers"]["fake"]
    reasoning = {"supportsReasoningEffort": True, "thinkingFormat": "openai"}
    fake["models"] += [
        model_entry("deepseek-v4-flash", 128000, reasoning=True, compat=reasoning),
        model_entry("gpt-5", 200000, reasoning=True, compat=reasoning),
        model_entry("DeepSeek-Coder-V3", 128000, reasoning=True, compat=reasoning),
    ]
    data["providers"]["deepseek"] = {**fake, "models": [model_entry("x", 64000)]}
    path.write_text(json.dumps(data, indent=2))
    rig.settings(defaultTools=FULL)
    rig.policy("use: [deepseek]\n")


def block(mode: str, band: str, persona: str) -> str:
    return f"{START}\n## DeepSeek Router\nmode={mode} band={band}\n{persona}\n{END}"


def guidance_messages(chat: ChatSummary) -> list[int]:
    """Indexes of the wire messages that carry the router's guidance."""
    return [i for i, m in enumerate(chat.messages) if GUIDANCE in m["text"]]


def probe(rig: RouterRig, *args: str, **kwargs: Any) -> RpcPi:
    """An RPC Pi with the pack and the probe extension (probe-tools, probe-send)."""
    extension = write_extension(rig.tmp, "probe", PROBE)
    return rig.rpc(*args, "-e", str(extension), **kwargs)


def active_tools(rpc: RpcPi) -> list[str]:
    [line] = [n for n in command(rpc, "/probe-tools") if n.startswith("tools=")]
    return line.removeprefix("tools=").split(",") if line != "tools=" else []


def answer_selects(*answers: str | None) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A UI handler answering successive select dialogs (None: cancel); other dialogs cancelled."""
    queue = list(answers)

    def handle(request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("method") == "select" and queue:
            value = queue.pop(0)
            return {"cancelled": True} if value is None else {"value": value}
        return {"cancelled": True} if request.get("method") in ("confirm", "input", "editor") else None

    return handle
