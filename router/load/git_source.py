"""Policies shared through git: `use:` entries `git+<url>@<ref>#<path in the repository>`.

A source is fetched with the system's `git` (an argument list, never a shell; no prompt; a
timeout) into a cache under `$XDG_CACHE_HOME/pi-policy-router/git/` (default `~/.cache/…`): one
bare mirror per repository, and one exported tree per commit. The first resolution writes
`router.lock` next to the policy file of the layer (source, ref, commit, SHA-256 of each file
used); from then on the lock decides which commit is read, and a file whose bytes differ from the
lock is refused. Only `router update` moves a locked source (router/commands/update.py).

Who may fetch: the command line (`router lint`, `test`, `explain`, `trust`, `update`) fetches
what is missing from the cache; the sidecar never does (`fetching`, router/load/git_fetching.py,
stays off there), so a missing entry is a refusal of that source that names the command to run.

The entry (router/load/git_spec.py), the cache and `git` (router/load/git_cache.py) and the lock
(router/load/git_lock.py) have their own modules; this one resolves an entry through them.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from router.load.git_cache import Cache, links_file, repo_dir
from router.load.git_fetching import may_fetch
from router.load.git_lock import Lock
from router.load.git_spec import TAMPERED, UNAVAILABLE, GitSourceError, GitSpec, parse
from router.load.git_spec import show as _show


@dataclass(frozen=True)
class GitOrigin:
    """Where a policy file came from: the source, its repository, the commit, the file in it."""

    key: str
    repo: str
    commit: str
    path: str
    tree: Path
    lock: Path

    @property
    def label(self) -> str:
        """`repo@commit:path` with the short commit, as provenance names the file."""
        return f"{self.repo}@{self.commit[:7]}:{self.path}"

    def inside(self, relative: str) -> GitOrigin:
        """The origin of another file of the same commit."""
        return GitOrigin(self.key, self.repo, self.commit, relative, self.tree, self.lock)


@dataclass
class GitSources:
    """Resolves git sources for one load: the locks it read, what it may fetch, what to refresh."""

    fetch: bool = False
    refresh: frozenset[str] | None = None  # source keys `router update` moves (None: none)
    moves: dict[str, str] = field(default_factory=dict)  # `router update`: source key -> the new ref
    write: bool = True  # False: never write a lock (`router update --dry-run`)
    cache: Cache = field(default_factory=Cache)
    locks: dict[Path, Lock] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _fetched: set[str] = field(default_factory=set)
    _reached: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def current(cls) -> GitSources:
        """Fetching as the calling command allows (router/load/git_fetching.py)."""
        return cls(fetch=may_fetch())

    def lock(self, path: Path) -> Lock:
        if path not in self.locks:
            self.locks[path] = Lock.read(path)
        return self.locks[path]

    def resolve(self, entry: str, lock_file: Path) -> tuple[Path, GitOrigin]:
        """The cached file a `use:` entry names and its origin; GitSourceError when unavailable."""
        spec = parse(entry)
        moved = spec.key in self.moves
        if moved:
            spec = GitSpec(spec.url, self.moves[spec.key], spec.path)
        lock = self.lock(lock_file)
        locked = lock.entry(spec.key)
        if locked is not None and not moved and not self._refreshing(spec.key):
            commit = str(locked["commit"])
            tree = self.cache.tree(spec, commit)
            if tree is None:
                tree = self._export(spec, commit, lock_file)
            else:
                self._reachable(spec, commit, lock_file)
        else:
            tree, commit = self._first(spec, lock, lock_file)
        origin = GitOrigin(spec.key, spec.repo, commit, spec.path, tree, lock_file)
        return self.file(origin), origin

    def file(self, origin: GitOrigin) -> Path:
        """The file of `origin` in its tree; GitSourceError when the commit has no such file."""
        target = origin.tree / origin.path
        real = Path(os.path.realpath(target))
        if not real.is_relative_to(Path(os.path.realpath(origin.tree))):
            raise GitSourceError(UNAVAILABLE, f"{origin.label} leads outside the repository",
                                 "a file of a git source uses only files of the same repository")
        linked = self.linked(origin)
        if linked is not None:
            raise GitSourceError(UNAVAILABLE, linked, "a git source's policy files are regular files: commit "
                                 "the file itself where the link is")
        if not target.is_file():
            raise GitSourceError(UNAVAILABLE, f"{origin.key}: commit {origin.commit[:7]} has no file "
                                 f"{origin.path}", "check the path after # in the `use:` entry")
        return target

    def linked(self, origin: GitOrigin) -> str | None:
        """Why `origin`'s file cannot be used when it (or a directory on its way) is a link of the
        commit (links are never extracted), else None."""
        try:
            names = json.loads(links_file(origin.tree).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # a tree exported before links were recorded: the realpath check holds
        if not isinstance(names, list):
            return None
        parts = Path(origin.path).parts
        for name in names:
            if isinstance(name, str) and Path(name).parts == parts[:len(Path(name).parts)]:
                return (f"{origin.label}: {name} is a symbolic link in commit {origin.commit[:7]} of "
                        f"{origin.key}; links in git sources are not followed")
        return None

    def verify(self, origin: GitOrigin, sha: str) -> None:
        """Check the bytes read for `origin` against the lock (recording them on a first use)."""
        lock = self.lock(origin.lock)
        entry = lock.entry(origin.key)
        known = entry.get("files", {}).get(origin.path) if entry else None
        if known == sha:
            return
        where = f"{origin.path} of {origin.key} (commit {origin.commit[:7]})"
        if known is not None:
            raise GitSourceError(TAMPERED, f"the cached {where} does not match {_show(origin.lock)}: "
                                 f"sha256 {sha[:12]}, locked {known[:12]}",
                                 f"the cache was changed after it was fetched; delete {_show(origin.tree)} "
                                 "and run `router lint` to fetch it again")
        if not self.fetch or entry is None:
            raise GitSourceError(UNAVAILABLE, f"{where} is not in {_show(origin.lock)}",
                                 "run `router lint` (or `router update`) to lock it")
        lock.record(origin.key, origin.path, sha)

    def save(self) -> None:
        """Write the locks that changed (only when fetching: the sidecar never writes one)."""
        if not self.fetch or not self.write:
            return
        for lock in self.locks.values():
            if lock.changed:
                try:
                    lock.write()
                except OSError as exc:
                    self.notes.append(f"warning: cannot write {_show(lock.path)}: {exc.strerror}")

    def _refreshing(self, key: str) -> bool:
        return self.refresh is not None and key in self.refresh

    def _first(self, spec: GitSpec, lock: Lock, lock_file: Path) -> tuple[Path, str]:
        """Fetch, resolve the ref and pin it in the lock (the first resolution, or an update)."""
        if not self.fetch:
            raise GitSourceError(UNAVAILABLE, f"{spec.key} is not locked in {_show(lock_file)}; the "
                                 "sidecar never fetches", "run `router lint` to fetch and lock it")
        self._fetch(spec)
        commit = self.cache.resolve(spec)
        tree = self.cache.export(spec, commit)
        previous = lock.entry(spec.key)
        if previous is None or previous.get("commit") != commit:
            lock.pin(spec, commit)
            done = "locked" if self.write else "would lock"
            self.notes.append(f"{done} {spec.key} at {commit[:7]} in {_show(lock_file)}")
        return tree, commit

    def _export(self, spec: GitSpec, commit: str, lock_file: Path) -> Path:
        """The locked commit's tree, fetched when allowed (the cache was cleared, a new machine)."""
        if not self.fetch:
            raise GitSourceError(UNAVAILABLE, f"{spec.key} (commit {commit[:7]}, locked in "
                                 f"{_show(lock_file)}) is not in the cache; the sidecar never fetches",
                                 "run `router lint` (or `router update`) to fetch it")
        self._fetch(spec, commit)
        if self.cache._commit(repo_dir(spec, self.cache.root) / "repo.git", commit) is None:
            raise GitSourceError(UNAVAILABLE, f"{spec.key}: the repository no longer has the locked commit "
                                 f"{commit[:7]}", f"`router update {spec.key} --to {spec.ref or 'HEAD'}` "
                                 "locks what the ref names now")
        self._reachable(spec, commit, lock_file)
        return self.cache.export(spec, commit)

    def _reachable(self, spec: GitSpec, commit: str, lock_file: Path) -> None:
        """The locked commit is what the ref names or an ancestor of it (checked once per load)."""
        if (spec.key, commit) in self._reached:
            return
        if not (repo_dir(spec, self.cache.root) / "repo.git" / "HEAD").is_file():
            if not self.fetch:
                raise GitSourceError(UNAVAILABLE, f"{spec.key}: its repository is not in the cache; the "
                                     "sidecar never fetches", "run `router lint` to fetch it")
            self._fetch(spec)
        self.cache.check_reachable(spec, commit, lock_file)
        self._reached.add((spec.key, commit))

    def _fetch(self, spec: GitSpec, commit: str | None = None) -> None:
        if spec.key in self._fetched and commit is None:
            return
        self.notes.append(f"fetching {spec.key}")
        self.cache.fetch(spec, commit)
        self._fetched.add(spec.key)


def emit_notes(sources: GitSources) -> None:
    """The fetch and lock notes on stderr (stdout stays the command's own output)."""
    for note in sources.notes:
        print(note, file=sys.stderr)
    sources.notes.clear()
