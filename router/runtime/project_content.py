"""A project's content as the trust store digests it: the project layer's files (a git source's
by their provenance), the data files the layers declare, the files a trust record lists, and the
loader's `admit` for the bytes a precheck hashed. router/runtime/session_policy.py decides with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from router.diagnostics.diagnostic import Diagnostic
from router.load.paths import packs_dir
from router.load.paths import project_policy as project_file
from router.trust.store import GitLocked, ProjectContent, project_content

CLI_PROJECT_SECONDS = 20.0


def git_tree_file(key: str, commit: str, inside: str) -> Path | None:
    """The cached file of a git source's commit (store.GitTree); None when it is not fetched."""
    from router.load.git_cache import tree_dir
    from router.load.git_spec import GitSourceError, parse

    try:
        tree = tree_dir(parse(f"{key}#{inside}"), commit)
    except GitSourceError:
        return None
    return tree / inside if tree.is_dir() else None


def locked_sha(cwd: Path) -> GitLocked:
    """store.GitLocked for the project's `.pi/router.lock` (read once, on the first question)."""
    from router.load.git_lock import Lock, lock_path
    from router.load.git_spec import GitSourceError

    lock: list[Lock | None] = []

    def locked(key: str, commit: str, inside: str) -> str | None:
        if not lock:
            try:
                lock.append(Lock.read(lock_path(project_file(cwd))))
            except GitSourceError:
                lock.append(None)
        entry = lock[0].entry(key) if lock[0] is not None else None
        if entry is None or entry.get("commit") != commit:
            return None
        sha = entry.get("files", {}).get(inside)
        return sha if isinstance(sha, str) else None

    return locked


def listed_content(cwd: Path, records: Mapping[str, Any]) -> ProjectContent | None:
    """The files a trust record lists (to watch them), without reading any."""
    from router.trust.store import recorded_files

    record = records.get(str(Path(cwd).resolve()))
    names = [n for n in (recorded_files(record) or []) if not n.startswith("git+")]
    return ProjectContent(Path(cwd).resolve(), tuple((n, "") for n in names)) if names else None


def admit_only(cwd: Path, checked: frozenset[tuple[str, str]]) -> Any:
    """The loader's `admit` for a precheck's files: only those bytes are parsed."""
    base = Path(cwd).resolve()

    def admit(path: Path, origin: Any, sha: str) -> bool:
        name = _git_name_of(origin) if origin is not None else _name(base, path)
        return (name, sha) in checked

    return admit


def _name(base: Path, path: Path) -> str:
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(base))
    except ValueError:
        return str(resolved)


def read_project_content(cwd: Path, agent: Path | None = None, *, seconds: float = CLI_PROJECT_SECONDS
                         ) -> tuple[ProjectContent | None, list[Diagnostic]]:
    """The project layer's content as the loader reads it (None when there is no project policy),
    with the project data files the layers declare (`project_data:`; the user's layers with `agent`).
    The project's files are parsed, each within `seconds`: for content the user asked to apply or
    review (`--approve`, `router trust`, the doctor), never for the sidecar's trust decision."""
    from router.load.loader import load_layers
    from router.load.paths import layer_paths

    project = project_file(cwd)
    if not project.is_file():
        return None, []
    files, diagnostics = load_layers([("project", project)], project_seconds=seconds)
    base: list[Any] = []
    if agent is not None:
        base, _ = load_layers(layer_paths(cwd, agent=agent, include_project=False))
    data = data_files(cwd, data_names([*base, *files]))
    return loaded_content(cwd, files, data) or raw_content(cwd, data), diagnostics


def data_names(files: Sequence[Any]) -> list[str]:
    """The project data files the loaded layers declare (`project_data:`), once each, in order."""
    return list(dict.fromkeys(name for f in files for name in f.policy.project_data))


def data_files(cwd: Path, names: Sequence[str]) -> list[tuple[Path, str | None]]:
    """(path, SHA-256) of each declared project data file; None for one that is not there."""
    return [(cwd / name, project_digest(cwd / name, cwd)) for name in names]


def project_digest(path: Path, cwd: Path, *, confined: bool = True) -> str | None:
    """The SHA-256 of a project's file, read as the loader reads one (a regular file of bounded
    size, not through a link out of the project, never a kernel file); None when it is not there
    or is refused (`read_bytes`)."""
    from router.diagnostics.errors import SourceError  # the YAML reader's module: not at the start
    from router.load.file_reading import read_bytes
    from router.trust.capabilities import project_area

    try:
        within = project_area(cwd.absolute(), Path.home()) if confined else None
        return hashlib.sha256(read_bytes(path, within=within)).hexdigest()
    except SourceError:
        return None


def recorded_data(recorded: Any) -> list[tuple[Path, str | None]] | None:
    """The data files a cache entry recorded, None when the entry does not say."""
    if not isinstance(recorded, list):
        return None
    found: list[tuple[Path, str | None]] = []
    for item in recorded:
        if not (isinstance(item, list) and len(item) == 2):
            return None
        found.append((Path(str(item[0])), None if item[1] is None else str(item[1])))
    return found


def loaded_content(cwd: Path, files: Sequence[Any],
             data: Sequence[tuple[Path, str | None]] = ()) -> ProjectContent | None:
    hashes = [(path if name is None else name, sha) for path, sha, name in project_hashes(files)]
    return project_content(cwd, [*hashes, *_present(data)]) if hashes else None


def raw_content(cwd: Path, data: Sequence[tuple[Path, str | None]] = ()) -> ProjectContent | None:
    """A project file the loader could not read or parse still has content to (not) trust."""
    digest = project_digest(project_file(cwd), cwd)
    if digest is None:
        return None
    return project_content(cwd, [(project_file(cwd), digest), *_present(data)])


def _present(data: Sequence[tuple[Path, str | None]]) -> list[tuple[Path, str]]:
    return [(path, sha) for path, sha in data if sha is not None]


def project_hashes(files: Sequence[Any]) -> list[tuple[Path, str, str | None]]:
    """(path, SHA-256, name) of the project layer's files, in load order (built-in packs excluded).

    A file of a git source is named by its provenance (`repo@commit:path`), so the digest covers
    the locked commit: `router update` to another commit asks for the user's trust again."""
    return [(Path(f.source or f.path), f.doc.sha256, _git_name(f)) for f in files
            if f.layer == "project" and Path(f.source or f.path).parent != packs_dir()]


def _git_name(f: Any) -> str | None:
    origin = getattr(f, "origin", None)
    return _git_name_of(origin) if origin is not None else None


def _git_name_of(origin: Any) -> str:
    """How the digest names a git source's file: `git+url@ref@commit:path` (store._GIT_NAME)."""
    return f"{origin.key}@{origin.commit}:{origin.path}"
