"""The policy a Pi session runs: the layers, the project layer only when trusted, the cache.

`load_session_policy` is what `router serve` calls at `hello` and on every reload. The trust
decision is taken before any YAML of the project is read: the files the trust record lists are
hashed and compared (`store.precheck`), and only trusted bytes reach the parser (the loader's
`admit`). It is taken again on the bytes the loader actually parsed (or, from the cache, on the
files' current bytes compared with the digests recorded when the cached policy was compiled), so
a file swapped between the check and the parse cannot slip through.

Layers fail apart: a project layer that cannot load (untrusted, broken, too big, too slow to read,
its git source not fetched) leaves the user's, the managed and the built-in layers in force; a
user layer that cannot load leaves the managed and built-in ones. Each time the user is told what
is off, why, and the command that fixes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from router.compile import cache as policy_cache
from router.compile.ir import CompiledPolicy
from router.diagnostics.code_names import GIT_SOURCE_MISMATCH, GIT_SOURCE_UNAVAILABLE, RELOAD_FAILED
from router.diagnostics.diagnostic import Diagnostic, has_errors
from router.load.paths import display_path, packs_dir
from router.load.paths import project_policy as project_file
from router.trust.capabilities import Refusal, refusal_of
from router.trust.store import (
    GitLocked,
    ProjectContent,
    TrustDecision,
    decide,
    precheck,
    project_content,
)

PROJECT_SECONDS = 3.0
"""The sidecar parses one project file for at most this long (RT103 past it): the user's layers
stay in force instead of the start or a prompt waiting. `router trust` and `router lint` allow
CLI_PROJECT_SECONDS."""
CLI_PROJECT_SECONDS = 20.0
GIT_UNAVAILABLE = frozenset({GIT_SOURCE_UNAVAILABLE,
                             GIT_SOURCE_MISMATCH})  # a policy built without a git source is not cached


@dataclass(frozen=True)
class SessionPolicy:
    """A loaded session policy (None when it has errors), its diagnostics and the trust decision."""

    policy: CompiledPolicy | None
    diagnostics: list[Diagnostic]
    trust: TrustDecision
    watched: tuple[Path, ...] = field(default=())
    """Files whose change means a reload (the layers, and the project files even when skipped)."""
    last_good: bool = False
    """`policy` is the last one that compiled for the built-in and user layers (the files have
    errors now): for a sidecar that starts without a policy in force."""


def base_candidates(agent: Path, extra: Sequence[Path]) -> list[Path]:
    """The files of the layers below the project's, with the locks that pin their git sources."""
    from router.load.git_lock import lock_path
    from router.load.managed import managed_policy

    managed = managed_policy()
    files = [packs_dir() / "default.yaml", managed, agent / "router.yaml", *extra]
    return [*files, *(lock_path(p) for p in files[1:])]


def load_session_policy(cwd: Path, agent: Path, *, extra: Sequence[Path] = (),
                        records: Mapping[str, Any], approved: str | None = None) -> SessionPolicy:
    """Load the layered policy; the project layer applies when `records` trust its content.

    `approved` is a digest applied for this run without being in `records` (`pi --approve`).
    """
    project = project_file(cwd)
    if not project.is_file():
        policy, diagnostics, last = _base(cwd, agent, extra)
        none = decide(None, cwd, records)
        return SessionPolicy(policy, diagnostics, none, _watched(policy, agent, extra, cwd), last)
    checked = None
    if approved is None:  # `--approve` applies what is there: it is parsed to be applied
        pre = precheck(cwd, records, git_tree_file, locked_sha(cwd))
        if not pre.applies:  # nothing of the project is parsed
            base, diagnostics, last = _base(cwd, agent, extra)
            listed = _listed(cwd, records)
            return SessionPolicy(base, diagnostics, pre, _watched(base, agent, extra, cwd, listed), last)
        checked = pre.checked
    cached = _cached_with_project(cwd, agent, extra)
    if cached is not None:
        policy, content = cached
        trust = decide(content, cwd, records, approve=content.digest == approved)
        if trust.applies:
            watched = _watched(policy, agent, extra, cwd, content)
            return _with_checked(SessionPolicy(policy, [], trust, watched), checked)
        base, diagnostics, last = _base(cwd, agent, extra)
        return SessionPolicy(base, diagnostics, trust, _watched(base, agent, extra, cwd, content), last)
    return _with_checked(_compile_with_project(cwd, agent, extra, records=records, approved=approved,
                                               checked=checked), checked)


def _with_checked(loaded: SessionPolicy, checked: frozenset[tuple[str, str]] | None) -> SessionPolicy:
    """The trusted decision keeps the files its precheck hashed (what a later write may compare)."""
    if checked is None or not loaded.trust.applies:
        return loaded
    return replace(loaded, trust=replace(loaded.trust, checked=checked))


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


def _listed(cwd: Path, records: Mapping[str, Any]) -> ProjectContent | None:
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
    return _content(cwd, files, data) or _raw_content(cwd, data), diagnostics


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


