"""Capabilities by layer: what a policy may touch outside the conversation, and who may do it.

Every action parameter and signal field that reaches files, the environment or processes declares
its capability in its registry entry (an action's or a signal kind's file: router/actions/,
router/actions/signals/); the policy keys' capabilities are `POLICY_KEYS` here. Built-in packs, the user's
file (and what it `use:`s) and `--policy` files keep every capability. A project's
`.pi/router.yaml` (and the project files it `use:`s) is *confined* (docs/language.md,
"Capabilities"):

- `fs.write`: an allow-list: only the project's `.pi/router/data/`, the project data files the
  unconfined layers declare (`project_data:`, e.g. the cuttle pack's `.pi/pi-cuttle.json`) and
  `<agent dir>/router/data/`; never a name an agent loads (`NEVER_WRITE`), wherever it is;
- `fs.read`: only inside the project directory (never under a `.git` directory) and
  `<agent dir>/router/data/`;
- `env.read`: only the variables the user grants with `project_env:` in their own file;
- `process.spawn`: a `child` signal runs the user's `pi`; a project may not choose the binary;
- `policy.use`: only files inside the project, and the built-in packs by name.

A violation found when compiling (a literal path, an `env.NAME` read, a `pi_bin`) refuses the
whole rule, signal or var (and whatever reads a refused signal or var); the rest of the policy
works. Templated paths are checked when rendered: lexically by the interpreter (the rule is
refused before any of its effects), then resolved (symlinks, `..`) by the executor before any I/O.
Values a project file defines taint the pack and user parameters they flow into: those parameters
are checked as the project's own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.diagnostics.code_names import (
    CHOOSES_CHILD_PROGRAM,
    ENV_VAR_NOT_GRANTED,
    FILE_OUTSIDE_PROJECT,
    PROJECT_ANSWERS_TRUST,
    READS_OUTSIDE_PROJECT,
    SYMLINK_REFUSED,
    USER_ONLY_SETTING,
    WRITES_OUTSIDE_PROJECT,
)
from router.diagnostics.diagnostic import Diagnostic, Span

ROUTER_LOG = "@router"  # the `log` action's default file: the router's own log

FS_WRITE = "fs.write"
FS_READ = "fs.read"
ENV_READ = "env.read"
PROCESS_SPAWN = "process.spawn"
POLICY_USE = "policy.use"
PI_TRUST = "pi.trust"
CAPABILITIES = (FS_WRITE, FS_READ, ENV_READ, PROCESS_SPAWN, POLICY_USE, PI_TRUST)

POLICY_KEYS: Mapping[str, str] = {
    "use": POLICY_USE, "skills": FS_READ, "env": ENV_READ,
    "vars": ENV_READ,  # `{env: NAME}` bindings; `env.NAME` in expressions is env.read too
}
CODES: Mapping[str, str] = {FS_WRITE: WRITES_OUTSIDE_PROJECT, FS_READ: READS_OUTSIDE_PROJECT,
                            ENV_READ: ENV_VAR_NOT_GRANTED,
                            PROCESS_SPAWN: CHOOSES_CHILD_PROGRAM, POLICY_USE: FILE_OUTSIDE_PROJECT,
                            PI_TRUST: PROJECT_ANSWERS_TRUST}
PROJECT_WRITE_DIR = (".pi", "router", "data")
"""The one directory of a project its policy writes freely (relative to the project root): Pi loads
nothing from `.pi/router/`, nor does any other agent we know of (docs/security.md, "Confinement")."""
NEVER_WRITE_DIRS = frozenset({".git", ".pi", ".agents", ".claude", ".cursor", ".github", ".vscode",
                              "node_modules"})
"""Directories (case-folded) no project write passes through below the allowed places: where Pi
(`.pi/`, `.agents/skills`, `node_modules/` of its packages) and other agents load code or settings."""
NEVER_WRITE = frozenset(name.casefold() for name in (
    "AGENTS.md", "AGENTS.override.md", "CLAUDE.md", "SYSTEM.md", "APPEND_SYSTEM.md", "SKILL.md",
    "settings.json", "mcp.json", "package.json", ".cursorrules"))
"""File names (case-folded) a project policy never writes, even in an allowed place: context files
Pi reads in every directory up from its working directory, and instructions and settings files."""
GRANT_CODE = USER_ONLY_SETTING  # `project_env` outside the user's own file
SYMLINK_CODE = SYMLINK_REFUSED  # a file the router writes is a symbolic link
CAPABILITY_CODES = frozenset({*CODES.values(), GRANT_CODE, SYMLINK_CODE})

CONFINED_LAYERS = frozenset({"project"})
GRANT_LAYERS = frozenset({"managed", "user", "file"})  # the files that may say `project_env:`
_ENV_IN_PATH = re.compile(r"\$(\w|\{)")


def show_path(path: Path) -> str:
    """An absolute path as people read it: with ~ for the home directory (never relative)."""
    try:
        inside = path.relative_to(Path.home())
    except ValueError:
        return str(path)
    return "~" if str(inside) == "." else f"~/{inside}"


def is_confined(layer: str) -> bool:
    return layer in CONFINED_LAYERS


def project_root(policy_file: Path) -> Path:
    """The project a project policy belongs to: the directory holding its `.pi/`."""
    parent = policy_file.absolute().parent
    return parent.parent if parent.name == ".pi" else parent


def project_area(root: Path, home: Path) -> Path:
    """Where a project policy may read and write in its project: the project directory, or only
    its `.pi/` when the project directory is the home directory or one of its parents."""
    return root / ".pi" if home.is_relative_to(root) else root


def project_data_dir(agent: Path) -> Path:
    """`<agent dir>/router/data/`: the one place outside the project open to project policies."""
    return agent / "router" / "data"


# --- confinement: where a confined owner may read and write -----------------------------------


@dataclass(frozen=True)
class Confinement:
    """The bounds of the project layer: its directory, the data dir and the granted variables."""

    project: str
    agent: str
    home: str
    env: frozenset[str] = frozenset()
    files: frozenset[str] = frozenset()  # project data files (relative) of unconfined layers: writable

    @property
    def area(self) -> Path:
        """The project directory; only its `.pi/` when the project contains the home directory."""
        return project_area(Path(self.project), Path(self.home))

    @property
    def data(self) -> Path:
        return project_data_dir(Path(self.agent))

    def to_dict(self) -> dict[str, Any]:
        return {"project": self.project, "agent": self.agent, "home": self.home, "env": sorted(self.env),
                "files": sorted(self.files)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Confinement:
        return cls(str(data["project"]), str(data["agent"]), str(data["home"]), frozenset(data["env"]),
                   frozenset(data.get("files", ())))

    @property
    def write_dir(self) -> Path:
        """`<project>/.pi/router/data/`: where the project policy writes inside its project."""
        return Path(self.project).joinpath(*PROJECT_WRITE_DIR)

    def bounds(self) -> str:
        return f"{show_path(self.area)} and {show_path(self.data)}"

    def write_bounds(self) -> str:
        files = "".join(f", {name}" for name in sorted(self.files))
        return f"{show_path(self.write_dir)}{files} and {show_path(self.data)}"


class Refused(Exception):
    """A capability a confined owner does not have; `code` is its RT6xx code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def confined_path(value: str, conf: Confinement, capability: str, *, label: str,
                  resolve: bool = True) -> Path:
    """The absolute path `value` names for a confined owner, or Refused when it is out of bounds.

    `~` is the user's home; relative paths are relative to the project. `..` is removed, and with
    `resolve` symbolic links are followed (a link inside the project that leads out is refused).
    """
    code = CODES[capability]
    if _ENV_IN_PATH.search(value):
        raise Refused(ENV_VAR_NOT_GRANTED,
                      f"{label} {value!r} names an environment variable; a project policy's "
                      "paths do not expand $NAME (use {env.NAME} with a name granted in project_env)")
    if value.startswith("~"):
        user, _, rest = value[1:].partition("/")
        if user:
            raise Refused(code, f"{label} {value!r}: only ~ (your home) is expanded in a project policy")
        path = Path(conf.home) / rest
    else:
        path = Path(value)
    path = Path(os.path.normpath(Path(conf.project) / path))
    verb = "writes" if capability == FS_WRITE else "reads"
    check = _write_problem if capability == FS_WRITE else _read_problem
    places = _Places(Path(conf.project), conf.area, Path(conf.agent), conf.data)
    problem = check(path, conf, places)
    if problem is None and resolve:
        real = Path(os.path.realpath(path))
        # the project's own places are taken from its real directory, never through a link inside
        # it (`.pi/router/data` committed as a link to `.pi/extensions` is not the data directory)
        project = Path(os.path.realpath(conf.project))
        area = project / ".pi" if conf.area != Path(conf.project) else project
        places = _Places(project, area, *(Path(os.path.realpath(p)) for p in (conf.agent, conf.data)))
        problem = check(real, conf, places)
        if problem is not None and real != path:
            problem = f"resolves to {show_path(real)}, which {problem}"
        path = real
    if problem is not None:
        raise Refused(code, f"{label} {verb} {value}, which {problem}")
    return path


