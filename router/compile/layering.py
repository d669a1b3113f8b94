"""Layers merged: rules overridden, disabled and placed by id (`before:`/`after:`), vars by name."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from router.compile.context import Entry
from router.diagnostics.code_names import (
    DUPLICATE_RULE_ID,
    UNKNOWN_OVERRIDE_ID,
    USER_ONLY_VAR,
    USER_ONLY_VAR_SWITCHED_ON,
)
from router.diagnostics.diagnostic import Diagnostic, Severity
from router.diagnostics.suggest import did_you_mean
from router.load.loader import PolicyFile
from router.load.managed import MANAGED, guard_disable, guard_rule, locked_elsewhere
from router.load.model import EnvVar
from router.load.validation import validation_diagnostics
from router.trust.capabilities import (
    Refusal,
)


def merge_rules(files: list[PolicyFile], diagnostics: list[Diagnostic],
                 refused: list[Refusal] | None = None) -> list[Entry]:
    ordered: list[Entry] = []
    by_id: dict[str, Entry] = {}  # the entry of each id in `ordered`: placing a new rule stays O(1)
    refused = [] if refused is None else refused
    for f in files:
        seen_here: set[str] = set()
        for index, rule in enumerate(f.policy.rules):
            span = f.doc.span(("rules", index, "id"))
            if rule.id in seen_here:
                diagnostics.append(Diagnostic(DUPLICATE_RULE_ID, f"duplicate rule id '{rule.id}'", span,
                                              rule_id=rule.id, help="rule ids must be unique in a file; "
                                              "a later file with the same id overrides the rule"))
                continue
            seen_here.add(rule.id)
            entry = Entry(rule, f, index, rule.group or f.group)
            if rule.locked and f.layer != MANAGED:
                where = f.doc.span(("rules", index, "locked"), key=True)
                diagnostics.append(locked_elsewhere(rule.id, where))
            guard = guard_rule(entry, ordered, by_id)
            if guard is not None:
                refused.append(guard)
                continue
            _place(ordered, by_id, entry, f, diagnostics)
        for index, rule_id in enumerate(f.policy.disable):
            guard = guard_disable(rule_id, f, by_id.get(rule_id), f.doc.span(("disable", index)))
            if guard is not None:
                refused.append(guard)
                continue
            if by_id.pop(rule_id, None) is None:
                diagnostics.append(Diagnostic(
                    UNKNOWN_OVERRIDE_ID, f"`disable:` names unknown rule '{rule_id}'",
                    f.doc.span(("disable", index)),
                    Severity.WARNING, help=did_you_mean(rule_id, [e.rule.id for e in ordered])))
                continue
            ordered[:] = [e for e in ordered if e.rule.id != rule_id]
    return [e for e in ordered if e.rule.enabled]


def _position(ordered: list[Entry], entry: Entry) -> int:
    return next(i for i, e in enumerate(ordered) if e is entry)


def _place(ordered: list[Entry], by_id: dict[str, Entry], entry: Entry, f: PolicyFile,
           diagnostics: list[Diagnostic]) -> None:
    rule = entry.rule
    previous = by_id.get(rule.id)
    anchor_id = rule.before or rule.after
    by_id[rule.id] = entry
    if previous is not None:
        existing = _position(ordered, previous)
        if rule.group is None:
            entry.group = previous.group
        if anchor_id is None:
            ordered[existing] = entry
            return
        del ordered[existing]
    if anchor_id is None:
        ordered.append(entry)
        return
    target = by_id.get(anchor_id) if anchor_id != rule.id else None
    if target is None:
        key = "before" if rule.before else "after"
        diagnostics.append(Diagnostic(
            UNKNOWN_OVERRIDE_ID, f"rule '{rule.id}' is placed {key} unknown rule '{anchor_id}'; it goes last",
            f.doc.span(("rules", entry.index, key)), Severity.WARNING, rule_id=rule.id,
            help=did_you_mean(anchor_id, [e.rule.id for e in ordered])))
        ordered.append(entry)
        return
    anchor = _position(ordered, target)
    if rule.group is None:
        entry.group = target.group
    ordered.insert(anchor if rule.before else anchor + 1, entry)


def merge_vars(files: list[PolicyFile], diagnostics: list[Diagnostic],
                refused: list[Refusal]) -> tuple[dict[str, Any], dict[str, EnvVar]]:
    literals: dict[str, Any] = {}
    env_vars: dict[str, EnvVar] = {}
    reserved = {name: text for f in files for name, text in f.policy.user_vars.items()}
    for f in files:
        for name, value in f.policy.vars.items():
            if name in reserved and not _may_set_reserved(f, name, value, reserved[name], diagnostics,
                                                          refused):
                continue
            literals.pop(name, None)
            env_vars.pop(name, None)
            if isinstance(value, dict) and "env" in value:
                try:
                    env_vars[name] = EnvVar.model_validate(value)
                except ValidationError as exc:
                    diagnostics.extend(validation_diagnostics(exc, f.doc, EnvVar, base=("vars", name)))
            else:
                literals[name] = value
    return literals, env_vars


def _may_set_reserved(f: PolicyFile, name: str, value: Any, text: str, diagnostics: list[Diagnostic],
                      refused: list[Refusal]) -> bool:
    """A `user_vars:` var: a project layer may not set it (refused, RT124); the user is warned (RT316)."""
    span = f.doc.span(("vars", name), key=True)
    if f.layer == "project":
        refused.append(Refusal("var", name, f.layer, USER_ONLY_VAR, "only your own policy "
                               "(~/.pi/agent/router.yaml) may set it; the project's value is ignored",
                               span, f"it {text}"))
        return False
    if f.layer != "pack" and value not in (None, False, 0, ""):
        diagnostics.append(Diagnostic(USER_ONLY_VAR_SWITCHED_ON, f"vars.{name} is on: it {text}", span,
                                      severity=Severity.WARNING,
                                      help=f"remove vars.{name} unless you want exactly that"))
    return True
