"""The releases of a git source: its tags that are versions (`v1`, `1.2`, `v2.0.3`), in version
order, for `router update` (like `pre-commit autoupdate`). A tag with anything else in it (`v2-rc1`,
`stable`, `latest`) is not a release and is never chosen."""

from __future__ import annotations

import re
from collections.abc import Iterable

from router.load.git_cache import Cache, repo_dir
from router.load.git_spec import GitSpec

_VERSION = re.compile(r"[vV]?(\d{1,9}(?:\.\d{1,9}){0,5})")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


def version(tag: str) -> tuple[int, ...] | None:
    """`v1.2` -> (1, 2); None when `tag` is not a plain version (trailing zeros do not count:
    `v1` and `v1.0` are the same version)."""
    found = _VERSION.fullmatch(tag)
    if found is None:
        return None
    parts = [int(p) for p in found.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def newest(tags: Iterable[str]) -> str | None:
    """The tag of the highest version (of equal versions, the longest name, then by name); None
    when no tag is a version."""
    ranked = [(v, len(t), t) for t in tags if (v := version(t)) is not None]
    return max(ranked)[2] if ranked else None


def looks_like_commit(ref: str | None) -> bool:
    """Whether `ref` is written as a commit id (7 to 40 hex digits)."""
    return ref is not None and _COMMIT.fullmatch(ref) is not None


def tags(cache: Cache, spec: GitSpec) -> dict[str, str]:
    """The tags of the (fetched) mirror of `spec`'s repository: name -> the commit it names."""
    mirror = repo_dir(spec, cache.root) / "repo.git"
    fmt = "--format=%(refname:strip=2) %(objectname) %(*objectname)"
    out = str(cache.git.run([f"--git-dir={mirror}", "for-each-ref", fmt, "refs/tags"],
                            what=f"listing the tags of {spec.safe_url}"))
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, _, rest = line.partition(" ")
        objects = rest.split()
        if name and objects:
            found[name] = objects[-1]  # an annotated tag's commit (`*objectname`), else the object
    return found


def branches(cache: Cache, spec: GitSpec) -> set[str]:
    """The branch names of the (fetched) mirror."""
    mirror = repo_dir(spec, cache.root) / "repo.git"
    out = str(cache.git.run([f"--git-dir={mirror}", "for-each-ref", "--format=%(refname:strip=2)",
                             "refs/heads"], what=f"listing the branches of {spec.safe_url}"))
    return {line for line in out.splitlines() if line}
