"""The normalized event model: what every rule sees, documented field by field.

Pydantic models describe the event documents (they feed `schema/event.schema.json`, event-file
validation and the field checks of `router lint`). At run time events are plain dicts built by
`router.normalize`, so evaluation never pays for validation.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Session(_Model):
    """The Pi session the event belongs to."""

    id: str | None = Field(None, description="Pi session id (null with --no-session)")
    cwd: str = Field("", description="working directory of the Pi process")
    mode: Literal["tui", "rpc", "json", "print", "cli"] = Field("cli", description="Pi's run mode")
    has_ui: bool = Field(False, description="true in tui and rpc modes, where dialogs can be shown")
    subagent: bool = Field(False, description="true when PI_SUBAGENT_CHILD=1 (a background subagent)")
    file: str | None = Field(None, description="session file path, null with --no-session")


class Cost(_Model):
    """Price in USD per million tokens, from Pi's model registry."""

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None


class ModelInfo(_Model):
    """A model as Pi's registry describes it."""

    provider: str = ""
    id: str = ""
    ref: str = Field("", description="'provider/id'")
    name: str | None = None
    api: str | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    reasoning: bool = False
    input: list[str] = Field(default_factory=list)
    cost: Cost | None = None
    virtual: bool = Field(False, description="true for a virtual model such as cuttle/auto")


class Tools(_Model):
    """Tool names: the ones declared to the model now, and every registered one."""

    active: list[str] = Field(default_factory=list)
    all: list[str] = Field(default_factory=list)


class Usage(_Model):
    """Context usage as Pi reports it (null right after a compaction)."""

    tokens: int | None = None
    context_window: int | None = None
    percent: float | None = None


class Common(_Model):
    """Fields present on every event."""

    type: str
    session: Session = Field(default_factory=Session)
    model: ModelInfo | None = Field(None, description="the selected model (may be virtual)")
    thinking_level: str | None = Field(None, description="off|minimal|low|medium|high|xhigh|max")
    tools: Tools = Field(default_factory=Tools)
    usage: Usage | None = None
    env: dict[str, str] = Field(default_factory=dict,
                                description="values of the environment variables the policy names")
    models: dict[str, ModelInfo] = Field(default_factory=dict,
                                         description="available models by ref (Pi's registry)")


class Option(_Model):
    value: str
    label: str
    description: str | None = None


class Question(_Model):
    """One question, normalized from any supported tool or dialog shape (seed 000)."""

    id: str
    header: str | None = None
    prompt: str
    options: list[Option] = Field(default_factory=list)
    allow_other: bool = True
    multi_select: bool = False


class Message(_Model):
    role: str
    text: str = ""
    custom_type: str | None = None
    tool_name: str | None = None


class ModelChoice(_Model):
    ref: str
    provider: str = ""
    id: str = ""
    thinking_level: str | None = None


class FailedModel(ModelChoice):
    stop_reason: str | None = None
    error: str | None = None


class ToolCall(_Model):
    name: str
    call_id: str | None = None
    input: Any = None


class ToolResult(ToolCall):
    text: str = ""
    is_error: bool = False


class History(_Model):
    user_messages: int = 0
    first_user_text: str | None = None
    last_user_text: str | None = None


class VirtualRef(_Model):
    provider: str
    id: str
    ref: str


# --- one model per event type -----------------------------------------------------------------


class InputEvent(Common):
    """A prompt typed by the user, sent over RPC, or sent by an extension (before any expansion)."""

    type: Literal["input"] = "input"
    text: str = ""
    source: Literal["interactive", "rpc", "extension"] = "interactive"
    images: int = 0
    streaming: Literal["steer", "followUp"] | None = None


class BeforeAgentStartEvent(Common):
    """A run is about to start: the place for system-prompt sections and first-request tools."""

    type: Literal["before_agent_start"] = "before_agent_start"
    prompt: str = ""
    message_type: Literal["user", "custom"] = "user"
    system_prompt: str = ""
    sections: list[str] = Field(default_factory=list)


class ContextEvent(Common):
    """Before every provider request: the place for ephemeral (never persisted) messages."""

    type: Literal["context"] = "context"
    messages: list[Message] = Field(default_factory=list)
    last_user_text: str | None = None
    last_role: str | None = None


class RouteEvent(Common):
    """A virtual model asks which physical model answers this request."""

    type: Literal["route"] = "route"
    reason: Literal["user", "continuation", "retry", "direct"] = "user"
    virtual: VirtualRef
    requested_thinking: str | None = None
    previous: ModelChoice | None = None
    failed: FailedModel | None = None
    route_state: Any = None
    last_user_text: str | None = None
    last_is_tool_result: bool = False
    message_count: int = 0


