"""`router test git+<url>@<ref>#<file>`: test a policy as a git repository publishes it.

The source is fetched into the cache as a `use:` entry is (router/load/git_cache.py: the same
mirror, the same git environment, the same checks on the file), without a lock: what the ref names
now is what is tested (offline, the cached copy of the ref, with a warning). The commit's files are
copied into a temporary directory and tested there as `router test FILE TESTS…` of a clone would:
the policy's inline examples and every `*.test.yaml` of the commit that names it (or, without
`policy:`, is its sibling `<name>.test.yaml`). Names are the repository's (`team.yaml:3`); the
`source:` line on stderr says which commit they are of.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from router.commands import policy_note
from router.diagnostics.diagnostic import Diagnostic, render_text
from router.diagnostics.errors import SourceError
from router.load.git_cache import Cache, repo_dir
from router.load.git_source import GitOrigin, GitSources
from router.load.git_spec import GitSourceError, GitSpec, parse
from router.testing.runner import TestFile, policy_paths_for, read_test_file

__all__ = ["Checkout", "checkout", "run", "tests_of"]


@dataclass(frozen=True)
class Checkout:
    """The commit a source's ref names and its exported files in the cache."""

    spec: GitSpec
    commit: str
    tree: Path


def checkout(entry: str, cache: Cache | None = None) -> tuple[Checkout, list[str]]:
    """Fetch `entry`'s repository, resolve its ref and export the commit (GitSourceError when it
    cannot be read); with the notes to show (the fetch, or the cached copy used offline)."""
    spec = parse(entry)
    cache = cache or Cache()
    notes = [f"fetching {spec.key}"]
    try:
        cache.fetch(spec)
    except GitSourceError as exc:
        commit = _cached(cache, spec)
        if commit is None:
            raise
        notes.append(f"warning: {exc.message}; testing the cached copy of {spec.ref or 'HEAD'}")
    else:
        commit = cache.resolve(spec)
    tree = cache.export(spec, commit)
    origin = GitOrigin(spec.key, spec.repo, commit, spec.path, tree, tree / "router.lock")
    GitSources(cache=cache).file(origin)  # a file of the commit, not a link, not outside it
    return Checkout(spec, commit, tree), notes


def _cached(cache: Cache, spec: GitSpec) -> str | None:
    """The commit the cache's mirror has for the ref (None when it was never fetched)."""
    if not (repo_dir(spec, cache.root) / "repo.git" / "HEAD").is_file():
        return None
    try:
        return cache.resolve(spec)
    except GitSourceError:
        return None


def _reaching_out(work: Path, policy: Path) -> list[Diagnostic]:
    """The `use:` entries of the fetched policy (and what it uses) that name a file outside the
    copy: a repository's policy is confined to its own commit, as a `use:`d git source is."""
    from router.diagnostics.code_names import FILE_REFUSED
    from router.load.loader import load_layers
    from router.trust.capabilities import refusal_of

    _, diagnostics = load_layers([("project", work / policy)], git=GitSources(fetch=False, write=False))
    return [d for d in diagnostics
            if d.code == FILE_REFUSED or ((r := refusal_of(d)) is not None and not r.code.startswith("RT12"))]


def tests_of(root: Path, policy: Path) -> list[Path]:
    """The test files under `root` that name `policy` (one that does not load counts when it is the
    policy's sibling `<name>.test.yaml`, so that its errors are shown)."""
    target = policy.resolve()
    found = []
    for path in sorted(root.rglob("*.test.yaml")):
        try:
            test, _ = read_test_file(path)
        except SourceError:
            test = TestFile()
        if target in {p.resolve() for p in policy_paths_for(path, test)}:
            found.append(path)
    return found


def run(entry: str, *, fmt: str = "text", packs: bool = False, coverage: bool = False,
        min_coverage: float | None = None) -> tuple[int, str]:
    """Test the policy `entry` names in a copy of its commit (see the module docstring)."""
    from router.commands import test as command

    try:
        found, notes = checkout(entry)
    except GitSourceError as exc:
        problem = Diagnostic(exc.code, exc.message, None, help=exc.help)
        if fmt == "json":
            return 1, json.dumps({"results": [], "passed": 0, "failed": 0,
                                  "diagnostics": [problem.to_dict()]}, indent=2, ensure_ascii=False)
        return 1, render_text([problem])
    policy_note.emit([*notes, f"source: {found.spec.key} is commit {found.commit[:12]} of {found.spec.repo}"])
    with tempfile.TemporaryDirectory(prefix="router-test-") as temp:
        work = Path(temp) / "source"
        shutil.copytree(found.tree, work)
        with contextlib.chdir(work):
            policy = Path(found.spec.path)
            outside = _reaching_out(work, policy)
            if outside:
                return 1, render_text(outside)
            return command.run([policy, *(p.relative_to(work) for p in tests_of(work, policy))], cwd=work,
                               fmt=fmt, packs=packs, coverage=coverage, min_coverage=min_coverage)
