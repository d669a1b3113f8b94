"""Compile loaded policy files into one frozen CompiledPolicy; every problem is a located diagnostic.

Layers are merged first (later files override or disable rules by id, override vars, signals,
commands, tools and virtual models by name), then every expression is parsed and checked once:
event types, actions and their parameters, functions and arity, names and field paths.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from router.actions import ACTIONS, signal_kinds
from router.compile.capability_analysis import Owner, Param, Verdict, analyze
from router.compile.compiled import (
    ClassifyQuestionSpec,
    CompiledAction,
    CompiledPolicy,
    CompiledRule,
    CompiledSignal,
)
from router.compile.question_events import merge_question_events
from router.compile.readable import (
    binding_paths,
    command_match,
    command_problems,
    compile_bindings,
    defaults_problems,
    unused_bindings,
    with_defaults,
)
from router.diagnostics.diagnostic import Diagnostic, Severity, Span, has_errors
from router.diagnostics.suggest import did_you_mean
from router.events.catalog import EVENT_TYPES
from router.events.fields import check_path, scope_tree
from router.lang.expr.expression import (
    Expression,
    ExpressionSyntaxError,
    Template,
    compile_expression,
    compile_template,
)
from router.lang.expr.trees import templates_in
from router.lang.functions import FUNCTIONS
from router.lang.query.query import JMESPATH_ARITY, JMESPATH_BUILTINS, Query, compile_query
from router.load.loader import MAX_RULES, PolicyFile, load_layers, too_many_rules
from router.load.managed import MANAGED, guard_disable, guard_rule, locked_elsewhere
from router.load.model import SIGNAL_KINDS, EnvVar, Rule, Signal
from router.load.paths import agent_dir, display_path, layer_paths
from router.load.source import KeyPath, SourceDoc, format_key_path
from router.load.validation import validation_diagnostics
from router.trust.capabilities import (
    CODES,
    ENV_READ,
    FS_READ,
    GRANT_CODE,
    GRANT_LAYERS,
    POLICY_KEYS,
    CapabilityUse,
    Confinement,
    Refusal,
    Refused,
    confined_path,
    help_for,
    is_confined,
    refusal_of,
)


@dataclass
class _Entry:
    rule: Rule
    file: PolicyFile
    index: int
    group: str


@dataclass
class _Context:
    """What compiling one rule needs to know about the whole policy."""

    var_names: frozenset[str]
    signal_names: frozenset[str]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    commands: frozenset[str] = frozenset()  # the declared slash commands (for `command:`)
    reads: dict[tuple[str, str], list[tuple[Span, tuple[str, ...]]]] = field(default_factory=dict)

    def error(self, code: str, message: str, span: Span, *, help: str | None = None,
              rule_id: str | None = None, severity: Severity = Severity.ERROR) -> None:
        self.diagnostics.append(Diagnostic(code, message, span, severity, help=help, rule_id=rule_id))


@dataclass(frozen=True)
class LoadedPolicy:
    """A compiled policy (None when it has errors), its diagnostics and the files that loaded."""

    policy: CompiledPolicy | None
    diagnostics: list[Diagnostic]
    files: list[PolicyFile]


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
    confinement = _confinement(files, agent or agent_dir(), refused)
    entries = _merge_rules(files, diagnostics, refused)
    literals, env_vars = _merge_vars(files, diagnostics, refused)
    question_events = merge_question_events(files, literals, env_vars, diagnostics)
    signals_raw = {name: (sig, f) for f in files for name, sig in f.policy.signals.items()}
    ctx = _Context(frozenset(literals) | frozenset(env_vars), frozenset(signals_raw), diagnostics,
                   commands=frozenset(c.name for f in files for c in f.policy.commands))
    for f in files:
        diagnostics.extend(defaults_problems(f.policy.defaults, f.doc, ACTIONS))
    signals = {name: _compile_signal(name, sig, f, ctx) for name, (sig, f) in signals_raw.items()}
    _check_signal_cycles(signals, ctx)
    compiled_rules = [(e, r) for i, e in enumerate(entries) if (r := _compile_rule(e, i, ctx)) is not None]
    skills = _skills(files, ctx, confinement, refused)
    if has_errors(ctx.diagnostics):
        return None, ctx.diagnostics + [r.diagnostic() for r in refused]
    owners = _owners(compiled_rules, signals, signals_raw, files, env_vars, ctx)
    analysis = analyze(owners, confinement)
    refused += analysis.refusals
    verdicts = analysis.verdicts
    rules = tuple(_confine_rule(r, verdicts[("rule", r.id)]) for _, r in compiled_rules
                  if verdicts[("rule", r.id)].refusal is None)
    kept_signals = {k: _confine_signal(v, verdicts[("signal", k)]) for k, v in signals.items()
                    if v is not None and verdicts[("signal", k)].refusal is None}
    literals = {k: v for k, v in literals.items() if verdicts[("var", k)].refusal is None}
    env_vars = {k: v for k, v in env_vars.items() if verdicts[("var", k)].refusal is None}
    by_event: dict[str, list[CompiledRule]] = {}
    for rule in rules:
        for event_type in rule.on:
            by_event.setdefault(event_type, []).append(rule)
    env_names = {spec.env for spec in env_vars.values()} | _env_list(files, confinement, refused)
    log_settings = _decision_log(files, agent or agent_dir(), refused)
    compiled = CompiledPolicy(
        rules=rules,
        by_event={k: tuple(v) for k, v in by_event.items()},
        vars=literals,
        env_vars={name: spec.model_dump() for name, spec in env_vars.items()},
        signals=kept_signals,
        commands=tuple(c.model_dump() for c in _by_name(files, "commands", "name")),
        virtual_models=tuple(v.model_dump() for v in _by_name(files, "virtual_models", "ref")),
        tools=tuple(t.model_dump() for t in _by_name(files, "tools", "name")),
        bus_events=tuple(b.model_dump() for b in _by_name(files, "bus_events", "prompt")),
        question_events=question_events,
        skills=skills,
        env_names=frozenset(env_names),
        transient_state=frozenset(key for f in files for key in f.policy.transient_state),
        project_data=tuple(dict.fromkeys(name for f in files for name in f.policy.project_data)),
        files=tuple(files),
        warnings=tuple(d for d in ctx.diagnostics if d.severity is Severity.WARNING),
        file_refs=tuple((f.path, str(f.source or f.path)) for f in files),
        confinement=confinement,
        refused=tuple(refused),
        capabilities=tuple(_policy_uses(files) + analysis.uses),
        decision_log=log_settings,
    )
    return compiled, ctx.diagnostics


def _skills(files: list[PolicyFile], ctx: _Context, confinement: Confinement | None,
            refused: list[Refusal]) -> tuple[str, ...]:
    """Each file's skill paths, resolved against that file's directory, in layer order."""
    found: dict[str, None] = {}
    for f in files:
        base = Path(f.source or f.path).parent
        for index, entry in enumerate(f.policy.skills):
            path = (base / Path(entry).expanduser()).resolve()
            span = f.doc.span(("skills", index))
            if is_confined(f.layer) and confinement is not None:
                try:
                    confined_path(str(path), confinement, FS_READ, label="skills")
                except Refused as exc:
                    refused.append(Refusal("skill", entry, f.layer, exc.code, exc.message, span,
                                           help_for(FS_READ, confinement)))
                    continue
            if not (path / "SKILL.md").is_file() and not (path.is_file() and path.suffix == ".md"):
                ctx.error("RT123", f"skill not found: {entry} (looked for {path}/SKILL.md)", span,
                          help="name a directory holding a SKILL.md, or a .md file, relative to this file")
                continue
            found[str(path)] = None
    return tuple(found)


# --- capabilities -----------------------------------------------------------------------------


def _confinement(files: list[PolicyFile], agent: Path, refused: list[Refusal]) -> Confinement | None:
    """The project layer's bounds and the variables the user grants it (`project_env`)."""
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
    return Confinement(str(project.root), str(agent.absolute()), str(Path.home()), frozenset(grant))


