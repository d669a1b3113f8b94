"""The `section` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Params, show


class SectionParams(Params):
    """Add a named section to the system prompt (rendered by Pi as `<name>…</name>` at the end).

    Sections are rebuilt every run, so the rule must fire on each `before_agent_start`.
    """

    name: str
    text: str


@action("section", events={"before_agent_start"},
        example="- section: {name: policy_engine, text: 'Answer briefly.'}")
def describe_section(params: dict[str, Any]) -> str:
    return f"add system prompt section <{params.get('name')}>: {show(params.get('text'))}"
