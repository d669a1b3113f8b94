"""The `widget` action."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Field, Params, show


class WidgetParams(Params):
    """Show lines of text in a widget above (or below) Pi's editor, under `key`; `lines: null`
    removes it. A widget stays until a rule replaces or removes it (a status-bar entry holds one
    short text; a widget holds a few lines, such as a plan or what a guard counted). Without a UI
    (print and json modes) nothing is shown.
    """

    key: str = Field(description="the widget's name: a later `widget` with the same key replaces it")
    lines: list[str] | str | None = Field(None, description="the lines (a text is split at its line "
                                          "breaks); null removes the widget")
    placement: Literal["above", "below"] = Field("above", description="above or below the editor")


@action("widget", example="- widget: {key: my-router, lines: ['Plan: 2 of 5 steps done', 'Next: tests']}")
def describe_widget(params: dict[str, Any]) -> str:
    lines = params.get("lines")
    return f"widget {params.get('key')}: {show(lines)}" if lines is not None else \
        f"remove widget {params.get('key')}"