def _decision_log(files: list[PolicyFile], agent: Path, refused: list[Refusal]) -> dict[str, Any]:
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


def _env_list(files: list[PolicyFile], confinement: Confinement | None,
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


def _owners(compiled_rules: list[tuple[_Entry, CompiledRule]],
            signals: dict[str, CompiledSignal | None], signals_raw: dict[str, tuple[Signal, PolicyFile]],
            files: list[PolicyFile], env_vars: dict[str, EnvVar], ctx: _Context) -> list[Owner]:
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
                  for key, capability in signal_kinds.SIGNAL_KINDS[sig.kind].capabilities.items()]
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


def _confine_rule(rule: CompiledRule, verdict: Verdict) -> CompiledRule:
    if not verdict.confined:
        return rule
    actions = tuple(replace(a, confined=verdict.confined[i]) if i in verdict.confined else a
                    for i, a in enumerate(rule.actions))
    return replace(rule, actions=actions)


def _confine_signal(signal: CompiledSignal, verdict: Verdict) -> CompiledSignal:
    confined = verdict.confined.get(None)
    return replace(signal, confined=confined) if confined else signal


def _policy_uses(files: list[PolicyFile]) -> list[CapabilityUse]:
    """The file-level capabilities: `use:` entries, `skills:` and `env:`."""
    uses = []
    for f in files:
        for key, capability in POLICY_KEYS.items():
            entries = getattr(f.policy, key) if key != "vars" else []
            uses += [CapabilityUse(f.layer, capability, key, key, str(entry), str(f.doc.span((key, i))))
                     for i, entry in enumerate(entries)]
    return uses


