"""Pydantic models of a policy file. Data only: behaviour lives in compile and interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import (
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from router.actions.signals import kind_names
from router.actions.signals import registry as signal_registry
from router.load.model_base import _ENV_NAME, _STATE_KEY, _Model
from router.load.provides import (
    BusEvents,
    Command,
    Provides,
    QuestionEvents,
    SettingsImport,
    Tool,
    VirtualModel,
)


class EnvVar(_Model):
    """A variable read from the environment: `{env: NAME, type: number, default: 95}`."""

    env: str = Field(description="environment variable name")
    type: Literal["string", "number", "int", "bool", "list"] = "string"
    default: Any = None
    min: float | None = None
    max: float | None = None
    description: str | None = None


SIGNAL_KINDS = kind_names()  # the registry: one file per kind in router/actions/signals/


class _OneSource(_Model):
    @model_validator(mode="after")
    def _one_source(self) -> _OneSource:
        sources = [n for n in SIGNAL_KINDS if getattr(self, n, None) is not None]
        if len(sources) != 1:
            raise ValueError(f"a signal needs exactly one of {', '.join(SIGNAL_KINDS)}; "
                             f"got {', '.join(sources) or 'none'}")
        return self


class _SignalFields(_OneSource):
    """A value computed lazily, at most once per event. Exactly one source."""

    description: str | None = None
    expr: str | None = Field(None, description="expression over the event")
    transform: str | None = Field(None, description="expression over `result`; a failure falls back")
    fallback: str | None = Field(None, description="expression used when the source fails")
    let: dict[str, str] = Field(default_factory=dict, description="local bindings: name -> expression, "
                                "in order; plain names in this signal's expressions and templates")


def _signal_model() -> type[_SignalFields]:
    """`Signal`: the common fields and, after `expr`, one optional field per kind of the registry,
    its request model built from the kind's `<Kind>Signal` class."""
    from router.actions._build import model_of

    common = {name: (info.annotation, info) for name, info in _SignalFields.model_fields.items()}
    kinds = {name: (model_of(params) | None, None) for name, spec in signal_registry().items()
             if (params := spec.params) is not None}
    order = ["description", "expr", *kinds, "transform", "fallback", "let"]
    fields: dict[str, Any] = {name: kinds.get(name) or common[name] for name in order}
    base: Any = _OneSource  # the fields are all given: the common ones and the kinds'
    model: Any = create_model("Signal", __base__=base, __doc__=_SignalFields.__doc__, __module__=__name__,
                              **fields)
    return cast("type[_SignalFields]", model)


if TYPE_CHECKING:
    Signal = _SignalFields  # a kind's request is read by name: getattr(signal, kind)
else:
    Signal = _signal_model()


class Example(_Model):
    """An inline example: an event and what the rule should do with it."""

    name: str | None = None
    event: dict[str, Any]
    state: dict[str, Any] = Field(default_factory=dict)
    signals: dict[str, Any] = Field(default_factory=dict)
    signal_errors: dict[str, str] = Field(default_factory=dict)
    expect: Expectation


class Expectation(_Model):
    fires: bool | None = Field(None, description="whether this rule fires")
    fired: list[str] | None = Field(None, description="exact ids of the rules that fire")
    actions: list[dict[str, Any]] | None = Field(None, description="expected actions, in order")
    state: dict[str, Any] | None = Field(None, description="expected state values (subset)")
    pending: str | None = Field(None, description="the external signal evaluation waits for")
    scope: Literal["rule", "own", "all"] | None = Field(
        None, description="whose rules `fires`, `fired` and `actions` look at: `rule` (the example's "
        "rule), `own` (the rules of the file's own layer, not the built-in packs it uses) or `all`; "
        "by default an example's `fires` is about its rule, everything else is `own`")