@dataclass(frozen=True)
class LoadedLayers:
    """The layers with the project's, read once: the files, what went wrong, and the project's
    content as those very bytes (so a summary and a digest can never come from two reads)."""

    files: list[Any]
    diagnostics: list[Diagnostic]
    refusals: list[Refusal]
    content: ProjectContent | None
    data: list[tuple[Path, str | None]] = field(default_factory=list)
    """The project data files the layers declare (`project_data:`), with their SHA-256."""

    def compile(self, agent: Path) -> tuple[CompiledPolicy | None, list[Diagnostic]]:
        """These files compiled (refusals kept in the policy); None while the files have errors."""
        from router.compile.compiler import compile_policy

        if has_errors(self.diagnostics):
            return None, self.diagnostics
        policy, more = compile_policy(self.files, agent=agent, refusals=self.refusals)
        return policy, self.diagnostics + more


def load_with_project(cwd: Path, agent: Path, extra: Sequence[Path] = (), *,
                      checked: frozenset[tuple[str, str]] | None = None,
                      seconds: float = CLI_PROJECT_SECONDS) -> LoadedLayers:
    """Read every layer, the project's included, once. With `checked` (a precheck's files), only
    those bytes of the project are parsed; each project file is parsed within `seconds`."""
    from router.load.loader import load_layers
    from router.load.paths import layer_paths

    layers = layer_paths(cwd, agent=agent, include_project=True) + [("file", p) for p in extra]
    admit = admit_only(cwd, checked) if checked is not None else None
    files, found = load_layers(layers, admit=admit, project_seconds=seconds)
    refusals = [r for d in found if (r := refusal_of(d)) is not None]
    diagnostics = [d for d in found if refusal_of(d) is None]
    data = data_files(cwd, data_names(files))
    content = _content(cwd, files, data) or _raw_content(cwd, data)
    return LoadedLayers(files, diagnostics, refusals, content, data)


def _compile_with_project(cwd: Path, agent: Path, extra: Sequence[Path], *,
                          records: Mapping[str, Any], approved: str | None,
                          checked: frozenset[tuple[str, str]] | None = None) -> SessionPolicy:
    loaded = load_with_project(cwd, agent, extra, checked=checked, seconds=PROJECT_SECONDS)
    files, content, data = loaded.files, loaded.content, loaded.data
    trust = decide(content, cwd, records, approve=content is not None and content.digest == approved)
    if not trust.applies:
        base, base_diagnostics, last = _base(cwd, agent, extra)
        return SessionPolicy(base, base_diagnostics, trust, _watched(base, agent, extra, cwd, content), last)
    policy, diagnostics = loaded.compile(agent)
    if policy is None or has_errors(diagnostics):
        off = _without_project(cwd, agent, extra, trust, content, diagnostics)
        if off is not None:
            return off
    unfetched = any(r.code in GIT_UNAVAILABLE for r in loaded.refusals)
    if policy is not None and not has_errors(diagnostics) and content is not None and not unfetched:
        meta = {"project": [[str(p), sha, name] for p, sha, name in _project_hashes(files)],
                "data": [[str(p), sha] for p, sha in data]}
        cache = _cache_file(cwd, agent, extra, project=True)
        policy_cache.save(cache, policy, _candidates(cwd, agent, extra), meta=meta)
    return SessionPolicy(policy, diagnostics, trust, _watched(policy, agent, extra, cwd, content))


def _without_project(cwd: Path, agent: Path, extra: Sequence[Path], trust: TrustDecision,
                     content: ProjectContent | None, diagnostics: list[Diagnostic]) -> SessionPolicy | None:
    """A trusted project layer that does not load (errors, too big, too slow to read): the layers
    below it, when they load, with a note first naming what is off and why. Marked `last_good`, so
    a sidecar starts with it and a reload keeps the policy in force instead."""
    base, base_diagnostics, last = _base(cwd, agent, extra)
    if base is None or (has_errors(base_diagnostics) and not last):
        return None
    first = next((d for d in diagnostics if d.severity == "error"), None)
    where = f" ({first.span}: {first.message} [{first.code}])" if first is not None else ""
    note = Diagnostic(RELOAD_FAILED, f"the project policy {display_path(project_file(cwd))} is not applied: "
                      f"it does not load{where}; your own and the built-in layers apply (run `router "
                      "lint` to see why)")
    return SessionPolicy(base, [note, *diagnostics, *base_diagnostics], trust,
                         _watched(base, agent, extra, cwd, content), True)


def _base(cwd: Path, agent: Path,
          extra: Sequence[Path]) -> tuple[CompiledPolicy | None, list[Diagnostic], bool]:
    """The built-in and user layers (and extra files), from the cache when nothing changed; when
    they have errors, the last policy that compiled for them (True) with the errors."""
    candidates = [p.absolute() for p in base_candidates(agent, extra)]
    cache = _cache_file(cwd, agent, extra, project=False)
    policy = policy_cache.load(cache, candidates)
    if policy is not None:
        return policy, [], False
    from router.compile.compiler import load_policy

    policy, diagnostics = load_policy(cwd, agent=agent, include_project=False, extra=extra)
    if policy is not None and not has_errors(diagnostics):
        if not any(d.code in GIT_UNAVAILABLE for d in diagnostics):  # rebuilt once it is fetched
            policy_cache.save(cache, policy, candidates)
        return policy, diagnostics, False
    last = policy_cache.load_last_good(cache)
    if last is None:
        return _builtin_only(agent, diagnostics)
    note = Diagnostic(RELOAD_FAILED, "the policy has errors; the last policy that loaded for these files "
                      "stays in force until they are fixed")
    return last, [note, *diagnostics], True


