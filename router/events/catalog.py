"""The normalized event model: what every rule sees, documented field by field.

Pydantic models describe the event documents (they feed `schema/event.schema.json`, event-file
validation and the field checks of `router lint`). At run time events are plain dicts built by
`router.events.normalize`, so evaluation never pays for validation.
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
    project_trusted: bool = Field(False, description="whether the project's router content (its "
                                  ".pi/router.yaml and the policy's project_data files) is trusted "
                                  "by content (`router trust`) and in force")


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
    cost: Cost | None = Field(None, description="null when Pi has no price for the model (Pi reports a "
                                                "missing price as all zeros, so those read as null)")
    virtual: bool = Field(False, description="true for a virtual model such as cuttle/auto")


class Tools(_Model):
    """Tool names: the ones declared to the model now, and every registered one."""

    active: list[str] = Field(default_factory=list, description="tools declared to the model now")
    all: list[str] = Field(default_factory=list, description="every registered tool")


class Usage(_Model):
    """Context usage as Pi reports it (null right after a compaction)."""

    tokens: int | None = Field(None, description="estimated tokens in the context")
    context_window: int | None = Field(None, description="the model's context window")
    percent: float | None = Field(None, description="tokens / context window × 100; null when unknown")


class Registry(_Model):
    """Pi's registry beyond the available chat models (empty where Pi does not say, e.g. a dry run)."""

    providers: list[str] = Field(default_factory=list, description="the provider ids Pi knows")
    classifiers: list[str] = Field(default_factory=list,
                                   description="the classifier model refs Pi lists (a provider that "
                                   "discovers its models at run time, such as llama.cpp, lists none)")
    discovering: list[str] | None = Field(None, description="the providers that can discover models at "
                                          "run time (llama.cpp, cloud catalogs); a models.json provider "
                                          "cannot; null where Pi does not say")


class Common(_Model):
    """Fields present on every event."""

    type: str = Field(description="the event type, as in `on:`")
    session: Session = Field(default_factory=Session, description="the Pi session")
    model: ModelInfo | None = Field(None, description="the selected model (may be virtual)")
    thinking_level: str | None = Field(None, description="off|minimal|low|medium|high|xhigh|max")
    tools: Tools = Field(default_factory=Tools, description="active and registered tool names")
    usage: Usage | None = Field(None, description="context usage; null before the first response")
    env: dict[str, str] = Field(default_factory=dict,
                                description="values of the environment variables the policy names")
    models: dict[str, ModelInfo] = Field(default_factory=dict,
                                         description="available models by ref (Pi's registry)")
    registry: Registry = Field(default_factory=lambda: Registry(),
                               description="what Pi's registry knows beyond the available models")
    payload_cut: bool = Field(False, description="true when parts of Pi's payload past the protocol's "
                              "limits were cut (nested deeper than 64 levels, strings over 1,000,000 "
                              "characters, over 100,000 items); the fields that fit are intact")


class Option(_Model):
    value: str
    label: str
    description: str | None = None


class Question(_Model):
    """One question, normalized from any supported tool or dialog shape."""

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


