"""The managed layer: an administrator's policy above the user's, whose rules may be `locked`.

It is `<dir>/router.yaml` (and what it `use:`s), where `<dir>` is `$ROUTER_MANAGED_DIR` when set,
else `/etc/pi-policy-router/`. It loads right after the built-in default pack, so the user's and
the project's files layer over it as over any file, except for its `locked: true` rules: a lower
file that overrides one (same id), disables one, or places a rule ahead of one in its group is
refused there (RT609): that rule or entry is dropped, the rest applies, and the user is told.
The managed layer is trusted like the user's own file and has the user's capabilities.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from router.diagnostics.code_names import LOCKED_RULE_CHANGED
from router.diagnostics.diagnostic import Diagnostic, Severity, Span
from router.trust.capabilities import Refusal

MANAGED = "managed"
MANAGED_ENV = "ROUTER_MANAGED_DIR"
SYSTEM_DIR = Path("/etc/pi-policy-router")
LOCKED_CODE = LOCKED_RULE_CHANGED
HELP = ("a locked rule of the managed policy stays as your administrator wrote it; add a rule with "
        "another id, placed after it")


class _Entry(Protocol):
    rule: Any
    file: Any
    group: str


def managed_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$ROUTER_MANAGED_DIR` when set, else `/etc/pi-policy-router`."""
    env = os.environ if environ is None else environ
    configured = env.get(MANAGED_ENV)
    return Path(configured).expanduser() if configured else SYSTEM_DIR


def managed_policy(environ: Mapping[str, str] | None = None) -> Path:
    return managed_dir(environ) / "router.yaml"


def is_locked(entry: _Entry | None) -> bool:
    return entry is not None and bool(entry.rule.locked) and entry.file.layer == MANAGED


def guard_rule(entry: _Entry, ordered: Sequence[_Entry], by_id: Mapping[str, _Entry]) -> Refusal | None:
    """The refusal of a lower file's rule that would override a locked rule or go ahead of one."""
    f, rule = entry.file, entry.rule
    if f.layer == MANAGED:
        return None
    previous = by_id.get(rule.id)
    span = f.doc.span(("rules", entry.index, "id")) if hasattr(entry, "index") else None
    if is_locked(previous):
        assert previous is not None
        return _refusal("rule", rule.id, f.layer, f"it overrides the locked rule '{rule.id}' of the "
                        f"managed policy ({previous.file.path})", span)
    anchor = rule.before or rule.after
    target = by_id.get(anchor) if anchor else None
    if target is None:
        return None
    at = next(i for i, e in enumerate(ordered) if e is target) + (0 if rule.before else 1)
    group = rule.group or (previous.group if previous is not None else entry.group)
    ahead = next((e for e in ordered[at:] if is_locked(e) and e.group == group and e is not previous), None)
    if ahead is None:
        return None
    key = "before" if rule.before else "after"
    return _refusal("rule", rule.id, f.layer, f"`{key}: {anchor}` places it ahead of the locked rule "
                    f"'{ahead.rule.id}' of the managed policy ({ahead.file.path})",
                    f.doc.span(("rules", entry.index, key)) if hasattr(entry, "index") else span)


def guard_disable(rule_id: str, f: Any, target: _Entry | None, span: Span) -> Refusal | None:
    """The refusal of a lower file's `disable:` entry naming a locked rule."""
    if f.layer == MANAGED or not is_locked(target):
        return None
    assert target is not None
    return _refusal("disable", rule_id, f.layer, f"it disables the locked rule '{rule_id}' of the managed "
                    f"policy ({target.file.path})", span)


def locked_elsewhere(rule_id: str, span: Span) -> Diagnostic:
    """`locked: true` outside the managed layer: it means nothing there."""
    return Diagnostic(LOCKED_CODE, f"rule '{rule_id}' says `locked: true`, which only the managed "
                      "policy's rules can be", span, Severity.WARNING, rule_id=rule_id,
                      help=f"remove `locked:`; locked rules live in {SYSTEM_DIR}/router.yaml or "
                      f"${MANAGED_ENV}/router.yaml")


def _refusal(kind: str, name: str, layer: str, reason: str, span: Span | None) -> Refusal:
    return Refusal(kind, name, layer, LOCKED_CODE, reason, span, HELP)
