"""Find and read the policy layers: built-in packs, the user's file, the project's file, `use:`.

Order of evaluation: for every file, the files it `use:`s come first (depth first, each file at
most once), then its own rules. The layers are the built-in `default` pack, then
`$PI_CODING_AGENT_DIR/router.yaml` (default `~/.pi/agent/router.yaml`), then `.pi/router.yaml`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import ValidationError

from router.diagnostics.code_names import (
    FILE_REFUSED,
    GIT_SOURCE_UNAVAILABLE,
    INVALID_VALUE,
    TOO_LARGE,
    USE_CYCLE,
    USE_NOT_FOUND,
)
from router.diagnostics.diagnostic import Diagnostic, Span
from router.diagnostics.errors import SourceError
from router.load.deadline import time_limit
from router.load.file_reading import read_text, refused_read
from router.load.git_lock import lock_path
from router.load.git_source import GitOrigin, GitSources, emit_notes
from router.load.git_spec import GitSourceError, is_git, parse, redact_text
from router.load.installed_packs import PackOrigin, installed_pack
from router.load.model import Policy
from router.load.paths import agent_dir, display_path, layer_paths, pack_names, packs_dir
from router.load.source import SourceDoc, parse_source
from router.load.validation import validation_diagnostics
from router.trust.capabilities import (
    CODES,
    POLICY_USE,
    Refusal,
    is_confined,
    project_area,
    project_root,
)

__all__ = ["MAX_RULES", "PolicyFile", "agent_dir", "describe_files", "layer_paths", "load_layers",
           "pack_names", "packs_dir"]

Admit = Callable[[Path, "GitOrigin | None", str], bool]
"""Whether a project file's bytes (its path, git origin and SHA-256) may be parsed at all."""

USE_HELP = "a project policy uses built-in packs by name and files inside its project"
MAX_RULES = 5_000  # compiled in 1.3 s here (3.5 s on a busy machine); more rules fail fast instead


@dataclass(frozen=True)
class PolicyFile:
    """One loaded policy file with its source positions."""

    path: str
    doc: SourceDoc
    policy: Policy
    layer: str
    group: str
    source: Path | None = None
    used_by: str | None = None  # the display path of the file whose `use:` loaded this one
    root: Path | None = None  # the project directory of a project-layer file
    origin: GitOrigin | None = None  # the git source, commit and file it was read from
    package: PackOrigin | None = None  # the installed distribution (and version) it comes from

    @property
    def pack(self) -> str | None:
        """The built-in pack's name when this file is one, else None."""
        in_packs = self.source is not None and self.source.parent == packs_dir().resolve()
        return self.source.stem if in_packs and self.source is not None else None

    @property
    def label(self) -> str:
        """How people name the file: `decision pack`, `.pi/router.yaml`, `~/.pi/agent/router.yaml`."""
        return f"{self.pack} pack" if self.pack else self.path

    def to_dict(self) -> dict[str, str | None]:
        return {"path": str(self.source or self.path), "display": self.path, "layer": self.layer,
                "pack": self.pack, "used_by": self.used_by,
                "origin": self.origin.label if self.origin else self.package.label if self.package else None}


def describe_files(files: Iterable[PolicyFile]) -> str:
    """The files in force, layer by layer, each with what it `use:`s:
    `default pack, ~/.pi/agent/router.yaml, .pi/router.yaml (+ decision pack via use:)`.
    """
    parts: list[str] = []
    used: list[str] = []
    for f in files:
        if f.used_by is not None:
            used.append(f.label)
            continue
        parts.append(f.label + (f" (+ {', '.join(used)} via use:)" if used else ""))
        used = []
    return ", ".join(parts + used) or "nothing"


YAML_SUFFIXES = (".yaml", ".yml")


