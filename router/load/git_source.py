"""Policies shared through git: `use:` entries `git+<url>@<ref>#<path in the repository>`.

A source is fetched with the system's `git` (an argument list, never a shell; no prompt; a
timeout) into a cache under `$XDG_CACHE_HOME/pi-policy-router/git/` (default `~/.cache/…`): one
bare mirror per repository, and one exported tree per commit. The first resolution writes
`router.lock` next to the policy file of the layer (source, ref, commit, SHA-256 of each file
used); from then on the lock decides which commit is read, and a file whose bytes differ from the
lock is refused. Only `router update` moves a locked source (router/commands/update.py).

Who may fetch: the command line (`router lint`, `test`, `explain`, `trust`, `update`) fetches
what is missing from the cache; the sidecar never does (`fetching` stays off there), so a missing
entry is a refusal of that source that names the command to run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from router.diagnostics.code_names import GIT_SOURCE_MISMATCH, GIT_SOURCE_UNAVAILABLE

GIT_PREFIX = "git+"
SCHEMES = ("https", "ssh", "file")
LOCK_NAME = "router.lock"
LOCK_VERSION = 1
GIT_TIMEOUT_S = 120.0
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
# cannot be resolved: a bad entry, the fetch failed, not in the cache or the lock
UNAVAILABLE = GIT_SOURCE_UNAVAILABLE
TAMPERED = GIT_SOURCE_MISMATCH  # the cached bytes are not the locked ones
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]*")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")
_FETCHING: ContextVar[bool] = ContextVar("router_git_fetching", default=False)


class GitSourceError(Exception):
    """A git source that cannot be used: `code` (RT125/RT126), what is wrong and what to do."""

    def __init__(self, code: str, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.help = code, message, help


# --- the entry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GitSpec:
    """One `use:` entry: the repository URL (as written), the ref (None: the default branch), the file."""

    url: str
    ref: str | None
    path: str

    @property
    def safe_url(self) -> str:
        return redact(self.url)

    @property
    def key(self) -> str:
        """How the lock names the source: `git+<url without credentials>@<ref>`."""
        return f"{GIT_PREFIX}{self.safe_url}@{self.ref or 'HEAD'}"

    @property
    def repo(self) -> str:
        return repo_label(self.url)


def is_git(entry: str) -> bool:
    return entry.startswith(GIT_PREFIX)


def parse(entry: str) -> GitSpec:
    """The parts of `git+<url>[@<ref>]#<path>`; GitSourceError naming what is wrong."""
    expected = "write git+https://host/repo.git@v1.2#path/in/repo.yaml (or git+ssh://, git+file://)"
    body, sep, path = entry[len(GIT_PREFIX):].partition("#")
    if not sep or not path:
        raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)} names no file", expected)
    parts = urlsplit(body)
    if parts.scheme not in SCHEMES:
        scheme = parts.scheme or "none"
        raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)}: scheme {scheme!r} is not one of "
                             f"{', '.join(SCHEMES)}", expected)
    url, ref = body, None
    head, at, tail = parts.path.rpartition("@")
    if at:
        url, ref = body[: len(body) - len(parts.path) + len(head)], tail
        if parts.query or parts.fragment:
            raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)}: a URL with a query",
                                 expected)
    _check_url(url, entry, expected)
    if ref is not None and (not _REF.fullmatch(ref) or ".." in ref or ref.endswith((".lock", "/"))):
        raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)}: {ref!r} is not a tag, branch "
                             "or commit name", "refs are letters, digits and ._/+- and never start with -")
    _check_path(path, entry)
    return GitSpec(url, ref, path)


def _check_url(url: str, entry: str, expected: str) -> None:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if any(c.isspace() or ord(c) < 32 for c in url) or host.startswith("-") or url.startswith("-"):
        raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)}: not a plain URL", expected)
    if parts.scheme == "file" and (parts.netloc or not parts.path.startswith("/")):
        raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)}: a file URL is file:///absolute/path",
                             expected)
    if parts.scheme != "file" and not host:
        raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)}: the URL names no host", expected)


def _check_path(path: str, entry: str) -> None:
    parts = Path(path).parts
    if path.startswith(("/", "-")) or ".." in parts or not path.endswith((".yaml", ".yml")):
        raise GitSourceError(UNAVAILABLE, f"git source {redact_text(entry)}: {path!r} is not a .yaml file "
                             "of the repository", "the part after # is a relative path inside the "
                             "repository, such as policies/team.yaml")


def redact(url: str) -> str:
    """The URL without credentials: `https://***@host/…` for a token, ssh keeps the user name."""
    parts = urlsplit(url)
    if not parts.netloc or "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}@" if parts.scheme == "ssh" and not colon else "***@"
    return url.replace(parts.netloc, shown + hostport, 1)


def redact_text(text: str) -> str:
    """`text` with the credentials of every URL in it replaced."""
    return re.sub(r"[a-z+]+://[^\s'\"]+", lambda m: redact(m.group(0)), text)


def repo_label(url: str) -> str:
    """How provenance names a repository: host and path without `.git` (`github.com/acme/policies`)."""
    parts = urlsplit(redact(url))
    host = parts.hostname or ""
    path = parts.path[:-4] if parts.path.endswith(".git") else parts.path
    return f"{host}{path}" if host else path


# --- the cache ---------------------------------------------------------------------------------


def cache_root(environ: dict[str, str] | None = None) -> Path:
    """`$XDG_CACHE_HOME/pi-policy-router/git` (default `~/.cache/pi-policy-router/git`)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "pi-policy-router" / "git"