class TurnStartEvent(Common):
    type: Literal["turn_start"] = "turn_start"
    turn_index: int = 0


class TurnEndEvent(Common):
    type: Literal["turn_end"] = "turn_end"
    turn_index: int = 0
    outcome: Literal["completed", "aborted", "error"] = "completed"
    tool_calls: int = 0
    tool_results: int = 0
    stop_reason: str | None = None


class ToolCallEvent(Common):
    """The model called a tool; rules may block it."""

    type: Literal["tool_call"] = "tool_call"
    tool: ToolCall


class ToolResultEvent(Common):
    """A tool finished; rules may rewrite its result."""

    type: Literal["tool_result"] = "tool_result"
    tool: ToolResult


class ModelSelectEvent(Common):
    type: Literal["model_select"] = "model_select"
    source: Literal["set", "cycle", "restore"] = "set"
    previous_model: ModelInfo | None = None


class ThinkingLevelSelectEvent(Common):
    type: Literal["thinking_level_select"] = "thinking_level_select"
    level: str
    previous_level: str | None = None


class AgentSettledEvent(Common):
    """Pi is idle after a run (the safe moment to compact)."""

    type: Literal["agent_settled"] = "agent_settled"
    aborted: bool = False
    had_tool_activity: bool = False


class SessionStartEvent(Common):
    type: Literal["session_start"] = "session_start"
    reason: Literal["startup", "reload", "new", "resume", "fork"] = "startup"
    previous_session_file: str | None = None
    history: History = Field(default_factory=History)


class SessionShutdownEvent(Common):
    type: Literal["session_shutdown"] = "session_shutdown"
    reason: Literal["quit", "reload", "new", "resume", "fork"] = "quit"


class CompactionBeforeEvent(Common):
    """A compaction is about to start; rules may cancel it."""

    type: Literal["compaction_before"] = "compaction_before"
    reason: Literal["manual", "threshold", "overflow"] = "manual"
    tokens_before: int | None = None
    by_router: bool = Field(False, description="true when a rule's compact action started it")


class CompactionDoneEvent(Common):
    type: Literal["compaction_done"] = "compaction_done"
    reason: Literal["manual", "threshold", "overflow"] = "manual"
    by_router: bool = False
    tokens_before: int | None = None


class CompactionFailedEvent(Common):
    type: Literal["compaction_failed"] = "compaction_failed"
    reason: Literal["manual", "threshold", "overflow"] = "manual"
    by_router: bool = False
    error: str = ""
    aborted: bool = False


class ProjectTrustEvent(Common):
    """Pi asks whether to trust the project's .pi/ folder."""

    type: Literal["project_trust"] = "project_trust"
    cwd: str = ""


class QuestionEvent(Common):
    """A question tool call (decision_request and the shapes of seed 000) or an rpiv questionnaire."""

    type: Literal["question"] = "question"
    tool_name: str = "decision_request"
    source: Literal["tool", "event"] = "tool"
    questions: list[Question] = Field(default_factory=list)
    context: str = ""


class DialogEvent(Common):
    """An extension opened ctx.ui.select/confirm/input/editor/custom during a tool call."""

    type: Literal["dialog"] = "dialog"
    kind: Literal["select", "confirm", "input", "editor", "custom"] = "select"
    title: str = ""
    message: str | None = None
    options: list[str] = Field(default_factory=list)
    placeholder: str | None = None
    prefill: str | None = None
    questions: list[Question] = Field(default_factory=list)
    context: str = ""


class CommandEvent(Common):
    """The user ran a command the policy declares (`/cuttle why`)."""

    type: Literal["command"] = "command"
    name: str
    args: str = ""
    argv: list[str] = Field(default_factory=list)


EVENT_MODELS: dict[str, type[Common]] = {
    model.model_fields["type"].default: model
    for model in (
        InputEvent, BeforeAgentStartEvent, ContextEvent, RouteEvent, TurnStartEvent, TurnEndEvent,
        ToolCallEvent, ToolResultEvent, ModelSelectEvent, ThinkingLevelSelectEvent,
        AgentSettledEvent, SessionStartEvent, SessionShutdownEvent, CompactionBeforeEvent,
        CompactionDoneEvent, CompactionFailedEvent, ProjectTrustEvent, QuestionEvent, DialogEvent,
        CommandEvent,
    )
}
EVENT_TYPES: tuple[str, ...] = tuple(sorted(EVENT_MODELS))
SCOPE_NAMES = ("vars", "state", "signals", "signal_errors")