def _by_name(files: list[PolicyFile], attr: str, key: str) -> list[Any]:
    merged: dict[str, Any] = {}
    for f in files:
        for item in getattr(f.policy, attr):
            name = f"{item.provider}/{item.id}" if key == "ref" else getattr(item, key)
            merged[name] = item
    return list(merged.values())


# --- layering ---------------------------------------------------------------------------------


def _merge_rules(files: list[PolicyFile], diagnostics: list[Diagnostic],
                 refused: list[Refusal] | None = None) -> list[_Entry]:
    ordered: list[_Entry] = []
    by_id: dict[str, _Entry] = {}  # the entry of each id in `ordered`: placing a new rule stays O(1)
    refused = [] if refused is None else refused
    for f in files:
        seen_here: set[str] = set()
        for index, rule in enumerate(f.policy.rules):
            span = f.doc.span(("rules", index, "id"))
            if rule.id in seen_here:
                diagnostics.append(Diagnostic("RT305", f"duplicate rule id '{rule.id}'", span,
                                              rule_id=rule.id, help="rule ids must be unique in a file; "
                                              "a later file with the same id overrides the rule"))
                continue
            seen_here.add(rule.id)
            entry = _Entry(rule, f, index, rule.group or f.group)
            if rule.locked and f.layer != MANAGED:
                where = f.doc.span(("rules", index, "locked"), key=True)
                diagnostics.append(locked_elsewhere(rule.id, where))
            guard = guard_rule(entry, ordered, by_id)
            if guard is not None:
                refused.append(guard)
                continue
            _place(ordered, by_id, entry, f, diagnostics)
        for index, rule_id in enumerate(f.policy.disable):
            guard = guard_disable(rule_id, f, by_id.get(rule_id), f.doc.span(("disable", index)))
            if guard is not None:
                refused.append(guard)
                continue
            if by_id.pop(rule_id, None) is None:
                diagnostics.append(Diagnostic(
                    "RT122", f"`disable:` names unknown rule '{rule_id}'", f.doc.span(("disable", index)),
                    Severity.WARNING, help=did_you_mean(rule_id, [e.rule.id for e in ordered])))
                continue
            ordered[:] = [e for e in ordered if e.rule.id != rule_id]
    return [e for e in ordered if e.rule.enabled]


def _position(ordered: list[_Entry], entry: _Entry) -> int:
    return next(i for i, e in enumerate(ordered) if e is entry)


