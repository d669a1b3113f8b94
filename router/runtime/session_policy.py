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
from router.runtime.project_content import (
    CLI_PROJECT_SECONDS,
    admit_only,
    data_files,
    data_names,
    git_tree_file,
    listed_content,
    loaded_content,
    locked_sha,
    project_digest,
    project_hashes,
    raw_content,
    recorded_data,
)
from router.trust.capabilities import Refusal, refusal_of
from router.trust.store import (
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
            listed = listed_content(cwd, records)
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
    content = loaded_content(cwd, files, data) or raw_content(cwd, data)
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
        meta = {"project": [[str(p), sha, name] for p, sha, name in project_hashes(files)],
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
    data = recorded_data(meta.get("data"))
    if data is None or data != data_files(cwd, [str(p.relative_to(cwd)) for p, _ in data]):
        return None  # a data file changed, appeared or went away: compile again, decide again
    return policy, project_content(cwd, [*files, *((p, sha) for p, sha in data if sha is not None)])


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
