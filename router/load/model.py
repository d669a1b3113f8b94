"""Pydantic models of a policy file. Data only: behaviour lives in compile and interpreter."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from router.actions.signal_kinds import kind_names


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class EnvVar(_Model):
    """A variable read from the environment: `{env: NAME, type: number, default: 95}`."""

    env: str = Field(description="environment variable name")
    type: Literal["string", "number", "int", "bool", "list"] = "string"
    default: Any = None
    min: float | None = None
    max: float | None = None
    description: str | None = None


class ClassifyQuestion(_Model):
    """One classifier question, asked in the same call as the others."""

    type: Literal["choice", "bool", "score"] = "choice"
    instructions: str
    criteria: dict[str, str] | str | None = None
    when: str | None = Field(None, description="expression: ask only when true")


class ClassifySignal(_Model):
    """Ask a classifier model of Pi's registry (one call, several questions)."""

    model: str = Field(description="template: classifier model ref, e.g. llama.cpp/Kev-9B")
    questions: dict[str, ClassifyQuestion]
    state: dict[str, Any] = Field(default_factory=dict, description="templates: the state shown")
    timeout_ms: int | str = 4000
    max_retries: int = 0


class ChildSignal(_Model):
    """Run a tool-less child `pi --print …` and read its stdout."""

    prompt: str = Field(description="template: written to the child's stdin (never its command line)")
    system_prompt: str | None = Field(None, description="template: passed to the child in a private file")
    provider: str | None = None
    model: str | None = None
    pi_bin: str | None = Field(None, description="template: the pi binary (default: pi on PATH)")
    timeout_ms: int | str = 45000


class CompleteSignal(_Model):
    """Ask a chat model of Pi's registry in-process (faster than a child process)."""

    prompt: str
    system_prompt: str | None = None
    model: str | None = Field(None, description="template: model ref (default: the session model)")
    timeout_ms: int | str = 45000


class LoadSignal(_Model):
    """Read a JSON file: the value under `key` (as `save` stores it), or the whole document.

    A missing file reads as null; a leading byte order mark is skipped. A file that is not JSON
    (comments and trailing commas included) fails the signal: `signal_errors.<name>` names
    file:line:col and what is wrong."""

    file: str = Field(description="template: the JSON file")
    key: str | None = Field(None, description="template: the key; none reads the whole document")


class RecordsSignal(_Model):
    """Read the records of a JSONL file written by `audit` (newest last), within `days`."""

    file: str = Field(description="template: the JSONL file")
    days: float | str | None = Field(None, description="only records whose timestamp is this recent")
    limit: int = Field(100000, ge=1, description="at most this many (the newest)")


class SlotSignal(_Model):
    """Take one of `max` machine-wide slots (a lock file per slot under `dir`); released by the
    `release` action or when the process ends. Waits up to `wait_ms`; the value is the slot
    number, or null when none freed up in time."""

    dir: str = Field(description="template: the directory of the slot locks")
    max: int | str = Field(description="template: how many slots exist")
    name: str = Field("turn", description="the handle `release` names")
    wait_ms: int | str = 30000


class ProbeQuestion(_Model):
    """The one question a probe asks a classifier (any answer proves it works)."""

    instructions: str = Field(description="template: what the classifier is asked")
    criteria: dict[str, str] | str = Field(description="the answers it may give, each with its "
                                           "meaning (or a template that gives that object)")


class ProbeSignal(_Model):
    """Check models live: a classifier call or a tiny completion each; a list of results.

    The policy words both calls: `prompt` is what each chat model is sent, `question` what the
    classifier is asked (each required when the signal names models, or a classifier)."""

    classifier: str | None = Field(None, description="template: a classifier model ref")
    models: list[str] | str = Field(default_factory=list, description="template: chat model refs")
    prompt: str | None = Field(None, description="template: the completion each chat model gets")
    question: ProbeQuestion | None = Field(None, description="the classifier's question")
    timeout_ms: int | str = 10000

    @model_validator(mode="after")
    def _worded(self) -> ProbeSignal:
        if self.models and self.prompt is None:
            raise ValueError("a probe of chat models needs `prompt` (what each model is sent), "
                             "e.g. prompt: Reply with the single word OK.")
        if self.classifier is not None and self.question is None:
            raise ValueError("a probe of a classifier needs `question: {instructions, criteria}`")
        return self


