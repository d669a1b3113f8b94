"""`router schema`: JSON Schemas of policy files and events, generated from the models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from router.actions import ACTIONS
from router.events.catalog import EVENT_MODELS
from router.load.model import Policy

SCHEMA_FILES = {"policy": "policy.schema.json", "event": "event.schema.json"}


def policy_schema() -> dict[str, Any]:
    """The policy schema, with `do:` items described action by action for editor completion."""
    schema = Policy.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pi-policy-router policy"
    defs = schema.setdefault("$defs", {})
    choices = []
    for name, spec in sorted(ACTIONS.items()):
        params = spec.params.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(params.pop("$defs", {}))
        shorthand = [{"type": ["string", "number", "boolean", "array"]}] if spec.shorthand or \
            name == "unset" else []
        choices.append({
            "type": "object", "additionalProperties": False, "required": [name],
            "description": (spec.params.__doc__ or "").strip().split("\n")[0],
            "properties": {name: {"anyOf": [params, *shorthand]}},
        })
    defs["Action"] = {"oneOf": choices}
    defs["Rule"]["properties"]["do"] = {"type": "array", "items": {"$ref": "#/$defs/Action"},
                                        "description": "actions, in order"}
    return schema


def event_schema() -> dict[str, Any]:
    """One schema for every normalized event, discriminated by `type`."""
    models = tuple(EVENT_MODELS.values())
    from typing import Union

    union: Any = Union[models]  # noqa: UP007
    adapter: TypeAdapter[Any] = TypeAdapter(union)
    schema = adapter.json_schema(ref_template="#/$defs/{model}")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pi-policy-router normalized event"
    return schema


def render(kind: str) -> str:
    schema = policy_schema() if kind == "policy" else event_schema()
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, name in SCHEMA_FILES.items():
        path = directory / name
        path.write_text(render(kind), encoding="utf-8")
        written.append(path)
    return written


def stale(directory: Path) -> list[str]:
    """Names of committed schema files that differ from the models."""
    out = []
    for kind, name in SCHEMA_FILES.items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != render(kind):
            out.append(name)
    return out
