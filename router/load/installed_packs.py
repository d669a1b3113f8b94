"""Packs from installed Python distributions: the `pi_policy_router.packs` entry point group.

A distribution declares, in its pyproject.toml::

    [project.entry-points."pi_policy_router.packs"]
    acme = "acme_router_policies"

and ships `acme.yaml` in that package's directory; `use: [acme]` then loads it. The value names a
module or package (its directory holds `<name>.yaml`), or `module:attribute` where the attribute
is a directory path. The module is located, never imported (a package's `__init__` does not run
for the router); built-in packs win over installed ones of the same name.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

GROUP = "pi_policy_router.packs"


@dataclass(frozen=True)
class InstalledPack:
    """One pack an installed distribution offers: its name, file and where it comes from."""

    name: str
    path: Path | None
    distribution: str
    value: str
    problem: str | None = None
    version: str = "?"

    def origin(self) -> PackOrigin | None:
        """Where the pack's file comes from, for provenance (None for a pack that is not usable)."""
        if self.path is None:
            return None
        return PackOrigin(self.distribution, self.version, self.path.parent, self.path.name)


@dataclass(frozen=True)
class PackOrigin:
    """A file of an installed pack: its distribution and version, the package directory, the file
    in it. Such a file `use:`s only files of the same directory (router/load/loader.py)."""

    distribution: str
    version: str
    directory: Path
    path: str

    @property
    def label(self) -> str:
        """`distribution==version:path`, as provenance names the file (never a site-packages path)."""
        return f"{self.distribution}=={self.version}:{self.path}"

    def inside(self, relative: str) -> PackOrigin:
        """The origin of another file of the same package directory."""
        return PackOrigin(self.distribution, self.version, self.directory, relative)


def installed_packs() -> list[InstalledPack]:
    """Every pack of the entry point group, sorted by name (problems kept, for `router packs`)."""
    found = [_pack(ep) for ep in entry_points(group=GROUP)]
    return sorted(found, key=lambda p: (p.name, p.distribution))


def installed_pack(name: str) -> InstalledPack | None:
    """The installed pack `name`, None when no distribution offers a usable one."""
    for ep in entry_points(group=GROUP, name=name):
        pack = _pack(ep)
        if pack.path is not None:
            return pack
    return None


def _pack(ep: EntryPoint) -> InstalledPack:
    dist = ep.dist.name if ep.dist is not None else "?"
    version = ep.dist.version if ep.dist is not None else "?"
    directory, problem = _directory(ep.value)
    path = directory / f"{ep.name}.yaml" if directory is not None else None
    if path is not None and not path.is_file():
        problem, path = f"{path} does not exist", None
    return InstalledPack(ep.name, path, dist, ep.value, problem, version)


def _directory(value: str) -> tuple[Path | None, str | None]:
    module, _, attribute = value.partition(":")
    module = module.strip()
    if attribute:
        return _attribute_directory(module, attribute.strip())
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        return None, f"cannot locate {module}: {exc}"
    if spec is None:
        return None, f"no module {module}"
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))), None
    if spec.origin:
        return Path(spec.origin).parent, None
    return None, f"{module} has no directory"


def _attribute_directory(module: str, attribute: str) -> tuple[Path | None, str | None]:
    import importlib

    try:
        value = getattr(importlib.import_module(module), attribute)
    except Exception as exc:  # a broken distribution must not break the router
        return None, f"cannot read {module}:{attribute}: {type(exc).__name__}: {exc}"
    if isinstance(value, (str, Path)):
        return Path(value), None
    return None, f"{module}:{attribute} is not a directory path"