@dataclass(frozen=True)
class _Places:
    """The directories a check compares with: the project, its area, the agent dir, the data dir."""

    project: Path
    area: Path
    agent: Path
    data: Path


def _read_problem(path: Path, conf: Confinement, places: _Places) -> str | None:
    """Why a confined read of `path` is out of bounds: outside the project's area and the data dir."""
    if _within(path, places.data):
        return None
    if _within(path, places.agent):
        return f"is inside Pi's agent directory (only {show_path(conf.data)} is open to a project policy)"
    if not _within(path, places.area):
        return f"is outside the project {show_path(conf.area)}"
    return "is inside a .git directory" if ".git" in _folded(_relative(path, places.area)) else None


def _write_problem(path: Path, conf: Confinement, places: _Places) -> str | None:
    """Why a confined write of `path` is not on the allow-list: the project's `.pi/router/data/`,
    the declared data files of the unconfined layers and `<agent dir>/router/data/`."""
    for place in (places.data, places.project.joinpath(*PROJECT_WRITE_DIR)):
        if _within(path, place):
            return _never(_relative(path, place))
    for name in conf.files:
        if path.as_posix().casefold() == places.project.joinpath(name).as_posix().casefold():
            return _never((Path(name).name,))
    if _within(path, places.agent):
        return f"is inside Pi's agent directory (only {show_path(conf.data)} is open to a project policy)"
    if not _within(path, places.area):
        return f"is outside the project {show_path(conf.area)}"
    parts = _folded(_relative(path, places.project))
    if ".git" in parts:
        return "is inside a .git directory"
    if parts[:1] == (".pi",) or (parts and parts[-1] in NEVER_WRITE) or set(parts) & NEVER_WRITE_DIRS:
        return ("is where Pi or another coding agent loads code, skills, prompts, settings or "
                "instructions from")
    return f"is not a data path of the project (a project policy writes only {conf.write_bounds()})"


