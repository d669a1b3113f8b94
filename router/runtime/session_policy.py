"""The policy a Pi session runs: the layers, the project layer only when trusted, the cache.

`load_session_policy` is what `router serve` calls at `hello` and on every reload. The trust
decision is taken on the bytes the loader actually parsed (or, from the cache, on the files'
current bytes compared with the digests recorded when the cached policy was compiled), so a file
swapped between the check and the parse cannot slip through.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.compile import cache as policy_cache
from router.compile.compiled import CompiledPolicy
from router.diagnostics.diagnostic import Diagnostic, has_errors
from router.load.paths import packs_dir
from router.load.paths import project_policy as project_file
from router.trust.capabilities import Refusal, refusal_of
from router.trust.store import ProjectContent, TrustDecision, decide, project_content


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
    from router.load.git_source import lock_path
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
    cached = _cached_with_project(cwd, agent, extra)
    if cached is not None:
        policy, content = cached
        trust = decide(content, cwd, records, approve=content.digest == approved)
        if trust.applies:
            return SessionPolicy(policy, [], trust, _watched(policy, agent, extra, cwd, content))
        base, diagnostics, last = _base(cwd, agent, extra)
        return SessionPolicy(base, diagnostics, trust, _watched(base, agent, extra, cwd, content), last)
    return _compile_with_project(cwd, agent, extra, records=records, approved=approved)


def read_project_content(cwd: Path, agent: Path | None = None
                         ) -> tuple[ProjectContent | None, list[Diagnostic]]:
    """The project layer's content as the loader reads it (None when there is no project policy),
    with the project data files the layers declare (`project_data:`; the user's layers with `agent`)."""
    from router.load.loader import load_layers
    from router.load.paths import layer_paths

    project = project_file(cwd)
    if not project.is_file():
        return None, []
    files, diagnostics = load_layers([("project", project)])
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
    found: list[tuple[Path, str | None]] = []
    for name in names:
        path = cwd / name
        found.append((path, project_digest(path, cwd)))
    return found


def project_digest(path: Path, cwd: Path, *, confined: bool = True) -> str | None:
    """The SHA-256 of a project's file, read as the loader reads one (a regular file of bounded
    size, not through a link out of the project, never a kernel file); None when it is not there
    or is refused (`read_bytes`)."""
    from router.diagnostics.errors import SourceError  # the YAML reader's module: not at the start
    from router.load.source import read_bytes
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


def load_with_project(cwd: Path, agent: Path, extra: Sequence[Path] = ()) -> LoadedLayers:
    """Read every layer, the project's included, once."""
    from router.load.loader import load_layers
    from router.load.paths import layer_paths

    layers = layer_paths(cwd, agent=agent, include_project=True) + [("file", p) for p in extra]
    files, found = load_layers(layers)
    refusals = [r for d in found if (r := refusal_of(d)) is not None]
    diagnostics = [d for d in found if refusal_of(d) is None]
    data = data_files(cwd, data_names(files))
    content = _content(cwd, files, data) or _raw_content(cwd, data)
    return LoadedLayers(files, diagnostics, refusals, content, data)


def _compile_with_project(cwd: Path, agent: Path, extra: Sequence[Path], *,
                          records: Mapping[str, Any], approved: str | None) -> SessionPolicy:
    loaded = load_with_project(cwd, agent, extra)
    files, content, data = loaded.files, loaded.content, loaded.data
    trust = decide(content, cwd, records, approve=content is not None and content.digest == approved)
    if not trust.applies:
        base, base_diagnostics, last = _base(cwd, agent, extra)
        return SessionPolicy(base, base_diagnostics, trust, _watched(base, agent, extra, cwd, content), last)
    policy, diagnostics = loaded.compile(agent)
    if policy is not None and not has_errors(diagnostics) and content is not None:
        meta = {"project": [[str(p), sha, name] for p, sha, name in _project_hashes(files)],
                "data": [[str(p), sha] for p, sha in data]}
        cache = _cache_file(cwd, agent, extra, project=True)
        policy_cache.save(cache, policy, _candidates(cwd, agent, extra), meta=meta)
    return SessionPolicy(policy, diagnostics, trust, _watched(policy, agent, extra, cwd, content))


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
        policy_cache.save(cache, policy, candidates)
        return policy, diagnostics, False
    last = policy_cache.load_last_good(cache)
    if last is None:
        return policy, diagnostics, False
    note = Diagnostic("RT503", "the policy has errors; the last policy that loaded for these files "
                      "stays in force until they are fixed")
    return last, [note, *diagnostics], True


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
    return f"{origin.key}@{origin.commit}:{origin.path}" if origin is not None else None


def _candidates(cwd: Path, agent: Path, extra: Sequence[Path]) -> list[Path]:
    from router.load.git_source import lock_path

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
