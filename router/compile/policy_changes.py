"""What a policy release changes, file contents compared: rules added, removed and changed, vars
and settings changed, and which rules read each changed var (`router update`, `router diff`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from router.load.loader import PolicyFile

# The keys of a policy file that are neither its rules nor its vars, nor only its name: the rest,
# compared one entry deep (`signals.hard`, `defaults.log`, `failure_policy.tool_call`).
NOT_SETTINGS = frozenset({"version", "name", "description", "use", "rules", "vars"})


@dataclass(frozen=True)
class Snapshot:
    """The rules (id -> its data and where it is), vars and settings of some loaded files, later
    files overriding earlier ones as the layers do."""

    rules: dict[str, tuple[Any, str]] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


def snapshot(files: Iterable[PolicyFile], relabel: Callable[[PolicyFile], str] | None = None) -> Snapshot:
    """The snapshot of `files` in load order; `relabel` gives the name a report shows for a file
    (a temporary copy's `REV:path`; default: its display path)."""
    found = Snapshot()
    for f in files:
        for index, rule in enumerate(f.policy.rules):
            where = f"{relabel(f) if relabel else f.path}:{f.doc.span(('rules', index)).line}"
            found.rules[rule.id] = (rule.model_dump(by_alias=True, exclude_defaults=True), where)
        found.vars.update(f.policy.vars)
        data = f.policy.model_dump(by_alias=True, exclude_defaults=True)
        for key, value in data.items():
            if key in NOT_SETTINGS:
                continue
            if isinstance(value, dict):
                found.settings.update({f"{key}.{name}": inner for name, inner in value.items()})
            else:
                found.settings[key] = value
    return found


@dataclass(frozen=True)
class ValueChange:
    """A var or setting whose value differs (None on a side that does not have it)."""

    name: str
    old: Any
    new: Any
    readers: tuple[str, ...] = ()  # the rules that read the var (directly or through a signal)


@dataclass
class PolicyChanges:
    added: list[tuple[str, str]] = field(default_factory=list)  # (rule id, where in the new policy)
    removed: list[tuple[str, str]] = field(default_factory=list)  # (rule id, where in the old policy)
    changed: list[tuple[str, str]] = field(default_factory=list)
    vars: list[ValueChange] = field(default_factory=list)
    settings: list[ValueChange] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.vars or self.settings)

    def counts(self) -> str:
        """`rules: 1 added, 0 removed, 2 changed; vars: 1 changed; settings: 0 changed`."""
        return (f"rules: {len(self.added)} added, {len(self.removed)} removed, {len(self.changed)} changed; "
                f"vars: {len(self.vars)} changed; settings: {len(self.settings)} changed")


def compare(old: Snapshot, new: Snapshot) -> PolicyChanges:
    """What changed from `old` to `new`, in the new policy's order (removals in the old one's)."""
    result = PolicyChanges()
    result.added = [(r, where) for r, (_, where) in new.rules.items() if r not in old.rules]
    result.changed = [(r, where) for r, (data, where) in new.rules.items()
                      if r in old.rules and old.rules[r][0] != data]
    result.removed = [(r, where) for r, (_, where) in old.rules.items() if r not in new.rules]
    signals = {**old.settings, **new.settings}
    for name in _changed_keys(old.vars, new.vars):
        readers = readers_of(name, new.rules if name in new.vars else old.rules, signals)
        result.vars.append(ValueChange(name, old.vars.get(name), new.vars.get(name), readers))
    result.settings = [ValueChange(k, old.settings.get(k), new.settings.get(k))
                       for k in _changed_keys(old.settings, new.settings)]
    return result


def readers_of(var: str, rules: dict[str, tuple[Any, str]], settings: dict[str, Any]) -> tuple[str, ...]:
    """The rules whose definition reads `vars.<var>`, or a signal that does (`signals.<name>`)."""
    reads = _reference("vars", var)
    signals = [key.partition(".")[2] for key, value in settings.items()
               if key.startswith("signals.") and reads.search(_text(value))]
    through = [_reference("signals", s) for s in signals]
    return tuple(rule for rule, (data, _) in rules.items()
                 if reads.search(text := _text(data)) or any(p.search(text) for p in through))


def _reference(scope: str, name: str) -> re.Pattern[str]:
    escaped = re.escape(name)
    return re.compile(rf"\b{scope}(?:\.{escaped}\b|\[\s*\\?['\"]{escaped}\\?['\"]\s*\])")


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    keys = [*new, *(k for k in old if k not in new)]
    return [k for k in keys if old.get(k, _MISSING) != new.get(k, _MISSING)]


_MISSING = object()


def value_text(value: Any, limit: int = 60) -> str:
    """A value as one short line of JSON (`(none)` for a side without it)."""
    if value is None:
        return "(none)"
    text = _text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_lines(changes: PolicyChanges) -> list[str]:
    """`+ rule id (where)`, `- rule id (where)`, `~ rule id (where)`, then `~ var name: old -> new
    (read by: …)` and `~ setting key: old -> new`, two spaces in."""
    lines = [f"  + rule {r} ({where})" for r, where in changes.added]
    lines += [f"  ~ rule {r} ({where})" for r, where in changes.changed]
    lines += [f"  - rule {r} (was {where})" for r, where in changes.removed]
    for var in changes.vars:
        readers = f" (read by: {', '.join(var.readers)})" if var.readers else " (read by no rule)"
        lines.append(f"  ~ var {var.name}: {value_text(var.old)} -> {value_text(var.new)}{readers}")
    lines += [f"  ~ setting {s.name}: {value_text(s.old)} -> {value_text(s.new)}" for s in changes.settings]
    return lines


def render_markdown(changes: PolicyChanges) -> list[str]:
    """The rules, vars and settings that changed as Markdown tables (nothing when none did)."""
    lines: list[str] = []
    rules = [*(("added", r, w) for r, w in changes.added), *(("changed", r, w) for r, w in changes.changed),
             *(("removed", r, w) for r, w in changes.removed)]
    if rules:
        lines += ["| rule | change | where |", "|---|---|---|",
                  *(f"| `{r}` | {kind} | `{_cell(w)}` |" for kind, r, w in rules), ""]
    if changes.vars:
        lines += ["| var | old | new | read by |", "|---|---|---|---|"]
        lines += [f"| `{v.name}` | `{_cell(value_text(v.old))}` | `{_cell(value_text(v.new))}` | "
                  f"{', '.join(f'`{r}`' for r in v.readers) or '(no rule)'} |" for v in changes.vars]
        lines.append("")
    if changes.settings:
        lines += ["| setting | old | new |", "|---|---|---|"]
        lines += [f"| `{s.name}` | `{_cell(value_text(s.old))}` | `{_cell(value_text(s.new))}` |"
                  for s in changes.settings]
        lines.append("")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")
