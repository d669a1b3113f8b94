"""The capability side of compiling: the project layer's bounds, what the user grants it, the
owners the capability analysis decides on, and refused rules and signals left out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from router.actions import ACTIONS
from router.actions.signals import registry as signal_kinds
from router.compile.capability_analysis import Owner, Param, Verdict
from router.compile.context import Context, Entry
from router.compile.ir import (
    CompiledRule,
    CompiledSignal,
)
from router.compile.readable import (
    binding_paths,
)
from router.lang.expr.expression import (
    Expression,
    Template,
)
from router.load.loader import PolicyFile
from router.load.model import EnvVar, Signal
from router.load.paths import display_path
from router.load.source import KeyPath
from router.trust.capabilities import (
    CODES,
    ENV_READ,
    GRANT_CODE,
    GRANT_LAYERS,
    POLICY_KEYS,
    CapabilityUse,
    Confinement,
    Refusal,
    help_for,
    is_confined,
)


def confinement_of(files: list[PolicyFile], agent: Path, refused: list[Refusal]) -> Confinement | None:
    """The project layer's bounds, the variables the user grants it (`project_env`) and the project
    data files the unconfined layers declare (`project_data:`: writable; a project's own are not)."""
    grant: set[str] = set()
    for f in files:
        if not f.policy.project_env:
            continue
        if f.layer in GRANT_LAYERS:
            grant.update(f.policy.project_env)
        else:
            refused.append(Refusal(
                "project_env", ", ".join(f.policy.project_env), f.layer, GRANT_CODE,
                "only your own router.yaml grants environment variables to project policies; "
                "this entry is ignored", f.doc.span(("project_env",), key=True),
                help=f"move `project_env:` to {display_path(agent / 'router.yaml')}"))
    project = next((f for f in files if is_confined(f.layer) and f.root is not None), None)
    if project is None or project.root is None:
        return None
    if not any(f.layer in GRANT_LAYERS for f in files):  # a project file compiled on its own
        grant.update(_user_grant(agent))
    data_files = {Path(name).as_posix() for f in files if not is_confined(f.layer)
                  for name in f.policy.project_data}
    return Confinement(str(project.root), str(agent.absolute()), str(Path.home()), frozenset(grant),
                       frozenset(data_files))


def decision_log_settings(files: list[PolicyFile], agent: Path, refused: list[Refusal]) -> dict[str, Any]:
    """`decision_log:` settings of the user's own files (later ones win); elsewhere refused."""
    settings: dict[str, Any] = {}
    for f in files:
        if f.policy.decision_log is None:
            continue
        if f.layer in GRANT_LAYERS:
            settings.update(f.policy.decision_log.model_dump(exclude_unset=True))
            continue
        refused.append(Refusal(
            "setting", "decision_log", f.layer, GRANT_CODE,
            "only your own router.yaml configures the decision log (a project cannot turn prompt "
            "logging on); this entry is ignored", f.doc.span(("decision_log",), key=True),
            help=f"move `decision_log:` to {display_path(agent / 'router.yaml')}"))
    return settings


def _user_grant(agent: Path) -> list[str]:
    """`project_env` of the user's router.yaml, read on its own (empty when absent or invalid)."""
    from router.diagnostics.errors import SourceError
    from router.load.source import read_source

    try:
        data = read_source(agent / "router.yaml").data
    except SourceError:
        return []
    names = data.get("project_env") if isinstance(data, dict) else None
    names = [names] if isinstance(names, str) else names
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def env_list(files: list[PolicyFile], confinement: Confinement | None,
              refused: list[Refusal]) -> set[str]:
    """The names under `env:` events carry: a project file's only when the user grants them."""
    names: set[str] = set()
    grant = confinement.env if confinement else frozenset()
    for f in files:
        for index, name in enumerate(f.policy.env):
            if not is_confined(f.layer) or name in grant:
                names.add(name)
                continue
            refused.append(Refusal("env", name, f.layer, CODES[ENV_READ],
                                   f"events carry {name} only when your router.yaml grants it in "
                                   "project_env", f.doc.span(("env", index)),
                                   help_for(ENV_READ, confinement)))
    return names


def owners_of(compiled_rules: list[tuple[Entry, CompiledRule]],
            signals: dict[str, CompiledSignal | None], signals_raw: dict[str, tuple[Signal, PolicyFile]],
            files: list[PolicyFile], env_vars: dict[str, EnvVar], ctx: Context) -> list[Owner]:
    """Every rule, signal and var with its layer, what it reads and its capability parameters."""
    owners = []
    for entry, rule in compiled_rules:
        base: KeyPath = ("rules", entry.index, "do")
        params = [Param(capability, i, f"{action.name}.{name}", _param(action.params, name),
                        entry.file.doc.span(("defaults", action.name, name) if name in action.defaulted
                                            else (*base, i, action.name, name)),
                        _through_bindings(_param(action.params, name), rule.bindings))
                  for i, action in enumerate(rule.actions)
                  for name, capability in ACTIONS[action.name].capabilities.items()]
        owners.append(Owner("rule", rule.id, entry.file.layer, rule.span,
                            ctx.reads.get(("rule", rule.id), []), params))
    for name, sig in signals.items():
        if sig is None:
            continue
        f = signals_raw[name][1]
        params = [Param(capability, None, f"{sig.kind}.{key}", _param(sig.request, key),
                        f.doc.span(("signals", name, sig.kind, key)),
                        _through_bindings(_param(sig.request, key), sig.bindings))
                  for key, capability in signal_kinds()[sig.kind].capabilities.items()]
        owners.append(Owner("signal", name, f.layer, sig.span, ctx.reads.get(("signal", name), []), params))
    var_files = {name: f for f in files for name in f.policy.vars}
    for name, f in var_files.items():
        binding = env_vars[name].env if name in env_vars else None
        owners.append(Owner("var", name, f.layer, f.doc.span(("vars", name)), env_binding=binding))
    return owners


def _through_bindings(value: Any, bindings: tuple[tuple[str, Expression], ...],
                      ) -> tuple[tuple[str, ...], ...]:
    """The paths a templated parameter reads through the `let:` bindings it names."""
    if not bindings or not isinstance(value, Template) or value.expression is None:
        return ()
    return binding_paths(set(value.expression.names), list(bindings))


def _param(params: Any, name: str) -> Any:
    return params.get(name) if isinstance(params, dict) else None


def confine_rule(rule: CompiledRule, verdict: Verdict) -> CompiledRule:
    if not verdict.confined:
        return rule
    actions = tuple(replace(a, confined=verdict.confined[i]) if i in verdict.confined else a
                    for i, a in enumerate(rule.actions))
    return replace(rule, actions=actions)


def confine_signal(signal: CompiledSignal, verdict: Verdict) -> CompiledSignal:
    confined = verdict.confined.get(None)
    return replace(signal, confined=confined) if confined else signal


def policy_uses(files: list[PolicyFile]) -> list[CapabilityUse]:
    """The file-level capabilities: `use:` entries, `skills:` and `env:`."""
    uses = []
    for f in files:
        for key, capability in POLICY_KEYS.items():
            entries = [] if key == "vars" else f.policy.provides.skills if key == "skills" \
                else getattr(f.policy, key)
            where = f.policy.provided_at(key) if key == "skills" else (key,)
            uses += [CapabilityUse(f.layer, capability, key, key, str(entry), str(f.doc.span((*where, i))))
                     for i, entry in enumerate(entries)]
    return uses


def by_name(files: list[PolicyFile], attr: str, key: str) -> list[Any]:
    merged: dict[str, Any] = {}
    for f in files:
        for item in getattr(f.policy.provides, attr):
            name = f"{item.provider}/{item.id}" if key == "ref" else getattr(item, key)
            merged[name] = item
    return list(merged.values())
