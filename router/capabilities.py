"""Capabilities by layer: what a policy may touch outside the conversation, and who may do it.

Every action parameter and signal field that reaches files, the environment or processes declares
its capability here (`ACTION_PARAMS`, `SIGNAL_PARAMS`, `POLICY_KEYS`). Built-in packs, the user's
file (and what it `use:`s) and `--policy` files keep every capability. A project's
`.pi/router.yaml` (and the project files it `use:`s) is *confined* (docs/language.md,
"Capabilities"):

- `fs.write`, `fs.read`: only inside the project directory (never under a `.git` directory) and
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.decision import ROUTER_LOG
from router.diagnostics import Diagnostic, Span
from router.expr import Template

if TYPE_CHECKING:
    from router.compiled import CompiledPolicy

FS_WRITE = "fs.write"
FS_READ = "fs.read"
ENV_READ = "env.read"
PROCESS_SPAWN = "process.spawn"
POLICY_USE = "policy.use"
PI_TRUST = "pi.trust"
CAPABILITIES = (FS_WRITE, FS_READ, ENV_READ, PROCESS_SPAWN, POLICY_USE, PI_TRUST)

ACTION_PARAMS: Mapping[str, Mapping[str, str]] = {
    "log": {"file": FS_WRITE},  # the router's own log (`@router`) is open to every layer
    "audit": {"file": FS_WRITE},
    "save": {"file": FS_WRITE},
    "trust": {"trusted": PI_TRUST},  # Pi then runs the folder's .pi/extensions
}
SIGNAL_PARAMS: Mapping[str, Mapping[str, str]] = {
    "load": {"file": FS_READ},
    "read": {"file": FS_READ},
    "records": {"file": FS_READ},
    "slot": {"dir": FS_WRITE},
    "child": {"pi_bin": PROCESS_SPAWN, "system_prompt": FS_READ},  # Pi reads a prompt that names a file
    "which": {"name": PROCESS_SPAWN},  # where a program is on your PATH: not a project policy's business
}
POLICY_KEYS: Mapping[str, str] = {
    "use": POLICY_USE, "skills": FS_READ, "env": ENV_READ,
    "vars": ENV_READ,  # `{env: NAME}` bindings; `env.NAME` in expressions is env.read too
}
CODES: Mapping[str, str] = {FS_WRITE: "RT601", FS_READ: "RT602", ENV_READ: "RT603",
                            PROCESS_SPAWN: "RT604", POLICY_USE: "RT605", PI_TRUST: "RT608"}
PI_CONFIG = frozenset({"settings.json", "mcp.json", "extensions", "skills", "prompts", "themes", "SYSTEM.md",
                       "APPEND_SYSTEM.md", "router.yaml", "router.lock", "router.schema.json",
                       "trust.json", "AGENTS.md"})
"""What Pi and the router read from a project's `.pi/` as configuration or code: closed to writes
of a project policy (writing `.pi/extensions/x.ts` would make Pi run it)."""
GRANT_CODE = "RT606"  # `project_env` outside the user's own file
SYMLINK_CODE = "RT607"  # a file the router writes is a symbolic link
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

    @property
    def area(self) -> Path:
        """The project directory; only its `.pi/` when the project contains the home directory."""
        return project_area(Path(self.project), Path(self.home))

    @property
    def data(self) -> Path:
        return project_data_dir(Path(self.agent))

    def to_dict(self) -> dict[str, Any]:
        return {"project": self.project, "agent": self.agent, "home": self.home, "env": sorted(self.env)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Confinement:
        return cls(str(data["project"]), str(data["agent"]), str(data["home"]), frozenset(data["env"]))

    def bounds(self) -> str:
        return f"{show_path(self.area)} and {show_path(self.data)}"


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
        raise Refused("RT603", f"{label} {value!r} names an environment variable; a project policy's "
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
    writing = capability == FS_WRITE
    problem = _out_of_bounds(path, conf.area, Path(conf.agent), conf.data, writing=writing)
    if problem is None and resolve:
        real = Path(os.path.realpath(path))
        problem = _out_of_bounds(real, *(Path(os.path.realpath(p)) for p in
                                         (conf.area, Path(conf.agent), conf.data)), writing=writing)
        if problem is not None and real != path:
            problem = f"resolves to {show_path(real)}, which {problem}"
        path = real
    if problem is not None:
        raise Refused(code, f"{label} {verb} {value}, which {problem}")
    return path


def _out_of_bounds(path: Path, area: Path, agent: Path, data: Path, *, writing: bool = False) -> str | None:
    if path.is_relative_to(data):
        return None
    if path.is_relative_to(agent):
        return f"is inside Pi's agent directory (only {show_path(data)} is open to a project policy)"
    if path.is_relative_to(area):
        parts = path.relative_to(area).parts
        if ".git" in parts:
            return "is inside a .git directory"
        if writing and _is_pi_config(parts if area.name != ".pi" else (".pi", *parts)):
            return "is configuration or code Pi or the router reads from the project's .pi/"
        return None
    return f"is outside the project {show_path(area)}"


def _is_pi_config(parts: tuple[str, ...]) -> bool:
    """`.pi/<name>` that Pi or the router reads as configuration or code, or a policy test file."""
    if len(parts) < 2 or parts[0] != ".pi":
        return False
    return parts[1] in PI_CONFIG or parts[1].endswith((".test.yaml", ".ts", ".js"))


def check_rendered(action: str, params: Any, confined: Iterable[str], conf: Confinement, *,
                   resolve: bool) -> dict[str, Path]:
    """Check an action's confined parameters; the paths they name. Refused when one is out of bounds."""
    found: dict[str, Path] = {}
    if not isinstance(params, Mapping):
        return found
    for name in confined:
        value = params.get(name)
        capability = ACTION_PARAMS.get(action, {}).get(name)
        if capability is None or not value or not isinstance(value, str) or value == ROUTER_LOG:
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
    return {
        FS_WRITE: f"a project policy writes only inside {bounds}; move the file there, or put the "
                  "rule in your own router.yaml",
        FS_READ: f"a project policy reads only inside {bounds}",
        ENV_READ: "grant the variable in your own router.yaml: `project_env: [NAME]`",
        PROCESS_SPAWN: "remove pi_bin: a project policy's child signals run your `pi`",
        PI_TRUST: "answer Pi's project-trust prompt from your own router.yaml, if at all",
        POLICY_USE: "a project policy uses built-in packs by name and files inside the project",
    }[capability]