def _place(ordered: list[_Entry], by_id: dict[str, _Entry], entry: _Entry, f: PolicyFile,
           diagnostics: list[Diagnostic]) -> None:
    rule = entry.rule
    previous = by_id.get(rule.id)
    anchor_id = rule.before or rule.after
    by_id[rule.id] = entry
    if previous is not None:
        existing = _position(ordered, previous)
        if rule.group is None:
            entry.group = previous.group
        if anchor_id is None:
            ordered[existing] = entry
            return
        del ordered[existing]
    if anchor_id is None:
        ordered.append(entry)
        return
    target = by_id.get(anchor_id) if anchor_id != rule.id else None
    if target is None:
        key = "before" if rule.before else "after"
        diagnostics.append(Diagnostic(
            "RT122", f"rule '{rule.id}' is placed {key} unknown rule '{anchor_id}'; it goes last",
            f.doc.span(("rules", entry.index, key)), Severity.WARNING, rule_id=rule.id,
            help=did_you_mean(anchor_id, [e.rule.id for e in ordered])))
        ordered.append(entry)
        return
    anchor = _position(ordered, target)
    if rule.group is None:
        entry.group = target.group
    ordered.insert(anchor if rule.before else anchor + 1, entry)


def _merge_vars(files: list[PolicyFile], diagnostics: list[Diagnostic],
                refused: list[Refusal]) -> tuple[dict[str, Any], dict[str, EnvVar]]:
    literals: dict[str, Any] = {}
    env_vars: dict[str, EnvVar] = {}
    reserved = {name: text for f in files for name, text in f.policy.user_vars.items()}
    for f in files:
        for name, value in f.policy.vars.items():
            if name in reserved and not _may_set_reserved(f, name, value, reserved[name], diagnostics,
                                                          refused):
                continue
            literals.pop(name, None)
            env_vars.pop(name, None)
            if isinstance(value, dict) and "env" in value:
                try:
                    env_vars[name] = EnvVar.model_validate(value)
                except ValidationError as exc:
                    diagnostics.extend(validation_diagnostics(exc, f.doc, EnvVar, base=("vars", name)))
            else:
                literals[name] = value
    return literals, env_vars


def _may_set_reserved(f: PolicyFile, name: str, value: Any, text: str, diagnostics: list[Diagnostic],
                      refused: list[Refusal]) -> bool:
    """A `user_vars:` var: a project layer may not set it (refused, RT124); the user is warned (RT316)."""
    span = f.doc.span(("vars", name), key=True)
    if f.layer == "project":
        refused.append(Refusal("var", name, f.layer, "RT124", "only your own policy "
                               "(~/.pi/agent/router.yaml) may set it; the project's value is ignored",
                               span, f"it {text}"))
        return False
    if f.layer != "pack" and value not in (None, False, 0, ""):
        diagnostics.append(Diagnostic("RT316", f"vars.{name} is on: it {text}", span,
                                      severity=Severity.WARNING,
                                      help=f"remove vars.{name} unless you want exactly that"))
    return True


# --- rules ------------------------------------------------------------------------------------