def _never(parts: tuple[str, ...]) -> str | None:
    """Why a path below an allowed place is still refused: a name an agent loads."""
    folded = _folded(parts)
    if set(folded[:-1]) & NEVER_WRITE_DIRS or (folded and folded[-1] in NEVER_WRITE | NEVER_WRITE_DIRS):
        return (f"names {'/'.join(parts)}, a file or directory coding agents load (never written by a "
                "project policy)")
    return None


def _within(path: Path, place: Path) -> bool:
    """`path` is `place` or below it, compared case-folded (macOS and Windows file systems)."""
    if path.is_relative_to(place):
        return True
    folded, base = path.as_posix().casefold(), place.as_posix().casefold()
    return folded == base or folded.startswith(base.rstrip("/") + "/")


def _relative(path: Path, place: Path) -> tuple[str, ...]:
    """The parts of `path` below `place` (which `_within` found it under, maybe by case)."""
    return path.parts[len(place.parts):]


def _folded(parts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.casefold() for part in parts)


def check_rendered(action: str, params: Any, confined: Mapping[str, str], conf: Confinement, *,
                   resolve: bool) -> dict[str, Path]:
    """Check an action's confined parameters (name -> capability); the paths they name. Refused
    when one is out of bounds."""
    found: dict[str, Path] = {}
    if not isinstance(params, Mapping):
        return found
    for name, capability in confined.items():
        value = params.get(name)
        if not value or not isinstance(value, str) or value == ROUTER_LOG:
            continue
        found[name] = confined_path(value, conf, capability, label=f"{action}.{name}", resolve=resolve)
    return found


