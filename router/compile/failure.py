"""The failure policy: what the bridge does, per event type, when the engine cannot answer.

The engine can be missing (not started, crashed), slow (past its deadline), or refuse an event
(a line it cannot read, a budget used up). For an event a rule could refuse (a `block` on
`tool_call`, a `rewrite_result` on `tool_result`: the actions declared `refuses`), the default is
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

from router.compile.context import Context
from router.compile.ir import CompiledRule
from router.diagnostics.code_names import FAILURE_POLICY_OPENED, UNKNOWN_EVENT_TYPE
from router.diagnostics.diagnostic import Severity
from router.diagnostics.suggest import did_you_mean
from router.events.catalog import EVENT_TYPES
from router.load.loader import PolicyFile

OPEN, CLOSED = "open", "closed"
FAILURE_CODE = FAILURE_POLICY_OPENED  # a project layer's `open` in `failure_policy:`
UNKNOWN_EVENT_CODE = UNKNOWN_EVENT_TYPE


CLOSABLE = frozenset({"tool_call", "tool_result"})
"""The events the bridge can refuse without the engine: it blocks the call, it withholds the result."""


def guarded_events(rules: Iterable[CompiledRule]) -> frozenset[str]:
    """The closable event types on which an applied (non-shadow) rule has an action that refuses
    (`block`, `rewrite_result`: ActionSpec.refuses)."""
    return frozenset(event for rule in rules
                     if not rule.shadow and any(a.refuses for a in rule.actions)
                     for event in rule.on if event in CLOSABLE)


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
    """The file's `failure_policy:` entries for an event the bridge can refuse (others: RT205)."""
    entries: dict[str, str] = {}
    for event, mode in f.policy.failure_policy.items():
        if event not in CLOSABLE:
            known = f"'{event}' always goes on as Pi would" if event in EVENT_TYPES else \
                f"unknown event type '{event}'"
            ctx.error(UNKNOWN_EVENT_CODE, f"{known}: failure_policy names tool_call or tool_result",
                      f.doc.span(("failure_policy", event), key=True),
                      help=did_you_mean(event, CLOSABLE) or "expected tool_call or tool_result")
            continue
        entries[event] = mode
    return entries