@dataclass(frozen=True)
class LayerReport:
    """What one layer of a compiled policy uses, and what of it is refused."""

    layer: str
    capabilities: tuple[CapabilityUse, ...]
    refused: tuple[Refusal, ...]


def capability_report(policy: CompiledPolicy) -> list[LayerReport]:
    """Per layer (pack, user, file, project, in that order): capabilities used and refusals."""
    layers = [*dict.fromkeys(["pack", "managed", "user", "file", "project",
                              *(u.layer for u in policy.capabilities), *(r.layer for r in policy.refused)])]
    reports = []
    for layer in layers:
        uses = tuple(u for u in policy.capabilities if u.layer == layer)
        refused = tuple(r for r in policy.refused if r.layer == layer)
        if uses or refused:
            reports.append(LayerReport(layer, uses, refused))
    return reports


def refused_rules(policy: CompiledPolicy) -> list[Refusal]:
    """The rules left out of the policy because they use a capability their layer lacks."""
    return [r for r in policy.refused if r.kind == "rule"]


def refusal_warnings(policy: CompiledPolicy | None, limit: int = 5) -> list[str]:
    """One line per refusal for the user (at most `limit`, then a count)."""
    if policy is None:
        return []
    lines = [r.warning() for r in policy.refused[:limit]]
    if len(policy.refused) > limit:
        lines.append(f"{len(policy.refused) - limit} more refusals in the project policy (run `router lint`)")
    return lines


# --- the compile-time analysis ----------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A capability-bearing parameter of a rule's action (`action` its index) or of a signal."""

    capability: str
    action: int | None
    label: str  # "log.file"
    value: Any  # a literal string, a Template, or None
    span: Span


@dataclass
class Owner:
    """A rule, signal or var as the analysis sees it."""

    kind: str  # rule, signal, var
    name: str
    layer: str
    span: Span
    reads: list[tuple[Span, tuple[str, ...]]] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    env_binding: str | None = None  # a var's `{env: NAME}`

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