def _compile_rule(entry: _Entry, order: int, ctx: _Context) -> CompiledRule | None:
    rule, doc = entry.rule, entry.file.doc
    base: KeyPath = ("rules", entry.index)
    for i, event_type in enumerate(rule.on):
        if event_type not in EVENT_TYPES:
            ctx.error("RT205", f"unknown event type '{event_type}' in rule '{rule.id}'",
                      doc.span((*base, "on", i)),
                      help=did_you_mean(event_type, EVENT_TYPES)
                      or f"expected one of: {', '.join(EVENT_TYPES)}",
                      rule_id=rule.id)
    tree = scope_tree(rule.on, var_names=ctx.var_names, signal_names=ctx.signal_names)
    reads = ctx.reads.setdefault(("rule", rule.id), [])
    read: set[str] = set()
    bindings = _bindings(rule.let, base, tree, doc, ctx, rule.id, reads, read=read)
    checker = _Checker(ctx, tree, doc, rule.id, extra_names=frozenset(rule.let), reads=reads)
    match = _rule_match(rule, base, doc, checker)
    when = checker.expression(rule.when, (*base, "when")) if rule.when is not None else None
    defaults = entry.file.policy.defaults
    actions = tuple(a for i, item in enumerate(rule.do)
                    if (a := _compile_action(item, (*base, "do", i), rule, doc, checker, defaults))
                    is not None)
    used = read | _names_read([when, *_templates([a.params for a in actions])])
    ctx.diagnostics.extend(unused_bindings(_kept(rule.let, bindings), used, doc, base, rule.id))
    examples = tuple((ex, doc.span((*base, "examples", i))) for i, ex in enumerate(rule.examples))
    return CompiledRule(
        id=rule.id, index=order, group=entry.group, on=tuple(rule.on), match=match, when=when,
        actions=actions, continue_=rule.continue_, shadow=rule.shadow, span=doc.span(base),
        file=entry.file.path, key_path=format_key_path(base), description=rule.description,
        examples=examples,
        match_span=doc.span((*base, "command" if rule.command is not None else "match"))
        if rule.match is not None or rule.command is not None else None,
        when_span=doc.span((*base, "when")) if rule.when is not None else None,
        layer=entry.file.layer, sandboxed=is_confined(entry.file.layer), bindings=tuple(bindings),
        origin=f"{entry.file.path}:{doc.span(base).line}", locked=rule.locked and entry.file.layer == MANAGED,
    )


def _rule_match(rule: Rule, base: KeyPath, doc: SourceDoc, checker: _Checker) -> Query | None:
    """The rule's match: its `match`, and-ed with the expansion of its `command:` shorthand."""
    if rule.command is None:
        return checker.query(rule.match, (*base, "match")) if rule.match is not None else None
    problems = command_problems(rule.command, rule.on, set(checker.ctx.commands), doc, base, rule.id)
    checker.ctx.diagnostics.extend(problems)
    if has_errors(problems):
        return None
    source = command_match(rule.command)
    if rule.match is not None:
        own = checker.query(rule.match, (*base, "match"))
        if own is None:
            return None
        source = f"({source}) && ({rule.match})"
    return checker.query(source, (*base, "command"))


def _bindings(let: dict[str, str], base: KeyPath, tree: dict[str, Any], doc: SourceDoc, ctx: _Context,
              rule_id: str | None, reads: list[tuple[Span, tuple[str, ...]]],
              extra: frozenset[str] = frozenset(), read: set[str] | None = None,
              ) -> list[tuple[str, Expression]]:
    """The compiled `let:` bindings of a rule or signal (their names hide nothing of `tree`)."""
    if not let:
        return []
    taken = {name: "a name of this scope (an event field, vars, state, signals, env, …)" for name in tree}
    taken.update({name: "a name of this signal's transform" for name in extra})

    def compile_one(source: str, key_path: KeyPath, names: frozenset[str]) -> Expression | None:
        return _Checker(ctx, tree, doc, rule_id, extra_names=names, reads=reads).expression(source, key_path)

    compiled, problems = compile_bindings(let, base, taken, doc, compile_one, rule_id, read)
    ctx.diagnostics.extend(problems)
    return compiled


def _kept(let: dict[str, str], bindings: list[tuple[str, Expression]]) -> dict[str, str]:
    """The bindings that compiled (a rejected one is not also reported as unused)."""
    names = {name for name, _ in bindings}
    return {name: source for name, source in let.items() if name in names}


def _names_read(exprs: Iterable[Expression | None]) -> set[str]:
    return {n for e in exprs if e is not None for n in e.names}