def load_layers(layers: Iterable[tuple[str, Path]], *, git: GitSources | None = None,
                admit: Admit | None = None, project_seconds: float | None = None,
                ) -> tuple[list[PolicyFile], list[Diagnostic]]:
    """Load each layer and what it uses; return files in evaluation order plus diagnostics.

    A project file that reaches outside its project (a `use:` entry, or `.pi/router.yaml` itself
    being a link that leads out) is not read: that is a refusal (`capabilities.refusal_of`), which
    does not stop the other files from loading. So is a git source that cannot be read as its
    layer's `router.lock` pins it (router/load/git_source.py); `git` resolves them (default: fetching as
    the calling command allows), and the locks it changed are written at the end.

    With `admit`, a project file whose bytes it refuses is not parsed (nor anything it would
    `use:`); the sidecar admits only bytes the user trusted. `project_seconds` bounds the time
    parsing one project file may take (RT103 past it).
    """
    loader = _Loader(git or GitSources.current(), admit, project_seconds)
    for layer, path in layers:
        root = project_root(path) if is_confined(layer) else None
        if root is not None and (problem := _outside(path, root)) is not None:
            shown = display_path(path)
            loader.refuse(shown, layer, f"{shown} {problem}", Span(str(path)), "file")
            continue
        loader.load(path, layer, via=None, root=root)
    loader.git.save()
    if loader.git.fetch:
        emit_notes(loader.git)
    return loader.files, loader.diagnostics


def _outside(path: Path, root: Path) -> str | None:
    """Why `path` (links followed) is not a file of the project at `root`, or None."""
    return refused_read(path, _area(root))


def _area(root: Path) -> Path:
    return project_area(root, Path.home())


