"""The `trust` action."""

from __future__ import annotations

from typing import Any, Literal

from router.actions import action
from router.actions._base import Params
from router.trust.capabilities import PI_TRUST


class TrustParams(Params):
    """Answer Pi's project trust prompt (`yes`, `no` or `undecided`), optionally remembered."""

    trusted: Literal["yes", "no", "undecided"]
    remember: bool = False


@action("trust", capabilities={"trusted": PI_TRUST},  # Pi then runs the folder's .pi/extensions
        events={"project_trust"}, shorthand="trusted",
        example="- trust: {trusted: 'yes', remember: true}")
def describe_trust(params: dict[str, Any]) -> str:
    return f"project trust: {params.get('trusted')}" + (" (remembered)" if params.get("remember") else "")