def _compile_action(item: dict[str, Any], key_path: KeyPath, rule: Rule, doc: SourceDoc,
                    checker: _Checker, defaults: dict[str, dict[str, Any]] | None = None,
                    ) -> CompiledAction | None:
    ctx, span = checker.ctx, doc.span(key_path)
    if not isinstance(item, dict) or len(item) != 1:
        ctx.error("RT207", f"an action is a mapping with one key (rule '{rule.id}')", span,
                  help="write `- notify: hello` or `- tools: {only: [read]}`", rule_id=rule.id)
        return None
    name, raw = next(iter(item.items()))
    spec = ACTIONS.get(name)
    if spec is None:
        ctx.error("RT206", f"unknown action '{name}' in rule '{rule.id}'",
                  doc.span((*key_path, name), key=True),
                  help=did_you_mean(name, ACTIONS) or f"expected one of: {', '.join(sorted(ACTIONS))}",
                  rule_id=rule.id)
        return None
    if spec.events is not None and not set(rule.on) & spec.events:
        ctx.error("RT309", f"action '{name}' has no effect on {', '.join(rule.on)} events (rule '{rule.id}')",
                  doc.span((*key_path, name), key=True), rule_id=rule.id,
                  help=f"'{name}' applies to: {', '.join(sorted(spec.events))}")
    params = {spec.shorthand: raw} if spec.shorthand and not isinstance(raw, dict) else raw
    if params is None:
        params = {}
    params, defaulted = with_defaults(params, (defaults or {}).get(name))
    try:
        validated = spec.params.model_validate(params)
    except ValidationError as exc:
        if spec.shorthand and not isinstance(raw, dict):
            ctx.error("RT207", f"invalid shorthand for action '{name}' (rule '{rule.id}'): "
                      f"{exc.errors()[0]['msg'].lower()}", doc.span((*key_path, name)), rule_id=rule.id)
        else:
            found = validation_diagnostics(exc, doc, spec.params, base=(*key_path, name))
            ctx.diagnostics.extend(replace(d, code="RT207", rule_id=rule.id) for d in found)
        return None
    dumped = validated.model_dump()
    if not defaulted or not isinstance(dumped, dict):
        return CompiledAction(name, checker.params(dumped, (*key_path, name)), span)
    tree = {k: checker.params(v, ("defaults", name, k) if k in defaulted else (*key_path, name, k))
            for k, v in dumped.items()}
    return CompiledAction(name, tree, span, defaulted=defaulted)


_PATH_PROBLEMS = {"vars": ("RT303", "undefined var"), "signals": ("RT304", "undefined signal"),
                  "signal_errors": ("RT304", "undefined signal")}


