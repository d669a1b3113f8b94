"""The failure policy: what the bridge does, per event type, when the engine cannot answer.

The engine can be missing (not started, crashed), slow (past its deadline), or refuse an event
(a line it cannot read, a budget used up). For an event a rule could refuse (a `block` on
`tool_call`, a `rewrite_result` on `tool_result`: the actions declared `guard`), the default is
**closed**: the bridge refuses what the rule could have refused, saying why and how to get out.
For every other event the default is **open**: Pi goes on with its own behaviour, told once.

A policy may declare otherwise per event type (`failure_policy: {tool_call: open}`). Built-in
packs, the user's own file and the managed layer may open or close; a project layer may only
close (its `open` would switch the user's own guards off: ignored, RT620); the managed layer's
`closed` cannot be opened by any other layer. The bridge caches the result with the declarations,
so it holds when the engine never starts (docs/security.md, "Failure policy").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from router.compile.compiled import CompiledRule
from router.compile.context import Context
from router.diagnostics.diagnostic import Severity
from router.diagnostics.suggest import did_you_mean
from router.events.catalog import EVENT_TYPES
from router.load.loader import PolicyFile

OPEN, CLOSED = "open", "closed"
FAILURE_CODE = "RT620"  # a project layer's `open` in `failure_policy:`
UNKNOWN_EVENT_CODE = "RT205"


def guard_actions() -> frozenset[str]:
    """The actions that refuse something when they fire (`block`, `rewrite_result`)."""
    from router.actions import ACTIONS

    return frozenset(name for name, spec in ACTIONS.items() if spec.guard)


def guarded_events(rules: Iterable[CompiledRule]) -> frozenset[str]:
    """The event types on which an enabled, applied (non-shadow) rule has a guard action."""
    guards = guard_actions()
    return frozenset(event for rule in rules
                     if not rule.shadow and any(a.name in guards for a in rule.actions)
                     for event in rule.on)


def failure_modes(files: list[PolicyFile], rules: Iterable[CompiledRule], ctx: Context) -> dict[str, str]:
    """`open` or `closed` for every event type the policy has rules or a declaration for."""
    rules = tuple(rules)
    modes = {event: OPEN for rule in rules for event in rule.on}
    modes.update(dict.fromkeys(guarded_events(rules), CLOSED))
    forced: set[str] = set()
    for f in files:
        for event, mode in declared(f, ctx).items():
            if event in forced and mode == OPEN:
                ctx.error(FAILURE_CODE, f"the managed policy keeps `{event}` closed; this `open` is ignored",
                          f.doc.span(("failure_policy", event)), severity=Severity.WARNING)
                continue
            if f.layer == "project" and mode == OPEN and modes.get(event, OPEN) == CLOSED:
                ctx.error(FAILURE_CODE, f"a project policy cannot open `{event}` (it would switch your own "
                          "guards off when the engine cannot answer); this entry is ignored",
                          f.doc.span(("failure_policy", event)), severity=Severity.WARNING,
                          help="declare it in your own ~/.pi/agent/router.yaml if you mean it")
                continue
            modes[event] = mode
            if f.layer == "managed" and mode == CLOSED:
                forced.add(event)
    return dict(sorted(modes.items()))


def declared(f: PolicyFile, ctx: Context) -> Mapping[str, str]:
    """The file's `failure_policy:` entries with a known event type (others: RT205)."""
    entries: dict[str, str] = {}
    for event, mode in f.policy.failure_policy.items():
        if event not in EVENT_TYPES:
            ctx.error(UNKNOWN_EVENT_CODE, f"unknown event type '{event}' in failure_policy",
                      f.doc.span(("failure_policy", event), key=True),
                      help=did_you_mean(event, EVENT_TYPES) or f"expected one of: {', '.join(EVENT_TYPES)}")
            continue
        entries[event] = mode
    return entries

