"""Compile loaded policy files into one frozen CompiledPolicy; every problem is a located diagnostic.

Layers are merged first (later files override or disable rules by id, override vars, signals,
commands, tools and virtual models by name), then every expression is parsed and checked once:
event types, actions and their parameters, functions and arity, names and field paths.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.actions import ACTIONS
from router.compile.capability_analysis import analyze
from router.compile.confinement import (
    by_name,
    confine_rule,
    confine_signal,
    confinement_of,
    decision_log_settings,
    env_list,
    owners_of,
    policy_uses,
)
from router.compile.context import Context
from router.compile.failure import failure_modes
from router.compile.ir import (
    CompiledPolicy,
    CompiledRule,
)
from router.compile.layering import merge_rules, merge_vars
from router.compile.question_events import merge_question_events
from router.compile.readable import (
    defaults_problems,
)
from router.compile.rules import compile_rule
from router.compile.signals import check_signal_cycles, compile_signal
from router.diagnostics.code_names import GIT_SOURCE_MISMATCH, GIT_SOURCE_UNAVAILABLE, SKILLS_PATH_NOT_FOUND
from router.diagnostics.diagnostic import Diagnostic, Severity, has_errors
from router.load.loader import MAX_RULES, PolicyFile, load_layers, too_many_rules
from router.load.paths import agent_dir, layer_paths
from router.trust.capabilities import (
    FS_READ,
    Confinement,
    Refusal,
    Refused,
    confined_path,
    help_for,
    is_confined,
    refusal_of,
)


@dataclass(frozen=True)
class LoadedPolicy:
    """A compiled policy (None when it has errors), its diagnostics and the files that loaded."""

    policy: CompiledPolicy | None
    diagnostics: list[Diagnostic]
    files: list[PolicyFile]


MISSING_SOURCES = frozenset({GIT_SOURCE_UNAVAILABLE,
                             GIT_SOURCE_MISMATCH})  # a git source that cannot be read (or is tampered)


def complete(loaded: LoadedPolicy) -> LoadedPolicy:
    """`loaded` as a dry run may use it: without a policy when a git source could not be read, so
    that `router explain`, `test`, `replay` and `diff` fail with that error (and its fix) instead
    of answering for a policy Pi would never run."""
    if loaded.policy is None:
        return loaded
    missing = [r.diagnostic() for r in loaded.policy.refused if r.code in MISSING_SOURCES]
    if not missing:
        return loaded
    return LoadedPolicy(None, [*loaded.diagnostics, *missing], loaded.files)


def load_policy(cwd: Path, *, agent: Path | None = None, include_project: bool = True,
                extra: Iterable[Path] = ()) -> tuple[CompiledPolicy | None, list[Diagnostic]]:
    """Load the layered policy for `cwd` (plus `extra` files last) and compile it."""
    loaded = load_layered(cwd, agent=agent, include_project=include_project, extra=extra)
    return loaded.policy, loaded.diagnostics


def load_layered(cwd: Path, *, agent: Path | None = None, include_project: bool = True,
                 extra: Iterable[Path] = ()) -> LoadedPolicy:
    """`load_policy`, also returning the files that loaded (in evaluation order)."""
    agent = agent or agent_dir()
    layers = layer_paths(cwd, agent=agent, include_project=include_project)
    layers += [("file", Path(p)) for p in extra]
    return compile_layers(layers, agent=agent)


def compile_files(layers: Iterable[tuple[str, Path]], *, agent: Path | None = None,
                  ) -> tuple[CompiledPolicy | None, list[Diagnostic]]:
    """Load the given layers (with what they use) and compile them."""
    loaded = compile_layers(layers, agent=agent)
    return loaded.policy, loaded.diagnostics


def compile_layers(layers: Iterable[tuple[str, Path]], *, agent: Path | None = None) -> LoadedPolicy:
    """`compile_files`, also returning the files that loaded (in evaluation order).

    A file given as `.pi/router.yaml` is a project policy wherever it is named. Refusals (what a
    layer may not do) are not in the returned diagnostics: the policy keeps them in `refused`.
    """
    with without_gc():
        files, found = load_layers([(_layer_of(layer, path), path) for layer, path in layers])
        refusals = [r for d in found if (r := refusal_of(d)) is not None]
        diagnostics = [d for d in found if refusal_of(d) is None]
        if has_errors(diagnostics):
            return LoadedPolicy(None, found, files)
        too_many = rule_limit(files)
        if too_many is not None:
            return LoadedPolicy(None, [*found, too_many], files)
        policy, more = compile_policy(files, agent=agent, refusals=refusals)
    if policy is None:
        return LoadedPolicy(None, found + more, files)
    return LoadedPolicy(policy, diagnostics + more, files)


def rule_limit(files: list[PolicyFile]) -> Diagnostic | None:
    """RT103 when the files hold more than MAX_RULES rules in all."""
    total = sum(len(f.policy.rules) for f in files)
    return too_many_rules(total, files[-1].doc.span(("rules",), key=True)) if total > MAX_RULES else None


@contextmanager
def without_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: compiling makes many long-lived objects and few cycles,
    and the collector's passes over them took two thirds of a 20,000-rule compile.

    On the way out the new objects go straight to the oldest generation (freeze, then unfreeze),
    so the first collection afterwards does not scan them all as young ones (130 ms at 1,000 rules);
    a later full collection still finds any cycle among them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def _layer_of(layer: str, path: Path) -> str:
    if layer == "file" and path.name == "router.yaml" and path.absolute().parent.name == ".pi":
        return "project"
    return layer


def compile_policy(files: list[PolicyFile], *, agent: Path | None = None,
                   refusals: Iterable[Refusal] = ()) -> tuple[CompiledPolicy | None, list[Diagnostic]]:
    """Merge the files' layers and compile everything; None when any error was found.

    Rules, signals and vars that use a capability their layer lacks are left out: the policy keeps
    them in `refused` (`router lint` reports them as errors), and they never stop it from loading.
    """
    diagnostics: list[Diagnostic] = []
    refused = list(refusals)
    confinement = confinement_of(files, agent or agent_dir(), refused)
    entries = merge_rules(files, diagnostics, refused)
    literals, env_vars = merge_vars(files, diagnostics, refused)
    question_events = merge_question_events(files, literals, env_vars, diagnostics)
    signals_raw = {name: (sig, f) for f in files for name, sig in f.policy.signals.items()}
    ctx = Context(frozenset(literals) | frozenset(env_vars), frozenset(signals_raw), diagnostics,
                   commands=frozenset(c.name for f in files for c in f.policy.provides.commands))
    for f in files:
        diagnostics.extend(defaults_problems(f.policy.defaults, f.doc, ACTIONS))
    signals = {name: compile_signal(name, sig, f, ctx) for name, (sig, f) in signals_raw.items()}
    check_signal_cycles(signals, ctx)
    compiled_rules = [(e, r) for i, e in enumerate(entries) if (r := compile_rule(e, i, ctx)) is not None]
    skills = _skills(files, ctx, confinement, refused)
    if has_errors(ctx.diagnostics):
        return None, ctx.diagnostics + [r.diagnostic() for r in refused]
    owners = owners_of(compiled_rules, signals, signals_raw, files, env_vars, ctx)
    analysis = analyze(owners, confinement)
    refused += analysis.refusals
    verdicts = analysis.verdicts
    rules = tuple(confine_rule(r, verdicts[("rule", r.id)]) for _, r in compiled_rules
                  if verdicts[("rule", r.id)].refusal is None)
    kept_signals = {k: confine_signal(v, verdicts[("signal", k)]) for k, v in signals.items()
                    if v is not None and verdicts[("signal", k)].refusal is None}
    literals = {k: v for k, v in literals.items() if verdicts[("var", k)].refusal is None}
    env_vars = {k: v for k, v in env_vars.items() if verdicts[("var", k)].refusal is None}
    env_names = {spec.env for spec in env_vars.values()} | env_list(files, confinement, refused)
    failure = failure_modes(files, rules, ctx)
    if has_errors(ctx.diagnostics):
        return None, ctx.diagnostics + [r.diagnostic() for r in refused]
    log_settings = decision_log_settings(files, agent or agent_dir(), refused)  # before `refused` is read
    compiled = CompiledPolicy(
        rules=rules, by_event=_by_event(rules), vars=literals,
        env_vars={name: spec.model_dump() for name, spec in env_vars.items()}, signals=kept_signals,
        question_events=question_events, skills=skills, env_names=frozenset(env_names),
        warnings=tuple(d for d in ctx.diagnostics if d.severity is Severity.WARNING),
        confinement=confinement, refused=tuple(refused),
        capabilities=tuple(policy_uses(files) + analysis.uses),
        decision_log=log_settings, failure=failure,
        **_declarations(files),
    )
    return compiled, ctx.diagnostics


def _by_event(rules: tuple[CompiledRule, ...]) -> dict[str, tuple[CompiledRule, ...]]:
    """The rules of each event type, in policy order."""
    by_event: dict[str, list[CompiledRule]] = {}
    for rule in rules:
        for event_type in rule.on:
            by_event.setdefault(event_type, []).append(rule)
    return {k: tuple(v) for k, v in by_event.items()}


def _declarations(files: list[PolicyFile]) -> dict[str, Any]:
    """What the files declare for the bridge and the sidecar, merged by name across layers."""
    return {
        "commands": tuple(c.model_dump() for c in by_name(files, "commands", "name")),
        "virtual_models": tuple(v.model_dump() for v in by_name(files, "virtual_models", "ref")),
        "tools": tuple(t.model_dump() for t in by_name(files, "tools", "name")),
        "bus_events": tuple(b.model_dump() for b in by_name(files, "bus_events", "prompt")),
        "model_choice": {k: v for f in files if f.policy.provides.model_choice is not None
                         for k, v in f.policy.provides.model_choice.model_dump(exclude_none=True).items()},
        "prices": {ref: price.model_dump(exclude_none=True, exclude_defaults=True) | {"local": price.local}
                   for f in files for ref, price in f.policy.provides.prices.items()},
        "transient_state": frozenset(key for f in files for key in f.policy.transient_state),
        "project_data": tuple(dict.fromkeys(name for f in files for name in f.policy.project_data)),
        "files": tuple(files),
        "file_refs": tuple((f.path, str(f.source or f.path)) for f in files),
    }


def _skills(files: list[PolicyFile], ctx: Context, confinement: Confinement | None,
            refused: list[Refusal]) -> tuple[str, ...]:
    """Each file's skill paths, resolved against that file's directory, in layer order."""
    found: dict[str, None] = {}
    for f in files:
        base = Path(f.source or f.path).parent
        for index, entry in enumerate(f.policy.provides.skills):
            path = (base / Path(entry).expanduser()).resolve()
            span = f.doc.span((*f.policy.provided_at("skills"), index))
            if is_confined(f.layer) and confinement is not None:
                try:
                    confined_path(str(path), confinement, FS_READ, label="skills")
                except Refused as exc:
                    refused.append(Refusal("skill", entry, f.layer, exc.code, exc.message, span,
                                           help_for(FS_READ, confinement)))
                    continue
            if not (path / "SKILL.md").is_file() and not (path.is_file() and path.suffix == ".md"):
                ctx.error(SKILLS_PATH_NOT_FOUND, f"skill not found: {entry} (looked for {path}/SKILL.md)",
                          span,
                          help="name a directory holding a SKILL.md, or a .md file, relative to this file")
                continue
            found[str(path)] = None
    return tuple(found)