class _Checker:
    """Compiles expressions of one rule (or signal) and checks names, paths and functions."""

    def __init__(self, ctx: _Context, tree: dict[str, Any], doc: SourceDoc, rule_id: str | None,
                 *, extra_names: frozenset[str] = frozenset(),
                 reads: list[tuple[Span, tuple[str, ...]]] | None = None) -> None:
        self.ctx, self.tree, self.doc, self.rule_id = ctx, tree, doc, rule_id
        self.extra_names = extra_names
        self.reads = reads  # (where, path) of every field path read, for the capability analysis

    def _record(self, paths: Iterable[tuple[str, ...]], key_path: KeyPath) -> None:
        if self.reads is not None:
            span = self.doc.span(key_path)
            self.reads.extend((span, p) for p in paths)

    def _where(self, key_path: KeyPath) -> str:
        label = f" (rule '{self.rule_id}')" if self.rule_id else ""
        return f"{format_key_path(key_path)}{label}"

    def query(self, source: str, key_path: KeyPath) -> Query | None:
        try:
            query = compile_query(source)
        except ExpressionSyntaxError as exc:
            self._syntax(exc, key_path)
            return None
        self._check_calls(query.calls, key_path, jmespath=True)
        self._check_paths(query.paths, key_path, jmespath=True)
        self._record(query.paths, key_path)
        return query

    def expression(self, source: str, key_path: KeyPath) -> Expression | None:
        try:
            expr = compile_expression(source)
        except ExpressionSyntaxError as exc:
            self._syntax(exc, key_path)
            return None
        self._check_expression(expr, key_path)
        return expr

    def template(self, source: str, key_path: KeyPath) -> Template | str | None:
        try:
            template = compile_template(source)
        except ExpressionSyntaxError as exc:
            self._syntax(exc, key_path)
            return None
        if template.expression is None:
            return source
        if template.block is not None:
            self._check_loop_names(template.block.loop_names, key_path)
        self._check_expression(template.expression, key_path)
        return template

    def _check_loop_names(self, names: Iterable[str], key_path: KeyPath) -> None:
        for name in sorted(set(names) & (set(self.tree) | self.extra_names)):
            self.ctx.error("RT330", f"template loop name '{name}' is already a name here, in "
                           f"{self._where(key_path)}", self.doc.span(key_path), rule_id=self.rule_id,
                           help="choose another name: loop names never hide fields, vars, signals or "
                           "bindings")

    def params(self, value: Any, key_path: KeyPath) -> Any:
        if isinstance(value, str):
            return self.template(value, key_path)
        if isinstance(value, list):
            return [self.params(v, (*key_path, i)) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.params(v, (*key_path, k)) for k, v in value.items()}
        if isinstance(value, BaseModel):
            return self.params(value.model_dump(), key_path)
        return value

    def _syntax(self, exc: ExpressionSyntaxError, key_path: KeyPath) -> None:
        self.ctx.error(exc.code, f"{exc.message} in {self._where(key_path)}",
                       self.doc.span_in(key_path, exc.offset), rule_id=self.rule_id)

    def _check_expression(self, expr: Expression, key_path: KeyPath) -> None:
        self._record(expr.paths, key_path)
        self._check_calls(expr.calls, key_path, jmespath=False)
        known = set(self.tree) | self.extra_names
        for name in sorted(expr.names - known):
            self.ctx.error("RT302", f"unknown name '{name}' in {self._where(key_path)}",
                           self.doc.span(key_path), rule_id=self.rule_id,
                           help=did_you_mean(name, known) or f"write '{name}' in quotes for a string")
        self._check_paths([p for p in expr.paths if p[0] in self.tree], key_path)

    def _check_calls(self, calls: Iterable[tuple[str, int]], key_path: KeyPath, *, jmespath: bool) -> None:
        names = set(FUNCTIONS) | (JMESPATH_BUILTINS if jmespath else set())
        for name, arity in calls:
            spec = FUNCTIONS.get(name)
            if name not in names:
                self.ctx.error("RT208", f"unknown function '{name}' in {self._where(key_path)}",
                               self.doc.span(key_path), rule_id=self.rule_id,
                               help=did_you_mean(name, names) or "see docs/reference/functions.md")
                continue
            if jmespath and name in JMESPATH_ARITY and (spec is None or spec.native_jmespath):
                low, high = JMESPATH_ARITY[name]
                example = f"see the JMESPath specification of {name}()"
            elif spec is not None:
                low, high, example = spec.min_args, spec.max_args, f"example: {spec.example}"
            else:
                continue
            if arity < low or (high is not None and arity > high):
                expected = str(low) if high == low else f"{low} to {high if high is not None else 'any'}"
                self.ctx.error("RT209", f"{name}() takes {expected} arguments, got {arity} in "
                               f"{self._where(key_path)}", self.doc.span(key_path), rule_id=self.rule_id,
                               help=example)

    def _check_paths(self, paths: Iterable[tuple[str, ...]], key_path: KeyPath, *,
                     jmespath: bool = False) -> None:
        for path in paths:
            if path[0] in self.extra_names:
                continue
            problem = check_path(self.tree, path)
            if problem is None:
                continue
            bad = ".".join(path[: problem.index + 1])
            root = path[0]
            code, what = _PATH_PROBLEMS.get(root, ("RT301", "unknown field"))
            hint = did_you_mean(path[problem.index], problem.known) or \
                (f"known here: {', '.join(problem.known)}" if problem.known else None)
            if jmespath and len(path) == 1 and path[0] in ("null", "true", "false"):
                hint = f"JMESPath literals go in backticks: `{path[0]}`"
            self.ctx.error(code, f"{what} '{bad}' in {self._where(key_path)}", self.doc.span(key_path),
                           rule_id=self.rule_id, help=hint)


# --- signals ----------------------------------------------------------------------------------


