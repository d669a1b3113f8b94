"""The `save` action."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Field, Params, show
from router.actions._local import Failure, Local, target
from router.diagnostics.code_names import ACTION_FAILED
from router.trust.capabilities import FS_WRITE


class SaveParams(Params):
    """Store a value in a JSON file under `key` (per-project settings that survive restarts).

    `path` instead of `key` sets a nested value (`[policy, threshold]`), creating objects on the way;
    `values` sets several (`{autoSelect: true, policy.threshold: 0.6}`, dotted paths) in one write.
    The rest of the file is kept: unknown keys, key order, indentation. A file that is not a JSON
    object (a syntax error, a comment, a trailing comma) is never overwritten: the save fails with
    a warning naming file:line:col. `backup: true` keeps the previous content in `<file>.bak`; a
    save that changes nothing does not write.
    """

    file: str
    key: str | None = None
    path: list[str] | str | None = None
    values: dict[str, Any] | str | None = Field(None, description="dotted path: value, set in one write")
    value: Any = None
    backup: bool = Field(False, description="keep the previous content in <file>.bak")

    def check(self) -> None:
        if sum(x is not None for x in (self.key, self.path, self.values)) != 1:
            raise ValueError("give exactly one of key, path, values")
        if self.values is not None and "value" in self.model_fields_set:
            raise ValueError("values sets its own values; drop value")
        if self.values is None and "value" not in self.model_fields_set:
            raise ValueError("value is required with key or path")


@action("save", runs="executor", capabilities={"file": FS_WRITE},
        example="- save: {file: '{vars.state_file}', key: '{session.cwd}', value: {enabled: false}}")
def describe_save(params: dict[str, Any]) -> str:
    what = params.get("key") or params.get("path") or ", ".join(params.get("values") or {})
    return f"save {show(what)} in {params.get('file')}"


def run(params: dict[str, Any], local: Local) -> Failure | None:
    path = target(params, local)
    if path is None:
        return "no file", ACTION_FAILED
    updates = _updates(params)
    if isinstance(updates, str):
        return updates, ACTION_FAILED
    local.update_json(path, updates, backup=params.get("backup") is True)
    return None


def _updates(params: dict[str, Any]) -> list[tuple[list[str], Any]] | str:
    """The (key path, value) pairs of a `save`: key, path, or values (dotted paths); or a problem."""
    values = params.get("values")
    if isinstance(values, dict):
        pairs = [(str(name).split("."), value) for name, value in values.items()]
    else:
        path, key = params.get("path"), params.get("key")
        keys = [str(k) for k in path] if isinstance(path, list) else \
            (str(path).split(".") if path else ([str(key)] if key not in (None, "") else []))
        pairs = [(keys, params.get("value"))]
    if not pairs or any(not keys or "" in keys for keys, _ in pairs):
        return "no key to save under (key, path or values rendered empty)"
    return pairs
