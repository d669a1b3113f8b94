"""A git source's `use:` entry: `git+<url>@<ref>#<path>` parsed and checked, credentials kept
out of every text the router shows, and the error every git module raises."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from router.diagnostics.code_names import GIT_SOURCE_MISMATCH, GIT_SOURCE_UNAVAILABLE
from router.diagnostics.redact import redact as redact
from router.diagnostics.redact import redact_text as redact_text

GIT_PREFIX = "git+"
SCHEMES = ("https", "ssh", "file")
# cannot be resolved: a bad entry, the fetch failed, not in the cache or the lock
UNAVAILABLE = GIT_SOURCE_UNAVAILABLE
TAMPERED = GIT_SOURCE_MISMATCH  # the cached bytes are not the locked ones
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]*")


class GitSourceError(Exception):
    """A git source that cannot be used: `code` (RT125/RT126), what is wrong and what to do."""

    def __init__(self, code: str, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.help = code, message, help


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


def repo_label(url: str) -> str:
    """How provenance names a repository: host and path without `.git` (`github.com/acme/policies`)."""
    parts = urlsplit(redact(url))
    host = parts.hostname or ""
    path = parts.path[:-4] if parts.path.endswith(".git") else parts.path
    return f"{host}{path}" if host else path



def show(path: Path) -> str:
    """`path` as the router's messages name a file (router/load/paths.py)."""
    from router.load.paths import display_path

    return display_path(path)
