"""The `forget` action: remove a key from a JSON settings file (what `save` wrote)."""

from __future__ import annotations

from typing import Any

from router.actions import action
from router.actions._base import Field, Params, show
from router.actions._local import Failure, Local, target
from router.diagnostics.code_names import ACTION_FAILED
from router.trust.capabilities import FS_WRITE


class ForgetParams(Params):
    """Remove a key from a JSON file, so the setting is back to its default (the reverse of `save`).

    `key` names a top-level key, `path` a nested one (`[policy, threshold]` or `policy.threshold`).
    A `save` with `value: null` would leave the key there, set to null; `forget` takes it out. The
    rest of the file is kept as `save` keeps it, a file that is not a JSON object is never
    overwritten, and forgetting a key the file does not have (or a file that does not exist)
    changes nothing and writes nothing.
    """

    file: str
    key: str | None = None
    path: list[str] | str | None = None
    backup: bool = Field(False, description="keep the previous content in <file>.bak")

    def check(self) -> None:
        if (self.key is None) == (self.path is None):
            raise ValueError("give exactly one of key, path")


@action("forget", runs="executor", capabilities={"file": FS_WRITE},
        example="- forget: {file: '{vars.state_file}', path: policy.threshold}")
def describe_forget(params: dict[str, Any]) -> str:
    return f"forget {show(params.get('key') or params.get('path'))} in {params.get('file')}"


def run(params: dict[str, Any], local: Local) -> Failure | None:
    path = target(params, local)
    if path is None:
        return "no file", ACTION_FAILED
    keys = _keys(params)
    if not keys or "" in keys:
        return "no key to forget (key or path rendered empty)", ACTION_FAILED
    local.remove_json(path, keys, backup=params.get("backup") is True)
    return None


def _keys(params: dict[str, Any]) -> list[str]:
    path, key = params.get("path"), params.get("key")
    if isinstance(path, list):
        return [str(part) for part in path]
    if path:
        return str(path).split(".")
    return [str(key)] if key not in (None, "") else []