class CommandSpec(_Model):
    """`command: {name: cuttle, sub: [on, off], args: 0}`: the slash command (and words) a rule is for."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="the command's name, without /")
    sub: str | list[str] | None = Field(
        None, description="the first words of the arguments (`config set`), or a list of alternatives; "
        "'' stands for no arguments at all")
    args: int | None = Field(None, ge=0, description="exactly this many words after `sub`")
    min_args: int | None = Field(None, ge=0, description="at least this many words after `sub`")

    @model_validator(mode="after")
    def _one_count(self) -> CommandSpec:
        if self.args is not None and self.min_args is not None:
            raise ValueError("give `args` (exactly) or `min_args` (at least), not both")
        return self


CommandMatch = str | CommandSpec


class Rule(_Model):
    """An ordered rule: on which events, when, and what to do."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    description: str | None = None
    on: list[str] = Field(min_length=1, description="event types")
    match: str | None = Field(None, description="JMESPath over the event; truthy to match")
    command: CommandMatch | list[CommandMatch] | None = Field(
        None, description="shorthand for matching `command` events: `cuttle`, `cuttle config set`, "
        "`{name: cuttle, sub: [on, off], args: 0}` or a list of alternatives; and-ed with `match`")
    let: dict[str, str] = Field(default_factory=dict, description="local bindings: name -> expression, "
                                "in order; plain names in `when`, templates and later bindings")
    when: str | None = Field(None, description="safe expression; true to match")
    do: list[dict[str, Any]] = Field(default_factory=list, description="actions, in order")
    continue_: bool = Field(False, alias="continue", description="let later rules of the group run")
    shadow: bool = Field(False, description="evaluate and record, never apply")
    group: str | None = Field(None, description="first-match scope (default: the file's group)")
    enabled: bool = True
    before: str | None = Field(None, description="place this rule before the rule with this id")
    after: str | None = Field(None, description="place this rule after the rule with this id")
    locked: bool = Field(False, description="in the managed layer: no user or project file may "
                         "override, disable or move this rule ahead (RT609)")
    examples: list[Example] = Field(default_factory=list)

    @field_validator("on", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


# The top-level keys `provides:` replaced, as written -> its sub-key (RT335 reports each).
LEGACY_PROVIDES = {"commands": "commands", "tools": "tools", "virtual_models": "virtual_models",
                   "skills": "skills", "bus_events": "bus_events", "question_events": "questions",
                   "import": "import"}
# Policy's field of each old key -> (the key as written, the Provides field it fills)
_LEGACY_FIELDS = {"commands": ("commands", "commands"), "tools": ("tools", "tools"),
                  "virtual_models": ("virtual_models", "virtual_models"), "skills": ("skills", "skills"),
                  "bus_events": ("bus_events", "bus_events"),
                  "question_events": ("question_events", "questions"),
                  "legacy_import": ("import", "import_")}
_MOVED: dict[str, Any] = {"deprecated": True}  # in the schema: editors strike the old keys through


class DecisionLogSettings(_Model):
    """The decision log (docs/observability.md); only your own router.yaml may set it."""

    enabled: bool = Field(True, description="write one record per decision to <agent dir>/router/log/")
    prompts: bool = Field(False, description="keep the conversation's text in every field "
                          "(`keep_text` with all of them)")
    max_bytes: int = Field(10 * 1024 * 1024, ge=4096, description="rotate the file past this size")
    keep: int = Field(5, ge=1, le=100, description="rotated files kept (decisions.1.jsonl, …)")
    keep_text: list[Literal["prompt", "actions", "signals", "errors"]] = Field(
        default_factory=list, description="the fields whose text is kept as it is (off: its length "
        "and a digest): prompt, actions (their parameters, the model, the tier), signals, errors")


class Policy(_Model):
    """A policy file (`.pi/router.yaml`, `~/.pi/agent/router.yaml` or a pack in rules/)."""

    version: Literal[1] = 1
    name: str | None = None
    description: str | None = None
    group: str | None = Field(None, description="default first-match group of this file's rules")
    use: list[str] = Field(default_factory=list, description="packs or relative paths to layer first")
    env: list[str] = Field(default_factory=list, description="environment variables events carry")
    project_env: list[str] = Field(default_factory=list, description="environment variables a "
                                   "project policy may read (only in your own router.yaml)")
    decision_log: DecisionLogSettings | None = Field(
        None, description="the decision log's settings (only in your own router.yaml)")
    vars: dict[str, Any] = Field(default_factory=dict)
    defaults: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="default parameters per action for this file's rules "
        "(`{log: {file: ...}}`); a parameter the action gives wins")
    signals: dict[str, Signal] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list, description="rule ids to switch off")
    user_vars: dict[str, str] = Field(
        default_factory=dict, description="vars only the built-in and user layers may set (a project "
        "layer's value is ignored, RT124); the text says what turning one on allows (RT315)")
    provides: Provides = Field(default_factory=Provides, description="what the policy provides "
                               "besides its rules: commands, tools, virtual models, skills, bus events, "
                               "question events, import, model choice")
    # The keys `provides:` replaced; they still load (`router lint` says where to move each, RT335).
    commands: list[Command] = Field(default_factory=list, json_schema_extra=_MOVED,
                                    description="moved: write it under `provides:`")
    virtual_models: list[VirtualModel] = Field(default_factory=list, json_schema_extra=_MOVED,
                                               description="moved: write it under `provides:`")
    tools: list[Tool] = Field(default_factory=list, json_schema_extra=_MOVED,
                              description="moved: write it under `provides:`")
    legacy_import: SettingsImport | None = Field(None, alias="import", json_schema_extra=_MOVED,
                                                 description="moved: write it under `provides:`")
    question_events: QuestionEvents | None = Field(None, json_schema_extra=_MOVED, description="moved: write "
                                                   "it under `provides:` as `questions:`")
    bus_events: list[BusEvents] = Field(default_factory=list, json_schema_extra=_MOVED,
                                        description="moved: write it under `provides:`")
    skills: list[str] = Field(default_factory=list, json_schema_extra=_MOVED,
                              description="moved: write it under `provides:`")
    project_data: list[str] = Field(
        default_factory=list, description="files of the project (relative to its root, e.g. "
        ".pi/pi-cuttle.json) this policy reads as data: part of the project's trusted content, so "
        "`router trust` pins them with .pi/router.yaml; rules see `session.project_trusted`")
    failure_policy: dict[str, Literal["open", "closed"]] = Field(
        default_factory=dict, description="per event type, what the bridge does when the engine cannot "
        "answer: `closed` refuses what a rule could refuse (the tool call), `open` lets Pi go on natively. "
        "Default: closed where a rule can refuse (`block`, `rewrite_result`), open elsewhere; a project "
        "layer may only close (docs/security.md)")
    transient_state: list[str] = Field(
        default_factory=list, description="state keys (dotted) kept only while the session runs: "
        "never stored in the session, so their changes write no state entry and a restored state has none")

    @field_validator("use", "env", "project_env", "disable", "skills", "transient_state", "project_data",
                     mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator(*_LEGACY_FIELDS)
    @classmethod
    def _not_twice(cls, value: Any, info: ValidationInfo) -> Any:
        """An old key beside the `provides:` sub-key it became (found at the old key)."""
        key, sub = _LEGACY_FIELDS[str(info.field_name)]
        provides = info.data.get("provides")
        if isinstance(provides, Provides) and sub in provides.model_fields_set:
            raise ValueError(f"`{key}:` is declared twice: at the top level and under `provides:` "
                             f"(keep only provides.{LEGACY_PROVIDES[key]})")
        return value

    @model_validator(mode="after")
    def _legacy_into_provides(self) -> Policy:
        """A key `provides:` replaced counts as written under `provides:`."""
        for name, (_, sub) in _LEGACY_FIELDS.items():
            if name not in self.model_fields_set:
                continue
            setattr(self.provides, sub, getattr(self, name))
            self.provides.model_fields_set.add(sub)
        return self

    def legacy_keys(self) -> list[str]:
        """The top-level keys of this file that belong under `provides:`, as written."""
        return [key for name, (key, _) in _LEGACY_FIELDS.items() if name in self.model_fields_set]

    def provided_at(self, key: str) -> tuple[str, ...]:
        """Where this file writes the `provides:` sub-key `key` (its old top-level key when the
        file still writes that), to locate a diagnostic."""
        for old in self.legacy_keys():
            if LEGACY_PROVIDES[old] == key:
                return (old,)
        return ("provides", key)

    @field_validator("project_env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits, _)")
        return value

    @field_validator("project_data")
    @classmethod
    def _project_paths(cls, value: list[str]) -> list[str]:
        for name in value:
            parts = Path(name).parts
            if not name or Path(name).is_absolute() or ".." in parts or name.startswith("~"):
                raise ValueError(f"{name!r} is not a path inside the project (relative, no '..')")
        return value

    @field_validator("transient_state")
    @classmethod
    def _state_keys(cls, value: list[str]) -> list[str]:
        for key in value:
            if not _STATE_KEY.fullmatch(key):
                raise ValueError(f"{key!r} is not a state key (names joined by dots, e.g. cu.slot)")
        return value


Example.model_rebuild()
