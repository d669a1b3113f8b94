"""`/policy` in Pi: the engine's own command (status, why, trust, untrust), handled by the sidecar.

The trust decision stays in Python: the bridge only shows the confirm dialog the engine asks for
(the `ask` request with `confirm`) and the notification it sends back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.runtime import policy_why, protocol
from router.runtime import trust_review as trust_command
from router.trust.store import TrustDecision, TrustStore, TrustStoreError, decide

if TYPE_CHECKING:
    from router.runtime.server import Engine

NAME = "policy"
DECLARATION = {
    "name": NAME,
    "description": "The router's policy: status, why (the last decision), or trust / untrust this "
                   "project's .pi/router.yaml",
    "completions": ["status", "why", "trust", "untrust"],
}
CONFIRM_BUDGET_MS = 600_000

Ask = Callable[[dict[str, Any], float], Awaitable[Any]]


def usage() -> str:
    return "usage: /policy [status|why [EVENT]|trust|untrust]"


def status_text(cwd: Path, trust: TrustDecision, files: list[str]) -> str:
    lines = [f"router policy for {cwd}:"]
    lines += [f"  {path}" for path in files] or ["  (no policy loaded)"]
    project = cwd / ".pi" / "router.yaml"
    state = {"none": f"no project policy ({project} does not exist)",
             "trusted": f"project policy trusted (sha256 {str(trust.digest)[:12]})",
             "approved": "project policy applied for this run only (approved, not recorded)",
             "untrusted": "project policy NOT applied: not trusted",
             "changed": "project policy NOT applied: changed since it was trusted"}[trust.state]
    lines.append(state)
    if trust.state in ("untrusted", "changed", "approved"):
        lines.append(f"to trust it: /policy trust, or `router trust {trust.root}` in a terminal")
    return "\n".join(lines)


async def trust_project(cwd: Path, agent: Path, *, ask: Ask, has_ui: bool) -> str:
    """Review the project policy, ask the user to confirm, record its digest. The text to show."""
    item = trust_command.review(cwd, agent)
    if item.content is None:
        return f"no project policy at {cwd / '.pi' / 'router.yaml'}: nothing to trust"
    if item.policy is None:
        first = next((d for d in item.diagnostics if d.severity == "error"), None)
        where = f"{first.span}: {first.message} [{first.code}]" if first else "errors"
        return f"{cwd / '.pi' / 'router.yaml'} has errors ({where}); fix them (router lint), then trust it"
    store = TrustStore(agent)
    try:
        state = decide(item.content, item.root, store.projects()).state
    except TrustStoreError as exc:
        return f"cannot trust: {exc}"
    if state == "trusted":
        return "this project policy is already trusted"
    summary = trust_command.render_summary(item, state=state)
    if not has_ui:
        return f"{summary}\nno dialog in this mode: run `router trust {item.root}` in a terminal to trust it"
    reply = await ask({"confirm": True, "title": "Trust this project policy?", "message": summary},
                      CONFIRM_BUDGET_MS / 1000)
    if not (isinstance(reply, dict) and reply.get("value") is True):
        return "not trusted: nothing was recorded"
    store.trust(item.content)
    return f"trusted {cwd / '.pi' / 'router.yaml'} (sha256 {item.content.digest[:12]}); applied now"


def untrust_project(cwd: Path, agent: Path) -> str:
    return trust_command.untrust(cwd, agent)[1]


async def answer(engine: Engine, request_id: Any, args: str, warnings: list[str],
                 session: str = "") -> dict[str, Any]:
    """`/policy [status|why|trust|untrust]` for the session `engine` serves: the notification to
    show, with the declarations and trust as they are after it."""
    word = (args.split() or ["status"])[0]
    if word == "trust":
        engine.connection.notify(protocol.PROGRESS, {
            "id": request_id, "budget_ms": CONFIRM_BUDGET_MS, "signal": "policy"})
        text = await trust_project(
            engine.cwd, engine.agent, has_ui=engine.has_ui,
            ask=lambda params, timeout: engine.connection.request(protocol.ASK, params, timeout))
        engine.load()
    elif word == "untrust":
        text = untrust_project(engine.cwd, engine.agent)
        engine.load(keep_trusted=False)
    elif word == "status":
        files = [path for path, _ in engine.policy.file_refs] if engine.policy else []
        text = status_text(engine.cwd, engine.trust, files)
    elif word == "why":
        event_type = [*args.split(), ""][1] or None
        last = engine.observer.last_decision(session, event_type)
        text = engine.executor.redact(policy_why.why_text(last, event_type))
    else:
        text = usage()
    notify = {"action": "notify", "params": {"text": text, "level": "info"}, "rule": "policy"}
    return {"actions": [notify], "fired": [], "warnings": warnings, "declarations": engine.declarations(),
            "trust": engine.trust_report()}
