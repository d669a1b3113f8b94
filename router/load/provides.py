"""What a policy provides besides its rules (`provides:`): commands, tools, virtual models, the
question and bus events, model choices, the settings import; the policy model is router/load/model.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from router.load.model_base import _ENV_NAME, _STATE_KEY, _Model


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


PerMillion = Annotated[float, Field(strict=True, ge=0)]  # a number (not a string or a bool), >= 0


class ModelPrice(_Model):
    """What a model costs (`provides.prices:`), USD per million tokens as Pi's models.json gives
    them, or that it is served from the user's own machine (`local: true`: free unless priced)."""

    input: PerMillion | None = Field(None, description="USD per million input tokens")
    output: PerMillion | None = Field(None, description="USD per million output tokens")
    cache_read: PerMillion | None = Field(None, description="USD per million tokens read from the cache")
    cache_write: PerMillion | None = Field(None, description="USD per million tokens written to the cache")
    local: bool = Field(False, description="served from the user's own machine: free unless a price "
                        "is given here")

    @model_validator(mode="after")
    def _says_something(self) -> ModelPrice:
        if not self.local and all(getattr(self, k) is None for k in PRICE_KEYS):
            raise ValueError("a price needs at least one of " + ", ".join(PRICE_KEYS)
                             + " (USD per million tokens), or `local: true`")
        return self


PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
_MODEL_REF = re.compile(r"[^/\s]+/\S+")


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

    prices: dict[str, ModelPrice] = Field(default_factory=dict, description="per model (provider/id), "
                                          "its price or that it is local, for the cost of a turn in the "
                                          "decision log, telemetry, replay and diff (before the "
                                          "registry's price)")

    @field_validator("prices")
    @classmethod
    def _model_refs(cls, value: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        for ref in value:
            if not _MODEL_REF.fullmatch(ref):
                raise ValueError(f"{ref!r} is not a model reference (provider/id, e.g. ollama/qwen3:8b)")
        return value

    @field_validator("skills", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value