def _builtin_only(agent: Path, diagnostics: list[Diagnostic]
                  ) -> tuple[CompiledPolicy | None, list[Diagnostic], bool]:
    """The user's layer (or an extra file) does not load and no earlier policy did: the built-in
    and managed layers alone, with a note naming what is off (None when those fail too)."""
    from router.compile.compiler import compile_files
    from router.load.paths import layer_paths

    layers = [(name, path) for name, path in layer_paths(Path("/"), agent=agent, include_project=False)
              if name != "user"]
    policy, more = compile_files(layers, agent=agent)
    if policy is None or has_errors(more):
        return None, diagnostics, False
    first = next((d for d in diagnostics if d.severity == "error"), None)
    where = f" ({first.span}: {first.message} [{first.code}])" if first is not None else ""
    note = Diagnostic(RELOAD_FAILED, f"{display_path(agent / 'router.yaml')} (or a file it uses) is not "
                      f"applied: it has errors{where}; the built-in and managed layers apply until "
                      "it is fixed (run `router lint`)")
    return policy, [note, *diagnostics], True


def _cached_with_project(cwd: Path, agent: Path,
                         extra: Sequence[Path]) -> tuple[CompiledPolicy, ProjectContent] | None:
    cache = _cache_file(cwd, agent, extra, project=True)
    entry = policy_cache.load_entry(cache, _candidates(cwd, agent, extra))
    if entry is None:
        return None
    policy, meta = entry
    recorded = meta.get("project")
    if not isinstance(recorded, list) or not recorded:
        return None
    files: list[tuple[Path | str, str]] = []
    for item in recorded:
        if not (isinstance(item, list) and len(item) == 3):
            return None
        path, sha, name = Path(str(item[0])), str(item[1]), item[2]
        current = project_digest(path, cwd, confined=name is None)
        if current is None or current != sha:
            return None
        files.append((str(name) if name is not None else path, sha))
    data = _recorded_data(meta.get("data"))
    if data is None or data != data_files(cwd, [str(p.relative_to(cwd)) for p, _ in data]):
        return None  # a data file changed, appeared or went away: compile again, decide again
    return policy, project_content(cwd, [*files, *((p, sha) for p, sha in data if sha is not None)])


def _recorded_data(recorded: Any) -> list[tuple[Path, str | None]] | None:
    """The data files a cache entry recorded, None when the entry does not say."""
    if not isinstance(recorded, list):
        return None
    found: list[tuple[Path, str | None]] = []
    for item in recorded:
        if not (isinstance(item, list) and len(item) == 2):
            return None
        found.append((Path(str(item[0])), None if item[1] is None else str(item[1])))
    return found


def _content(cwd: Path, files: Sequence[Any],
             data: Sequence[tuple[Path, str | None]] = ()) -> ProjectContent | None:
    hashes = [(path if name is None else name, sha) for path, sha, name in _project_hashes(files)]
    return project_content(cwd, [*hashes, *_present(data)]) if hashes else None


def _raw_content(cwd: Path, data: Sequence[tuple[Path, str | None]] = ()) -> ProjectContent | None:
    """A project file the loader could not read or parse still has content to (not) trust."""
    digest = project_digest(project_file(cwd), cwd)
    if digest is None:
        return None
    return project_content(cwd, [(project_file(cwd), digest), *_present(data)])


def _present(data: Sequence[tuple[Path, str | None]]) -> list[tuple[Path, str]]:
    return [(path, sha) for path, sha in data if sha is not None]


def _project_hashes(files: Sequence[Any]) -> list[tuple[Path, str, str | None]]:
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


def _candidates(cwd: Path, agent: Path, extra: Sequence[Path]) -> list[Path]:
    from router.load.git_lock import lock_path

    project = project_file(cwd)
    return [p.absolute() for p in [*base_candidates(agent, extra), project, lock_path(project)]]


def _cache_file(cwd: Path, agent: Path, extra: Sequence[Path], *, project: bool) -> Path:
    key = policy_cache.cache_key(cwd.absolute(), agent.absolute(), project,
                                 *[p.absolute() for p in extra])
    return policy_cache.cache_path(agent, key)


def _watched(policy: CompiledPolicy | None, agent: Path, extra: Sequence[Path], cwd: Path,
             content: ProjectContent | None = None) -> tuple[Path, ...]:
    refs = {Path(source).absolute() for _, source in (policy.file_refs if policy else ())}
    refs |= {(cwd / name).absolute() for name in (policy.project_data if policy else ())}
    layers = {p.absolute() for p in _candidates(cwd, agent, extra)}
    project = {content.root / name for name, _ in content.files} if content is not None else set()
    return tuple(sorted(refs | layers | project))