class _Loader:
    def __init__(self, git: GitSources, admit: Admit | None = None,
                 project_seconds: float | None = None) -> None:
        self.git = git
        self.admit = admit
        self.project_seconds = project_seconds
        self.files: list[PolicyFile] = []
        self.diagnostics: list[Diagnostic] = []
        self._done: set[Path] = set()
        self._active: list[Path] = []

    def refuse(self, name: str, layer: str, reason: str, span: Span | None, kind: str = "use", *,
               code: str = CODES[POLICY_USE], help: str = USE_HELP) -> None:
        refusal = Refusal(kind, name, layer, code, reason, span, help)
        self.diagnostics.append(refusal.diagnostic())

    def load(self, path: Path, layer: str, via: Span | None, root: Path | None = None, *,
             used_by: str | None = None, origin: GitOrigin | None = None, lock: Path | None = None,
             package: PackOrigin | None = None) -> None:
        lock = lock or lock_path(path)
        resolved = path.resolve()
        if resolved in self._active:
            chain = " -> ".join(p.name for p in [*self._active, resolved])
            self.diagnostics.append(Diagnostic(USE_CYCLE, f"`use:` cycle: {chain}", via,
                                               help="remove one of the `use:` entries"))
            return
        if resolved in self._done:
            return
        try:
            doc = self._read(path, layer, origin, root, package)
            if doc is None:
                return
            if origin is not None:
                self.git.verify(origin, doc.sha256)
        except SourceError as exc:  # nothing of a file that is not a policy is shown
            self.diagnostics.extend(_no_excerpt(d.at(d.span or via)) for d in exc.diagnostics)
            return
        except GitSourceError as exc:
            self.refuse(origin.key if origin else str(path), layer, exc.message, via, code=exc.code,
                        help=exc.help or "")
            return
        policy = self._validate(doc)
        if policy is None:
            return
        self._active.append(resolved)
        for index, entry in enumerate(policy.use):
            self._use(entry, doc, path, layer, root, (origin, package), lock, doc.span(("use", index)))
        self._active.pop()
        self._done.add(resolved)
        group = policy.group or (path.stem if layer == "pack" else "main")
        self.files.append(PolicyFile(doc.path, doc, policy, layer, group, resolved, used_by, root, origin,
                                     package))

    def _read(self, path: Path, layer: str, origin: GitOrigin | None, root: Path | None,
              package: PackOrigin | None = None) -> SourceDoc | None:
        """The parsed file (SourceError when it is not YAML, or read through a link out of its
        project); None for project bytes `admit` refuses: they are never parsed."""
        display = origin.label if origin else package.label if package else display_path(path)
        text = read_text(path, display=display,
                         within=_area(root) if root is not None and origin is None else None)
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        confined = is_confined(layer)
        if confined and self.admit is not None and not self.admit(path, origin, sha):
            return None
        limit = time_limit(self.project_seconds) if confined and self.project_seconds else \
            contextlib.nullcontext()
        with limit:
            doc = parse_source(text, display)
        return replace(doc, sha256=sha)

    def _use(self, entry: str, doc: SourceDoc, path: Path, layer: str, root: Path | None,
             origins: tuple[GitOrigin | None, PackOrigin | None], lock: Path, span: Span) -> None:
        """Load one `use:` entry of the file at `path`: a git source, a file or a pack."""
        origin, package = origins
        if package is not None and (is_git(entry) or _is_path(entry)):
            self._use_in_package(entry, doc, path, package, span)
            return
        if is_git(entry):
            self._use_git(entry, doc, layer, root, lock, span)
            return
        inner: GitOrigin | None = None
        if origin is not None and _is_path(entry):
            named = path.parent / Path(entry).expanduser()
            problem = _outside_tree(named, origin.tree)
            if problem is not None:
                self.refuse(entry, layer, f"{entry} {problem}", span, code=GIT_SOURCE_UNAVAILABLE,
                            help="a file of a git source uses only files of the same repository commit")
                return
            relative = Path(os.path.normpath(named)).relative_to(os.path.normpath(origin.tree))
            inner = origin.inside(relative.as_posix())
            linked = self.git.linked(inner)
            if linked is not None:
                self.refuse(entry, layer, linked, span, code=GIT_SOURCE_UNAVAILABLE,
                            help="a git source's policy files are regular files: commit the file itself")
                return
        elif root is not None and _is_path(entry):
            named = path.parent / Path(entry).expanduser()
            problem = None if _is_pack_file(named) else _outside(named, root)
            if problem is not None:
                self.refuse(entry, layer, f"{entry} {problem}", span)
                return
        resolved = self._resolve_use(entry, path.parent, span)
        if resolved is None:
            return
        target, installed = resolved
        if _is_pack_file(target) or not _is_path(entry):  # a name: a built-in or a pip-installed pack
            self.load(target, "pack", span, used_by=doc.path, package=installed)
        else:
            self.load(target, layer, span, root, used_by=doc.path, origin=inner, lock=lock)

    def _use_in_package(self, entry: str, doc: SourceDoc, path: Path, package: PackOrigin,
                        span: Span) -> None:
        """A file `use:`d by an installed pack's file: one of the same package directory, or refused."""
        where = f"{package.distribution} {package.version}"
        if is_git(entry):
            self.refuse(redact_text(entry), "pack", f"the installed pack {where} names a git source",
                        span, code=FILE_REFUSED, help="an installed pack uses its own files and packs by "
                        "name; a git source belongs in the policy that uses the pack")
            return
        named = path.parent / Path(entry).expanduser()
        real = Path(os.path.realpath(named))
        if not real.is_relative_to(Path(os.path.realpath(package.directory))):
            self.refuse(entry, "pack", f"{entry} is outside the package directory of {where}", span,
                        code=FILE_REFUSED, help="an installed pack uses only files of its own package "
                        "directory (and packs by name)")
            return
        resolved = self._resolve_use(entry, path.parent, span)
        if resolved is not None:
            inner = package.inside(real.relative_to(os.path.realpath(package.directory)).as_posix())
            self.load(resolved[0], "pack", span, used_by=doc.path, package=inner)

    def _use_git(self, entry: str, doc: SourceDoc, layer: str, root: Path | None, lock: Path,
                 span: Span) -> None:
        """Load a git source as `lock` pins it; a source that cannot be read is refused."""
        try:
            parse(entry)
        except GitSourceError as exc:
            self.diagnostics.append(Diagnostic(exc.code, exc.message, span, help=exc.help))
            return
        try:
            target, origin = self.git.resolve(entry, lock)
        except GitSourceError as exc:
            self.refuse(redact_text(entry), layer, exc.message, span, code=exc.code, help=exc.help or "")
            return
        self.load(target, layer, span, root, used_by=doc.path, origin=origin, lock=lock)

    def _validate(self, doc: SourceDoc) -> Policy | None:
        if doc.data is None:
            return Policy.model_validate({})
        if not isinstance(doc.data, dict):
            self.diagnostics.append(_no_excerpt(Diagnostic(
                INVALID_VALUE, "a policy file must be a mapping at the top level", doc.span(()))))
            return None
        rules = doc.data.get("rules")
        if isinstance(rules, list) and len(rules) > MAX_RULES:  # before validating thousands of rules
            self.diagnostics.append(too_many_rules(len(rules), doc.span(("rules",), key=True)))
            return None
        try:
            return Policy.model_validate(doc.data)
        except ValidationError as exc:
            self.diagnostics.extend(validation_diagnostics(exc, doc, Policy))
            return None

    def _resolve_use(self, entry: str, base: Path, span: Span) -> tuple[Path, PackOrigin | None] | None:
        """The file a `use:` entry names (and, for an installed pack, where it comes from)."""
        if _is_path(entry):
            target = base / Path(entry).expanduser()
            if not entry.endswith(YAML_SUFFIXES):
                self.diagnostics.append(Diagnostic(
                    USE_NOT_FOUND, f"`use:` file must be a .yaml or .yml file: {entry}", span,
                    help="policy files end in .yaml or .yml; other files are never read as policies"))
                return None
            if target.is_file():
                return target, None
            self.diagnostics.append(Diagnostic(USE_NOT_FOUND, f"`use:` file not found: {entry}", span,
                                               help=f"paths are relative to {base}"))
            return None
        candidate = packs_dir() / f"{entry}.yaml"
        if candidate.is_file():
            return candidate, None
        installed = installed_pack(entry)
        if installed is not None and installed.path is not None:
            return installed.path, installed.origin()
        from router.diagnostics.suggest import did_you_mean
        from router.load.installed_packs import installed_packs

        names = sorted({*pack_names(), *(p.name for p in installed_packs() if p.path is not None)})
        self.diagnostics.append(Diagnostic(
            USE_NOT_FOUND, f"unknown pack '{entry}'; expected one of {', '.join(names)}", span,
            help=did_you_mean(entry, names) or "use ./path.yaml for a file; `router packs` lists the packs"))
        return None


def _outside_tree(path: Path, tree: Path) -> str | None:
    """Why `path` (links followed) is not a file of the exported commit at `tree`, or None."""
    real = Path(os.path.realpath(path))
    return None if real.is_relative_to(Path(os.path.realpath(tree))) else "is outside the repository"


def _is_path(entry: str) -> bool:
    """A `use:` entry naming a file (else it names a built-in pack)."""
    return "/" in entry or entry.endswith(YAML_SUFFIXES)


def _is_pack_file(path: Path) -> bool:
    return path.resolve().parent == packs_dir().resolve() and path.suffix == ".yaml"


def _no_excerpt(diagnostic: Diagnostic) -> Diagnostic:
    """The diagnostic of a file that may not be a policy at all: renderers show none of its lines."""
    return replace(diagnostic, extra={**diagnostic.extra, "excerpt": False})


def too_many_rules(count: int, span: Span | None) -> Diagnostic:
    """RT103 for a policy of more than MAX_RULES rules."""
    return Diagnostic(TOO_LARGE, f"the policy has {count} rules; at most {MAX_RULES} are supported", span,
                      help="merge rules that differ only in data into one rule reading a var, or split "
                      "the work between policies")
