"""The `panel` action."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Field, Params, show

PanelKind = Literal["text", "number", "bool", "choice", "list", "json"]


class PanelItem(Params):
    """One setting of a `panel`."""

    key: str = Field(description="what a change sends as KEY (a dotted key, for instance)")
    label: str | None = Field(None, description="the name shown and searched; null: the key")
    value: Any = Field(None, description="the current value (a template of one placeholder keeps its type)")
    description: str | None = Field(None, description="shown under the list while the item is selected")
    kind: PanelKind = Field("text", description="how Enter edits it")
    choices: list[str] | None = Field(None, description="the values a choice cycles through")
    min: float | None = Field(None, description="the smallest number accepted")
    max: float | None = Field(None, description="the largest number accepted")

    def check(self) -> None:
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"item '{self.key}': a choice needs choices")
        if self.kind != "choice" and self.choices is not None:
            raise ValueError(f"item '{self.key}': choices belong to kind choice, not {self.kind}")
        if self.kind != "number" and (self.min is not None or self.max is not None):
            raise ValueError(f"item '{self.key}': min and max belong to kind number, not {self.kind}")


class PanelParams(Params):
    """Open a searchable settings panel in Pi's TUI (`ctx.ui.custom`); valid on `command` events.

    The panel lists `items` (label and value); typing filters them, Enter edits the selected
    one (a `bool` toggles, a `choice` cycles through `choices`, `text`, `number`, `list` and
    `json` open an inline input), Esc closes it. Each change runs the policy's command at once:
    `/<command> <args> KEY VALUE`, VALUE being the new value as compact JSON (`0.7`, `true`,
    `"cost"`, `["a","b"]`), so a rule of that command writes it (a `save`). Its notifications
    are shown inside the panel. Then `/<command> <refresh>` runs, and a `panel` action with
    the same `id` in its answer updates the open panel's values instead of opening a second one.
    A number outside `min`/`max`, or a `json` value that does not parse, is refused in the panel
    and sends nothing.

    Without the TUI (print, json and RPC modes) the bridge shows the panel as text instead: the
    title, `text` and one `label: value` line per item, as a notification (stderr in print mode).
    """

    id: str = Field(description="names the panel; the open panel with this id is updated in place")
    title: str
    text: str | None = Field(None, description="a line under the title (where changes are written)")
    items: list[PanelItem]
    command: str = Field(description="the policy-declared command a change runs")
    args: str = Field("", description="its arguments before KEY VALUE")
    refresh: str | None = Field(None, description="the command's arguments that answer with this panel again")

    def check(self) -> None:
        keys = [item.key for item in self.items]
        doubled = sorted({key for key in keys if keys.count(key) > 1})
        if doubled:
            raise ValueError(f"item keys must be unique; twice: {', '.join(doubled)}")


@action("panel", events={"command"},
        example="- panel: {id: my-settings, title: 'My settings', command: mine, args: set, refresh: show, "
                "items: [{key: verbose, kind: bool, value: '{vars.verbose}'}]}")
def describe_panel(params: dict[str, Any]) -> str:
    items = params.get("items") or []
    count = len(items) if isinstance(items, list) else 0
    return f"open the settings panel {show(params.get('title'))} ({count} settings)"
