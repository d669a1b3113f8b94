"""`router import`: convert a pi-cuttle.json into the YAML policy (the user's router.yaml).

The JSON keeps working as it is (the cuttle pack reads it); importing moves it into
`vars: {cuttle: …}` of router.yaml, next to `use: [cuttle]`, keeping the file's comments.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap


def import_cuttle(source: Path, target: Path, *, force: bool = False) -> tuple[int, str]:
    """Merge the JSON configuration into `target` (created when missing)."""
    try:
        config: Any = json.loads(source.read_text(encoding="utf-8-sig"))  # a BOM is harmless
    except FileNotFoundError:
        return 1, f"{source}: file not found"
    except json.JSONDecodeError as exc:
        return 1, f"{source}:{exc.lineno}:{exc.colno}: error: not valid JSON: {exc.msg}"
    if not isinstance(config, dict):
        return 1, f"{source}: expected a JSON object"
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    document: Any = CommentedMap([("version", 1)])
    if target.is_file():
        loaded = yaml.load(target.read_text(encoding="utf-8"))
        if loaded is not None and not isinstance(loaded, dict):
            return 1, f"{target}: the policy is not a mapping; not touching it"
        document = loaded if loaded is not None else document
    variables = document.get("vars")
    if not isinstance(variables, dict):
        variables = CommentedMap()
        document["vars"] = variables
    if "cuttle" in variables and not force:
        return 1, f"{target} already has vars.cuttle; use --force to replace it"
    variables["cuttle"] = config
    uses = document.get("use") or []
    uses = [uses] if isinstance(uses, str) else list(uses)
    if "cuttle" not in uses:
        document["use"] = [*uses, "cuttle"]
    out = io.StringIO()
    yaml.dump(document, out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(out.getvalue(), encoding="utf-8")
    return 0, (f"imported {source} into {target} (vars.cuttle, use: cuttle)\n"
               "the JSON file still works; remove it once you edit the YAML instead\n"
               f"next: router lint {target}")
