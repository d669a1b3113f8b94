"""The cache of git sources: one bare mirror per repository and one exported tree per commit,
under `$XDG_CACHE_HOME/pi-policy-router/git/`, filled by the system's `git` (an argument list,
never a shell; no prompt; a timeout) with the size of a commit capped before anything is read."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from router.load.git_env import PROTECT, WORKDIR, git_env, git_message, ssh_configured
from router.load.git_spec import UNAVAILABLE, GitSourceError, GitSpec
from router.load.git_spec import show as _show

GIT_TIMEOUT_S = 120.0
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
_COMMIT = re.compile(r"[0-9a-f]{7,40}")
FETCH_HELP = ("check that this machine reaches the repository (the network, the URL, your access to it: "
              "`git ls-remote` with the URL shows git's own answer), then run the command again")


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
    """Runs the system's `git`: an argument list, no prompt, no hook, a timeout, credentials never
    shown; with the user's gitconfig and the part of the environment a fetch needs (git_env.py)."""

    def __init__(self, timeout: float = GIT_TIMEOUT_S) -> None:
        self.timeout = timeout
        self._ssh: bool | None = None  # whether the user's gitconfig chooses the ssh command

    def env(self, args: list[str] | None = None) -> dict[str, str]:
        """The environment of `git <args>`; a fetch asks the user's gitconfig for `core.sshCommand`
        once (ssh gets BatchMode unless the user chose their own ssh)."""
        exe = shutil.which("git")
        if args is not None and "fetch" in args and self._ssh is None and exe is not None:
            self._ssh = ssh_configured(exe, os.environ, self.timeout)
        return git_env(os.environ, bool(self._ssh))

    def _argv(self, exe: str, args: list[str]) -> list[str]:
        return [exe, *PROTECT, *args]

    def run(self, args: list[str], *, what: str, binary: bool = False) -> Any:
        """Run `git <args>`; its stdout (bytes with `binary`); GitSourceError saying `what` failed."""
        exe = shutil.which("git")
        if exe is None:
            raise GitSourceError(UNAVAILABLE, f"{what}: git is not installed (git sources need it)",
                                 "install git, or vendor the policy file into the project")
        try:
            done = subprocess.run(self._argv(exe, args), env=self.env(args), capture_output=True,
                                  timeout=self.timeout, stdin=subprocess.DEVNULL, check=False, cwd=WORKDIR)
        except subprocess.TimeoutExpired:
            raise GitSourceError(UNAVAILABLE, f"{what}: git did not finish within {self.timeout:.0f} s",
                                 "check the network and the URL, then run the command again") from None
        if done.returncode != 0:
            raise GitSourceError(UNAVAILABLE, f"{what}: {git_message(done.stderr, done.returncode)}")
        return done.stdout if binary else done.stdout.decode("utf-8", "replace")


    def status(self, args: list[str], *, what: str) -> int:
        """Run `git <args>` for its exit status (a yes/no question such as `merge-base --is-ancestor`)."""
        exe = shutil.which("git")
        if exe is None:
            raise GitSourceError(UNAVAILABLE, f"{what}: git is not installed (git sources need it)")
        try:
            return subprocess.run(self._argv(exe, args), env=self.env(args), capture_output=True,
                                  timeout=self.timeout, stdin=subprocess.DEVNULL, check=False,
                                  cwd=WORKDIR).returncode
        except subprocess.TimeoutExpired:
            raise GitSourceError(UNAVAILABLE, f"{what}: git did not finish within {self.timeout:.0f} s",
                                 "check the network and the URL, then run the command again") from None

    def stream(self, args: list[str]) -> subprocess.Popen[bytes]:
        """Start `git <args>` with its stdout as a pipe to read as it comes (stop it with `stop`)."""
        exe = shutil.which("git")
        if exe is None:
            raise GitSourceError(UNAVAILABLE, "git is not installed (git sources need it)")
        return subprocess.Popen(self._argv(exe, args), env=self.env(args), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=WORKDIR)


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
        self.root = (root or cache_root()).absolute()  # git runs in `/`: every path it gets is absolute
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
        try:
            self.git.run([f"--git-dir={mirror}", "fetch", "--quiet", "--prune", "--no-tags",
                          "--no-recurse-submodules", "--end-of-options", spec.url, *refspecs], what=what)
            if commit is not None and self._commit(mirror, commit) is None:
                self.git.run([f"--git-dir={mirror}", "fetch", "--quiet", "--no-tags", "--end-of-options",
                              spec.url, commit], what=what)
        except GitSourceError as exc:
            exc.help = exc.help or FETCH_HELP
            raise

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
                             f"`router update {spec.key} --to {ref}` locks what {ref} names now (review "
                             f"it, then trust again), or restore {_show(lock_file)} from a version you trust")

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