class ReadSignal(_Model):
    """Read the last non-empty lines of a text file (a list of strings; empty when missing)."""

    file: str = Field(description="template: the file")
    tail: int = Field(10, ge=1, le=10000, description="how many lines")


class AskSignal(_Model):
    """Ask the user through Pi's UI (select or input); null when cancelled or without a UI."""

    select: list[str] | str | None = Field(None, description="options to choose from (template)")
    title: str = ""
    placeholder: str | None = None
    timeout_ms: int | str = 300000


class WhichSignal(_Model):
    """The path of a program, as the `child` signal finds `pi`: a name without a slash is looked
    up on PATH (the signal fails when it is not there); a path is returned as it is (`~` expanded)."""

    name: str = Field(description="template: a program name (e.g. pi) or a path")


SIGNAL_KINDS = kind_names()  # the registry: router/actions/signal_kinds.py


class Signal(_Model):
    """A value computed lazily, at most once per event. Exactly one source."""

    description: str | None = None
    expr: str | None = Field(None, description="expression over the event")
    classify: ClassifySignal | None = None
    child: ChildSignal | None = None
    complete: CompleteSignal | None = None
    load: LoadSignal | None = None
    read: ReadSignal | None = None
    records: RecordsSignal | None = None
    slot: SlotSignal | None = None
    probe: ProbeSignal | None = None
    ask: AskSignal | None = None
    which: WhichSignal | None = None
    transform: str | None = Field(None, description="expression over `result`; a failure falls back")
    fallback: str | None = Field(None, description="expression used when the source fails")
    let: dict[str, str] = Field(default_factory=dict, description="local bindings: name -> expression, "
                                "in order; plain names in this signal's expressions and templates")

    @model_validator(mode="after")
    def _one_source(self) -> Signal:
        sources = [n for n in SIGNAL_KINDS if getattr(self, n) is not None]
        if len(sources) != 1:
            raise ValueError(f"a signal needs exactly one of {', '.join(SIGNAL_KINDS)}; "
                             f"got {', '.join(sources) or 'none'}")
        return self


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


class Command(_Model):
    """A slash command the bridge registers; typing it sends a `command` event."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str = ""
    completions: list[dict[str, str] | str] = Field(default_factory=list)


RouteFallback = Literal["previous", "first_available"]
ROUTE_FALLBACKS: tuple[RouteFallback, ...] = ("previous", "first_available")


class VirtualModel(_Model):
    """A virtual model the bridge registers; each request sends a `route` event."""

    provider: str
    id: str
    name: str | None = None
    thinking_levels: list[str] = Field(default_factory=lambda: ["off", "low", "medium", "high"])
    context_window: int | None = None
    max_tokens: int | None = None
    fallback: list[RouteFallback] = Field(
        default_factory=lambda: list(ROUTE_FALLBACKS),
        description="where a request goes when no rule routes it (or routes it to a model Pi does "
        "not have), tried in order: `previous` (the request's previous physical model), "
        "`first_available` (Pi's first available model that is not virtual); none left: the "
        "request fails")


class Tool(_Model):
    """An LLM tool the bridge registers; a call sends a `question` event (kind: question)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    kind: Literal["question"] = "question"
    label: str | None = None
    description: str
    prompt_snippet: str | None = None
    guidelines: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object",
                                                                 "additionalProperties": True})
    sequential: bool = True
    no_answer: str = Field(
        "No rule answered this call.",
        description="the error text the tool call returns when no rule answers it (a pack words its own)")


class ConfirmOption(_Model):
    """One option of a confirm dialog's question."""

    value: str = Field(min_length=1)
    label: str = Field(min_length=1)
    description: str | None = None


class DialogLines(_Model):
    """Per dialog kind, the label of the line after the title (`''`: the value alone)."""

    confirm: str | None = Field(None, description="before a confirm's message")
    input: str | None = Field(None, description="before an input's placeholder")
    editor: str | None = Field(None, description="before an editor's prefilled value")


class QuestionEvents(_Model):
    """How the engine builds `question` and `dialog` events (`provides.questions:`).

    A text is a template over `vars` (docs/language.md, Templates): `"{vars.NAME}"`, exactly one
    placeholder, is that var's value with its type, so a layer can change it through `vars:`; it is
    rendered for each event. A field left out keeps the engine's neutral default."""

    tool_name: str | None = Field(None, description="template: a question's tool_name when the "
                                  "bridge names none")
    excerpt_entries: int | str | None = Field(
        None, description="how many of the last session entries the conversation excerpt holds "
        "(or a template that gives that number)")
    context_chars: int | str | None = Field(
        None, description="the cap of `context` (characters, the last ones; or a template)")
    confirm_options: list[ConfirmOption] | str | None = Field(
        None, description="a confirm dialog's options (or a template that gives them)")
    dialog_lines: DialogLines | str | None = Field(
        None, description="per dialog kind, the label of the line after the title (or a template)")