def repo_dir(spec: GitSpec, root: Path | None = None) -> Path:
    """The cache directory of one repository (its bare mirror and its exported commits)."""
    digest = hashlib.sha256(spec.safe_url.encode("utf-8")).hexdigest()[:16]
    return (root or cache_root()) / digest


def tree_dir(spec: GitSpec, commit: str, root: Path | None = None) -> Path:
    return repo_dir(spec, root) / "trees" / commit


class Git:
    """Runs the system's `git`: an argument list, no prompt, a timeout, credentials never shown."""

    def __init__(self, timeout: float = GIT_TIMEOUT_S) -> None:
        self.timeout = timeout

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in ("GIT_SSH_COMMAND",
                                                                                          "GIT_SSH")}
        env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "LC_ALL": "C",
                    "GIT_ALLOW_PROTOCOL": "https:ssh:file", "GIT_CONFIG_NOSYSTEM": "1"})
        env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        return env

    def run(self, args: list[str], *, what: str, binary: bool = False) -> Any:
        """Run `git <args>`; its stdout (bytes with `binary`); GitSourceError saying `what` failed."""
        exe = shutil.which("git")
        if exe is None:
            raise GitSourceError(UNAVAILABLE, f"{what}: git is not installed (git sources need it)",
                                 "install git, or vendor the policy file into the project")
        try:
            done = subprocess.run([exe, *args], env=self.env(), capture_output=True, timeout=self.timeout,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise GitSourceError(UNAVAILABLE, f"{what}: git did not finish within {self.timeout:.0f} s",
                                 "check the network and the URL, then run the command again") from None
        if done.returncode != 0:
            problem = done.stderr.decode("utf-8", "replace").strip().splitlines()
            reason = redact_text("; ".join(line.strip() for line in problem[-3:]))
            reason = reason or f"exit {done.returncode}"
            raise GitSourceError(UNAVAILABLE, f"{what}: {reason}")
        return done.stdout if binary else done.stdout.decode("utf-8", "replace")


    def status(self, args: list[str], *, what: str) -> int:
        """Run `git <args>` for its exit status (a yes/no question such as `merge-base --is-ancestor`)."""
        exe = shutil.which("git")
        if exe is None:
            raise GitSourceError(UNAVAILABLE, f"{what}: git is not installed (git sources need it)")
        try:
            return subprocess.run([exe, *args], env=self.env(), capture_output=True, timeout=self.timeout,
                                  stdin=subprocess.DEVNULL, check=False).returncode
        except subprocess.TimeoutExpired:
            raise GitSourceError(UNAVAILABLE, f"{what}: git did not finish within {self.timeout:.0f} s",
                                 "check the network and the URL, then run the command again") from None

    def stream(self, args: list[str]) -> subprocess.Popen[bytes]:
        """Start `git <args>` with its stdout as a pipe to read as it comes (stop it with `stop`)."""
        exe = shutil.which("git")
        if exe is None:
            raise GitSourceError(UNAVAILABLE, "git is not installed (git sources need it)")
        return subprocess.Popen([exe, *args], env=self.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _drain(process: subprocess.Popen[bytes], limit: int = 1 << 20) -> None:
    """Read what follows the archive's end (its padding), at most `limit` bytes, so that git ends
    on its own; more than that and `_stop` kills it."""
    assert process.stdout is not None
    while limit > 0 and (chunk := process.stdout.read(min(limit, 1 << 16))):
        limit -= len(chunk)
    if limit > 0:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=GIT_TIMEOUT_S)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a streaming git and reap it (its pipes closed)."""
    if process.poll() is None:
        process.kill()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    process.wait()


class Cache:
    """The bare mirrors and exported trees under `root`."""

    def __init__(self, root: Path | None = None, git: Git | None = None) -> None:
        self.root = root or cache_root()
        self.git = git or Git()

    def fetch(self, spec: GitSpec, commit: str | None = None) -> None:
        """Bring the mirror up to date with the remote's branches, tags and default branch."""
        mirror = repo_dir(spec, self.root) / "repo.git"
        what = f"fetching {spec.key}"
        if not (mirror / "HEAD").is_file():
            mirror.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.git.run(["init", "--bare", "--quiet", str(mirror)], what=what)
            (mirror.parent / "source.json").write_text(json.dumps({"url": spec.safe_url}) + "\n")
        refspecs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", "+HEAD:refs/router/HEAD"]
        self.git.run([f"--git-dir={mirror}", "fetch", "--quiet", "--prune", "--no-tags",
                      "--no-recurse-submodules", "--end-of-options", spec.url, *refspecs], what=what)
        if commit is not None and self._commit(mirror, commit) is None:
            self.git.run([f"--git-dir={mirror}", "fetch", "--quiet", "--no-tags", "--end-of-options",
                          spec.url, commit], what=what)

    def resolve(self, spec: GitSpec) -> str:
        """The commit the (fetched) ref names; GitSourceError when the repository has no such ref."""
        mirror = repo_dir(spec, self.root) / "repo.git"
        ref = spec.ref
        candidates = ["refs/router/HEAD"] if ref is None else \
            [f"refs/tags/{ref}", f"refs/heads/{ref}", *([ref] if _COMMIT.fullmatch(ref) else [])]
        for candidate in candidates:
            found = self._commit(mirror, candidate)
            if found is None:
                continue
            if candidate == ref and not self._published(mirror, found):
                raise GitSourceError(UNAVAILABLE, f"{spec.key}: commit {found[:12]} is on no branch or tag "
                                     "of the repository (a fork's pull request, or a commit since removed)",
                                     "name a tag or branch after @, or a commit one of them contains")
            return found
        raise GitSourceError(UNAVAILABLE, f"{spec.key}: the repository has no tag, branch or commit "
                             f"{spec.ref or 'HEAD'!r}", "check the ref after @ in the `use:` entry")

    def _published(self, mirror: Path, commit: str) -> bool:
        """Whether a branch or tag of the mirror contains `commit`."""
        out = self.git.run([f"--git-dir={mirror}", "for-each-ref", "--count=1", f"--contains={commit}",
                            "--format=%(refname)", "refs/heads", "refs/tags"], what="for-each-ref")
        return bool(str(out).strip())

    def check_reachable(self, spec: GitSpec, commit: str, lock_file: Path) -> None:
        """Refuse a locked commit that is not what the ref names nor reachable from it (a lock
        pinning a fork's commit that only `refs/pull/…` reaches, under the name of a tag)."""
        mirror = repo_dir(spec, self.root) / "repo.git"
        tip = self.resolve(spec)
        if tip == commit:
            return
        code = self.git.status([f"--git-dir={mirror}", "merge-base", "--is-ancestor", "--end-of-options",
                                commit, tip], what=f"checking {spec.key}")
        if code == 0:
            return
        ref = spec.ref or "HEAD"
        raise GitSourceError(UNAVAILABLE, f"{_show(lock_file)} pins {spec.key} at commit {commit[:12]}, "
                             f"which is not {ref} ({tip[:12]}) nor reachable from it: the lock is refused",
                             f"`router update {spec.key}` locks what {ref} names now (review it, then "
                             f"trust again), or restore {_show(lock_file)} from a version you trust")

    def _commit(self, mirror: Path, name: str) -> str | None:
        try:
            out = self.git.run([f"--git-dir={mirror}", "rev-parse", "--verify", "--quiet",
                                "--end-of-options", f"{name}^{{commit}}"], what="rev-parse")
        except GitSourceError:
            return None
        return out.strip() or None

    def tree(self, spec: GitSpec, commit: str) -> Path | None:
        """The exported tree of `commit`, None when it is not in the cache."""
        path = tree_dir(spec, commit, self.root)
        return path if path.is_dir() else None

    def export(self, spec: GitSpec, commit: str) -> Path:
        """Export `commit`'s files (fetched first) into the cache; the tree's directory.

        The sizes `git ls-tree` lists are checked against the cap before anything is read, and the
        archive is read as a stream (memory bounded whatever the repository holds). Links are not
        extracted: their names are kept in `<commit>.links` to refuse a `use:` naming one."""
        target = tree_dir(spec, commit, self.root)
        if target.is_dir():
            return target
        mirror = repo_dir(spec, self.root) / "repo.git"
        what = f"exporting {spec.key} at {commit[:12]}"
        self._check_sizes(spec, mirror, commit, what)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".export-"))
        try:
            links = self._extract(spec, mirror, commit, temp, what)
            links_file(target).write_text(json.dumps(sorted(links)) + "\n", encoding="utf-8")
            os.replace(temp, target)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            if not target.is_dir():
                raise
        return target

    def _check_sizes(self, spec: GitSpec, mirror: Path, commit: str, what: str) -> None:
        """Refuse a commit whose files add up to more than the cap, from `git ls-tree -l` alone."""
        listing = str(self.git.run([f"--git-dir={mirror}", "ls-tree", "-r", "-l", "-z", "--end-of-options",
                                    commit], what=what))
        total = 0
        for entry in listing.split("\0"):
            meta, _, _ = entry.partition("\t")
            fields = meta.split()
            if len(fields) == 4 and fields[1] == "blob" and fields[3].isdigit():
                total += int(fields[3])
        if total > MAX_ARCHIVE_BYTES:
            raise _too_big(spec, f" ({total >> 20} MiB of files; nothing was read)")

    def _extract(self, spec: GitSpec, mirror: Path, commit: str, temp: Path, what: str) -> list[str]:
        """Stream `git archive` into `temp`: regular files and directories only, at most the cap;
        the names of the links left out."""
        import tarfile  # only when a source is fetched

        process = self.git.stream([f"--git-dir={mirror}", "archive", "--format=tar", "--end-of-options",
                                   commit])
        links: list[str] = []
        total = 0
        try:
            assert process.stdout is not None
            with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
                for member in archive:
                    if member.issym() or member.islnk():
                        links.append(member.name)
                        continue
                    if not (member.isreg() or member.isdir()):
                        continue
                    total += member.size
                    if total > MAX_ARCHIVE_BYTES:
                        raise _too_big(spec)
                    try:
                        archive.extract(member, temp, filter="data")
                    except tarfile.FilterError:
                        links.append(member.name)  # a name that leaves the tree: never extracted
            _drain(process)
        except tarfile.TarError as exc:
            raise GitSourceError(UNAVAILABLE, f"{what}: git archive gave no readable tar ({exc})") from None
        finally:
            _stop(process)
        if process.returncode != 0:
            raise GitSourceError(UNAVAILABLE, f"{what}: git archive failed (exit {process.returncode})")
        return links