class MessageUsage(_Model):
    """Tokens and cost (USD, from Pi's registry prices) of one assistant message."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = None


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
    text: str = Field("", description="the raw text, before skill and template expansion")
    source: Literal["interactive", "rpc", "extension"] = Field(
        "interactive", description="interactive (TUI and `pi -p`), rpc, or extension (sendUserMessage)")
    images: int = Field(0, description="number of attached images")
    streaming: Literal["steer", "followUp"] | None = Field(None, description="set when queued during a run")


class BeforeAgentStartEvent(Common):
    """A run is about to start: the place for system-prompt sections and first-request tools."""

    type: Literal["before_agent_start"] = "before_agent_start"
    prompt: str = Field("", description="the expanded prompt of the run")
    message_type: Literal["user", "custom"] = "user"
    system_prompt: str = Field("", description="Pi's assembled system prompt")
    sections: list[str] = Field(default_factory=list, description="names of the sections already set")


class ContextEvent(Common):
    """Before every provider request: the place for ephemeral (never persisted) messages."""

    type: Literal["context"] = "context"
    messages: list[Message] = Field(default_factory=list, description="the request's messages (no system)")
    last_user_text: str | None = Field(None, description="text of the last user message")
    last_role: str | None = Field(None, description="role of the last message (toolResult after a tool)")


class RouteEvent(Common):
    """A virtual model asks which physical model answers this request."""

    type: Literal["route"] = "route"
    reason: Literal["user", "continuation", "retry", "direct"] = Field(
        "user", description="user: after a prompt; continuation: after a tool result; retry; direct")
    virtual: VirtualRef = Field(description="the virtual model being routed")
    requested_thinking: str | None = Field(None, description="the thinking level selected by the user")
    previous: ModelChoice | None = Field(None, description="physical model of the last successful response")
    failed: FailedModel | None = Field(None, description="for retries: the model that failed")
    route_state: Any = Field(None, description="the `state` returned by the last route on this branch")
    last_user_text: str | None = Field(None, description="text of the last user message")
    last_is_tool_result: bool = Field(False, description="the request follows a tool result")
    message_count: int = Field(0, description="messages in the request")


class TurnStartEvent(Common):
    type: Literal["turn_start"] = "turn_start"
    turn_index: int = 0


class TurnEndEvent(Common):
    type: Literal["turn_end"] = "turn_end"
    turn_index: int = Field(0, description="0 for the first turn of a run")
    outcome: Literal["completed", "aborted", "error"] = "completed"
    tool_calls: int = Field(0, description="tool calls in the turn's assistant message")
    tool_results: int = Field(0, description="tool results of the turn")
    stop_reason: str | None = Field(None, description="stop, toolUse, error, aborted …")
    answered_by: str | None = Field(None, description="ref of the physical model that answered")
    message_usage: MessageUsage | None = Field(None, description="tokens and cost of the turn's answer")


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
    aborted: bool = Field(False, description="the run was aborted (for example by a compaction)")
    had_tool_activity: bool = Field(False, description="a turn of the run called tools")


class SessionStartEvent(Common):
    type: Literal["session_start"] = "session_start"
    reason: Literal["startup", "reload", "new", "resume", "fork"] = "startup"
    previous_session_file: str | None = None
    model_flag: str | None = Field(
        None, description="the `--model` Pi was started with, as given (null without one)")
    history: History = Field(default_factory=History, description="user messages already in the branch")


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
    """A call of a question tool the policy provides (any question tool's shape) or a bus questionnaire."""

    type: Literal["question"] = "question"
    tool_name: str = Field("", description="the tool (or bus event) that asked; when the bridge "
                           "names none, the policy's `provides.questions.tool_name`")
    source: Literal["tool", "event"] = "tool"
    questions: list[Question] = Field(default_factory=list, description="normalized questions, in order")
    context: str = Field("", description="the call's context, else the conversation excerpt")
    context_given: bool = Field(False, description="true when `context` is the call's own `context` "
                                "or `description`, not the excerpt")


class DialogEvent(Common):
    """An extension opened ctx.ui.select/confirm/input/editor/custom during a tool call."""

    type: Literal["dialog"] = "dialog"
    kind: Literal["select", "confirm", "input", "editor", "custom"] = "select"
    title: str = ""
    message: str | None = Field(None, description="confirm's message")
    options: list[str] = Field(default_factory=list, description="select's options")
    placeholder: str | None = Field(None, description="input's placeholder")
    prefill: str | None = Field(None, description="editor's prefilled text")
    questions: list[Question] = Field(default_factory=list, description="the dialog as one question")
    context: str = Field("", description="the conversation excerpt")


class CommandEvent(Common):
    """The user ran a command the policy declares (`/cuttle why`)."""

    type: Literal["command"] = "command"
    name: str = Field(description="the command, without the slash")
    args: str = Field("", description="everything after the command name")
    argv: list[str] = Field(default_factory=list, description="args split on white space")


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