@dataclass
class Verdict:
    """What the analysis decided for one owner."""

    refusal: Refusal | None = None
    sandboxed: bool = False  # evaluated with the granted environment only
    confined: dict[int | None, frozenset[str]] = field(default_factory=dict)  # checked parameters


@dataclass
class Analysis:
    verdicts: dict[tuple[str, str], Verdict]
    refusals: list[Refusal]
    uses: list[CapabilityUse]


def analyze(owners: list[Owner], conf: Confinement | None) -> Analysis:
    """Decide, for every owner, whether it is refused and which of its parameters are confined."""
    grant = conf.env if conf else frozenset()
    verdicts = {o.key: Verdict(sandboxed=is_confined(o.layer)) for o in owners}
    by_key = {o.key: o for o in owners}
    for owner in owners:
        if is_confined(owner.layer):
            verdicts[owner.key].refusal = _direct_refusal(owner, conf, grant)
    _refuse_env_through_signals(owners, verdicts, _env_readers(owners, grant), conf)
    _propagate_refusals(owners, verdicts, by_key)
    tainted = _tainted(owners)
    for owner in owners:
        verdict = verdicts[owner.key]
        confined: dict[int | None, set[str]] = {}
        for param in owner.params:
            if param.value is None:
                continue
            if is_confined(owner.layer) or _deps(_paths(param.value)) & tainted:
                confined.setdefault(param.action, set()).add(param.label.split(".", 1)[1])
        verdict.confined = {k: frozenset(v) for k, v in confined.items()}
    refusals = [v.refusal for o in owners if (v := verdicts[o.key]).refusal is not None]
    return Analysis(verdicts, refusals, [u for o in owners for u in _uses(o)])


def _direct_refusal(owner: Owner, conf: Confinement | None, grant: frozenset[str]) -> Refusal | None:
    def refuse(capability: str, reason: str, span: Span, code: str | None = None) -> Refusal:
        return Refusal(owner.kind, owner.name, owner.layer, code or CODES[capability], reason, span,
                       help_for(capability, conf))

    if owner.env_binding is not None and owner.env_binding not in grant:
        return refuse(ENV_READ, f"it binds the environment variable {owner.env_binding}, which your "
                      "router.yaml does not grant in project_env", owner.span)
    for span, path in owner.reads:
        if path[0] == "env" and (len(path) == 1 or path[1] not in grant):
            what = f"env.{path[1]}" if len(path) > 1 else "the whole env"
            return refuse(ENV_READ, f"it reads {what}, which your router.yaml does not grant in "
                          "project_env", span)
    for param in owner.params:
        problem = _static_param(param, conf)
        if problem is not None:
            return refuse(param.capability, problem.message, param.span, problem.code)
    return None


def _static_param(param: Param, conf: Confinement | None) -> Refused | None:
    value = param.value
    if param.capability == PROCESS_SPAWN:
        if value not in (None, ""):
            return Refused(CODES[PROCESS_SPAWN], spawn_refusal(param.label, None))
        return None
    if param.capability == PI_TRUST:
        return Refused(CODES[PI_TRUST], "it answers Pi's project-trust prompt, after which Pi runs the "
                       "folder's .pi/extensions")
    if not isinstance(value, str) or not value or value == ROUTER_LOG or conf is None:
        return None  # templates are checked when rendered
    if param.label == "child.system_prompt":
        if not os.path.exists(Path(conf.project) / value):
            return None  # Pi reads the prompt from a file only when it names one
        value = str(Path(conf.project) / value)
    try:
        confined_path(value, conf, param.capability, label=param.label)
    except Refused as refused:
        return refused
    return None


def _propagate_refusals(owners: list[Owner], verdicts: dict[tuple[str, str], Verdict],
                        by_key: dict[tuple[str, str], Owner]) -> None:
    changed = True
    while changed:
        changed = False
        for owner in owners:
            verdict = verdicts[owner.key]
            if verdict.refusal is not None:
                continue
            for span, path in owner.reads:
                dep = _dep(path)
                refused = verdicts[dep].refusal if dep in verdicts else None
                if dep is None or refused is None:
                    continue
                verdict.refusal = Refusal(
                    owner.kind, owner.name, owner.layer, refused.code,
                    f"it reads {'vars' if dep[0] == 'var' else 'signals'}.{dep[1]}, which is refused "
                    f"({by_key[dep].layer} {refused.where})", span, refused.help)
                changed = True
                break


