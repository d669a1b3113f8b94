"""The compile-time capability analysis of a policy, and the per-layer report of what it uses.

Which rules, signals and vars a layer may keep (router/trust/capabilities.py says what each
capability allows); what reads a refused value is refused too; values a confined file defines
taint the parameters they flow into.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.diagnostics.diagnostic import Span
from router.lang.expr.expression import Template
from router.trust.capabilities import (
    CODES,
    ENV_READ,
    PI_TRUST,
    PROCESS_SPAWN,
    ROUTER_LOG,
    CapabilityUse,
    Confinement,
    Refusal,
    Refused,
    confined_path,
    help_for,
    is_confined,
    spawn_refusal,
)

if TYPE_CHECKING:
    from router.compile.ir import CompiledPolicy

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





@dataclass(frozen=True)
class Param:
    """A capability-bearing parameter of a rule's action (`action` its index) or of a signal."""

    capability: str
    action: int | None
    label: str  # "log.file"
    value: Any  # a literal string, a Template, or None
    span: Span
    via: tuple[tuple[str, ...], ...] = ()  # paths it reads through `let:` bindings


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
    confined: dict[int | None, dict[str, str]] = field(default_factory=dict)  # checked: capability


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
        confined: dict[int | None, dict[str, str]] = {}
        for param in owner.params:
            if param.value is None:
                continue
            if is_confined(owner.layer) or _deps((*_paths(param.value), *param.via)) & tainted:
                confined.setdefault(param.action, {})[param.label.split(".", 1)[1]] = param.capability
        verdict.confined = confined
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