def _too_big(spec: GitSpec, detail: str = "") -> GitSourceError:
    return GitSourceError(UNAVAILABLE, f"{spec.key}: the commit holds more than {MAX_ARCHIVE_BYTES >> 20} MiB"
                          f"{detail}", "keep policies in a small repository")


def links_file(tree: Path) -> Path:
    """Beside an exported tree: the names of the links its commit holds (not extracted)."""
    return tree.parent / f"{tree.name}.links"


# --- the lock ----------------------------------------------------------------------------------


@dataclass
class Lock:
    """`router.lock`: per source key, the URL, ref, commit and the SHA-256 of each file used."""

    path: Path
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def read(cls, path: Path) -> Lock:
        """The lock at `path` (empty when absent); GitSourceError when it is not a lock."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as exc:
            message = f"{path}: not a readable lock file ({exc})"
            raise GitSourceError(UNAVAILABLE, message, _LOCK_HELP) from None
        sources = data.get("sources") if isinstance(data, dict) else None
        if not isinstance(sources, dict) or not all(_entry_ok(v) for v in sources.values()):
            raise GitSourceError(UNAVAILABLE, f"{path}: not a lock file of this router (no valid `sources`)",
                                 _LOCK_HELP)
        return cls(path, dict(sources))

    def entry(self, key: str) -> dict[str, Any] | None:
        return self.sources.get(key)

    def pin(self, spec: GitSpec, commit: str) -> dict[str, Any]:
        entry = {"url": spec.safe_url, "ref": spec.ref or "HEAD", "commit": commit, "files": {}}
        self.sources[spec.key] = entry
        self.changed = True
        return entry

    def record(self, key: str, path: str, sha: str) -> None:
        files = self.sources[key].setdefault("files", {})
        if files.get(path) != sha:
            files[path] = sha
            self.changed = True

    def write(self) -> None:
        sources = {k: {**self.sources[k], "files": dict(sorted(self.sources[k].get("files", {}).items()))}
                   for k in sorted(self.sources)}
        body = {"version": LOCK_VERSION, "sources": sources}
        text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".router-lock-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temp, 0o644)
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        self.changed = False


_LOCK_HELP = "restore it from version control, or delete it and run `router lint`"


def _entry_ok(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("commit"), str):
        return False
    full = re.fullmatch(r"[0-9a-f]{40}", entry["commit"]) is not None
    return full and isinstance(entry.get("files", {}), dict)


def lock_path(policy_file: Path) -> Path:
    """The lock of the layer whose top file is `policy_file`: `router.lock` next to it."""
    return policy_file.absolute().parent / LOCK_NAME


# --- resolving ---------------------------------------------------------------------------------


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
    cache: Cache = field(default_factory=Cache)
    locks: dict[Path, Lock] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _fetched: set[str] = field(default_factory=set)
    _reached: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def current(cls) -> GitSources:
        """Fetching as the calling command allows (see `fetching`)."""
        return cls(fetch=_FETCHING.get())

    def lock(self, path: Path) -> Lock:
        if path not in self.locks:
            self.locks[path] = Lock.read(path)
        return self.locks[path]

    def resolve(self, entry: str, lock_file: Path) -> tuple[Path, GitOrigin]:
        """The cached file a `use:` entry names and its origin; GitSourceError when unavailable."""
        spec = parse(entry)
        lock = self.lock(lock_file)
        locked = lock.entry(spec.key)
        if locked is not None and not self._refreshing(spec.key):
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
        if not self.fetch:
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
            self.notes.append(f"locked {spec.key} at {commit[:7]} in {_show(lock_file)}")
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
                                 f"{commit[:7]}", f"`router update {spec.key}` locks what the ref names now")
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


@contextlib.contextmanager
def fetching(enabled: bool = True) -> Iterator[None]:
    """Let the loads inside fetch what the cache lacks (the command line; never the sidecar)."""
    token = _FETCHING.set(enabled)
    try:
        yield
    finally:
        _FETCHING.reset(token)


def emit_notes(sources: GitSources) -> None:
    """The fetch and lock notes on stderr (stdout stays the command's own output)."""
    for note in sources.notes:
        print(note, file=sys.stderr)
    sources.notes.clear()


def _show(path: Path) -> str:
    from router.load.paths import display_path

    return display_path(path)