def _env_readers(owners: list[Owner], grant: frozenset[str]) -> dict[tuple[str, str], str]:
    """Signals of unconfined layers computed (in the full scope) from variables not granted to the
    project, and vars bound to them, each with the variable it reads: a project rule reading one
    would read the variable."""
    found: dict[tuple[str, str], str] = {}
    for owner in owners:
        if owner.kind == "var" and owner.env_binding is not None and owner.env_binding not in grant:
            found[owner.key] = owner.env_binding
    changed = True
    while changed:
        changed = False
        for owner in owners:
            if owner.kind != "signal" or owner.key in found or is_confined(owner.layer):
                continue
            for _, path in owner.reads:
                name = _ungranted_env(path, grant) or found.get(_dep(path) or ("", ""))
                if name is not None:
                    found[owner.key] = name
                    changed = True
                    break
    return {k: v for k, v in found.items() if k[0] == "signal"}


def _ungranted_env(path: tuple[str, ...], grant: frozenset[str]) -> str | None:
    if path[0] != "env":
        return None
    if len(path) == 1:
        return "the whole env"
    return path[1] if path[1] not in grant else None


def _refuse_env_through_signals(owners: list[Owner], verdicts: dict[tuple[str, str], Verdict],
                                readers: dict[tuple[str, str], str], conf: Confinement | None) -> None:
    for owner in owners:
        verdict = verdicts[owner.key]
        if not is_confined(owner.layer) or verdict.refusal is not None:
            continue
        for span, path in owner.reads:
            dep = _dep(path)
            if dep in readers:
                verdict.refusal = Refusal(
                    owner.kind, owner.name, owner.layer, CODES[ENV_READ],
                    f"it reads signals.{dep[1]}, which is computed from {readers[dep]}; your router.yaml "
                    "does not grant that to project policies in project_env", span, help_for(ENV_READ, conf))
                break


def _tainted(owners: list[Owner]) -> set[tuple[str, str]]:
    """Vars and signals a confined layer defines, and signals computed from them."""
    tainted = {o.key for o in owners if o.kind != "rule" and is_confined(o.layer)}
    changed = True
    while changed:
        changed = False
        for owner in owners:
            if owner.kind == "signal" and owner.key not in tainted and \
                    _deps(p for _, p in owner.reads) & tainted:
                tainted.add(owner.key)
                changed = True
    return tainted


def _dep(path: tuple[str, ...]) -> tuple[str, str] | None:
    if len(path) < 2:
        return None
    if path[0] == "vars":
        return ("var", path[1])
    if path[0] in ("signals", "signal_errors"):
        return ("signal", path[1])
    return None


def _deps(paths: Iterable[tuple[str, ...]]) -> set[tuple[str, str]]:
    return {d for p in paths if (d := _dep(p)) is not None}


def _paths(value: Any) -> tuple[tuple[str, ...], ...]:
    if isinstance(value, Template) and value.expression is not None:
        return value.expression.paths
    return ()


def _uses(owner: Owner) -> list[CapabilityUse]:
    label = f"{owner.kind} {owner.name}"
    uses = []
    for param in owner.params:
        value = param.value
        if value is None or value == "" or (param.label == "log.file" and value == ROUTER_LOG):
            continue
        shown = value.source if isinstance(value, Template) else str(value)
        uses.append(CapabilityUse(owner.layer, param.capability, label, param.label, shown, str(param.span)))
    if owner.env_binding is not None:
        uses.append(CapabilityUse(owner.layer, ENV_READ, label, "env", owner.env_binding, str(owner.span)))
    seen: set[str] = set()
    for span, path in owner.reads:
        if path[0] == "env":
            name = path[1] if len(path) > 1 else "*"
            if name not in seen:
                seen.add(name)
                uses.append(CapabilityUse(owner.layer, ENV_READ, label, f"env.{name}", name, str(span)))
    return uses