class ModelChoice(_Model):
    """What the decision log, telemetry and replay read about a turn's model choice
    (`provides.model_choice:`): the state keys the policy's rules write it to."""

    tier: str | None = Field(None, description="the state key (dotted, e.g. cu.tier) a `set` action "
                             "writes the chosen model's tier to; the log's and replay's `tier`")

    @field_validator("tier")
    @classmethod
    def _state_key(cls, value: str | None) -> str | None:
        if value is not None and not _STATE_KEY.fullmatch(value):
            raise ValueError(f"{value!r} is not a state key (names joined by dots, e.g. cu.tier)")
        return value


class BusEvents(_Model):
    """A protocol on Pi's event bus the bridge listens to (`bus_events:`).

    `questionnaire`: an extension emits `prompt` with a questionnaire, then opens ctx.ui.custom;
    the payload is sent as a `question` event (source `event`, tool_name the event's name) and
    the answer a rule gives is what that custom call returns. `blocked` with `active: false`
    drops a pending answer."""

    protocol: Literal["questionnaire"] = Field(description="which protocol the bridge speaks")
    prompt: str = Field(min_length=1, description="the bus event that carries the questionnaire")
    blocked: str | None = Field(None, min_length=1,
                                description="the bus event whose `active: false` drops a pending answer")


class SettingsImport(_Model):
    """What `router import` moves into router.yaml for this pack (`import:`): a JSON settings
    file of Pi's agent dir, as one var (`var`) or key by key (`keys`: JSON key -> var name);
    `use:` gains the pack."""

    file: str = Field(min_length=1, description="the settings file's name in Pi's agent dir, "
                      "e.g. pi-cuttle.json (the default source)")
    var: str | None = Field(None, description="the var the whole JSON object becomes")
    keys: dict[str, str] | None = Field(None, description="JSON key -> the var its value becomes")
    known: str | None = Field(None, description="the pack's var whose keys are the file's keys: a file "
                              "with another key, or an object where that var has one, is refused")

    @field_validator("file")
    @classmethod
    def _inside_agent_dir(cls, value: str) -> str:
        if Path(value).is_absolute() or ".." in Path(value).parts or value.startswith("~"):
            raise ValueError(f"{value!r} is not a file name inside Pi's agent dir")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> SettingsImport:
        if (self.var is None) == (self.keys is None):
            raise ValueError("an import needs exactly one of `var` (the whole file) or `keys` "
                             "(key by key)")
        names = [self.var] if self.var is not None else list((self.keys or {}).values())
        for name in [*names, *([self.known] if self.known is not None else [])]:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a var name (letters, digits, _)")
        return self


class Provides(_Model):
    """What a policy provides besides its rules (`provides:`): what the bridge registers in Pi,
    how the engine builds question events, what `router import` moves, what a model choice records.
    Each sub-key merges across the layers (by name; `questions` and `model_choice` field by field)."""

    commands: list[Command] = Field(default_factory=list, description="slash commands Pi registers")
    tools: list[Tool] = Field(default_factory=list, description="LLM tools Pi registers (question tools)")
    virtual_models: list[VirtualModel] = Field(default_factory=list,
                                               description="virtual models Pi registers (`route` events)")
    skills: list[str] = Field(default_factory=list, description="Pi skill directories (or SKILL.md "
                              "files), relative to this file, that Pi lists while the policy is loaded")
    bus_events: list[BusEvents] = Field(default_factory=list, description="protocols on Pi's event "
                                        "bus the bridge listens to (their events become `question` events)")
    questions: QuestionEvents | None = Field(None, description="how question and dialog events are "
                                             "built (wording, excerpt sizes)")
    import_: SettingsImport | None = Field(None, alias="import", description="what `router import` "
                                           "moves from a JSON settings file into router.yaml")
    model_choice: ModelChoice | None = Field(None, description="what the log, telemetry and replay "
                                             "read about a turn's model choice (its tier)")

    @field_validator("skills", mode="before")
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


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STATE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*")

Example.model_rebuild()