# --- records: what a policy uses and what is refused -------------------------------------------


@dataclass(frozen=True)
class CapabilityUse:
    """One place where a policy uses a capability (for the trust summary)."""

    layer: str
    capability: str
    owner: str  # "rule r", "signal s", "var v", "use", "env", "skills"
    field: str  # e.g. "log.file", "read.file", "env.MY_FLAG"
    value: str  # the literal, the template source, or the variable name
    where: str  # file:line:col

    def to_dict(self) -> dict[str, str]:
        return {"layer": self.layer, "capability": self.capability, "owner": self.owner,
                "field": self.field, "value": self.value, "where": self.where}


@dataclass(frozen=True)
class Refusal:
    """Something a policy file may not do: the rule, signal, var or entry is left out."""

    kind: str  # rule, signal, var, env, use, skill, project_env
    name: str
    layer: str
    code: str
    reason: str
    span: Span | None = None
    help: str | None = None

    @property
    def where(self) -> str:
        return str(self.span) if self.span else ""

    def diagnostic(self) -> Diagnostic:
        rule_id = self.name if self.kind == "rule" else None
        return Diagnostic(self.code, f"{self.kind} '{self.name}' refused: {self.reason}", self.span,
                          help=self.help, rule_id=rule_id, extra={"refusal": self})

    def warning(self) -> str:
        where = f"{self.where}: " if self.span else ""
        return (f"{where}{self.kind} '{self.name}' of the {self.layer} policy refused: {self.reason} "
                f"[{self.code}]")

    def to_dict(self) -> dict[str, Any]:
        span = [self.span.path, self.span.line, self.span.col] if self.span else None
        return {"kind": self.kind, "name": self.name, "layer": self.layer, "code": self.code,
                "reason": self.reason, "span": span, "help": self.help}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Refusal:
        span = data.get("span")
        return cls(data["kind"], data["name"], data["layer"], data["code"], data["reason"],
                   Span(span[0], span[1], span[2]) if span else None, data.get("help"))


def refusal_of(diagnostic: Diagnostic) -> Refusal | None:
    """The refusal a diagnostic reports (refusals never stop a policy from loading)."""
    found = diagnostic.extra.get("refusal")
    return found if isinstance(found, Refusal) else None


def spawn_refusal(label: str, value: Any) -> str:
    """Why a project layer may not set `label` (a program to run, or to look up on PATH)."""
    shown = f" {value!r}" if value is not None else ""
    if label.startswith("which."):
        return f"{label}{shown} looks a program up on your PATH"
    return f"{label}{shown} chooses the program the child runs"


def help_for(capability: str, conf: Confinement | None) -> str:
    bounds = conf.bounds() if conf else "the project and <agent dir>/router/data"
    writable = conf.write_bounds() if conf else "the project's .pi/router/data/ and <agent dir>/router/data/"
    return {
        FS_WRITE: f"a project policy writes only {writable}; move the file there, or put the "
                  "rule in your own router.yaml",
        FS_READ: f"a project policy reads only inside {bounds}",
        ENV_READ: "grant the variable in your own router.yaml: `project_env: [NAME]`",
        PROCESS_SPAWN: "remove pi_bin: a project policy's child signals run your `pi`",
        PI_TRUST: "answer Pi's project-trust prompt from your own router.yaml, if at all",
        POLICY_USE: "a project policy uses built-in packs by name and files inside the project",
    }[capability]
