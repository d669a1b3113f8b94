"""`router update [SOURCE]`: move locked git sources to what their refs name now, show what changed.

Without SOURCE every git source of the layered policy (the managed, user and project layers) is
fetched again; with it, the sources whose lock key, URL or repository match. The locks are
rewritten (entries no file uses any more are dropped) and, per source, the rules added, removed
and changed are listed. A project whose locked content moved must be trusted again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.diagnostics.diagnostic import render_text
from router.load.git_source import GitOrigin, GitSources, emit_notes
from router.load.git_spec import GIT_PREFIX, redact
from router.load.loader import PolicyFile, load_layers
from router.load.paths import display_path, layer_paths
from router.trust.capabilities import refusal_of

RuleMap = dict[str, tuple[Any, str]]  # rule id -> (its definition as data, where it is)


@dataclass
class SourceState:
    """One git source as a load saw it: the commit, its lock, and its rules by id."""

    key: str
    commit: str
    lock: Path
    layers: set[str] = field(default_factory=set)
    rules: RuleMap = field(default_factory=dict)


def sources(files: Iterable[PolicyFile]) -> dict[str, SourceState]:
    """The git sources among the loaded files, each with the rules of its files."""
    found: dict[str, SourceState] = {}
    for f in files:
        origin: GitOrigin | None = f.origin
        if origin is None:
            continue
        state = found.setdefault(origin.key, SourceState(origin.key, origin.commit, origin.lock))
        state.layers.add(f.layer)
        for index, rule in enumerate(f.policy.rules):
            where = f"{f.path}:{f.doc.span(('rules', index)).line}"
            state.rules[rule.id] = (rule.model_dump(by_alias=True, exclude_defaults=True), where)
    return found


def matches(key: str, wanted: str) -> bool:
    """Whether the lock key `key` is the source the user named (key, URL or repository)."""
    url, _, _ref = key[len(GIT_PREFIX):].rpartition("@")
    given = redact(wanted[len(GIT_PREFIX):] if wanted.startswith(GIT_PREFIX) else wanted)
    given = given.partition("#")[0]
    return given in (key[len(GIT_PREFIX):], url) or given.removesuffix(".git") == url.removesuffix(".git")


def changes(old: RuleMap, new: RuleMap) -> list[str]:
    """`+ id (where)`, `- id`, `~ id (where)` lines, in the new file order, removals last."""
    lines = [f"  + rule {rule_id} ({where})" for rule_id, (_, where) in new.items() if rule_id not in old]
    lines += [f"  ~ rule {rule_id} ({where})" for rule_id, (data, where) in new.items()
              if rule_id in old and old[rule_id][0] != data]
    lines += [f"  - rule {rule_id}" for rule_id in old if rule_id not in new]
    return lines


def run(wanted: str | None, *, cwd: Path, agent: Path) -> tuple[int, str]:
    """Update and report; exit 1 when nothing matched or a source could not be updated."""
    layers = layer_paths(cwd, agent=agent)
    quiet = GitSources(fetch=True)
    before = sources(load_layers(layers, git=quiet)[0])
    emit_notes(quiet)
    keys = [k for k in before if wanted is None or matches(k, wanted)]
    if wanted is not None and not keys:
        known = ", ".join(sorted(before)) or "none"
        return 1, f"error: no git source matches {redact(wanted)!r} (the policy's git sources: {known})"
    if not keys:
        return 0, "no git sources in the layered policy: nothing to update"
    git = GitSources(fetch=True, refresh=frozenset(keys))
    files, diagnostics = load_layers(layers, git=git)
    emit_notes(git)
    failed = [d for d in diagnostics if (r := refusal_of(d)) is not None and r.code.startswith("RT12")]
    after = sources(files)
    if not failed:
        _prune(git, files)
    lines = [_report(key, before[key], after.get(key)) for key in keys]
    if any(after.get(k) and after[k].commit != before[k].commit and "project" in before[k].layers
           for k in keys):
        lines.append("the project policy's content changed: Pi applies it again once you trust it "
                     "(`router trust`)")
    text = "\n".join(lines)
    if failed:
        return 1, f"{render_text(failed)}\n{text}"
    return 0, text


def _report(key: str, old: SourceState, new: SourceState | None) -> str:
    if new is None:
        return f"{key}: not updated (see the errors above)"
    where = display_path(new.lock)
    if new.commit == old.commit:
        return f"{key}: up to date at {new.commit[:7]} ({where})"
    body = changes(old.rules, new.rules) or ["  (no rule changed)"]
    return "\n".join([f"{key}: {old.commit[:7]} -> {new.commit[:7]} ({where})", *body])


def _prune(git: GitSources, files: list[PolicyFile]) -> None:
    """Drop the lock entries no loaded file uses any more."""
    used = {(f.origin.lock, f.origin.key) for f in files if f.origin is not None}
    for path, lock in git.locks.items():
        stale = [key for key in lock.sources if (path, key) not in used]
        for key in stale:
            del lock.sources[key]
        if stale:
            lock.changed = True
    git.save()