def _compile_signal(name: str, sig: Signal, f: PolicyFile, ctx: _Context) -> CompiledSignal | None:
    base: KeyPath = ("signals", name)
    tree = scope_tree(EVENT_TYPES, var_names=ctx.var_names, signal_names=ctx.signal_names)
    reads = ctx.reads.setdefault(("signal", name), [])
    read: set[str] = set()
    bindings = _bindings(sig.let, base, tree, f.doc, ctx, None, reads, extra=frozenset({"result"}), read=read)
    local = frozenset(sig.let)
    checker = _Checker(ctx, tree, f.doc, None, extra_names=local, reads=reads)
    result_checker = _Checker(ctx, tree, f.doc, None, extra_names=local | {"result"}, reads=reads)
    span = f.doc.span(base)
    transform = result_checker.expression(sig.transform, (*base, "transform")) if sig.transform else None
    fallback = checker.expression(sig.fallback, (*base, "fallback")) if sig.fallback else None
    if sig.expr is not None:
        expr = checker.expression(sig.expr, (*base, "expr"))
        _unused_signal_bindings(sig, [expr, transform, fallback], bindings, read, f, ctx)
        return CompiledSignal(name, "expr", span, expr=expr, transform=transform, fallback=fallback,
                              layer=f.layer, sandboxed=is_confined(f.layer), bindings=tuple(bindings))
    kind = next(k for k in SIGNAL_KINDS[1:] if getattr(sig, k) is not None)
    source: Any = getattr(sig, kind)
    raw = source.model_dump(exclude={"questions"} if kind == "classify" else set())
    request = checker.params(raw, (*base, kind))
    questions: tuple[ClassifyQuestionSpec, ...] = ()
    if kind == "classify":
        questions = tuple(
            ClassifyQuestionSpec(qname, q.type, q.instructions, q.criteria,
                                 checker.expression(q.when, (*base, kind, "questions", qname, "when"))
                                 if q.when else None)
            for qname, q in source.questions.items())
    _unused_signal_bindings(sig, [transform, fallback, *(q.when for q in questions), *_templates(request)],
                            bindings, read, f, ctx)
    return CompiledSignal(name, kind, span, request=request, questions=questions,
                          transform=transform, fallback=fallback, layer=f.layer,
                          sandboxed=is_confined(f.layer), bindings=tuple(bindings))


def _unused_signal_bindings(sig: Signal, exprs: list[Expression | None],
                            bindings: list[tuple[str, Expression]], read: set[str], f: PolicyFile,
                            ctx: _Context) -> None:
    used = read | _names_read(exprs)
    name = next(n for n, s in f.policy.signals.items() if s is sig)
    ctx.diagnostics.extend(unused_bindings(_kept(sig.let, bindings), used, f.doc, ("signals", name), None))


def _signal_deps(sig: CompiledSignal) -> set[str]:
    exprs: list[Expression | None] = [sig.expr, sig.fallback, *(q.when for q in sig.questions),
                                      *(e for _, e in sig.bindings)]
    exprs += _templates(sig.request)
    return {p[1] for e in exprs if e is not None for p in e.paths if p[0] == "signals" and len(p) > 1}


def _templates(tree: Any) -> list[Expression | None]:
    return [template.expression for template in templates_in(tree)]


def _check_signal_cycles(signals: dict[str, CompiledSignal | None], ctx: _Context) -> None:
    deps = {name: _signal_deps(sig) for name, sig in signals.items() if sig is not None}
    state: dict[str, int] = {}

    def visit(name: str, chain: list[str]) -> None:
        if state.get(name) == 2 or name not in deps:
            return
        if state.get(name) == 1:
            cycle = [*chain[chain.index(name):], name]
            sig = signals[name]
            ctx.error("RT310", f"signals depend on each other in a cycle: {' -> '.join(cycle)}",
                      sig.span if sig else Span(""), help="break the cycle with a fallback value")
            return
        state[name] = 1
        for dep in sorted(deps[name]):
            visit(dep, [*chain, name])
        state[name] = 2

    for name in sorted(deps):
        visit(name, [])
