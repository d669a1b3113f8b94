"""The frozen, compiled form of a policy: what the interpreter runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from router.compile.vars import resolve_vars
from router.diagnostics.diagnostic import Diagnostic, Span
from router.lang.expr.expression import Expression
from router.lang.query.query import Query
from router.lang.truth import expression_truthy
from router.trust.capabilities import CapabilityUse, Confinement, Refusal

if TYPE_CHECKING:  # the serve path loads compiled policies without pydantic
    from router.load.loader import PolicyFile
    from router.load.model import Example

ParamTree = Any  # dict[str, ParamTree] | list[ParamTree] | Template | scalar


@dataclass(frozen=True, eq=False)
class CompiledAction:
    name: str
    params: ParamTree
    span: Span
    confined: Mapping[str, str] = field(default_factory=dict)  # checked parameter -> capability
    defaulted: frozenset[str] = frozenset()  # parameters filled from the file's `defaults:`
    refuses: bool = False  # the action refuses what the event asks for (ActionSpec.refuses)

    def describe(self, params: Any) -> str:
        """What the executor would do with these (rendered) parameters."""
        from router.actions import ACTIONS

        return ACTIONS[self.name].describe(params)


@dataclass(frozen=True, eq=False)
class CompiledRule:
    id: str
    index: int
    group: str
    on: tuple[str, ...]
    match: Query | None
    when: Expression | None
    actions: tuple[CompiledAction, ...]
    continue_: bool
    shadow: bool
    span: Span
    file: str
    key_path: str
    description: str | None = None
    examples: tuple[tuple[Example, Span], ...] = ()
    match_span: Span | None = None
    when_span: Span | None = None
    layer: str = "user"  # the layer of the file that defines the rule
    sandboxed: bool = False  # evaluated with the environment the user grants the project only
    conditions: tuple[tuple[str, Query | Expression, Callable[[Any], Any]], ...] = ()
    runs: tuple[tuple[Callable[[Any], Any], bool], ...] = ()  # (closure, Python truthiness?)
    origin: str = ""  # where the rule is defined: `repo@commit:path:line` (git) or `path:line`
    locked: bool = False  # a managed rule no lower layer may override, disable or move ahead
    bindings: tuple[tuple[str, Expression], ...] = ()  # `let:`, in order
    lazy: Mapping[str, Expression] = field(default_factory=dict)  # the bindings by name
    guard: bool = False  # one of its actions refuses (a `block`): it fails closed, never open

    def __post_init__(self) -> None:
        conditions: list[tuple[str, Query | Expression, Callable[[Any], Any]]] = []
        if self.match is not None:
            conditions.append(("match", self.match, self.match.run))
        if self.when is not None and self.when.run is not None:
            run = self.when.run  # expression truthiness (router/lang/truth.py)
            conditions.append(("when", self.when, lambda scope: expression_truthy(run(scope))))
        object.__setattr__(self, "conditions", tuple(conditions))
        runs = [(self.match.run, False)] if self.match is not None else []
        if self.when is not None and self.when.run is not None:
            runs.append((self.when.run, True))
        object.__setattr__(self, "runs", tuple(runs))
        object.__setattr__(self, "lazy", dict(self.bindings))
        object.__setattr__(self, "guard", any(a.refuses for a in self.actions))


@dataclass(frozen=True, eq=False)
class ClassifyQuestionSpec:
    name: str
    type: str
    instructions: str
    criteria: Any
    when: Expression | None


@dataclass(frozen=True, eq=False)
class CompiledSignal:
    """A signal: `expr` ones are computed by the interpreter, the others by the executor."""

    name: str
    kind: str
    span: Span
    expr: Expression | None = None
    request: ParamTree = None
    questions: tuple[ClassifyQuestionSpec, ...] = ()
    transform: Expression | None = None
    fallback: Expression | None = None
    layer: str = "user"
    sandboxed: bool = False
    confined: Mapping[str, str] = field(default_factory=dict)  # checked request field -> capability
    bindings: tuple[tuple[str, Expression], ...] = ()  # `let:`, in order

    @property
    def external(self) -> bool:
        return self.kind != "expr"


@dataclass(frozen=True, eq=False)
class CompiledPolicy:
    rules: Sequence[CompiledRule]
    by_event: Mapping[str, tuple[CompiledRule, ...]]
    vars: Mapping[str, Any]
    env_vars: Mapping[str, Mapping[str, Any]]
    signals: Mapping[str, CompiledSignal]
    commands: tuple[dict[str, Any], ...] = ()
    virtual_models: tuple[dict[str, Any], ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    bus_events: tuple[dict[str, Any], ...] = ()  # event-bus protocols the bridge listens to
    question_events: Mapping[str, Any] = field(default_factory=dict)  # provides.questions, as written
    model_choice: Mapping[str, str] = field(default_factory=dict)  # provides.model_choice: field -> state key
    prices: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # provides.prices: ref -> price
    skills: tuple[str, ...] = ()  # absolute paths of skill directories or SKILL.md files
    env_names: frozenset[str] = frozenset()
    transient_state: frozenset[str] = frozenset()  # dotted state keys never stored in the session
    project_data: tuple[str, ...] = ()  # project files read as data, pinned by the project's trust
    files: tuple[PolicyFile, ...] = ()
    warnings: tuple[Diagnostic, ...] = ()
    file_refs: tuple[tuple[str, str], ...] = ()  # (display path, absolute path) of every file
    confinement: Confinement | None = None  # the project layer's bounds (None: no project layer)
    refused: tuple[Refusal, ...] = ()  # what the layers may not do, left out of the policy
    capabilities: tuple[CapabilityUse, ...] = ()  # every use of a capability, per layer
    decision_log: Mapping[str, Any] = field(default_factory=dict)  # the user's own settings only
    failure: Mapping[str, str] = field(default_factory=dict)  # event type -> open/closed (compile/failure.py)

    def vars_for(self, env: Mapping[str, str]) -> dict[str, Any]:
        """The vars with environment-bound ones resolved from `env`."""
        if not self.env_vars:
            return dict(self.vars)
        return resolve_vars(self.vars, self.env_vars, env)

    @property
    def event_types(self) -> tuple[str, ...]:
        """The event types the policy has rules for (the bridge forwards only these)."""
        return tuple(sorted(self.by_event))

    def rule(self, rule_id: str) -> CompiledRule | None:
        return next((r for r in self.rules if r.id == rule_id), None)


