"""`router update [SOURCE]`: move git sources to their newest release, show what the release changes.

Per git source named by a local policy file (the managed, user and project layers): a source on a
version tag (`@v3`) moves to the repository's newest version tag (version order, like
`pre-commit autoupdate`; tags that are not versions are never chosen); one on a branch or another
tag is fetched again and locked at what it names now; one pinned to a commit stays, unless
`--to REF` names where to go. `--freeze` writes the commit (with `# frozen: <ref>` after the
entry, as pre-commit does). The `use:` entry is rewritten in place (router/commands/use_entry.py:
comments and layout kept; a file that cannot be parsed is refused, never overwritten), the lock is
rewritten, and lock entries no file uses any more are dropped. The report lists, per source, the
rules added, removed and changed, the vars (with the rules that read them) and settings changed;
with `--sessions`, the recorded decisions that change, as `router diff` shows them. A project
whose locked content moved must be trusted again. `--dry-run` shows all of it and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from router.commands import use_entry
from router.compile import policy_changes
from router.diagnostics.diagnostic import render_text
from router.load.git_cache import Cache
from router.load.git_lock import lock_path
from router.load.git_releases import branches, looks_like_commit, newest, tags, version
from router.load.git_source import GitOrigin, GitSources, emit_notes
from router.load.git_spec import GIT_PREFIX, GitSourceError, GitSpec, is_git, parse, redact, redact_text
from router.load.loader import PolicyFile, load_layers
from router.load.paths import display_path, layer_paths
from router.trust.capabilities import refusal_of

USAGE = 2


@dataclass
class SourceState:
    """One git source as a load saw it: the commit, its lock, its files."""

    key: str
    commit: str
    lock: Path
    layers: set[str] = field(default_factory=set)
    files: list[PolicyFile] = field(default_factory=list)


@dataclass
class Plan:
    """What happens to one source: the entries that name it, where it goes, why."""

    key: str
    spec: GitSpec
    entries: list[tuple[Path, str]]  # (local policy file, the entry as written)
    ref: str | None = None  # the new ref (None: the same ref, fetched again)
    frozen: str | None = None  # the ref a `# frozen:` comment names
    note: str = ""
    stays: bool = False  # a commit pin (or frozen at the newest release): not even fetched again

    @property
    def moves(self) -> bool:
        return self.ref is not None and self.ref != self.spec.ref

    @property
    def new_key(self) -> str:
        return GitSpec(self.spec.url, self.ref, self.spec.path).key if self.moves else self.key

    def entry(self, old: str) -> str:
        """`old` with the new ref after `@`."""
        return f"{GIT_PREFIX}{self.spec.url}@{self.ref}#{self.spec.path}" if self.moves else old


@dataclass(frozen=True)
class Options:
    """What `router update` was asked for."""

    wanted: str | None = None
    to: str | None = None
    freeze: bool = False
    dry_run: bool = False
    sessions: tuple[Path, ...] = ()
    models: Path | None = None


def sources(files: Iterable[PolicyFile]) -> dict[str, SourceState]:
    """The git sources among the loaded files, each with its files."""
    found: dict[str, SourceState] = {}
    for f in files:
        origin: GitOrigin | None = f.origin
        if origin is None:
            continue
        state = found.setdefault(origin.key, SourceState(origin.key, origin.commit, origin.lock))
        state.layers.add(f.layer)
        state.files.append(f)
    return found


def matches(key: str, wanted: str) -> bool:
    """Whether the lock key `key` is the source the user named (key, URL or repository)."""
    url, _, _ref = key[len(GIT_PREFIX):].rpartition("@")
    given = redact(wanted[len(GIT_PREFIX):] if wanted.startswith(GIT_PREFIX) else wanted)
    given = given.partition("#")[0]
    return given in (key[len(GIT_PREFIX):], url) or given.removesuffix(".git") == url.removesuffix(".git")


def run(options: Options, *, cwd: Path, agent: Path) -> tuple[int, str]:
    """Update and report; exit 1 when a source could not be updated, 2 for a usage mistake."""
    layers = layer_paths(cwd, agent=agent)
    quiet = GitSources(fetch=True, write=not options.dry_run)
    before_files, _ = load_layers(layers, git=quiet)
    emit_notes(quiet)
    before = sources(before_files)
    named = local_entries(before_files)
    for key, entries in named.items():  # a source refused as locked (its lock is what to move)
        before.setdefault(key, SourceState(key, "", lock_path(entries[0][0])))
    keys = [k for k in before if options.wanted is None or matches(k, options.wanted)]
    if options.wanted is not None and not keys:
        known = ", ".join(sorted(before)) or "none"
        return 1, (f"error: no git source matches {redact(options.wanted)!r} "
                   f"(the policy's git sources: {known})")
    if not keys:
        return 0, "no git sources in the layered policy: nothing to update"
    if options.to is not None and len([k for k in keys if k in named]) > 1:
        return USAGE, ("error: --to moves one source, and several match: name one of "
                       + ", ".join(k for k in keys if k in named))
    try:
        plans = [plan(key, named.get(key, []), options, quiet.cache) for key in keys]
    except GitSourceError as exc:
        return 1, f"error: {exc.message}" + (f"\n  help: {exc.help}" if exc.help else "")
    try:
        rewrites = rewritten(plans)
    except use_entry.RewriteError as exc:
        return 1, f"error: {redact_text(str(exc))}"
    refresh = frozenset(p.key for p in plans if not p.moves and not p.stays)
    git = GitSources(fetch=True, refresh=refresh, moves={p.key: p.ref for p in plans if p.moves and p.ref},
                     write=not options.dry_run)
    after_files, diagnostics = load_layers(layers, git=git)
    emit_notes(git)
    failed = [d for d in diagnostics if (r := refusal_of(d)) is not None and r.code.startswith("RT12")]
    after = sources(after_files)
    dropped: list[str] = []
    if not failed and not options.dry_run:
        for path, (text, _) in rewrites.items():
            use_entry.write(path, text)
        dropped = _prune(git, after_files)
    lines = [_report(p, before[p.key], after.get(p.new_key), rewrites) for p in plans]
    lines += dropped
    if any(after.get(p.new_key) and after[p.new_key].commit != before[p.key].commit
           and "project" in before[p.key].layers for p in plans):
        lines.append("the project policy's content changed: Pi applies it again once you trust it "
                     "(`router trust`)")
    if options.sessions and not failed:
        lines += ["", *sessions_report(before_files, after_files, options, agent)]
    if options.dry_run:
        lines.append("dry run: no policy file or lock was written")
    text = "\n".join(lines)
    if failed:
        return 1, f"{render_text(failed)}\n{text}"
    return 0, text


def local_entries(files: Iterable[PolicyFile]) -> dict[str, list[tuple[Path, str]]]:
    """Per source key, the `use:` entries of local policy files (not of a git source's files)
    that name it, with the file."""
    found: dict[str, list[tuple[Path, str]]] = {}
    for f in files:
        if f.origin is not None or f.source is None:
            continue
        for entry in f.policy.use:
            if not is_git(entry):
                continue
            try:
                key = parse(entry).key
            except GitSourceError:
                continue
            if (f.source, entry) not in found.get(key, []):
                found.setdefault(key, []).append((f.source, entry))
    return found


def plan(key: str, entries: list[tuple[Path, str]], options: Options, cache: Cache) -> Plan:
    """Where the source `key` goes: the newest release, `--to`, or it stays on its ref."""
    if not entries:
        spec = parse(f"{key}#x.yaml")
        return Plan(key, spec, [], note="named inside a git source: it moves with that source's release")
    spec = parse(entries[0][1])
    result = Plan(key, spec, entries)
    frozen = use_entry.frozen_ref(*entries[0]) if looks_like_commit(spec.ref) else None
    if options.to is None and looks_like_commit(spec.ref):
        cache.fetch(spec)
        if spec.ref in tags(cache, spec) or spec.ref in branches(cache, spec):
            frozen = None  # a tag or branch that happens to look like a commit id
        elif frozen is None or version(frozen) is None:
            result.note = f"pinned to commit {spec.ref}: stays (`router update --to REF` moves it)"
            result.stays = True
            return result
    target = options.to or _release(frozen or spec.ref, spec, cache)
    if frozen is not None and target is None:
        result.note = f"frozen at {frozen}, the newest release: up to date"
        result.stays = True
        return result
    if options.freeze or (frozen is not None and options.to is None):
        named = target or spec.ref or "HEAD"
        result.ref = cache.resolve(GitSpec(spec.url, named, spec.path))
        result.frozen = named if not looks_like_commit(named) else None
    else:
        result.ref = target
    return result


def _release(current: str | None, spec: GitSpec, cache: Cache) -> str | None:
    """The newest version tag when `current` is a version tag and a newer one exists; else None
    (a branch or another tag is fetched again as it is)."""
    if current is None or version(current) is None:
        return None
    cache.fetch(spec)
    found = tags(cache, spec)
    if current not in found:
        return None
    latest = newest(found)
    if latest is not None and (version(latest) or ()) > (version(current) or ()):
        return latest
    return None


def rewritten(plans: list[Plan]) -> dict[Path, tuple[str, list[use_entry.Edited]]]:
    """The new text of each local policy file whose entries move (nothing is written here)."""
    changes: dict[Path, list[use_entry.Change]] = {}
    for p in plans:
        if not p.moves:
            continue
        for path, old in p.entries:
            changes.setdefault(path, []).append(use_entry.Change(old, p.entry(old), p.frozen))
    return {path: use_entry.rewrite(path, found) for path, found in changes.items()}


def _report(p: Plan, old: SourceState, new: SourceState | None,
            rewrites: dict[Path, tuple[str, list[use_entry.Edited]]]) -> str:
    if p.stays or (p.note and new is None):
        return f"{p.key}: {p.note}"
    if new is None:
        return f"{p.key}: not updated (see the errors above)"
    where = display_path(new.lock)
    head = f"{p.key} -> @{p.ref}" if p.moves else p.key
    if new.commit == old.commit and not p.moves:
        return f"{head}: up to date at {new.commit[:7]} ({where})" + (f"; {p.note}" if p.note else "")
    changes = policy_changes.compare(policy_changes.snapshot(old.files), policy_changes.snapshot(new.files))
    body = policy_changes.render_lines(changes) or ["  (no rule, var or setting changed)"]
    edits = [f"  {display_path(path)}:{e.line}: use: {redact_text(e.old)} -> {redact_text(e.new)}"
             for path, (_, found) in rewrites.items() for e in found if (path, e.old) in p.entries]
    was = old.commit[:7] or "(refused)"
    return "\n".join([f"{head}: {was} -> {new.commit[:7]} ({where})", *body, *edits])


def _prune(git: GitSources, files: list[PolicyFile]) -> list[str]:
    """Drop the lock entries no loaded file uses any more, write the locks; what was dropped."""
    used = {(f.origin.lock, f.origin.key) for f in files if f.origin is not None}
    dropped = []
    for path, lock in git.locks.items():
        stale = [key for key in lock.sources if (path, key) not in used]
        for key in stale:
            del lock.sources[key]
            dropped.append(f"dropped {key} from {display_path(path)} (no policy file uses it)")
        if stale:
            lock.changed = True
    git.save()
    return dropped


def sessions_report(before: list[PolicyFile], after: list[PolicyFile], options: Options,
                    agent: Path) -> list[str]:
    """The recorded decisions the update changes, as `router diff` shows them."""
    from router.commands import diff
    from router.compile.compiler import compile_policy
    from router.replay.diff import render_text as render_diff

    sides = []
    for label, files in (("before the update", before), ("after the update", after)):
        policy, diagnostics = compile_policy(files, agent=agent)
        if policy is None:
            return [f"sessions: cannot replay, the policy {label} does not compile:",
                    render_text(diagnostics)]
        sides.append(diff.Side(label, policy))
    replay = diff.Options(list(options.sessions), models=options.models)
    inputs = diff.read_inputs(replay)
    if not inputs.sessions:
        diff.warn_problems(inputs, [])
        return [f"sessions: no Pi session files found in {', '.join(map(str, options.sessions))}"]
    result = diff.compare(sides[0], sides[1], replay, inputs)
    result.policy = None  # listed per source above
    return render_diff(result).splitlines()
